import { OpenDataDictionary } from '@ooh/protocol';
import { Value } from '@sinclair/typebox/value';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { FORMAT_VENUE_TYPES } from '../../src/open-data/dictionary.js';
import { venueTaxonomy } from '../../src/structures/venue-taxonomy.js';
import {
  apiCall,
  createOrganisation,
  createStructure,
  startTestPlatform,
  type TestPlatform,
} from '../support/platform.js';

/**
 * Issue 20 item 3: the published open-data dictionary maps our format codes to OpenOOH venue types, as a field added
 * to each codes.format entry; every field of the spec's dictionary stays as it was.
 */

let p: TestPlatform;

beforeAll(async () => {
  p = await startTestPlatform();
  const operator = await createOrganisation(p, 'operator', ['console:fleet']);
  for (const format of ['billboard', 'citylight', 'supersite', 'led', 'mega_wall']) {
    await createStructure(p, operator.id, { district: 'almaly', format });
  }
  const on = await apiCall(p.servers.api, p.adminKey, 'PUT', '/api/v1/console/open-data/publication', {
    enabled: true,
  });
  expect(on.statusCode).toBe(200);
});
afterAll(async () => {
  await p?.close();
});

describe('codes.format in the published dictionary', () => {
  test('each format code carries openooh_venue_type_id: a venue of the shipped taxonomy, or null', async () => {
    const res = await p.servers.verify.inject({ method: 'GET', url: '/v1/open/dictionary.json' });
    expect(res.statusCode).toBe(200);
    const d = res.json();
    // Additive only: still the spec's OpenDataDictionary, the same top-level fields.
    expect(Value.Check(OpenDataDictionary, d)).toBe(true);
    expect(Object.keys(d).sort()).toEqual(
      ['basis', 'codes', 'columns', 'disclosure', 'files', 'licence', 'statuses', 'tables', 'version'].sort(),
    );
    const byCode = Object.fromEntries(
      d.codes.format.map((f: { code: string; openooh_venue_type_id: number | null }) => [
        f.code,
        f.openooh_venue_type_id,
      ]),
    );
    expect(byCode).toEqual({ billboard: 301, citylight: 302, led: null, mega_wall: null, supersite: 304 });
    expect(d.codes.format[0]).toEqual({
      code: 'billboard',
      name: { en: 'Billboard', ru: 'Билборд', kk: 'Билборд' },
      openooh_venue_type_id: 301,
    });
    // Districts and dayparts are not venue-typed.
    expect(d.codes.district[0]).not.toHaveProperty('openooh_venue_type_id');
    // The column text explains the field in every language.
    const format = d.columns.find((c: { name: string }) => c.name === 'format');
    for (const language of ['en', 'ru', 'kk'])
      expect(format.description[language]).toContain('openooh_venue_type_id');
  });

  test('every mapped venue type is a current child venue of OpenOOH Outdoor', () => {
    const taxonomy = venueTaxonomy();
    for (const [code, id] of Object.entries(FORMAT_VENUE_TYPES)) {
      const venue = taxonomy.get(id);
      expect(venue, code).toBeDefined();
      expect(venue!.deprecated, code).toBe(false);
      expect(venue!.parent_id, code).toBe(3);
    }
  });
});
