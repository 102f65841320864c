import { checkPopRecord, freeFormWithinLimits, LIMITS, parseSrc, REFUSAL_REASONS } from '@ooh/protocol';
import fc from 'fast-check';
import { describe, expect, test } from 'vitest';

const HASH = 'ab'.repeat(32);

const agentPlay = {
  kind: 'play',
  seq: 17,
  play_id: 'p_17-a',
  approval_number: 'APP-2026-00042',
  media_sha256: HASH,
  start: '2026-11-21T09:00:00.000+05:00',
  end: '2026-11-21T09:00:15.000+05:00',
  duration_ms: 15000,
  structure: 'ALM-0001',
  screen: { power: 'on' },
};

const reject = {
  kind: 'reject',
  seq: 18,
  at: '2026-11-21T09:00:00.000+05:00',
  code: 'HASH_MISMATCH',
  detail: { file: 'a.mp4' },
};

const cmsPlay = {
  kind: 'play',
  seq: 5,
  play_id: 'cms-play-5',
  approval_number: 'APP-2026-00042',
  media_sha256: HASH,
  start: '2026-11-21T04:00:00.000Z',
  end: '2026-11-21T04:00:10.000Z',
  duration_ms: 10000,
  player: 'player-007',
};

function without(record: Record<string, unknown>, field: string): Record<string, unknown> {
  const { [field]: _, ...rest } = record;
  return rest;
}

describe('checkPopRecord on the agent channel', () => {
  test('a full play is accepted and returned as it is', () => {
    const result = checkPopRecord(agentPlay, 'agent');
    expect(result).toEqual({ ok: true, record: agentPlay });
    if (result.ok) expect(result.record).toBe(agentPlay);
  });

  test('a minimal play: seq and media_sha256', () => {
    expect(checkPopRecord({ kind: 'play', seq: 1, media_sha256: HASH }, 'agent').ok).toBe(true);
  });

  test('approval_number-or-slot is not judged here (approval_missing is the platform’s)', () => {
    expect(checkPopRecord(without(agentPlay, 'approval_number'), 'agent').ok).toBe(true);
    expect(checkPopRecord({ ...without(agentPlay, 'approval_number'), slot: 'emergency' }, 'agent').ok).toBe(
      true,
    );
    expect(checkPopRecord({ ...agentPlay, slot: 'ads' }, 'agent')).toEqual({
      ok: false,
      reason: 'invalid_record',
    });
  });

  test.each(['seq', 'media_sha256'])('a play without %s is invalid_record', (field) => {
    expect(checkPopRecord(without(agentPlay, field), 'agent')).toEqual({
      ok: false,
      reason: 'invalid_record',
    });
  });

  test('reject, mode_change and tamper need no seq or media', () => {
    expect(checkPopRecord(without(reject, 'seq'), 'agent').ok).toBe(true);
    expect(checkPopRecord({ kind: 'mode_change', seq: 3, at: '2026-11-21T09:00:00Z' }, 'agent').ok).toBe(
      true,
    );
    expect(checkPopRecord({ kind: 'tamper', detail: { door: 'open' } }, 'agent').ok).toBe(true);
    expect(checkPopRecord({ ...reject, code: 'TOO_LOUD' }, 'agent').ok).toBe(false);
  });

  test.each([
    ['kind unknown', { ...agentPlay, kind: 'dance' }],
    ['kind missing', without(agentPlay, 'kind')],
    ['seq 0', { ...agentPlay, seq: 0 }],
    ['seq fractional', { ...agentPlay, seq: 1.5 }],
    ['seq as text', { ...agentPlay, seq: '17' }],
    ['seq beyond 2^53', { ...agentPlay, seq: 2 ** 53 }],
    ['media_sha256 upper case', { ...agentPlay, media_sha256: HASH.toUpperCase() }],
    ['media_sha256 short', { ...agentPlay, media_sha256: HASH.slice(2) }],
    ['play_id with a dot', { ...agentPlay, play_id: 'p.17' }],
    ['play_id empty', { ...agentPlay, play_id: '' }],
    ['start not RFC 3339', { ...agentPlay, start: '2026-11-21 09:00:00' }],
    ['end without offset', { ...agentPlay, end: '2026-11-21T09:00:15' }],
    ['duration_ms negative', { ...agentPlay, duration_ms: -1 }],
    ['screen.power unknown word', { ...agentPlay, screen: { power: 'dim' } }],
    ['screen without power', { ...agentPlay, screen: {} }],
    ['detail not an object', { ...agentPlay, detail: 'x' }],
    ['at not a date-time', { kind: 'tamper', at: 'yesterday' }],
    ['a number', 42],
    ['null', null],
    ['an array', [agentPlay]],
    ['a string', 'play'],
  ])('%s is invalid_record', (_name, record) => {
    expect(checkPopRecord(record, 'agent')).toEqual({ ok: false, reason: 'invalid_record' });
  });

  test('unknown fields are allowed (a newer player may send more)', () => {
    expect(checkPopRecord({ ...agentPlay, volume: 7 }, 'agent').ok).toBe(true);
  });

  test('a malformed src tag never makes the record invalid', () => {
    const record = { ...agentPlay, detail: { src: { channel: 'NOT A WORD', seller_id: 7 } } };
    expect(checkPopRecord(record, 'agent').ok).toBe(true);
    expect(parseSrc(record.detail)).toBeNull();
  });
});

describe('checkPopRecord on the CMS channel', () => {
  test('a full play is accepted', () => {
    expect(checkPopRecord(cmsPlay, 'cms')).toEqual({ ok: true, record: cmsPlay });
  });

  test.each(['reject', 'mode_change', 'tamper', 'dance', ''])('kind %j is kind_not_allowed', (kind) => {
    expect(checkPopRecord({ ...cmsPlay, kind }, 'cms')).toEqual({ ok: false, reason: 'kind_not_allowed' });
  });

  test.each([
    'play_id',
    'start',
    'end',
    'duration_ms',
    'player',
    'seq',
    'media_sha256',
    'kind',
  ])('a play without %s is invalid_record', (field) => {
    expect(checkPopRecord(without(cmsPlay, field), 'cms')).toEqual({ ok: false, reason: 'invalid_record' });
  });

  test('an agent play without player is no CMS record', () => {
    expect(checkPopRecord(agentPlay, 'cms')).toEqual({ ok: false, reason: 'invalid_record' });
    expect(checkPopRecord({ ...cmsPlay, player: '' }, 'cms')).toEqual({
      ok: false,
      reason: 'invalid_record',
    });
  });

  test('screen is ignored on the CMS channel, whatever its shape (spec: "Agent channel only")', () => {
    for (const screen of [{ power: 'dimmed' }, 'on', 7, null, [], { power: 'on', v: 'x'.repeat(20_000) }]) {
      const result = checkPopRecord({ ...cmsPlay, screen }, 'cms');
      expect(result).toEqual({ ok: true, record: cmsPlay });
    }
    // On the agent channel it has its shape.
    expect(checkPopRecord({ ...agentPlay, screen: { power: 'dimmed' } }, 'agent').ok).toBe(false);
  });

  test('a non-object is invalid_record, not kind_not_allowed', () => {
    expect(checkPopRecord('play', 'cms')).toEqual({ ok: false, reason: 'invalid_record' });
    expect(checkPopRecord({ ...cmsPlay, kind: 5 }, 'cms')).toEqual({ ok: false, reason: 'invalid_record' });
  });
});

test('checkPopRecord never throws and answers only its two reasons', () => {
  fc.assert(
    fc.property(fc.jsonValue(), fc.constantFrom('agent' as const, 'cms' as const), (value, channel) => {
      const result = checkPopRecord(value, channel);
      if (!result.ok) expect(REFUSAL_REASONS).toContain(result.reason);
      expect(['invalid_record', 'kind_not_allowed', undefined]).toContain(
        result.ok ? undefined : result.reason,
      );
    }),
  );
});

describe('parseSrc', () => {
  const src = { channel: 'programmatic', seller_id: 'pub-1', deal_id: 'D.1:x-y_z', imp_id: 'imp:42' };

  test('a well-formed tag', () => {
    expect(parseSrc({ src })).toEqual(src);
    expect(parseSrc({ src: { channel: 'direct', seller_id: 'S' }, other: 1 })).toEqual({
      channel: 'direct',
      seller_id: 'S',
    });
    expect(parseSrc({ src: { ...src, deal_id: 'd'.repeat(64) } })).not.toBeNull();
  });

  test.each([
    ['channel in capitals', { ...src, channel: 'DOOH' }],
    ['channel of two words', { ...src, channel: 'open auction' }],
    ['channel with digits', { ...src, channel: 'rtb2' }],
    ['channel empty', { ...src, channel: '' }],
    ['seller_id missing', { channel: 'dooh' }],
    ['seller_id empty', { ...src, seller_id: '' }],
    ['seller_id not a string', { ...src, seller_id: 12 }],
    ['seller_id over the free-form bounds', { ...src, seller_id: 's'.repeat(20_000) }],
    ['seller_id holding U+0000', { ...src, seller_id: 'pub\u00001' }],
    ['seller_id holding a lone surrogate', { ...src, seller_id: 'pub-\ud800' }],
    ['deal_id over 64', { ...src, deal_id: 'd'.repeat(65) }],
    ['deal_id empty', { ...src, deal_id: '' }],
    ['deal_id with a slash', { ...src, deal_id: 'a/b' }],
    ['imp_id with a space', { ...src, imp_id: 'a b' }],
    ['an extra key', { ...src, price: 3 }],
    ['not an object', 'dooh'],
    ['an array', [src]],
    ['null', null],
  ])('%s is ignored', (_name, tag) => {
    expect(parseSrc({ src: tag })).toBeNull();
  });

  test('no detail, or no src in it', () => {
    expect(parseSrc(undefined)).toBeNull();
    expect(parseSrc(null)).toBeNull();
    expect(parseSrc('src')).toBeNull();
    expect(parseSrc([{ src }])).toBeNull();
    expect(parseSrc({})).toBeNull();
  });
});

describe('free-form objects of a record (detail, screen) are small and shallow', () => {
  const nested = (depth: number): unknown => {
    let value: unknown = 'x';
    for (let i = 0; i < depth; i += 1) value = i % 2 === 0 ? [value] : { v: value };
    return value;
  };

  test('a reject whose detail nests 100,000 arrays is invalid_record, not a stack overflow', () => {
    let deep: unknown = [];
    for (let i = 0; i < 100_000; i += 1) deep = [deep];
    const record = {
      kind: 'reject',
      seq: 3,
      at: '2026-11-21T09:00:00.000+05:00',
      code: 'REVOKED',
      detail: { a: deep },
    };
    expect(checkPopRecord(record, 'agent')).toEqual({ ok: false, reason: 'invalid_record' });
  });

  test('depth: the limit itself passes, one more level does not (detail is the first level)', () => {
    const max = LIMITS.recordObjectMaxDepth;
    expect(freeFormWithinLimits({ v: nested(max - 1) })).toBe(true);
    expect(freeFormWithinLimits({ v: nested(max) })).toBe(false);
    expect(checkPopRecord({ ...reject, detail: { v: nested(max) } }, 'agent')).toEqual({
      ok: false,
      reason: 'invalid_record',
    });
    // A play's detail is not kept: only its tag is read, and a tag of another shape is ignored.
    expect(checkPopRecord({ ...agentPlay, detail: { v: nested(max) } }, 'agent').ok).toBe(true);
    expect(checkPopRecord({ ...agentPlay, screen: { power: 'on', v: nested(max) } }, 'agent')).toEqual({
      ok: false,
      reason: 'invalid_record',
    });
  });

  test('size: the JSON text of the object, in UTF-8 bytes, at most recordObjectMaxBytes', () => {
    const max = LIMITS.recordObjectMaxBytes;
    // {"t":"..."} is 8 bytes around the text.
    expect(freeFormWithinLimits({ t: 'a'.repeat(max - 8) })).toBe(true);
    expect(freeFormWithinLimits({ t: 'a'.repeat(max - 7) })).toBe(false);
    // Two bytes a character in UTF-8: half as many fit.
    expect(freeFormWithinLimits({ t: 'ә'.repeat((max - 8) / 2) })).toBe(true);
    expect(freeFormWithinLimits({ t: 'ә'.repeat((max - 8) / 2 + 1) })).toBe(false);
    // Wide rather than long: a hundred thousand small keys.
    const wide: Record<string, number> = {};
    for (let i = 0; i < 100_000; i += 1) wide[`k${i}`] = i;
    expect(freeFormWithinLimits(wide)).toBe(false);
  });

  test('a text that is not Unicode (a lone surrogate, in a value or a key) is refused; pairs are fine', () => {
    expect(freeFormWithinLimits({ t: '\ud800' })).toBe(false);
    expect(freeFormWithinLimits({ t: 'a\udc00b' })).toBe(false);
    expect(freeFormWithinLimits({ ['\ud83d']: 1 })).toBe(false);
    expect(freeFormWithinLimits({ t: '\ud83d\ude00 ok' })).toBe(true);
    expect(checkPopRecord({ ...reject, detail: { file: '\udfff.mp4' } }, 'agent')).toEqual({
      ok: false,
      reason: 'invalid_record',
    });
  });

  test('a U+0000 in a kept detail, in a value or a key, refuses its record: PostgreSQL could not read it back', () => {
    expect(freeFormWithinLimits({ file: 'a\u0000b' })).toBe(false);
    expect(freeFormWithinLimits({ ['a\u0000']: 1 })).toBe(false);
    expect(freeFormWithinLimits({ list: [{ note: '\u0000' }] })).toBe(false);
    for (const record of [
      { ...reject, detail: { file: 'a\u0000b.mp4' } },
      { kind: 'mode_change', seq: 4, at: '2026-11-21T09:00:00Z', detail: { note: 'x\u0000' } },
      { kind: 'tamper', seq: 5, detail: { ['door\u0000']: 'open' } },
    ]) {
      expect(checkPopRecord(record, 'agent')).toEqual({ ok: false, reason: 'invalid_record' });
    }
  });

  test("a play's detail is never a reason to refuse it: its tag is read or ignored", () => {
    const src = { channel: 'pmp', seller_id: 'ssp-1' };
    for (const detail of [
      { file: 'a\u0000b', src },
      { note: '\ud800', src },
      { note: 'x'.repeat(20_000), src },
      { src: { ...src, seller_id: 's'.repeat(20_000) } },
    ]) {
      expect(checkPopRecord({ ...agentPlay, detail }, 'agent').ok).toBe(true);
      expect(checkPopRecord({ ...cmsPlay, detail }, 'cms').ok).toBe(true);
    }
    // The tag itself is read wherever the detail's other fields stand.
    expect(parseSrc({ note: 'x'.repeat(20_000), src })).toEqual(src);
    expect(parseSrc({ src: { ...src, seller_id: 's'.repeat(20_000) } })).toBeNull();
  });

  test('the usual details pass', () => {
    expect(freeFormWithinLimits({ from: 'online', to: 'offline', reason: 'clock' })).toBe(true);
    expect(freeFormWithinLimits({ src: { channel: 'pmp', seller_id: 'ssp-1', deal_id: 'D-1' } })).toBe(true);
    expect(freeFormWithinLimits(undefined)).toBe(true);
  });
});
