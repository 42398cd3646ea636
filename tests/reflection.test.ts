// gRPC server reflection on directory and nodeassign, asked over real gRPC by a
// reflection client built from the protocol's own .proto (the one
// @grpc/reflection ships), as grpcurl asks: list the services, then describe one
// from the file descriptor that declares it.
import * as grpc from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import path from 'node:path';
import { grpcClient, type ClientAuth } from '../lib/grpc.js';
import { DirectoryService } from '../lib/gen/directory.js';
import { NodeAssignService } from '../lib/gen/nodeassign.js';
import { startDirectory } from '../services/directory/server.js';
import { startNodeAssign } from '../services/nodeassign/server.js';
import { healthStatus, TEST_AUTH, WRONG_AUTHS } from './support/services.js';

const require = createRequire(import.meta.url);
// Decodes the FileDescriptorProto bytes a reflection answer carries.
const descriptor = require('protobufjs/ext/descriptor') as {
  FileDescriptorProto: { decode(b: Uint8Array): FileDescriptor };
};

interface FileDescriptor {
  name: string;
  package: string;
  service: Array<{ name: string; method: Array<{ name: string; inputType: string; outputType: string }> }>;
  messageType: Array<{ name: string; field: Array<{ name: string; number: number }> }>;
}

interface ReflectionResponse {
  list_services_response?: { service: Array<{ name: string }> };
  file_descriptor_response?: { file_descriptor_proto: Buffer[] };
  error_response?: { error_code: number; error_message: string };
}

const reflectionProto = path.join(path.dirname(require.resolve('@grpc/reflection')), '../proto');
const ReflectionClient = (
  grpc.loadPackageDefinition(loadSync('grpc/reflection/v1/reflection.proto', { includeDirs: [reflectionProto], keepCase: true })) as unknown as {
    grpc: { reflection: { v1: { ServerReflection: grpc.ServiceClientConstructor } } };
  }
).grpc.reflection.v1.ServerReflection;

/** One request on the reflection stream and its one answer; a refused call rejects with its gRPC error. */
function reflect(port: number, auth: ClientAuth, request: Record<string, string>): Promise<ReflectionResponse> {
  const client = grpcClient(ReflectionClient, `127.0.0.1:${port}`, auth);
  return new Promise<ReflectionResponse>((resolve, reject) => {
    const stream = (client.ServerReflectionInfo as (opts: grpc.CallOptions) => grpc.ClientDuplexStream<unknown, ReflectionResponse>)({
      deadline: Date.now() + 5000,
    });
    stream.on('data', (res: ReflectionResponse) => {
      resolve(res);
      stream.end();
    });
    stream.on('error', reject);
    stream.on('end', () => reject(new Error('stream ended without an answer')));
    stream.write(request);
  }).finally(() => client.close());
}

async function listServices(port: number): Promise<string[]> {
  const res = await reflect(port, TEST_AUTH, { list_services: '*' });
  return (res.list_services_response?.service ?? []).map((s) => s.name).sort();
}

/** The descriptor of the file that declares `symbol` (it comes first; its imports follow). */
async function describe(port: number, symbol: string): Promise<FileDescriptor> {
  const res = await reflect(port, TEST_AUTH, { file_containing_symbol: symbol });
  assert.equal(res.error_response, undefined, res.error_response?.error_message);
  const files = (res.file_descriptor_response?.file_descriptor_proto ?? []).map((b) => descriptor.FileDescriptorProto.decode(b));
  const declaring = files.find((f) => `.${symbol}`.startsWith(`.${f.package}.`));
  assert.ok(declaring, `no file declares ${symbol}`);
  return declaring;
}

/** The methods of `definition` (the generated one the server runs) as `/<service>/<method>` paths. */
function generatedPaths(definition: Record<string, { path: string }>): string[] {
  return Object.values(definition).map((m) => m.path).sort();
}

const cases = [
  {
    name: 'directory',
    service: 'tokenserver.directory.v1.Directory',
    definition: DirectoryService as unknown as Record<string, { path: string }>,
    start: (storeUrl: string) => startDirectory({ storeUrl, auth: TEST_AUTH }),
    message: { name: 'LoginRequest', fields: ['service', 'email', 'generation', 'client_state', 'keys_changed_at'] },
  },
  {
    name: 'nodeassign',
    service: 'tokenserver.nodeassign.v1.NodeAssign',
    definition: NodeAssignService as unknown as Record<string, { path: string }>,
    start: (storeUrl: string) => startNodeAssign({ storeUrl, auth: TEST_AUTH }),
    message: { name: 'AllocateRequest', fields: ['service'] },
  },
];

for (const c of cases) {
  test(`${c.name}: reflection lists the service and describes every method the server runs`, async () => {
    const running = await c.start('sqlite::memory:');
    try {
      const services = await listServices(running.port);
      assert.deepEqual(services, [c.service]);

      const file = await describe(running.port, c.service);
      const service = file.service.find((s) => `${file.package}.${s.name}` === c.service);
      assert.ok(service);
      const reflected = service.method.map((m) => `/${c.service}/${m.name}`).sort();
      assert.deepEqual(reflected, generatedPaths(c.definition));
      for (const m of service.method) {
        assert.match(m.inputType, new RegExp(`^\\.${file.package.replace(/\./g, '\\.')}\\.\\w+$`), m.name);
        assert.ok(file.messageType.some((t) => `.${file.package}.${t.name}` === m.outputType), `${m.name} returns ${m.outputType}`);
      }
      const message = file.messageType.find((t) => t.name === c.message.name);
      assert.ok(message, c.message.name);
      // The .proto's own field names (snake_case), as protoc would describe them.
      for (const f of c.message.fields) assert.ok(message.field.some((x) => x.name === f), `${c.message.name}.${f}`);
    } finally {
      await running.close();
    }
  });

  test(`${c.name}: reflection needs INTERNAL_SECRET like every call but health`, async () => {
    const running = await c.start('sqlite::memory:');
    try {
      for (const wrong of WRONG_AUTHS) {
        await assert.rejects(
          reflect(running.port, wrong.auth, { list_services: '*' }),
          (err: grpc.ServiceError) => err.code === grpc.status.UNAUTHENTICATED,
          wrong.name,
        );
      }
      assert.equal(await healthStatus(running.port, c.service), 'SERVING');
    } finally {
      await running.close();
    }
  });
}
