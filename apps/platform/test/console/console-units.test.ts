import { createPublicKey } from 'node:crypto';
import { createCsr, exportPublicKeySpki, generateEs256KeyPair } from '@ooh/crypto';
import { almatyDate, almatyOffsetMinutes } from '@ooh/protocol';
import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { en } from '../../console/src/i18n/en.js';
import { intlKnowsKazakh, kazakhFormats } from '../../console/src/i18n/formats.js';
import { groupSeries } from '../../console/src/lib/series.js';
import { kk } from '../../console/src/i18n/kk.js';
import { ru } from '../../console/src/i18n/ru.js';
import { readEnrolmentFile, readEnrolmentText } from '../../console/src/lib/enrolment.js';
import { workingMsBetween } from '../../console/src/lib/working-hours.js';
import { parseDeviceCsr, parseDevicePublicKey } from '../../src/devices/keys.js';
import { addWorkingHours, workingCalendar } from '../../src/working-hours/index.js';
import { agentInit } from './agent-init.js';

/** Texts that are the same in every language: the language names (each in its own language) and a bare number. */
const SAME_IN_EVERY_LANGUAGE = new Set(['language.en', 'language.ru', 'language.kk', 'plays.percent']);

const placeholders = (text: string) => [...text.matchAll(/\{(\w+)\}/g)].map((m) => m[1]).sort();

describe('console dictionaries', () => {
  test.each([
    ['ru', ru],
    ['kk', kk],
  ] as const)('%s has every English key, the same placeholders, and no English left', (_name, dictionary) => {
    expect(Object.keys(dictionary).sort()).toEqual(Object.keys(en).sort());
    const untranslated: string[] = [];
    for (const [key, english] of Object.entries(en)) {
      const text = dictionary[key as keyof typeof en];
      expect(text.trim(), key).not.toBe('');
      expect(placeholders(text), key).toEqual(placeholders(english));
      if (text === english && !SAME_IN_EVERY_LANGUAGE.has(key)) untranslated.push(key);
    }
    expect(untranslated).toEqual([]);
  });

  test('Russian and Kazakh texts are written in Cyrillic', () => {
    for (const dictionary of [ru, kk]) {
      const latinOnly = Object.entries(dictionary).filter(
        ([key, text]) =>
          !SAME_IN_EVERY_LANGUAGE.has(key) && !/[\u0400-\u04ff]/.test(text.replace(/\{\w+\}/g, '')),
      );
      expect(latinOnly).toEqual([]);
    }
  });
});

describe('Kazakh dates and numbers where the browser has no Kazakh data', () => {
  test('a browser without Kazakh data is recognised; one with it is left to Intl', () => {
    // Node carries full ICU: its kk-KZ writes Kazakh. A locale with no data falls back to the root ("M11", "1,540").
    expect(intlKnowsKazakh('kk-KZ')).toBe(true);
    expect(intlKnowsKazakh('und')).toBe(false);
    expect(intlKnowsKazakh('en-GB')).toBe(false);
  });

  test('written by hand as CLDR writes them, times in Almaty', () => {
    const f = kazakhFormats();
    expect(f.date(new Date(Date.UTC(2026, 10, 24)))).toBe('2026 ж. 24 қар.');
    expect(f.date(new Date(Date.UTC(2027, 2, 1)))).toBe('2027 ж. 1 нау.');
    // 2026-11-24T19:30Z is 00:30 on the 25th in Almaty (UTC+5).
    expect(f.dateTime(new Date('2026-11-24T19:30:00Z'))).toBe('2026 ж. 25 қар., 00:30');
    expect(f.number(1540)).toBe('1\u00a0540');
    expect(f.number(1234567.5)).toBe('1\u00a0234\u00a0567,5');
    expect(f.number(7)).toBe('7');
  });
});

describe('which structures a stacked chart names, and which it groups as Other', () => {
  const other = (count: number) => `Other (${count})`;
  const flat = (n: number, plays: number) =>
    Array.from({ length: n }, (_, i) => ({
      name: `S-${String(i).padStart(2, '0')}`,
      values: [plays, plays],
    }));

  test('a few large structures: the seven largest named, the small rest grouped', () => {
    const items = [{ name: 'NONE', values: [0, 0] }, { name: 'BIG', values: [500, 500] }, ...flat(8, 10)];
    const series = groupSeries(items, { length: 2, other });
    expect(series.map((s) => s.name)).toEqual([
      'BIG',
      'S-00',
      'S-01',
      'S-02',
      'S-03',
      'S-04',
      'S-05',
      'Other (2)',
    ]);
    expect(series.at(-1)).toEqual({ name: 'Other (2)', values: [20, 20], other: true });
  });

  test('many equal structures: more are named until Other is no larger than the largest, up to twelve', () => {
    // 14 equal structures: with seven named, the seven grouped would be the largest segment.
    const fourteen = groupSeries(flat(14, 10), { length: 2, other });
    expect(fourteen).toHaveLength(13);
    expect(fourteen.at(-1)?.name).toBe('Other (2)');
    // 200 equal structures: twelve at most are named, and Other says how many it holds.
    const many = groupSeries(flat(200, 1), { length: 2, other });
    expect(many).toHaveLength(13);
    expect(many.at(-1)).toEqual({ name: 'Other (188)', values: [188, 188], other: true });
  });

  test('a rest of one is named, nothing with no plays is shown, and missing days count as 0', () => {
    expect(groupSeries(flat(8, 5), { length: 2, other }).map((s) => s.name)).not.toContain('Other (1)');
    expect(groupSeries([{ name: 'A', values: [null, 3] }, ...flat(2, 0)], { length: 3, other })).toEqual([
      { name: 'A', values: [0, 3, 0] },
    ]);
  });
});

describe('working hours left, as the browser counts them', () => {
  const calendar = workingCalendar();
  const browserCalendar = { covers: calendar.covers, days: calendar.days };

  test('Almaty offsets and dates come from the tz database (UTC+6 before 2024-03-01, UTC+5 since)', () => {
    expect(almatyOffsetMinutes(Date.parse('2024-02-28T12:00:00Z'))).toBe(360);
    expect(almatyOffsetMinutes(Date.parse('2026-11-20T12:00:00Z'))).toBe(300);
    expect(almatyDate(Date.parse('2026-11-20T19:30:00Z'))).toBe('2026-11-21');
  });

  test('agrees with the platform deadline: the hours added are exactly the hours left from the start', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: Date.parse('2025-01-01T00:00:00Z'), max: Date.parse('2027-11-30T00:00:00Z') }),
        fc.integer({ min: 1, max: 60 }),
        (start, quarterHours) => {
          const hours = quarterHours / 4;
          const { due } = addWorkingHours(new Date(start), hours, calendar);
          expect(workingMsBetween(browserCalendar, start, due.getTime())).toBe(Math.round(hours * 3_600_000));
        },
      ),
      { numRuns: 300 },
    );
  });

  test('no working time on a public holiday or at night; 0 once the deadline has passed', () => {
    // 2026-12-16 is Independence Day (a holiday, Wednesday).
    const holiday = workingMsBetween(
      browserCalendar,
      Date.parse('2026-12-16T03:00:00Z'),
      Date.parse('2026-12-16T14:00:00Z'),
    );
    expect(holiday).toBe(0);
    // Friday 17:00 to Monday 10:00 Almaty: 1 h on Friday, 1 h on Monday.
    const weekend = workingMsBetween(
      browserCalendar,
      Date.parse('2026-11-20T12:00:00Z'),
      Date.parse('2026-11-23T05:00:00Z'),
    );
    expect(weekend).toBe(2 * 3_600_000);
    expect(
      workingMsBetween(
        browserCalendar,
        Date.parse('2026-11-23T05:00:00Z'),
        Date.parse('2026-11-20T12:00:00Z'),
      ),
    ).toBe(0);
  });
});

describe('device enrolment: what the console reads from the player', () => {
  test('the output of the real agent init gives the structure, a key and a CSR the platform accepts', async () => {
    const init = await agentInit('ALM-0042');
    const facts = readEnrolmentText(init.output);
    expect(facts.structureCode).toBe('ALM-0042');
    const key = parseDevicePublicKey(facts.publicKey!, '/public_key');
    // The key is the one agent init created.
    expect(exportPublicKeySpki(createPublicKey(init.keyPem))).toBe(facts.publicKey);
    const csr = await parseDeviceCsr(facts.csr!, '/csr');
    expect(csr.fingerprint).toBe(key.fingerprint);
    // The same from the file's bytes.
    expect(readEnrolmentFile(new TextEncoder().encode(init.output))).toEqual(facts);
  }, 30_000);

  test('PEM and DER files of a key or a CSR, and a bare base64 key', async () => {
    const { publicKey, privateKey } = generateEs256KeyPair();
    const spki = exportPublicKeySpki(publicKey);
    const csrPem = await createCsr({ subject: 'CN=player', keyPair: { publicKey, privateKey } });
    const keyPem = publicKey.export({ type: 'spki', format: 'pem' }).toString();
    expect(readEnrolmentText(keyPem)).toEqual({ publicKey: keyPem.trim(), csr: null, structureCode: null });
    expect(readEnrolmentText(`  ${spki}\n`)).toEqual({ publicKey: spki, csr: null, structureCode: null });
    expect(readEnrolmentText(csrPem)).toEqual({ publicKey: null, csr: csrPem.trim(), structureCode: null });
    const spkiDer = publicKey.export({ type: 'spki', format: 'der' });
    expect(readEnrolmentFile(new Uint8Array(spkiDer))).toEqual({
      publicKey: spki,
      csr: null,
      structureCode: null,
    });
    const csrDer = Buffer.from(csrPem.replace(/-----[A-Z ]+-----|\s/g, ''), 'base64');
    const fromDer = readEnrolmentFile(new Uint8Array(csrDer));
    expect(fromDer).toEqual({ publicKey: null, csr: csrDer.toString('base64'), structureCode: null });
    // The platform takes the base64 of the DER as it takes PEM.
    expect((await parseDeviceCsr(fromDer.csr!, '/csr')).fingerprint).toBe(
      parseDevicePublicKey(spki, '/public_key').fingerprint,
    );
    // Text that holds neither.
    expect(readEnrolmentText('hello, player')).toEqual({ publicKey: null, csr: null, structureCode: null });
  });
});
