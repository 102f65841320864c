import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { exportPublicKeySpki, generateEs256KeyPair } from '@ooh/crypto';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { generateApiKey } from '../../src/auth/api-keys.js';
import { freePort } from '../../src/db/embedded.js';
import { createTestDatabase, type TestDatabase } from '../support/database.js';
import { type Answer, agentBody, cmsBody, cmsPlay, insertDevice, play, sign } from './helpers.js';

/*
 * The platform process is killed (SIGKILL) in the middle of a stream of batches and started again; the clients
 * resend every batch they had no answer for, byte for byte. Nothing may be lost and nothing counted twice: the
 * batch, its records, the counts and the high-water marks are one transaction, and a repeat gets the stored answer.
 */

const REPO = path.resolve(import.meta.dirname, '../../../..');
let database: TestDatabase;
let dataDir: string;
let child: ChildProcess | null = null;
let childLog = '';

beforeAll(async () => {
  database = await createTestDatabase();
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'ooh-pop-crash-'));
});
afterAll(async () => {
  if (child && child.exitCode === null) child.kill('SIGKILL');
  await database?.drop();
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
});

interface Ports {
  api: number;
  agents: number;
  devices: number;
  verify: number;
}

async function startChild(ports: Ports): Promise<ChildProcess> {
  const proc = spawn(
    process.execPath,
    ['--conditions=source', '--import', 'tsx', 'apps/platform/src/main.ts', '--test-clock'],
    {
      cwd: REPO,
      env: {
        ...process.env,
        // An outside PostgreSQL: killing the platform must not leave an embedded server orphaned.
        DATABASE_URL: database.url,
        API_PORT: String(ports.api),
        AGENTS_PORT: String(ports.agents),
        DEVICES_PORT: String(ports.devices),
        VERIFY_PORT: String(ports.verify),
        DATA_DIR: dataDir,
        LOG_LEVEL: 'warn',
        PLATFORM_ENV: 'test',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  proc.stdout?.on('data', (chunk: Buffer) => {
    childLog += chunk.toString();
  });
  proc.stderr?.on('data', (chunk: Buffer) => {
    childLog += chunk.toString();
  });
  const deadline = Date.now() + 90_000;
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`platform exited with ${proc.exitCode}:\n${childLog}`);
    try {
      const res = await fetch(`http://127.0.0.1:${ports.agents}/healthz`);
      if (res.status === 200) return proc;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`platform did not start:\n${childLog}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

interface Job {
  url: (ports: Ports) => string;
  /** Headers and bytes, made once (at the first attempt) and resent unchanged. */
  make: () => { headers: Record<string, string>; body: Buffer };
  made?: { headers: Record<string, string>; body: Buffer };
  answers: Answer[];
  attempts: number;
}

type Outcome = 'answered' | 'lost';

async function sendJob(job: Job, ports: Ports): Promise<Outcome> {
  job.made ??= job.make();
  for (;;) {
    job.attempts += 1;
    let res: Response;
    try {
      res = await fetch(job.url(ports), { method: 'POST', headers: job.made.headers, body: job.made.body });
    } catch {
      return 'lost';
    }
    let text: string;
    try {
      text = await res.text();
    } catch {
      return 'lost';
    }
    if (res.status === 429) {
      await new Promise((resolve) =>
        setTimeout(resolve, Number(res.headers.get('retry-after') ?? '1') * 1000),
      );
      continue;
    }
    if (res.status !== 200) throw new Error(`unexpected ${res.status}: ${text}`);
    job.answers.push(JSON.parse(text) as Answer);
    return 'answered';
  }
}

test('SIGKILL mid-stream, restart, resend the unanswered: nothing lost, nothing counted twice', async () => {
  const db = database.db;
  const at = new Date();
  const { rows: orgs } = await db.query<{ id: string }>(
    "INSERT INTO organisations (name, kind, created_at) VALUES ('Operator', 'operator', $1) RETURNING id",
    [at],
  );
  const org = orgs[0]!.id;
  const apiKey = generateApiKey();
  await db.query(
    "INSERT INTO api_keys (organisation_id, name, key_hash, scopes, created_at) VALUES ($1, 'cms', $2, '{write:plays}', $3)",
    [org, apiKey.hash, at],
  );
  const { rows: structures } = await db.query<{ id: string; code: string }>(
    "INSERT INTO structures (organisation_id, code, district, format, created_at) VALUES ($1, 'CRASH-1', 'almaly', 'billboard', $2) RETURNING id, code",
    [org, at],
  );
  const structure = structures[0]!;
  const cmsKeys = generateEs256KeyPair();
  const { rows: installations } = await db.query<{ id: string }>(
    "INSERT INTO cms_installations (organisation_id, name, kind, created_at) VALUES ($1, 'CMS', 'x', $2) RETURNING id",
    [org, at],
  );
  const source = { id: installations[0]!.id };
  await db.query(
    'INSERT INTO cms_keys (installation_id, public_key_spki, registered_at) VALUES ($1, $2, $3)',
    [source.id, exportPublicKeySpki(cmsKeys.publicKey), at],
  );
  const screens = ['s1', 's2', 's3'];
  for (const screen of screens) {
    await db.query(
      'INSERT INTO cms_players (installation_id, external_id, structure_id, mapped_at) VALUES ($1, $2, $3, $4)',
      [source.id, screen, structure.id, at],
    );
  }

  // 60 devices, 2 batches of 10 plays each; one CMS stream of 20 batches of 60 plays over 3 screens.
  const DEVICES = 60;
  const clients: Job[][] = [];
  for (let d = 0; d < DEVICES; d += 1) {
    const device = await insertDevice(db, structure, at);
    clients.push(
      [0, 1].map((batchSeq) => ({
        url: (p: Ports) => `http://127.0.0.1:${p.agents}/s/v1/telemetry`,
        make: () => {
          const now = new Date();
          const events = Array.from({ length: 10 }, (_, i) =>
            play(batchSeq * 10 + i + 1, {}, new Date(now.getTime() - 60_000)),
          );
          const body = agentBody(device, batchSeq, events, { ts: now });
          return {
            headers: {
              'content-type': 'application/json',
              'x-service-signature': sign(device.privateKey, body),
            },
            body,
          };
        },
        answers: [],
        attempts: 0,
      })),
    );
  }
  const seqOf = { s1: 0, s2: 0, s3: 0 } as Record<string, number>;
  clients.push(
    Array.from({ length: 20 }, (_, batchSeq) => {
      const records = Array.from({ length: 60 }, (_, i) => {
        const screen = screens[i % 3]!;
        seqOf[screen]! += 1;
        return cmsPlay(
          screen,
          seqOf[screen]!,
          { play_id: randomBytes(9).toString('base64url') },
          new Date(at.getTime() - 60_000),
        );
      });
      const body = cmsBody(source, batchSeq, records);
      return {
        url: (p: Ports) => `http://127.0.0.1:${p.api}/api/v1/pop/batches`,
        make: () => ({
          headers: {
            authorization: `Bearer ${apiKey.key}`,
            'content-type': 'application/json',
            'content-encoding': 'gzip',
            'x-service-source': source.id,
            'x-service-signature': sign(cmsKeys.privateKey, body),
          },
          body: gzipSync(body),
        }),
        answers: [],
        attempts: 0,
      };
    }),
  );
  const debug = process.env['POP_CRASH_DEBUG'] === '1';
  const totalJobs = clients.reduce((n, jobs) => n + jobs.length, 0);
  const totalPlays = DEVICES * 20 + 20 * 60;

  const ports: Ports = {
    api: await freePort(),
    agents: await freePort(),
    devices: await freePort(),
    verify: await freePort(),
  };
  child = await startChild(ports);

  // Phase 1: every client sends its batches one after the other; the process dies when 40 % are answered.
  let answered = 0;
  let inFlightAtKill = -1;
  let inFlight = 0;
  const killAt = Math.floor(totalJobs * 0.4);
  const firstRun = clients.map(async (jobs) => {
    for (const job of jobs) {
      inFlight += 1;
      const outcome = await sendJob(job, ports);
      inFlight -= 1;
      if (outcome === 'lost') return;
      answered += 1;
      if (answered === killAt) {
        inFlightAtKill = inFlight;
        child!.kill('SIGKILL');
      }
    }
  });
  await Promise.all(firstRun);
  await new Promise<void>((resolve) =>
    child!.exitCode !== null || child!.signalCode !== null ? resolve() : child!.once('exit', () => resolve()),
  );
  expect(child.signalCode).toBe('SIGKILL');
  // Killed in the middle: some batches were on the wire and some were never sent.
  expect(inFlightAtKill).toBeGreaterThan(0);
  const unanswered = clients.flat().filter((job) => job.answers.length === 0);
  expect(unanswered.length).toBeGreaterThan(0);
  const storedAtCrash = (await db.query<{ n: number }>('SELECT count(*)::int AS n FROM pop_batches')).rows[0]!
    .n;
  expect(storedAtCrash).toBeLessThan(totalJobs);

  // Phase 2: a new process on the same database; clients resend what they got no answer for, then go on.
  child = await startChild(ports);
  await Promise.all(
    clients.map(async (jobs) => {
      for (const job of jobs) {
        if (job.answers.length > 0) continue;
        const outcome = await sendJob(job, ports);
        if (outcome !== 'answered') throw new Error(`lost again after the restart:\n${childLog}`);
      }
    }),
  );
  child.kill('SIGTERM');

  // Every batch answered once at least; those stored before the crash but unanswered came back as duplicates.
  const resentStored = clients.flat().filter((job) => job.answers.length === 1 && job.answers[0]!.duplicate);
  expect(clients.flat().every((job) => job.answers.length === 1)).toBe(true);
  const { rows: batches } = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM pop_batches');
  expect(batches[0]!.n).toBe(totalJobs);
  // Nothing lost, nothing counted twice.
  const { rows: plays } = await db.query<{ n: number }>('SELECT sum(plays)::int AS n FROM play_counts');
  expect(plays[0]!.n).toBe(totalPlays);
  const { rows: records } = await db.query<{ n: number; distinct: number }>(
    "SELECT count(*)::int AS n, count(DISTINCT (player_key, seq))::int AS distinct FROM pop_records WHERE kind = 'play'",
  );
  expect(records[0]).toEqual({ n: totalPlays, distinct: totalPlays });
  const answeredAccepted = clients
    .flat()
    .filter((job) => !job.answers[0]!.duplicate)
    .reduce((n, job) => n + job.answers[0]!.accepted, 0);
  const duplicateAccepted = resentStored.reduce((n, job) => n + job.answers[0]!.accepted, 0);
  // The stored answers of batches committed just before the kill are given back as they were.
  expect(answeredAccepted + duplicateAccepted).toBe(totalPlays);
  if (debug)
    console.log({
      totalJobs,
      killAt,
      inFlightAtKill,
      unanswered: unanswered.length,
      storedAtCrash,
      resentStored: resentStored.length,
    });
}, 240_000);
