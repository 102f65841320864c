import { createHmac, type KeyObject, timingSafeEqual } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { es256Sign, exportPublicKeySpki, generateEs256KeyPair } from '@ooh/crypto';
import { expect } from 'vitest';
import type { Servers } from '../../src/platform.js';
import { apiCall, type TestPlatform } from '../support/platform.js';

/*
 * What the alert tests share: devices enrolled and CMS installations registered through the console routes, signed
 * batches through the real agent and CMS channels, and a webhook receiver on a local socket that checks every
 * signature as a subscriber would.
 */

export const MINUTE = 60_000;
export const MEDIA = 'd'.repeat(64);

export interface Device {
  id: string;
  privateKey: KeyObject;
  structure: { id: string; code: string };
  /** The next batch number and record number the device uses. */
  nextBatch: number;
  nextSeq: number;
}

/** Enrols a device through POST /api/v1/console/devices with the operator's key (a real P-256 key pair). */
export async function enrol(
  p: { servers: Servers },
  key: string,
  structure: { id: string; code: string },
): Promise<Device> {
  const { publicKey, privateKey } = generateEs256KeyPair();
  const res = await apiCall(p.servers.api, key, 'POST', '/api/v1/console/devices', {
    structure_id: structure.id,
    public_key: exportPublicKeySpki(publicKey),
  });
  expect(res.statusCode, res.body).toBe(201);
  return { id: res.json<{ device_id: string }>().device_id, privateKey, structure, nextBatch: 1, nextSeq: 1 };
}

/** An agent play of 15 s that ended at `end`. */
export function play(device: Device, end: Date): Record<string, unknown> {
  const seq = device.nextSeq++;
  return {
    kind: 'play',
    seq,
    play_id: `p${seq}`,
    approval_number: 'APR-2026-000001',
    media_sha256: MEDIA,
    start: new Date(end.getTime() - 15_000).toISOString(),
    end: end.toISOString(),
    duration_ms: 15_000,
    screen: { power: 'on' },
  };
}

/** A mode_change record as the agent writes it (apps/agent/src/playback/mode.ts). */
export function modeChange(device: Device, at: Date, from: string, to: string): Record<string, unknown> {
  return { kind: 'mode_change', seq: device.nextSeq++, at: at.toISOString(), detail: { from, to } };
}

/** Signs and sends one batch on the agent channel at the platform's present time; expects it stored. */
export async function sendBatch(
  p: TestPlatform | { servers: Servers; clock: { now(): Date } },
  device: Device,
  events: Record<string, unknown>[],
): Promise<void> {
  const body = Buffer.from(
    JSON.stringify({
      schema: 'service.pop/1',
      device_id: device.id,
      ts: p.clock.now().toISOString(),
      batch_seq: device.nextBatch++,
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
  expect(res.json<{ refused: number }>().refused, res.body).toBe(0);
}

export interface Cms {
  id: string;
  privateKey: KeyObject;
  key: string;
  nextBatch: number;
  nextSeq: Map<string, number>;
}

/** Registers a CMS installation for `organisationId` and maps its players, through the console routes. */
export async function registerCms(
  p: TestPlatform,
  organisationId: string,
  operatorKey: string,
  players: Record<string, { id: string }>,
): Promise<Cms> {
  const { publicKey, privateKey } = generateEs256KeyPair();
  const res = await apiCall(p.servers.api, operatorKey, 'POST', '/api/v1/console/cms-installations', {
    organisation_id: organisationId,
    name: 'Screen CMS',
    kind: 'test-cms',
    public_key: exportPublicKeySpki(publicKey),
  });
  expect(res.statusCode, res.body).toBe(201);
  const id = res.json<{ id: string }>().id;
  for (const [player, structure] of Object.entries(players)) {
    const mapped = await apiCall(
      p.servers.api,
      operatorKey,
      'PUT',
      `/api/v1/console/cms-installations/${id}/players/${player}`,
      { structure_id: structure.id },
    );
    expect(mapped.statusCode, mapped.body).toBe(200);
  }
  return { id, privateKey, key: operatorKey, nextBatch: 1, nextSeq: new Map() };
}

/** A CMS play of `player` that ended at `end`. */
export function cmsPlay(cms: Cms, player: string, end: Date): Record<string, unknown> {
  const seq = (cms.nextSeq.get(player) ?? 0) + 1;
  cms.nextSeq.set(player, seq);
  return {
    kind: 'play',
    seq,
    player,
    play_id: `${player}-${seq}`,
    approval_number: 'APR-2026-000001',
    media_sha256: MEDIA,
    start: new Date(end.getTime() - 15_000).toISOString(),
    end: end.toISOString(),
    duration_ms: 15_000,
  };
}

/** Signs and sends one CMS batch (POST /api/v1/pop/batches); expects it stored. */
export async function sendCms(p: { servers: Servers }, cms: Cms, records: Record<string, unknown>[]) {
  const body = Buffer.from(
    JSON.stringify({ schema: 'service.pop/1', source_id: cms.id, batch_seq: cms.nextBatch++, records }),
  );
  const res = await p.servers.api.inject({
    method: 'POST',
    url: '/api/v1/pop/batches',
    headers: {
      authorization: `Bearer ${cms.key}`,
      'content-type': 'application/json',
      'x-service-source': cms.id,
      'x-service-signature': es256Sign(cms.privateKey, body),
    },
    payload: body,
  });
  expect(res.statusCode, res.body).toBe(200);
  expect(res.json<{ refused: number }>().refused, res.body).toBe(0);
}

// ---- the webhook receiver ----

export interface Delivered {
  /** The path it was sent to: which subscription. */
  path: string;
  eventId: string;
  type: string;
  attempt: number;
  body: {
    id: string;
    type: string;
    day: string;
    created_at: string;
    data: Record<string, unknown> & {
      alert_id: string;
      kind: string;
      state: string;
      organisation_id: string;
    };
  };
}

export interface Receiver {
  url: (path: string) => string;
  delivered: Delivered[];
  /** Deliveries whose X-Signature did not verify with the path's secret (none, or the test fails). */
  badSignatures: string[];
  close(): Promise<void>;
}

/**
 * A receiver that checks each delivery as docs/city-events.md tells subscribers to: HMAC-SHA256 of the raw body with the
 * secret registered for the path, compared in constant time, before parsing.
 */
export async function startReceiver(secrets: Record<string, string>): Promise<Receiver> {
  const delivered: Delivered[] = [];
  const badSignatures: string[] = [];
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const raw = Buffer.concat(chunks);
      const path = request.url ?? '';
      const secret = secrets[path];
      const expected = secret ? createHmac('sha256', secret).update(raw).digest() : Buffer.alloc(32);
      const given = Buffer.from(String(request.headers['x-signature'] ?? ''), 'hex');
      if (!secret || given.length !== expected.length || !timingSafeEqual(given, expected)) {
        badSignatures.push(path);
        response.writeHead(401).end();
        return;
      }
      delivered.push({
        path,
        eventId: String(request.headers['x-event-id']),
        type: String(request.headers['x-event-type']),
        attempt: Number(request.headers['x-delivery-attempt']),
        body: JSON.parse(raw.toString('utf8')) as Delivered['body'],
      });
      response.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: (path) => `http://127.0.0.1:${port}${path}`,
    delivered,
    badSignatures,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
