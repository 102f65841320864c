import type * as pkijs from 'pkijs';

// What cms.ts (RFC 5652 SignedData) and tsp.ts (RFC 3161 tokens, which are SignedData) share: a small exact-DER
// writer (pkijs bundles its own asn1js, whose objects cannot be mixed with this package's, and would write BER
// where DER is wanted) and the readers of values pkijs parsed. Internal to the package.

export const TAG_BOOLEAN = 0x01;
export const TAG_INTEGER = 0x02;
export const TAG_OCTET_STRING = 0x04;
export const TAG_NULL = 0x05;
export const TAG_OID = 0x06;
export const TAG_UTC_TIME = 0x17;
export const TAG_GENERALIZED_TIME = 0x18;
export const TAG_SEQUENCE = 0x30;
export const TAG_SET = 0x31;
export const TAG_CONTEXT_0 = 0xa0;

/** ASN.1 tag classes as asn1js numbers them. */
export const UNIVERSAL = 1;

// ---------------------------------------------------------------------------------------------------------
// DER writing

function derLength(length: number): Uint8Array {
  if (length < 0x80) return Uint8Array.of(length);
  const octets: number[] = [];
  for (let rest = length; rest > 0; rest = Math.floor(rest / 256)) octets.unshift(rest % 256);
  return Uint8Array.of(0x80 | octets.length, ...octets);
}

export function tlv(tag: number, ...contents: Uint8Array[]): Uint8Array {
  const body = Buffer.concat(contents);
  return Buffer.concat([Uint8Array.of(tag), derLength(body.byteLength), body]);
}

/** X.690 §11.6: the elements of a DER SET OF are ordered by their encodings. */
export function derSetOf(tag: number, elements: Uint8Array[]): Uint8Array {
  return tlv(tag, ...[...elements].sort((a, b) => Buffer.compare(a, b)));
}

export function oid(dotted: string): Uint8Array {
  const arcs = dotted.split('.').map(Number);
  const octets: number[] = [];
  const values = [40 * arcs[0]! + arcs[1]!, ...arcs.slice(2)];
  for (const value of values) {
    const group = [value & 0x7f];
    for (let rest = Math.floor(value / 128); rest > 0; rest = Math.floor(rest / 128))
      group.unshift(0x80 | (rest & 0x7f));
    octets.push(...group);
  }
  return tlv(TAG_OID, Uint8Array.from(octets));
}

/** A DER INTEGER of a non-negative number given as big-endian octets (minimal, with a 00 sign octet if needed). */
export function unsignedInteger(octets: Uint8Array): Uint8Array {
  let start = 0;
  while (start < octets.length - 1 && octets[start] === 0) start += 1;
  const trimmed = octets.subarray(start);
  const body = (trimmed[0] ?? 0) & 0x80 ? Buffer.concat([Uint8Array.of(0), trimmed]) : trimmed;
  return tlv(TAG_INTEGER, body.byteLength === 0 ? Uint8Array.of(0) : body);
}

// ---------------------------------------------------------------------------------------------------------
// Reading what pkijs parsed

/**
 * What this package reads of an ASN.1 value that pkijs parsed. pkijs holds values of its own asn1js copy,
 * so they are recognised by tag, never by `instanceof` against this package's asn1js.
 */
export interface AsnValue {
  idBlock: { tagClass: number; tagNumber: number; isConstructed: boolean };
  valueBlock: { valueHexView?: Uint8Array };
}

export function isAsn(value: unknown, tagClass: number, tagNumber: number): value is AsnValue {
  const idBlock = (value as AsnValue | null)?.idBlock;
  return (
    typeof idBlock === 'object' &&
    idBlock !== null &&
    idBlock.tagClass === tagClass &&
    idBlock.tagNumber === tagNumber
  );
}

/** An OCTET STRING's value; getValue() also joins the pieces of a constructed (BER) OCTET STRING. */
export function octetStringValue(value: unknown): Uint8Array | null {
  if (!isAsn(value, UNIVERSAL, TAG_OCTET_STRING)) return null;
  const getValue = (value as { getValue?: () => ArrayBuffer }).getValue;
  return typeof getValue === 'function' ? new Uint8Array(getValue.call(value)) : null;
}

export function certificateDer(certificate: pkijs.Certificate): Uint8Array {
  return new Uint8Array(certificate.toSchema(false).toBER(false));
}
