// Checks a real HTTP response against docs/openapi.yaml: the status is
// documented for that path and method, every required header is there, every
// documented header's values match their schema, the content type is the
// documented one and the body matches its schema. The protocol headers the
// login sends (X-Backoff, Retry-After, …) must be documented where they appear.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
// `yaml` is in node_modules as a dependency of docker-compose (testcontainers); no other parser is installed.
import { parse } from 'yaml';

export const OPENAPI_FILE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../docs/openapi.yaml');

export type OpenApiDocument = {
  openapi: string;
  paths: Record<string, Record<string, unknown>>;
  components?: Record<string, unknown>;
};

export function loadOpenApi(file = OPENAPI_FILE): OpenApiDocument {
  return parse(readFileSync(file, 'utf8')) as OpenApiDocument;
}

export type Schema = { [keyword: string]: unknown };

/** Follows a local reference such as `#/components/headers/X-Timestamp` in `root`. */
export function resolveRef(root: unknown, ref: string): unknown {
  if (!ref.startsWith('#/')) throw new Error(`only local $refs are supported, got ${ref}`);
  let node: unknown = root;
  for (const raw of ref.slice(2).split('/')) {
    const key = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (typeof node !== 'object' || node === null || !(key in node)) throw new Error(`unresolvable $ref ${ref}`);
    node = (node as Record<string, unknown>)[key];
  }
  return node;
}

// Schemas are checked by Ajv. The document's component schemas are registered
// under one id, and `#/components/schemas/X` references are rewritten to point
// there, so a schema from anywhere in the document compiles on its own.
const SCHEMAS_ID = 'https://openapi.invalid/components/schemas';
const SCHEMA_REF = '#/components/schemas/';

function pointingAtRegistered(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(pointingAtRegistered);
  if (typeof node !== 'object' || node === null) return node;
  return Object.fromEntries(
    Object.entries(node).map(([k, v]) => [k, k === '$ref' && typeof v === 'string' && v.startsWith(SCHEMA_REF) ? `${SCHEMAS_ID}#/$defs/${v.slice(SCHEMA_REF.length)}` : pointingAtRegistered(v)]),
  );
}

interface Validators {
  ajv: Ajv;
  compiled: WeakMap<Schema, ValidateFunction>;
}
const validatorsByRoot = new WeakMap<object, Validators>();

function validators(root: object): Validators {
  let v = validatorsByRoot.get(root);
  if (!v) {
    // strict: a keyword Ajv does not know throws instead of being skipped, so the
    // document cannot rely on a rule that is never checked.
    const ajv = new Ajv({ allErrors: true, strict: true });
    const schemas = ((root as { components?: { schemas?: unknown } }).components?.schemas ?? {}) as Record<string, unknown>;
    ajv.addSchema({ $id: SCHEMAS_ID, $defs: pointingAtRegistered(schemas) });
    v = { ajv, compiled: new WeakMap() };
    validatorsByRoot.set(root, v);
  }
  return v;
}

function errorText(e: ErrorObject): string {
  const detail = e.keyword === 'enum' ? ` ${JSON.stringify(e.params.allowedValues)}` : e.keyword === 'additionalProperties' ? ` (${JSON.stringify(e.params.additionalProperty)})` : '';
  return `${e.message}${detail}`;
}

/**
 * Every way `value` breaks `schema` (a schema found in `root`, whose component
 * schemas its `$ref`s name), as "<path>: <problem>" lines; empty when it conforms.
 */
export function validate(schema: Schema, value: unknown, root: object, path = '$'): string[] {
  const { ajv, compiled } = validators(root);
  let check = compiled.get(schema);
  if (!check) {
    check = ajv.compile(pointingAtRegistered(schema) as Schema);
    compiled.set(schema, check);
  }
  if (check(value)) return [];
  return (check.errors ?? []).map((e) => `${path}${e.instancePath.replace(/\//g, '.')}: ${errorText(e)}`);
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
