import { concatBytes } from './bytes.js';
import { VerificationError } from './errors.js';

/**
 * The one DER reader (X.690 §10): what checking certificates, CMS SignedData and RFC 3161 tokens needs. Definite
 * lengths only; anything malformed throws VerificationError('malformed').
 */
function malformed(message: string): never {
  throw new VerificationError('malformed', `DER: ${message}`);
}

export interface Tlv {
  tag: number;
  /** The whole encoding: tag, length and value. */
  bytes: Uint8Array;
  /** The value only. */
  value: Uint8Array;
}

export function readTlv(data: Uint8Array, offset = 0): Tlv {
  if (offset + 2 > data.length) malformed('truncated');
  const tag = data[offset]!;
  if ((tag & 0x1f) === 0x1f) malformed('multi-byte tags are not used here');
  let length = data[offset + 1]!;
  let header = 2;
  if (length & 0x80) {
    const octets = length & 0x7f;
    if (octets === 0 || octets > 4) malformed('indefinite or oversized length');
    if (offset + 2 + octets > data.length) malformed('truncated length');
    length = 0;
    for (let i = 0; i < octets; i += 1) length = length * 256 + data[offset + 2 + i]!;
    header += octets;
  }
  const end = offset + header + length;
  if (end > data.length) malformed('value runs past the end');
  return { tag, bytes: data.subarray(offset, end), value: data.subarray(offset + header, end) };
}

/** The one element `data` holds, with no trailing bytes. */
export function readDer(data: Uint8Array): Tlv {
  const tlv = readTlv(data);
  if (tlv.bytes.length !== data.length) malformed('trailing bytes after the element');
  return tlv;
}

/** The elements inside a constructed value. */
export function children(tlv: Tlv): Tlv[] {
  if ((tlv.tag & 0x20) === 0) malformed(`tag 0x${tlv.tag.toString(16)} is not constructed`);
  const out: Tlv[] = [];
  let offset = 0;
  while (offset < tlv.value.length) {
    const child = readTlv(tlv.value, offset);
    out.push(child);
    offset += child.bytes.length;
  }
  return out;
}

export function expectTag(tlv: Tlv | undefined, tag: number, what: string): Tlv {
  if (!tlv || tlv.tag !== tag) malformed(`${what}: expected tag 0x${tag.toString(16)}`);
  return tlv;
}

export function oidText(tlv: Tlv): string {
  expectTag(tlv, 0x06, 'object identifier');
  const bytes = tlv.value;
  const arcs: number[] = [];
  let value = 0;
  for (const b of bytes) {
    value = value * 128 + (b & 0x7f);
    if ((b & 0x80) === 0) {
      if (arcs.length === 0)
        arcs.push(value < 80 ? Math.floor(value / 40) : 2, value < 80 ? value % 40 : value - 80);
      else arcs.push(value);
      value = 0;
    }
  }
  return arcs.join('.');
}

/** UTCTime or GeneralizedTime (Z only, as DER requires). */
export function timeValue(tlv: Tlv): Date {
  const text = new TextDecoder().decode(tlv.value);
  const utc = tlv.tag === 0x17 ? /^(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})Z$/.exec(text) : null;
  const generalized = tlv.tag === 0x18 ? /^(\d{4})(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})Z$/.exec(text) : null;
  const match = utc ?? generalized;
  if (!match) malformed('not a DER time');
  const [, y, mo, d, h, mi, s] = match.map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  // RFC 5280 section 4.1.2.5.1: two-digit years 50-99 are 19xx, 00-49 are 20xx.
  const year = utc ? (y < 50 ? 2000 + y : 1900 + y) : y;
  return new Date(Date.UTC(year, mo - 1, d, h, mi, s));
}

/** The content octets of an OCTET STRING, joining the pieces of a constructed (BER) one. */
export function octets(tlv: Tlv): Uint8Array {
  if (tlv.tag === 0x04) return tlv.value;
  if (tlv.tag === 0x24) {
    return concatBytes(...children(tlv).map(octets));
  }
  malformed('expected an OCTET STRING');
}

/** The OID of an AlgorithmIdentifier (a SEQUENCE starting with the OID). */
export function algorithmOid(tlv: Tlv | undefined, what: string): string {
  const [oid] = children(expectTag(tlv, 0x30, what));
  return oidText(expectTag(oid, 0x06, what));
}

/** A small INTEGER value (versions). */
export function smallInteger(tlv: Tlv | undefined, what: string): number {
  const value = expectTag(tlv, 0x02, what).value;
  if (value.length !== 1) malformed(`${what}: not a small integer`);
  return value[0]!;
}

/**
 * The one value of a signed attribute (CMS, RFC 5652 §5.3: a SET OF Attribute), undefined when absent; an attribute
 * given twice, or with several values, is malformed.
 */
export function signedAttribute(attributes: Tlv, oid: string): Tlv | undefined {
  let found: Tlv | undefined;
  for (const a of children(attributes)) {
    const [type, values] = children(a);
    if (type && values && oidText(type) === oid) {
      const list = children(values);
      if (found || list.length !== 1) malformed(`signed attribute ${oid} must appear once with one value`);
      found = list[0];
    }
  }
  return found;
}
