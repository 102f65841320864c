import { DAYPARTS, type LocalizedText, OpenDataDictionary } from '@ooh/protocol';
import { Value } from '@sinclair/typebox/value';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { COLUMNS, STATUSES, TABLES } from '../../src/open-data/dictionary.js';
import {
  apiCall,
  createOrganisation,
  createStructure,
  startTestPlatform,
  type TestPlatform,
} from '../support/platform.js';

let p: TestPlatform;
beforeAll(async () => {
  p = await startTestPlatform();
  const operator = await createOrganisation(p, 'operator', ['console:fleet']);
  await createStructure(p, operator.id, { district: 'medeu', format: 'billboard' });
  await createStructure(p, operator.id, { district: 'almaly', format: 'led' });
  await createStructure(p, operator.id, { district: 'almaly', format: 'mega_wall' });
});
afterAll(async () => {
  await p?.close();
});

const dictionary = () => p.servers.verify.inject({ method: 'GET', url: '/v1/open/dictionary.json' });
const admin = (method: 'GET' | 'PUT', url: string, body?: unknown) =>
  apiCall(p.servers.api, p.adminKey, method, url, body);

/** Every {en, ru, kk} object anywhere in the document. */
function texts(value: unknown, path = ''): [string, LocalizedText][] {
  if (value === null || typeof value !== 'object') return [];
  const keys = Object.keys(value);
  if (keys.length === 3 && ['en', 'ru', 'kk'].every((k) => keys.includes(k)))
    return [[path, value as LocalizedText]];
  return Object.entries(value).flatMap(([k, v]) => texts(v, `${path}/${k}`));
}

describe('GET {verify_url}/v1/open/dictionary.json', () => {
  test('404 not_published while publication is off (the default)', async () => {
    const res = await dictionary();
    expect(res.statusCode).toBe(404);
    expect(res.headers['content-type']).toMatch(/application\/problem\+json/);
    expect(res.json().code).toBe('not_published');
    const state = await admin('GET', '/api/v1/console/open-data');
    expect(state.json().publication).toEqual({ enabled: false, changed_at: null });
  });

  test('published: the OpenDataDictionary with every field of the spec, public, no credentials', async () => {
    const on = await admin('PUT', '/api/v1/console/open-data/publication', { enabled: true });
    expect(on.statusCode).toBe(200);
    expect(on.json()).toEqual({ enabled: true, changed_at: '2026-11-20T11:00:00+05:00' });
    const res = await dictionary();
    expect(res.statusCode).toBe(200);
    const d = res.json();
    expect(Value.Check(OpenDataDictionary, d)).toBe(true);
    expect(Object.keys(d).sort()).toEqual(
      ['basis', 'codes', 'columns', 'disclosure', 'files', 'licence', 'statuses', 'tables', 'version'].sort(),
    );
    expect(typeof d.version).toBe('string');
    expect(d.licence.status).toBe('draft');
    expect(d.basis.name).toBeTruthy();
    expect(d.basis.code).toBeTruthy();
    expect(d.files.map((f: { name: string }) => f.name)).toEqual(['plays-YYYY-MM.csv', 'dictionary.json']);
    expect(d.tables.map((t: { name: string }) => t.name)).toEqual([...TABLES]);
    expect(d.columns.map((c: { name: string }) => c.name)).toEqual([...COLUMNS]);
    expect(d.statuses.map((s: { code: string }) => s.code)).toEqual([...STATUSES]);
    expect(d.disclosure).toMatchObject({
      min_operators: 3,
      min_advertisers: 3,
      max_party_share_pct: 70,
      lag_months: 1,
    });
  });

  test('codes: districts and formats from the structures, dayparts with start_hour and end_hour', async () => {
    const d = (await dictionary()).json();
    expect(d.codes.district).toEqual([
      { code: 'almaly', name: { en: 'Almaly district', ru: 'Алмалинский район', kk: 'Алмалы ауданы' } },
      { code: 'medeu', name: { en: 'Medeu district', ru: 'Медеуский район', kk: 'Медеу ауданы' } },
    ]);
    expect(d.codes.format.map((f: { code: string }) => f.code)).toEqual(['billboard', 'led', 'mega_wall']);
    // A code without a known name is named by itself.
    expect(d.codes.format[2].name).toEqual({ en: 'mega_wall', ru: 'mega_wall', kk: 'mega_wall' });
    const dayparts = d.codes.daypart;
    expect(dayparts.slice(0, DAYPARTS.length)).toEqual(
      DAYPARTS.map((dp) =>
        expect.objectContaining({ code: dp.code, start_hour: dp.start_hour, end_hour: dp.end_hour }),
      ),
    );
    // Every entry has integer hours (spec: "each an array of {code, name, start_hour, end_hour}").
    for (const dp of dayparts) {
      expect(Number.isInteger(dp.start_hour) && Number.isInteger(dp.end_hour), dp.code).toBe(true);
    }
    // The parts of the day cover 0..24 once.
    const hours = dayparts
      .filter((dp: { code: string }) => dp.code !== 'unknown')
      .flatMap((dp: { start_hour: number; end_hour: number }) =>
        Array.from({ length: dp.end_hour - dp.start_hour }, (_, i) => dp.start_hour + i),
      );
    expect(hours.sort((a: number, b: number) => a - b)).toEqual(Array.from({ length: 24 }, (_, i) => i));
    // Plays without a start time: a daypart of their own, 0 to 24 by the convention its name states.
    expect(dayparts.at(-1)).toMatchObject({ code: 'unknown', start_hour: 0, end_hour: 24 });
    expect(dayparts.at(-1).name.en).toMatch(/0 to 24 by convention/);
  });

  test('every text is written in English, Russian and Kazakh', async () => {
    const d = (await dictionary()).json();
    const all = texts(d);
    expect(all.length).toBeGreaterThan(30);
    const kazakhLetters = /[әғқңөұүһі]/i;
    for (const [path, t] of all) {
      expect(t.en.trim(), path).not.toBe('');
      expect(t.ru.trim(), path).not.toBe('');
      expect(t.kk.trim(), path).not.toBe('');
      if (path.startsWith('/codes/format') || path.startsWith('/codes/district')) continue;
      expect(t.ru, path).toMatch(/[а-яё]/i);
      expect(t.kk, path).toMatch(/[а-яё]/i);
      expect(t.en, path).not.toMatch(/[а-яё]/i);
      expect(t.kk, path).not.toBe(t.ru);
    }
    // The long texts are Kazakh, not Russian in disguise.
    for (const [path, t] of all.filter(([, t]) => t.kk.length > 40))
      expect(t.kk, path).toMatch(kazakhLetters);
  });

  test('the disclosure values are configurable and the dictionary shows the values in force', async () => {
    const set = await admin('PUT', '/api/v1/console/open-data/disclosure', {
      min_operators: 4,
      max_party_share_pct: 60,
      lag_months: 2,
    });
    expect(set.statusCode).toBe(200);
    expect(set.json()).toEqual({
      min_operators: 4,
      min_advertisers: 3,
      max_party_share_pct: 60,
      lag_months: 2,
    });
    const d = (await dictionary()).json();
    expect(d.disclosure).toMatchObject({
      min_operators: 4,
      min_advertisers: 3,
      max_party_share_pct: 60,
      lag_months: 2,
    });
    expect(d.disclosure.description.en).toContain('(4)');
    const bad = await admin('PUT', '/api/v1/console/open-data/disclosure', {
      max_party_share_pct: 101,
      other: 1,
    });
    expect(bad.statusCode).toBe(422);
    const paths = new Set(bad.json().errors.map((e: { path: string }) => e.path));
    expect([...paths].sort()).toEqual(['/max_party_share_pct', '/other']);
    // null returns to the spec's default.
    const reset = await admin('PUT', '/api/v1/console/open-data/disclosure', {
      min_operators: null,
      max_party_share_pct: null,
      lag_months: null,
    });
    expect(reset.json()).toEqual({
      min_operators: 3,
      min_advertisers: 3,
      max_party_share_pct: 70,
      lag_months: 1,
    });
  });

  test('only the authority administers the switch', async () => {
    const operator = await createOrganisation(p, 'operator', ['console:admin']);
    const res = await apiCall(p.servers.api, operator.key, 'PUT', '/api/v1/console/open-data/publication', {
      enabled: false,
    });
    expect(res.statusCode).toBe(403);
    const bad = await admin('PUT', '/api/v1/console/open-data/publication', { enabled: 'yes' });
    expect(bad.statusCode).toBe(422);
    const off = await admin('PUT', '/api/v1/console/open-data/publication', { enabled: false });
    expect(off.json().enabled).toBe(false);
    expect((await dictionary()).json().code).toBe('not_published');
  });
});
