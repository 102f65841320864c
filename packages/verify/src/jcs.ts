import { VerificationError } from './errors.js';

// RFC 8785 (JSON Canonicalization Scheme), the one implementation: seal bodies, envelopes, revocation lists, ledger
// leaves and block digests are hashed or signed over it. DESIGN.md §4: "Canonical JSON: RFC 8785. Integers beyond
// 2^53 never appear in signed bodies." @ooh/crypto re-exports it.

export interface CanonicalizeOptions {
  /**
   * RFC 8785 itself serialises any finite IEEE 754 number (its published vectors contain 1e30). This
   * project refuses integers beyond 2^53 - 1 by default (DESIGN.md §4); pass true to get plain RFC 8785
   * behaviour, e.g. to run the RFC's own test vectors.
   */
  allowUnsafeIntegers?: boolean;
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function refuse(message: string, cause?: unknown): never {
  throw new VerificationError('not_canonicalizable', message, cause === undefined ? undefined : { cause });
}

function serializeString(text: string, where: string): string {
  // RFC 8785 §3.2.2.2: strings must be valid Unicode; a lone surrogate cannot be expressed in UTF-8.
  if (LONE_SURROGATE.test(text)) refuse(`lone surrogate in ${where}`);
  // With well-formed input, JSON.stringify escapes exactly as RFC 8785 §3.2.2.2 requires:
  // \b \t \n \f \r \" \\ as two-character escapes, other controls as lowercase \u00xx, all else literal.
  return JSON.stringify(text);
}

function serializeNumber(value: number, allowUnsafeIntegers: boolean, where: string): string {
  if (!Number.isFinite(value)) refuse(`${value} at ${where} is not a JSON number`);
  if (!allowUnsafeIntegers && Number.isInteger(value) && !Number.isSafeInteger(value)) {
    refuse(`integer ${value} at ${where} is beyond 2^53 - 1`);
  }
  // RFC 8785 §3.2.2.3: the ECMAScript Number-to-String algorithm; String(-0) is already "0".
  return String(value);
}

function isPlainObject(value: object): boolean {
  const prototype = Object.getPrototypeOf(value);
  return prototype === Object.prototype || prototype === null;
}

function serialize(value: unknown, options: CanonicalizeOptions, open: Set<object>, where: string): string {
  switch (typeof value) {
    case 'string':
      return serializeString(value, where);
    case 'number':
      return serializeNumber(value, options.allowUnsafeIntegers === true, where);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'object':
      break;
    default:
      // undefined, bigint, symbol, function: not JSON values (RFC 8785 §3.1 requires I-JSON data).
      return refuse(`${typeof value} at ${where} is not a JSON value`);
  }
  if (value === null) return 'null';
  if (open.has(value)) refuse(`cycle at ${where}`);
  open.add(value);
  let text: string;
  if (Array.isArray(value)) {
    const parts: string[] = [];
    for (let index = 0; index < value.length; index += 1) {
      if (!(index in value)) refuse(`hole in array at ${where}[${index}]`);
      parts.push(serialize(value[index], options, open, `${where}[${index}]`));
    }
    text = `[${parts.join(',')}]`;
  } else {
    if (!isPlainObject(value))
      refuse(`${value.constructor?.name ?? 'object'} at ${where} is not a plain object`);
    if (Object.getOwnPropertySymbols(value).length > 0) refuse(`symbol key at ${where}`);
    // RFC 8785 §3.2.3: members sorted by their names as arrays of UTF-16 code units; the default
    // Array.prototype.sort comparison is exactly that.
    const keys = Object.keys(value).sort();
    const record = value as Record<string, unknown>;
    const parts: string[] = [];
    for (const key of keys) {
      const member = `${where}.${key}`;
      parts.push(`${serializeString(key, `key ${member}`)}:${serialize(record[key], options, open, member)}`);
    }
    text = `{${parts.join(',')}}`;
  }
  open.delete(value);
  return text;
}

/**
 * RFC 8785 canonical JSON text of a JSON value. Throws VerificationError('not_canonicalizable') on NaN,
 * ±Infinity, undefined (also as a member value), functions, symbols, bigint, lone surrogates, cycles,
 * array holes, non-plain objects (Date, Map, class instances: convert them first) and, unless
 * `allowUnsafeIntegers`, integers beyond 2^53 - 1.
 */
export function canonicalize(value: unknown, options: CanonicalizeOptions = {}): string {
  try {
    return serialize(value, options, new Set(), '$');
  } catch (error) {
    if (error instanceof RangeError) refuse('value nested too deeply', error);
    throw error;
  }
}

/** UTF-8 bytes of canonicalize(value). */
export function canonicalBytes(value: unknown, options: CanonicalizeOptions = {}): Uint8Array {
  return new TextEncoder().encode(canonicalize(value, options));
}
