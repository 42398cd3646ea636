// Checks a real HTTP response against docs/openapi.yaml: the status is
// documented for that path and method, every required header is there, every
// documented header's values match their schema, the content type is the
// documented one and the body matches its schema. The protocol headers the
// login sends (X-Backoff, Retry-After, …) must be documented where they appear.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
// `yaml` is in node_modules as a dependency of docker-compose (testcontainers); no other parser is installed.
import { parse } from 'yaml';
import { resolveRef, validate, type Schema } from './json-schema.js';

export const OPENAPI_FILE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../docs/openapi.yaml');

export type OpenApiDocument = {
  openapi: string;
  paths: Record<string, Record<string, unknown>>;
  components?: Record<string, unknown>;
};

export function loadOpenApi(file = OPENAPI_FILE): OpenApiDocument {
  return parse(readFileSync(file, 'utf8')) as OpenApiDocument;
}

/** Headers whose presence the document must explain wherever they are sent. */
const PROTOCOL_HEADERS = ['x-timestamp', 'x-request-id', 'x-backoff', 'retry-after', 'www-authenticate', 'allow'];

export interface ObservedResponse {
  method: string;
  /** The request path, without the query. */
  path: string;
  status: number;
  /** Lower-case name → every value sent. */
  headers: Map<string, string[]>;
  text: string;
}

interface HeaderObject {
  required?: boolean;
  schema: Schema;
}

interface ResponseObject {
  headers?: Record<string, HeaderObject | { $ref: string }>;
  content?: Record<string, { schema: Schema }>;
}

function deref<T>(doc: OpenApiDocument, node: T | { $ref: string }): T {
  let n: unknown = node;
  while (typeof n === 'object' && n !== null && typeof (n as { $ref?: unknown }).$ref === 'string') n = resolveRef(doc, (n as { $ref: string }).$ref);
  return n as T;
}

/** The document's path template for a concrete path, e.g. /1.0/sync/1.5 → /1.0/{app}/{version}. */
export function pathTemplate(doc: OpenApiDocument, concrete: string): string | undefined {
  return Object.keys(doc.paths).find((template) => {
    const re = template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/]+');
    return new RegExp(`^${re}$`).test(concrete);
  });
}

/** A header value as its schema types it: integer headers are compared as numbers. */
function headerValue(raw: string, schema: Schema): unknown {
  return schema.type === 'integer' && /^-?\d+$/.test(raw) ? Number(raw) : raw;
}

/** Every way `res` departs from the document; empty when it conforms. */
export function responseProblems(doc: OpenApiDocument, res: ObservedResponse): string[] {
  const where = `${res.method} ${res.path} → ${res.status}`;
  const template = pathTemplate(doc, res.path);
  if (!template) return [`${where}: path not in the document`];
  const item = doc.paths[template];
  // HEAD answers as GET without a body; any other undocumented method is the 405 documented under GET.
  const method = res.method === 'HEAD' ? 'get' : res.method.toLowerCase();
  const operation = (item[method] ?? (res.status === 405 ? item.get : undefined)) as { responses: Record<string, unknown> } | undefined;
  if (!operation) return [`${where}: method not in the document`];
  const documented = operation.responses[String(res.status)] ?? operation.responses.default;
  if (!documented) return [`${where}: status not documented`];
  const response = deref<ResponseObject>(doc, documented as ResponseObject);

  const problems: string[] = [];
  const headers = Object.fromEntries(Object.entries(response.headers ?? {}).map(([name, h]) => [name.toLowerCase(), deref<HeaderObject>(doc, h)]));
  for (const [name, header] of Object.entries(headers)) {
    const values = res.headers.get(name);
    if (values === undefined) {
      if (header.required) problems.push(`${where}: required header ${name} missing`);
      continue;
    }
    for (const v of values) problems.push(...validate(header.schema, headerValue(v, header.schema), doc, `${where}: header ${name}`));
  }
  for (const name of PROTOCOL_HEADERS) {
    if (res.headers.has(name) && !headers[name]) problems.push(`${where}: header ${name} sent but not documented`);
  }

  const contentType = res.headers.get('content-type')?.[0]?.split(';')[0].trim().toLowerCase();
  const content = response.content ?? {};
  if (Object.keys(content).length === 0) {
    if (res.text !== '') problems.push(`${where}: a body where none is documented`);
    return problems;
  }
  if (contentType === undefined || !content[contentType]) {
    problems.push(`${where}: content type ${contentType} is not one of ${Object.keys(content).join(', ')}`);
    return problems;
  }
  if (res.method === 'HEAD') {
    if (res.text !== '') problems.push(`${where}: HEAD with a body`);
    return problems;
  }
  let body: unknown = res.text;
  if (contentType === 'application/json') {
    try {
      body = JSON.parse(res.text);
    } catch {
      return [...problems, `${where}: body is not JSON`];
    }
  }
  problems.push(...validate(content[contentType].schema, body, doc, `${where}: body`));
  return problems;
}
