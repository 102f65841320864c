import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { migrate } from '../../src/db/migrate.js';
import { venueTaxonomy } from '../../src/structures/venue-taxonomy.js';
import { createTestDatabase } from '../support/database.js';
import { seedApproval, seedOrganisation, seedStructure } from '../open-data/helpers.js';
import {
  apiCall,
  createOrganisation,
  createStructure,
  startTestPlatform,
  type TestPlatform,
} from '../support/platform.js';

/**
 * Issue 20 item 3: a structure's OpenOOH venue type (1.2 enumeration id, checked against the shipped taxonomy, set
 * once) and its screen identifiers (OpenOOH screen id, Geopath spot id; unique among active structures), on the
 * create, the import and PATCH /api/v1/console/structures/{id}.
 */

let p: TestPlatform;
let operatorId = '';
let operatorKey = '';
let serial = 0;
const code = () => `VEN-${process.pid}-${++serial}`;

beforeAll(async () => {
  p = await startTestPlatform();
  const op = await createOrganisation(
    p,
    'operator',
    ['write:submissions', 'console:fleet'],
    'Venue Outdoor LLP',
  );
  operatorId = op.id;
  operatorKey = op.key;
});
afterAll(async () => {
  await p?.close();
});

const create = (body: Record<string, unknown>, key: string | null = p.adminKey) =>
  apiCall(p.servers.api, key, 'POST', '/api/v1/console/structures', {
    organisation_id: operatorId,
    code: code(),
    district: 'almaly',
    format: 'billboard',
    ...body,
  });
const patch = (id: string, body: unknown, key: string | null = p.adminKey) =>
  apiCall(p.servers.api, key, 'PATCH', `/api/v1/console/structures/${id}`, body);
const importCall = (structures: unknown[], dry_run = false) =>
  apiCall(p.servers.api, p.adminKey, 'POST', '/api/v1/console/structures/import', {
    organisation_id: operatorId,
    structures,
    dry_run,
  });
const errorsOf = (res: { json: () => { errors: { path: string; code: string }[] } }) =>
  res.json().errors.map((e) => [e.path, e.code]);

describe('the shipped taxonomy', () => {
  test('OpenOOH 1.2.1 with its tiers: 301 Billboard under 3 Outdoor, 10101 under 101 under 1', () => {
    const t = venueTaxonomy();
    expect(t.version).toBe('1.2.1');
    expect(t.get(301)).toMatchObject({ name: 'Billboard', parent_id: 3, string_value: 'outdoor.billboard' });
    expect(t.get(302)).toMatchObject({ name: 'Urban Panel', parent_id: 3 });
    expect(t.path(10101).map((v) => v.id)).toEqual([1, 101, 10101]);
    expect(t.get(104)?.deprecated).toBe(true);
    expect(t.get(307)?.deprecated).toBe(false);
    expect(t.all.length).toBeGreaterThan(200);
    for (const v of t.all) if (v.parent_id !== null) expect(t.get(v.parent_id), String(v.id)).toBeDefined();
  });
});

describe('create', () => {
  test('stores and returns the venue type and screen identifiers; absent ones are null', async () => {
    const res = await create({
      venue_type_id: 301,
      openooh_screen_id: 'kz.almaty-outdoor.scr-0001',
      geopath_spot_id: '30045678',
    });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json()).toMatchObject({
      venue_type_id: 301,
      openooh_screen_id: 'kz.almaty-outdoor.scr-0001',
      geopath_spot_id: '30045678',
    });
    const plain = await create({});
    expect(plain.json()).toMatchObject({
      venue_type_id: null,
      openooh_screen_id: null,
      geopath_spot_id: null,
    });
    const listed = await apiCall(p.servers.api, operatorKey, 'GET', '/api/v1/structures');
    const mine = listed.json().items.find((s: { id: string }) => s.id === res.json().id);
    expect(mine).toMatchObject({ venue_type_id: 301, geopath_spot_id: '30045678' });
  });

  test('an unknown or deprecated venue type is 422 validation_failed at /venue_type_id; nothing stored', async () => {
    for (const [venue, expected] of [
      [999, 'not_found'],
      [3000, 'not_found'],
      [104, 'not_allowed'],
      [30101, 'not_allowed'],
    ] as const) {
      const c = code();
      const res = await create({ code: c, venue_type_id: venue });
      expect(res.statusCode, res.body).toBe(422);
      expect(res.headers['content-type']).toMatch(/application\/problem\+json/);
      expect(res.json().code).toBe('validation_failed');
      expect(errorsOf(res)).toEqual([['/venue_type_id', expected]]);
      const { rows } = await p.database.db.query('SELECT 1 FROM structures WHERE code = $1', [c]);
      expect(rows).toEqual([]);
    }
  });

  test('hostile values are field errors, never a 5xx', async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ venue_type_id: '301' }, '/venue_type_id'],
      [{ venue_type_id: 301.5 }, '/venue_type_id'],
      [{ venue_type_id: -1 }, '/venue_type_id'],
      [{ venue_type_id: 2 ** 53 }, '/venue_type_id'],
      [{ venue_type_id: null }, '/venue_type_id'],
      [{ openooh_screen_id: '' }, '/openooh_screen_id'],
      [{ openooh_screen_id: 'a'.repeat(129) }, '/openooh_screen_id'],
      [{ openooh_screen_id: 'screen one' }, '/openooh_screen_id'],
      [{ openooh_screen_id: "x'; DROP TABLE structures; --" }, '/openooh_screen_id'],
      [{ openooh_screen_id: 'scr\u0000' }, '/openooh_screen_id'],
      [{ geopath_spot_id: '12ab' }, '/geopath_spot_id'],
      [{ geopath_spot_id: 30045678 }, '/geopath_spot_id'],
      [{ geopath_spot_id: '1'.repeat(19) }, '/geopath_spot_id'],
    ];
    for (const [body, path] of cases) {
      const res = await create(body);
      expect(res.statusCode, `${JSON.stringify(body)} ${res.body}`).toBe(422);
      expect(res.json().errors.map((e: { path: string }) => e.path)).toContain(path);
    }
  });

  test('a screen identifier held by an active structure is a duplicate; a retired holder frees it', async () => {
    const first = await create({ openooh_screen_id: 'kz.dup.screen-1', geopath_spot_id: '111' });
    expect(first.statusCode).toBe(201);
    const again = await create({ openooh_screen_id: 'kz.dup.screen-1', geopath_spot_id: '111' });
    expect(again.statusCode).toBe(422);
    expect(errorsOf(again).sort()).toEqual([
      ['/geopath_spot_id', 'duplicate'],
      ['/openooh_screen_id', 'duplicate'],
    ]);
    const retired = await apiCall(
      p.servers.api,
      p.adminKey,
      'POST',
      `/api/v1/console/structures/${first.json().id}/retire`,
    );
    expect(retired.statusCode).toBe(200);
    const reregistered = await create({ openooh_screen_id: 'kz.dup.screen-1', geopath_spot_id: '111' });
    expect(reregistered.statusCode, reregistered.body).toBe(201);
  });

  test('no credentials: 401; an operator key: refused as every console write is', async () => {
    expect((await create({ venue_type_id: 301 }, null)).statusCode).toBe(401);
    const res = await create({ venue_type_id: 301 }, operatorKey);
    expect([403, 404]).toContain(res.statusCode);
  });
});

describe('PATCH /api/v1/console/structures/{id}', () => {
  test('sets, changes and clears screen identifiers; a field left out is unchanged', async () => {
    const s = await createStructure(p, operatorId);
    let res = await patch(s.id, { openooh_screen_id: 'kz.patch.1', geopath_spot_id: '222' });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({
      id: s.id,
      venue_type_id: null,
      openooh_screen_id: 'kz.patch.1',
      geopath_spot_id: '222',
    });
    res = await patch(s.id, { openooh_screen_id: 'kz.patch.2' });
    expect(res.json()).toMatchObject({ openooh_screen_id: 'kz.patch.2', geopath_spot_id: '222' });
    res = await patch(s.id, { geopath_spot_id: null });
    expect(res.json()).toMatchObject({ openooh_screen_id: 'kz.patch.2', geopath_spot_id: null });
  });

  test('an unknown venue id is 422 at /venue_type_id; an empty body, other fields and bad ids are refused', async () => {
    const s = await createStructure(p, operatorId);
    const unknown = await patch(s.id, { venue_type_id: 12345 });
    expect(unknown.statusCode).toBe(422);
    expect(errorsOf(unknown)).toEqual([['/venue_type_id', 'not_found']]);
    expect((await patch(s.id, {})).statusCode).toBe(422);
    const other = await patch(s.id, { code: 'RENAMED' });
    expect(other.statusCode).toBe(422);
    expect(other.json().code).toBe('validation_failed');
    expect((await patch(s.id, [1])).statusCode).toBe(422);
    expect((await patch('not-a-uuid', { venue_type_id: 301 })).statusCode).toBe(404);
    expect((await patch('00000000-0000-4000-8000-000000000000', { venue_type_id: 301 })).statusCode).toBe(
      404,
    );
  });

  test('the venue type: set once, corrected while nothing names the structure, then immutable', async () => {
    const s = await createStructure(p, operatorId);
    expect((await patch(s.id, { venue_type_id: 302 })).json().venue_type_id).toBe(302);
    // A mistake found before the structure is used is corrected.
    expect((await patch(s.id, { venue_type_id: 301 })).json().venue_type_id).toBe(301);
    const advertiser = await createOrganisation(p, 'advertiser', ['write:submissions']);
    await seedApproval(p.database.db, advertiser.id, [s.id]);
    const change = await patch(s.id, { venue_type_id: 302 });
    expect(change.statusCode).toBe(422);
    expect(errorsOf(change)).toEqual([['/venue_type_id', 'immutable']]);
    const clear = await patch(s.id, { venue_type_id: null });
    expect(errorsOf(clear)).toEqual([['/venue_type_id', 'immutable']]);
    // The same value again is no change; the screen ids stay editable.
    const same = await patch(s.id, { venue_type_id: 301, openooh_screen_id: 'kz.used.1' });
    expect(same.statusCode, same.body).toBe(200);
    expect(same.json()).toMatchObject({ venue_type_id: 301, openooh_screen_id: 'kz.used.1' });
    // The database keeps the rule for every writer.
    await expect(
      p.database.db.query('UPDATE structures SET venue_type_id = 302 WHERE id = $1', [s.id]),
    ).rejects.toMatchObject({
      code: '23514',
      where: expect.stringContaining('structures_venue_type_immutable'),
    });
    // A structure used before it had a venue type may still get one.
    const t = await createStructure(p, operatorId);
    await seedApproval(p.database.db, advertiser.id, [t.id]);
    expect((await patch(t.id, { venue_type_id: 303 })).json().venue_type_id).toBe(303);
  });

  test('uniqueness against other structures; a retired structure is not edited', async () => {
    const a = await createStructure(p, operatorId);
    const b = await createStructure(p, operatorId);
    expect((await patch(a.id, { geopath_spot_id: '333' })).statusCode).toBe(200);
    const taken = await patch(b.id, { geopath_spot_id: '333' });
    expect(taken.statusCode).toBe(422);
    expect(errorsOf(taken)).toEqual([['/geopath_spot_id', 'duplicate']]);
    // Its own value again is not a duplicate.
    expect((await patch(a.id, { geopath_spot_id: '333' })).statusCode).toBe(200);
    await apiCall(p.servers.api, p.adminKey, 'POST', `/api/v1/console/structures/${a.id}/retire`);
    const retired = await patch(a.id, { geopath_spot_id: '334' });
    expect(retired.statusCode).toBe(409);
    expect(retired.json().code).toBe('state_conflict');
  });

  test('no credentials: 401 before anything is read; another organisation’s key is refused', async () => {
    const s = await createStructure(p, operatorId);
    expect((await patch(s.id, { venue_type_id: 301 }, null)).statusCode).toBe(401);
    const res = await patch(s.id, { venue_type_id: 301 }, operatorKey);
    expect([403, 404]).toContain(res.statusCode);
    const { rows } = await p.database.db.query('SELECT venue_type_id FROM structures WHERE id = $1', [s.id]);
    expect(rows[0].venue_type_id).toBeNull();
  });
});

describe('import', () => {
  test('rows carry the identifiers; bad ones are field errors by row; nothing stored while any is wrong', async () => {
    const base = code();
    const good = [
      {
        code: `${base}-1`,
        district: 'almaly',
        format: 'billboard',
        venue_type_id: 301,
        geopath_spot_id: '444001',
      },
      {
        code: `${base}-2`,
        district: 'almaly',
        format: 'citylight',
        venue_type_id: 302,
        openooh_screen_id: 'kz.imp.2',
      },
    ];
    const bad = await importCall([
      ...good,
      { code: `${base}-3`, district: 'almaly', format: 'led', venue_type_id: 7777 },
      { code: `${base}-4`, district: 'almaly', format: 'led', geopath_spot_id: '444001' },
      { code: `${base}-5`, district: 'almaly', format: 'led', openooh_screen_id: 'bad id' },
    ]);
    expect(bad.statusCode).toBe(422);
    expect(errorsOf(bad)).toEqual([
      ['/structures/2/venue_type_id', 'not_found'],
      ['/structures/3/geopath_spot_id', 'duplicate'],
      ['/structures/4/openooh_screen_id', 'pattern'],
    ]);
    const { rows: none } = await p.database.db.query('SELECT 1 FROM structures WHERE code LIKE $1', [
      `${base}-%`,
    ]);
    expect(none).toEqual([]);

    const done = await importCall(good);
    expect(done.statusCode, done.body).toBe(200);
    expect(done.json()).toMatchObject({ created: 2, unchanged: 0 });
    const { rows } = await p.database.db.query(
      'SELECT code, venue_type_id, openooh_screen_id, geopath_spot_id FROM structures WHERE code LIKE $1 ORDER BY code',
      [`${base}-%`],
    );
    expect(rows).toEqual([
      { code: `${base}-1`, venue_type_id: 301, openooh_screen_id: null, geopath_spot_id: '444001' },
      { code: `${base}-2`, venue_type_id: 302, openooh_screen_id: 'kz.imp.2', geopath_spot_id: null },
    ]);
    // Again: unchanged, its own screen ids are not duplicates; a file without the columns is unchanged too.
    expect((await importCall(good)).json()).toMatchObject({ created: 0, unchanged: 2 });
    const without = good.map(({ code: c, district, format }) => ({ code: c, district, format }));
    expect((await importCall(without)).json()).toMatchObject({ created: 0, unchanged: 2 });
    // Another venue type for a registered structure is a difference, never a silent change.
    const other = await importCall([{ ...good[0], venue_type_id: 303 }]);
    expect(errorsOf(other)).toEqual([['/structures/0/code', 'duplicate']]);
  });

  test('a screen id held by another structure, or twice in the file, is the row’s error', async () => {
    const holder = await create({ openooh_screen_id: 'kz.held.1' });
    expect(holder.statusCode).toBe(201);
    const base = code();
    const res = await importCall(
      [
        { code: `${base}-1`, district: 'almaly', format: 'led', openooh_screen_id: 'kz.held.1' },
        { code: `${base}-2`, district: 'almaly', format: 'led', geopath_spot_id: '555' },
        { code: `${base}-3`, district: 'almaly', format: 'led', geopath_spot_id: '555' },
      ],
      true,
    );
    expect(res.statusCode).toBe(422);
    expect(errorsOf(res)).toEqual([
      ['/structures/0/openooh_screen_id', 'duplicate'],
      ['/structures/2/geopath_spot_id', 'duplicate'],
    ]);
  });
});

describe('migration 075_structure_venue', () => {
  test('applies over existing structures: every new column null, constraints in force', async () => {
    const d = await createTestDatabase({ upTo: 74 });
    try {
      const operator = await seedOrganisation(d.db, 'operator');
      const a = await seedStructure(d.db, operator, 'almaly', 'billboard');
      const b = await seedStructure(d.db, operator, 'medeu', 'led');
      await migrate(d.db);
      const { rows } = await d.db.query(
        'SELECT id, venue_type_id, openooh_screen_id, geopath_spot_id FROM structures ORDER BY id',
      );
      expect(rows).toEqual(
        [a, b]
          .sort()
          .map((id) => ({ id, venue_type_id: null, openooh_screen_id: null, geopath_spot_id: null })),
      );
      await d.db.query("UPDATE structures SET geopath_spot_id = '9' WHERE id = $1", [a]);
      await expect(
        d.db.query("UPDATE structures SET geopath_spot_id = '9' WHERE id = $1", [b]),
      ).rejects.toMatchObject({ code: '23505', constraint: 'structures_geopath_spot_id' });
      await expect(
        d.db.query("UPDATE structures SET geopath_spot_id = 'x9' WHERE id = $1", [b]),
      ).rejects.toMatchObject({ code: '23514', constraint: 'structures_geopath_spot_id_check' });
      await expect(
        d.db.query('UPDATE structures SET venue_type_id = 0 WHERE id = $1', [b]),
      ).rejects.toMatchObject({
        code: '23514',
        constraint: 'structures_venue_type_id_check',
      });
      // Unused structures may change their venue type (a correction); the trigger lets it through.
      await d.db.query('UPDATE structures SET venue_type_id = 301 WHERE id = $1', [b]);
      await d.db.query('UPDATE structures SET venue_type_id = 302 WHERE id = $1', [b]);
    } finally {
      await d.drop();
    }
  });
});

describe('GET /api/v1/venue-types', () => {
  test('the shipped taxonomy, public reference data', async () => {
    const res = await p.servers.api.inject({ method: 'GET', url: '/api/v1/venue-types' });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({ taxonomy: 'OpenOOH Venue Taxonomy', version: '1.2.1' });
    expect(body.items).toContainEqual({ id: 301, parent_id: 3, name: 'Billboard', deprecated: false });
    expect(body.items).toContainEqual({
      id: 104,
      parent_id: 1,
      name: 'Taxi & Rideshare Top',
      deprecated: true,
    });
  });
});
