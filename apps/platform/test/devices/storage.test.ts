import type { KeyObject } from 'node:crypto';
import { es256Sign, exportPublicKeySpki, generateEs256KeyPair } from '@ooh/crypto';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { FLEET_STORAGE_SQL } from '../../src/devices/storage.js';
import {
  apiCall,
  createOrganisation,
  createStructure,
  startTestPlatform,
  type TestPlatform,
} from '../support/platform.js';

/**
 * GET /api/v1/console/devices: the disk state each player last reported (issue "A player that runs for years on a
 * small disk"). The agent reports it in the detail of its mode_change records (apps/agent/src/playback/mode.ts);
 * batches go through the real signed agent channel.
 */

const T0 = new Date('2026-11-20T06:00:00.000Z');
const MINUTE = 60_000;
const MIB = 1024 * 1024;

let p: TestPlatform;
let operator: { id: string; key: string };
let other: { id: string; key: string };
let structure: { id: string; code: string };
let otherStructure: { id: string; code: string };

interface Device {
  id: string;
  privateKey: KeyObject;
  batch: number;
  seq: number;
}

interface FleetItem {
  device_id: string;
  storage: { state: string; free_bytes: number | null; at: string | null } | null;
}

beforeAll(async () => {
  p = await startTestPlatform({ now: T0 });
  operator = await createOrganisation(p, 'operator', ['console:fleet']);
  other = await createOrganisation(p, 'operator', ['console:fleet']);
  structure = await createStructure(p, operator.id, { code: 'DSK-0001' });
  otherStructure = await createStructure(p, other.id, { code: 'DSK-0002' });
});
afterAll(async () => {
  await p?.close();
});

async function enrol(structureId: string, key: string): Promise<Device> {
  const { publicKey, privateKey } = generateEs256KeyPair();
  const res = await apiCall(p.servers.api, key, 'POST', '/api/v1/console/devices', {
    structure_id: structureId,
    public_key: exportPublicKeySpki(publicKey),
  });
  expect(res.statusCode, res.body).toBe(201);
  return { id: res.json<{ device_id: string }>().device_id, privateKey, batch: 1, seq: 1 };
}

/** A mode_change as the agent writes it, with `detail.storage` when given. */
function modeChange(device: Device, at: Date, detail: Record<string, unknown>): Record<string, unknown> {
  return { kind: 'mode_change', seq: device.seq++, at: at.toISOString(), detail };
}

async function send(device: Device, events: Record<string, unknown>[]): Promise<void> {
  // spec Limits: one batch every 10 seconds per device (burst 3).
  p.clock.set(new Date(p.clock.now().getTime() + 11_000));
  const body = Buffer.from(
    JSON.stringify({
      schema: 'service.pop/1',
      device_id: device.id,
      ts: p.clock.now().toISOString(),
      batch_seq: device.batch++,
      events,
    }),
  );
  const res = await p.servers.agents.inject({
    method: 'POST',
    url: '/s/v1/telemetry',
    headers: {
      'content-type': 'application/json',
      'x-service-signature': es256Sign(device.privateKey, body),
    },
    payload: body,
  });
  expect(res.statusCode, res.body).toBe(200);
  expect(res.json<{ accepted: number }>().accepted).toBe(events.length);
}

async function fleet(key: string): Promise<FleetItem[]> {
  const res = await apiCall(p.servers.api, key, 'GET', '/api/v1/console/devices');
  expect(res.statusCode, res.body).toBe(200);
  return res.json<{ items: FleetItem[] }>().items;
}

describe('GET /api/v1/console/devices: the disk state a player reported', () => {
  test('null until reported; then the newest report, as sent, up to its return to ok', async () => {
    const device = await enrol(structure.id, operator.key);
    const storageOf = async () => (await fleet(operator.key)).find((i) => i.device_id === device.id)!.storage;
    expect(await storageOf()).toBeNull();

    // Mode changes without a disk state leave it unknown.
    await send(device, [modeChange(device, T0, { from: 'normal', to: 'offline' })]);
    expect(await storageOf()).toBeNull();

    // Low (the mode stays), then full, in one batch: the newest in the batch counts, not the earliest time.
    const low = new Date(T0.getTime() + MINUTE);
    const full = new Date(T0.getTime() + 2 * MINUTE);
    await send(device, [
      modeChange(device, low, {
        from: 'offline',
        to: 'offline',
        storage: { state: 'low', free_bytes: 300 * MIB },
      }),
      modeChange(device, full, {
        from: 'offline',
        to: 'disk_full',
        storage: { state: 'full', free_bytes: 100 * MIB },
      }),
    ]);
    expect(await storageOf()).toEqual({ state: 'full', free_bytes: 100 * MIB, at: full.toISOString() });

    // A later batch, with the mode change and no disk detail in between: still full.
    p.clock.set(new Date(T0.getTime() + 30 * MINUTE));
    await send(device, [modeChange(device, p.clock.now(), { from: 'disk_full', to: 'screen_off' })]);
    expect((await storageOf())?.state).toBe('full');

    // Space back.
    const back = new Date(T0.getTime() + 40 * MINUTE);
    p.clock.set(back);
    await send(device, [
      modeChange(device, back, {
        from: 'screen_off',
        to: 'normal',
        storage: { state: 'ok', free_bytes: 2048 * MIB },
      }),
    ]);
    expect(await storageOf()).toEqual({ state: 'ok', free_bytes: 2048 * MIB, at: back.toISOString() });
  });

  test('a detail of another shape is not shown, and never breaks the list', async () => {
    p.clock.set(T0);
    const device = await enrol(structure.id, operator.key);
    const storageOf = async () => (await fleet(operator.key)).find((i) => i.device_id === device.id)!.storage;
    await send(device, [
      modeChange(device, T0, { from: 'normal', to: 'normal', storage: { state: 'on fire' } }),
    ]);
    expect(await storageOf()).toBeNull();
    await send(device, [
      modeChange(device, T0, { from: 'normal', to: 'normal', storage: { state: 'low', free_bytes: 'lots' } }),
    ]);
    expect(await storageOf()).toEqual({ state: 'low', free_bytes: null, at: T0.toISOString() });
    await send(device, [modeChange(device, T0, { from: 'normal', to: 'normal', storage: 'low' })]);
    expect(await storageOf()).toBeNull();
    await send(device, [
      modeChange(device, T0, { from: 'normal', to: 'normal', storage: { state: 'low', free_bytes: -5 } }),
    ]);
    expect(await storageOf()).toEqual({ state: 'low', free_bytes: null, at: T0.toISOString() });
  });

  test("an operator sees its own devices' disk state only; the authority sees all", async () => {
    p.clock.set(T0);
    const mine = await enrol(structure.id, operator.key);
    const theirs = await enrol(otherStructure.id, other.key);
    await send(theirs, [
      modeChange(theirs, T0, { from: 'normal', to: 'disk_full', storage: { state: 'full', free_bytes: 1 } }),
    ]);
    const operatorView = await fleet(operator.key);
    expect(operatorView.some((i) => i.device_id === theirs.id)).toBe(false);
    expect(operatorView.find((i) => i.device_id === mine.id)!.storage).toBeNull();
    expect((await fleet(other.key)).find((i) => i.device_id === theirs.id)!.storage).toMatchObject({
      state: 'full',
    });
    expect((await fleet(p.adminKey)).find((i) => i.device_id === theirs.id)!.storage).toMatchObject({
      state: 'full',
    });
    const anonymous = await p.servers.api.inject({ method: 'GET', url: '/api/v1/console/devices' });
    expect(anonymous.statusCode).toBe(401);
  });

  test("a device's newest report is read through the partial index (migration 074), not its other events", async () => {
    const client = await p.ctx.db.connect();
    try {
      await client.query('BEGIN');
      await client.query('SET LOCAL enable_seqscan = off');
      const plan = (await client.query(`EXPLAIN ${FLEET_STORAGE_SQL}`, [operator.id])).rows
        .map((r: { 'QUERY PLAN': string }) => r['QUERY PLAN'])
        .join('\n');
      // Each month partition's copy of pop_records_storage (named after its columns), read backwards: one step.
      expect(plan, plan).toMatch(
        /Index Scan Backward using pop_records_\d{4}_\d{2}_player_key_receive_day_batch_id_record_\w* on pop_records_/,
      );
      // The indexes the plan reads (migration 076's index of every mode change has the same columns, so the same
      // kind of name): each is a copy of pop_records_storage.
      const used = [...plan.matchAll(/Index Scan Backward using (\S+) on pop_records_/g)].map((m) => m[1]!);
      const { rows } = await client.query<{ indexdef: string }>(
        'SELECT indexdef FROM pg_indexes WHERE indexname = ANY ($1)',
        [used],
      );
      expect(rows.length).toBeGreaterThan(0);
      for (const row of rows) expect(row.indexdef).toMatch(/WHERE \(\(kind = 'mode_change'::text\) AND/);
      await client.query('ROLLBACK');
    } finally {
      client.release();
    }
  });
});
