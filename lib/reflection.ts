// gRPC server reflection (grpc.reflection.v1 and v1alpha) on directory and
// nodeassign, so that grpcurl and similar tools can list and describe the
// services without the .proto files. The descriptors come from proto/ through
// @grpc/proto-loader, read once at start: the files the types in lib/gen/ are
// generated from, so what reflection shows is what the server speaks.
// Reflection sits behind INTERNAL_SECRET like every call but health (lib/grpc.ts says why).
import type * as grpc from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { ReflectionService } from '@grpc/reflection';
import { fileURLToPath } from 'node:url';

/** proto/ beside lib/: the source tree, or dist/ in the image (the Dockerfile copies proto/ there). */
export const PROTO_DIR = fileURLToPath(new URL('../proto/', import.meta.url));

/**
 * Adds reflection for the services of `protoFiles` (files in proto/). Not for grpc.health.v1:
 * protobufjs describes its map field with an entry named `Statuses` instead of `StatusesEntry`,
 * and Go's protobuf (grpcurl) then refuses the whole file; probes do not need reflection.
 */
export function addReflection(server: grpc.Server, protoFiles: string[]): void {
  // keepCase: the descriptors keep the .proto's field names (snake_case), as protoc would.
  const definition = loadSync(protoFiles, { includeDirs: [PROTO_DIR], keepCase: true });
  new ReflectionService(definition).addToServer(server);
}
