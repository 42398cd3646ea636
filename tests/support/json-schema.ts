// A small JSON Schema validator for the subset docs/openapi.yaml uses: type,
// required, properties, enum, items, additionalProperties, pattern, minItems,
// minimum and local $refs. A keyword outside that subset throws, so the
// document cannot rely on a rule this validator would silently skip.

export type Schema = { [keyword: string]: unknown };

/** Keywords that only describe; they never fail a value. */
const ANNOTATIONS = new Set(['description', 'title', 'example', 'examples', 'format', 'default', 'deprecated']);
const ASSERTIONS = new Set(['$ref', 'type', 'required', 'properties', 'enum', 'items', 'additionalProperties', 'pattern', 'minItems', 'minimum']);

/** Follows a local reference such as `#/components/schemas/Token` in `root`. */
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

function typeOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  return typeof value;
}

function hasType(value: unknown, type: string): boolean {
  switch (type) {
    case 'integer':
      return Number.isInteger(value);
    case 'number':
      return typeof value === 'number' && Number.isFinite(value);
    case 'object':
      return typeOf(value) === 'object';
    case 'array':
    case 'string':
    case 'boolean':
    case 'null':
      return typeOf(value) === type;
    default:
      throw new Error(`unsupported type ${type}`);
  }
}

/**
 * Every way `value` breaks `schema`, as "<path>: <problem>" lines; empty when
 * it conforms. `root` is the document `$ref`s point into.
 */
export function validate(schema: Schema, value: unknown, root: unknown = schema, path = '$'): string[] {
  for (const k of Object.keys(schema)) {
    if (!ASSERTIONS.has(k) && !ANNOTATIONS.has(k)) throw new Error(`${path}: unsupported schema keyword "${k}"`);
  }
  if (typeof schema.$ref === 'string') return validate(resolveRef(root, schema.$ref) as Schema, value, root, path);

  const problems: string[] = [];
  if (schema.type !== undefined) {
    const types = Array.isArray(schema.type) ? (schema.type as string[]) : [schema.type as string];
    if (!types.some((t) => hasType(value, t))) {
      // Nothing below makes sense for a value of the wrong type.
      return [`${path}: expected ${types.join(' or ')}, got ${typeOf(value)}`];
    }
  }
  if (Array.isArray(schema.enum) && !schema.enum.some((e) => e === value)) {
    problems.push(`${path}: ${JSON.stringify(value)} is not one of ${JSON.stringify(schema.enum)}`);
  }
  if (typeof schema.pattern === 'string' && typeof value === 'string' && !new RegExp(schema.pattern, 'u').test(value)) {
    problems.push(`${path}: ${JSON.stringify(value)} does not match ${schema.pattern}`);
  }
  if (typeof schema.minimum === 'number' && typeof value === 'number' && value < schema.minimum) {
    problems.push(`${path}: ${value} is below the minimum ${schema.minimum}`);
  }
  if (Array.isArray(value)) {
    if (typeof schema.minItems === 'number' && value.length < schema.minItems) {
      problems.push(`${path}: ${value.length} items, at least ${schema.minItems} expected`);
    }
    if (schema.items !== undefined) {
      value.forEach((item, i) => problems.push(...validate(schema.items as Schema, item, root, `${path}[${i}]`)));
    }
  }
  if (typeOf(value) === 'object') {
    const obj = value as Record<string, unknown>;
    const properties = (schema.properties ?? {}) as Record<string, Schema>;
    for (const name of (schema.required ?? []) as string[]) {
      if (!Object.hasOwn(obj, name)) problems.push(`${path}: missing required property "${name}"`);
    }
    for (const [name, v] of Object.entries(obj)) {
      const p = `${path}.${name}`;
      if (Object.hasOwn(properties, name)) problems.push(...validate(properties[name], v, root, p));
      else if (schema.additionalProperties === false) problems.push(`${p}: property not allowed`);
      else if (typeof schema.additionalProperties === 'object' && schema.additionalProperties !== null) {
        problems.push(...validate(schema.additionalProperties as Schema, v, root, p));
      }
    }
  }
  return problems;
}
