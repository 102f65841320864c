import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { canonicalBytes, canonicalize, VerificationError, type VerificationErrorCode } from '../src/index.js';

// Third-party RFC 8785 vectors, read in place (shared/vectors/README.md).
const JCS_VECTORS = fileURLToPath(new URL('../../../../shared/vectors/jcs/', import.meta.url));
const vectorNames = readdirSync(join(JCS_VECTORS, 'input')).filter((name) => name.endsWith('.json'));

function expectCode(action: () => unknown, code: VerificationErrorCode): void {
  let caught: unknown;
  try {
    action();
  } catch (error) {
    caught = error;
  }
  expect(caught).toBeInstanceOf(VerificationError);
  expect((caught as VerificationError).code).toBe(code);
}

describe('RFC 8785 vectors (cyberphone/json-canonicalization testdata)', () => {
  test('all six vector files are present', () => {
    expect(vectorNames.sort()).toEqual([
      'arrays.json',
      'french.json',
      'structures.json',
      'unicode.json',
      'values.json',
      'weird.json',
    ]);
  });

  test.each(vectorNames)('%s canonicalises to output/ and outhex/ byte for byte', (name) => {
    const input: unknown = JSON.parse(readFileSync(join(JCS_VECTORS, 'input', name), 'utf8'));
    const expected = readFileSync(join(JCS_VECTORS, 'output', name));
    const expectedHex = readFileSync(join(JCS_VECTORS, 'outhex', name.replace(/\.json$/, '.txt')), 'utf8');
    const expectedFromHex = Buffer.from(expectedHex.replace(/\s+/g, ''), 'hex');
    expect(expectedFromHex.equals(expected)).toBe(true);

    // values.json holds 1E30: plain RFC 8785 serialises it, this project's default refuses it.
    const bytes = canonicalBytes(input, { allowUnsafeIntegers: true });
    expect(Buffer.from(bytes).equals(expected)).toBe(true);
    expect(canonicalize(input, { allowUnsafeIntegers: true })).toBe(expected.toString('utf8'));
    if (name === 'values.json') {
      expectCode(() => canonicalize(input), 'not_canonicalizable');
    } else {
      expect(Buffer.from(canonicalBytes(input)).equals(expected)).toBe(true);
    }
  });
});

describe('numbers: ECMAScript Number.prototype.toString (RFC 8785 §3.2.2.3)', () => {
  test.each([
    [0, '0'],
    [-0, '0'],
    [1, '1'],
    [-1, '-1'],
    [4.5, '4.5'],
    [0.002, '0.002'],
    [1e-7, '1e-7'],
    [0.000001, '0.000001'],
    [333333333.3333333, '333333333.3333333'],
    [5e-324, '5e-324'],
    [2 ** 53 - 1, '9007199254740991'],
    [-(2 ** 53 - 1), '-9007199254740991'],
    [123456789012.5, '123456789012.5'],
  ])('%d -> %s', (value, text) => {
    expect(canonicalize(value)).toBe(text);
  });

  test('numbers beyond 2^53 - 1 follow the RFC only when allowed', () => {
    expect(canonicalize(1e21, { allowUnsafeIntegers: true })).toBe('1e+21');
    expect(canonicalize(1e30, { allowUnsafeIntegers: true })).toBe('1e+30');
    expect(canonicalize(1.7976931348623157e308, { allowUnsafeIntegers: true })).toBe(
      '1.7976931348623157e+308',
    );
    expect(canonicalize(2 ** 53, { allowUnsafeIntegers: true })).toBe('9007199254740992');
    for (const value of [2 ** 53, -(2 ** 53), 1e21, 1e30, Number.MAX_VALUE]) {
      expectCode(() => canonicalize({ n: value }), 'not_canonicalizable');
    }
  });
});

describe('strings and keys', () => {
  test('escapes exactly as RFC 8785 §3.2.2.2 says', () => {
    expect(canonicalize('\u0000\u0008\t\n\u000b\f\r\u001f"\\/\u007f\u2028€😂')).toBe(
      '"\\u0000\\b\\t\\n\\u000b\\f\\r\\u001f\\"\\\\/\u007f\u2028€😂"',
    );
  });

  test('sorts keys by UTF-16 code units, not by code points or locale', () => {
    // U+1F600 is D83D DE00 in UTF-16, so it sorts before U+FB33 although its code point is larger.
    const value = { '\ufb33': 1, '\u{1f600}': 2, b: 3, B: 4, a: 5, '': 6, aa: 7, é: 8 };
    expect(canonicalize(value)).toBe('{"":6,"B":4,"a":5,"aa":7,"b":3,"\u00e9":8,"\u{1f600}":2,"\ufb33":1}');
  });

  test('nests arrays and objects without whitespace', () => {
    expect(canonicalize({ z: [1, { y: null, x: [true, false] }], a: {} })).toBe(
      '{"a":{},"z":[1,{"x":[true,false],"y":null}]}',
    );
    expect(Buffer.from(canonicalBytes({ s: 'é' })).toString('hex')).toBe('7b2273223a22c3a9227d');
  });

  test('accepts objects without a prototype', () => {
    const bare = Object.create(null) as Record<string, unknown>;
    bare.b = 1;
    bare.a = 2;
    expect(canonicalize(bare)).toBe('{"a":2,"b":1}');
  });
});

describe('refusals (RFC 8785 §3.1: I-JSON only)', () => {
  const cyclic: Record<string, unknown> = {};
  cyclic.self = cyclic;
  const sparse: unknown[] = [1];
  sparse[2] = 3;
  class Point {
    x = 1;
  }
  const symbolKeyed = { a: 1, [Symbol('s')]: 2 };

  test.each([
    ['NaN', Number.NaN],
    ['Infinity', Number.POSITIVE_INFINITY],
    ['-Infinity', Number.NEGATIVE_INFINITY],
    ['undefined', undefined],
    ['undefined member', { a: undefined }],
    ['undefined element', [undefined]],
    ['function', () => 1],
    ['symbol', Symbol('x')],
    ['bigint', 10n],
    ['lone high surrogate', '\ud800'],
    ['lone low surrogate', 'a\udc00b'],
    ['reversed pair', '\ude00\ud83d'],
    ['lone surrogate in a key', { '\ud800': 1 }],
    ['NaN nested', { a: [1, { b: Number.NaN }] }],
    ['cycle', cyclic],
    ['array hole', sparse],
    ['Date', new Date(0)],
    ['Map', new Map()],
    ['class instance', new Point()],
    ['Uint8Array', new Uint8Array(1)],
    ['symbol key', symbolKeyed],
    ['integer 2^53', 2 ** 53],
  ])('%s', (_name, value) => {
    expectCode(() => canonicalize(value), 'not_canonicalizable');
    expectCode(() => canonicalBytes(value), 'not_canonicalizable');
  });

  test('a value nested beyond the stack is refused with a code, not a RangeError', () => {
    let deep: unknown = 1;
    for (let depth = 0; depth < 200_000; depth += 1) deep = [deep];
    expectCode(() => canonicalize(deep), 'not_canonicalizable');
  });

  test('a shared (non-cyclic) sub-object is fine', () => {
    const shared = { k: 1 };
    expect(canonicalize({ a: shared, b: [shared] })).toBe('{"a":{"k":1},"b":[{"k":1}]}');
  });
});

describe('properties', () => {
  test('canonical text parses back to an equal value and is a fixed point', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const text = canonicalize(value, { allowUnsafeIntegers: true });
        const reparsed: unknown = JSON.parse(text);
        expect(canonicalize(reparsed, { allowUnsafeIntegers: true })).toBe(text);
        // JSON.parse(text) equals the value, except that -0 comes back as 0 (as through JSON.stringify).
        expect(reparsed).toEqual(JSON.parse(JSON.stringify(value)));
      }),
      { numRuns: 500 },
    );
  });

  test('output does not depend on key insertion order', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string(), fc.integer()), (record) => {
        const reversed = Object.fromEntries(Object.entries(record).reverse());
        expect(canonicalize(reversed)).toBe(canonicalize(record));
      }),
      { numRuns: 300 },
    );
  });
});
