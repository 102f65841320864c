/**
 * RFC 8785 JSON canonicalisation (DESIGN.md section 4: seal bodies, ledger leaves and block digests are hashed over
 * it). Numbers use the ECMAScript serialisation the RFC adopts; keys are sorted by UTF-16 code units. Values JSON
 * cannot carry (NaN, Infinity, undefined, functions) are refused, never turned into null.
 */
export function canonicalize(value: unknown): string {
  if (value === null) return 'null';
  switch (typeof value) {
    case 'boolean':
      return value ? 'true' : 'false';
    case 'number':
      if (!Number.isFinite(value)) throw new TypeError('canonical JSON has no NaN or Infinity');
      return JSON.stringify(value);
    case 'string':
      return JSON.stringify(value);
    case 'object': {
      if (Array.isArray(value)) return `[${value.map((v) => canonicalize(v)).join(',')}]`;
      const record = value as Record<string, unknown>;
      const keys = Object.keys(record).sort();
      return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalize(record[k])}`).join(',')}}`;
    }
    default:
      throw new TypeError(`canonical JSON cannot hold a value of type ${typeof value}`);
  }
}
