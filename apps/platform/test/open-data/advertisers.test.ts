import { describe, expect, test } from 'vitest';
import {
  advertiserBinKey,
  advertiserNameKey,
  type NamedAdvertiser,
  namedAdvertiserGroups,
} from '../../src/open-data/advertisers.js';

describe('who one advertiser is (audit I finding 1)', () => {
  test('names are compared without case, spaces, punctuation and legal form', () => {
    const key = advertiserNameKey('Coca-Cola Almaty LLP');
    for (const name of [
      'COCA COLA ALMATY',
      '«ТОО» Coca-Cola  Almaty',
      'coca-cola almaty, llp',
      'Ｃｏｃａ-Ｃｏｌａ Almaty',
    ]) {
      expect(advertiserNameKey(name), name).toBe(key);
    }
    expect(advertiserNameKey('Coca-Cola Astana')).not.toBe(key);
    // A name that is only a legal form keeps it.
    expect(advertiserNameKey('ТОО')).toBe('тоо');
    expect(advertiserBinKey(' 1234 5678 9012 ')).toBe('123456789012');
    expect(advertiserBinKey(null)).toBeNull();
    expect(advertiserBinKey('')).toBeNull();
  });

  test('the same BIN or the same name is one advertiser, also through another submission', () => {
    const a: NamedAdvertiser = { advertiserName: 'Coca-Cola Almaty', advertiserBin: '123456789012' };
    const b: NamedAdvertiser = { advertiserName: 'CCA Beverages', advertiserBin: '123456789012' };
    const c: NamedAdvertiser = { advertiserName: 'cca beverages llp', advertiserBin: null };
    const d: NamedAdvertiser = { advertiserName: 'Magnum', advertiserBin: null };
    const e: NamedAdvertiser = { advertiserName: 'Magnum', advertiserBin: '999999999999' };
    const f: NamedAdvertiser = { advertiserName: 'Small Shop', advertiserBin: '111111111111' };
    const forward = namedAdvertiserGroups([a, b, c, d, e, f]);
    const backward = namedAdvertiserGroups([f, e, d, c, b, a]);
    for (const group of [forward, backward]) {
      expect(group(a)).toBe(group(b));
      // c gives no BIN, but its name is b's: a, b and c are one advertiser.
      expect(group(c)).toBe(group(a));
      expect(group(d)).toBe(group(e));
      expect(new Set([a, b, c, d, e, f].map(group)).size).toBe(3);
    }
    // The key of a group does not depend on the order of the submissions.
    expect([a, d, f].map(forward)).toEqual([a, d, f].map(backward));
  });
});
