import { chmod, mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { almatyDate } from '@ooh/protocol';
import { parsePem, verifySignedDocument } from '@ooh/verify';
import { afterAll, expect, test } from 'vitest';
import { png } from '../approvals/media-fixtures.js';
import {
  type PlatformProcess,
  processesNaming,
  runPlatformCommand,
  spawnPlatform,
} from '../support/process.js';

/*
 * Audit I, finding 3: a restored platform issued again the approval numbers and revocation list versions made after
 * its backup, which the world already held with other contents (players that answered "unchanged" to a different
 * list of the same version, two verifying envelopes with one number). Through the real `platform backup`,
 * `platform restore` and `platform run`, on real embedded PostgreSQL clusters.
 */

const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => {});
});

const tempDir = async (prefix: string) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), prefix));
  // PostgreSQL's user (when the tests run as root) reaches the cluster through it.
  await chmod(dir, 0o755);
  cleanups.push(async () => {
    for (const pid of await processesNaming(dir)) process.kill(pid, 'SIGKILL');
    await rm(dir, { recursive: true, force: true });
  });
  return dir;
};

function stopLater(p: PlatformProcess) {
  cleanups.push(async () => {
    const timer = setTimeout(() => p.child.kill('SIGKILL'), 20_000);
    await p.stop('SIGTERM');
    clearTimeout(timer);
  });
}

async function call(base: string, key: string | null, method: string, pathname: string, body?: unknown) {
  const res = await fetch(`${base}${pathname}`, {
    method,
    headers: {
      ...(key ? { authorization: `Bearer ${key}` } : {}),
      ...(body !== undefined
        ? { 'content-type': Buffer.isBuffer(body) ? 'image/png' : 'application/json' }
        : {}),
    },
    ...(body !== undefined
      ? { body: Buffer.isBuffer(body) ? new Uint8Array(body) : JSON.stringify(body) }
      : {}),
  });
  const text = await res.text();
  return { status: res.status, text, json: () => JSON.parse(text) as Record<string, unknown> };
}

const isoDay = (offsetDays: number) =>
  new Date(Date.now() + offsetDays * 86_400_000).toISOString().slice(0, 10);

/** The API of one running platform, as the authority (admin) and one operator (key) use it. */
function actors(platform: () => PlatformProcess, admin: string, key: string, structureId: string) {
  const api = () => platform().urls.api;
  const submit = async () => {
    const created = await call(api(), key, 'POST', '/api/v1/submissions', {
      advertiser_name: 'Steppe Tea LLP',
      period_from: isoDay(5),
      period_to: isoDay(30),
      structure_ids: [structureId],
      category_id: 1564,
    });
    expect(created.status, created.text).toBe(201);
    return created.json() as { id: string; number: string };
  };
  return {
    submit,
    issue: async (seed: number) => {
      const { id } = await submit();
      expect(
        (await call(api(), key, 'PUT', `/api/v1/submissions/${id}/media`, png(64, 32, seed))).status,
      ).toBe(200);
      expect((await call(api(), key, 'POST', `/api/v1/submissions/${id}/send`)).status).toBe(200);
      const approved = await call(api(), admin, 'POST', `/api/v1/console/submissions/${id}/approve`, {});
      expect(approved.status, approved.text).toBe(201);
      const number = approved.json()['approval_number'] as string;
      const envelope = await call(api(), key, 'GET', `/api/v1/approvals/${number}/envelope`);
      expect(envelope.status).toBe(200);
      return { number, envelope: envelope.text };
    },
    revoke: async (number: string) => {
      const revoked = await call(api(), admin, 'POST', `/api/v1/console/approvals/${number}/revoke`, {
        reason: 'withdrawn',
      });
      expect(revoked.status, revoked.text).toBe(200);
      return revoked.json()['revocation_list_version'] as number;
    },
    list: async () => {
      const served = await call(platform().urls.verify, null, 'GET', '/v1/revocations.json');
      expect(served.status).toBe(200);
      return served.text;
    },
  };
}

const serial = (number: string) => Number(number.split('-')[2]);

test('after a restore no approval number, submission number or revocation list version the lost interval used is issued again; the restore says what to re-do', async () => {
  const dataDir = path.join(await tempDir('ooh-numbers-'), 'data');
  const boot = await runPlatformCommand(['bootstrap'], { DATA_DIR: dataDir }, 120_000);
  expect(boot.code, boot.stderr).toBe(0);
  const admin = boot.stdout.trim().split('\n').at(-1)!;
  let platform = await spawnPlatform([], { DATA_DIR: dataDir });
  stopLater(platform);
  const api = platform.urls.api;
  const operator = (
    await call(api, admin, 'POST', '/api/v1/console/organisations', { name: 'Op', kind: 'operator' })
  ).json();
  const key = (
    await call(api, admin, 'POST', `/api/v1/console/organisations/${operator['id']}/api-keys`, {
      name: 'k',
      scopes: ['write:submissions', 'read:creatives'],
    })
  ).json()['key'] as string;
  const structure = (
    await call(api, admin, 'POST', '/api/v1/console/structures', {
      organisation_id: operator['id'],
      code: 'ALM-RN-1',
      district: 'almaly',
      format: 'billboard',
    })
  ).json();
  const world = actors(() => platform, admin, key, structure['id'] as string);
  const a1 = await world.issue(1);
  const a2 = await world.issue(2);
  const a3 = await world.issue(3);
  expect(await world.revoke(a1.number)).toBe(1);

  const backup = path.join(await tempDir('ooh-numbers-backup-'), 'backup');
  const taken = await runPlatformCommand(['backup', backup], { DATA_DIR: dataDir }, 240_000);
  expect(taken.code, taken.stderr).toBe(0);
  // The interval the restore loses: A2 revoked (list v2, which players take), a fourth approval, a submission.
  expect(await world.revoke(a2.number)).toBe(2);
  const lostList = JSON.parse(await world.list());
  const lostApproval = await world.issue(4);
  const lostSubmission = await world.submit();
  const rootPem = await readFile(path.join(dataDir, 'authority', 'root-ca.pem'), 'utf8');
  expect(await platform.stop('SIGTERM')).toBe(0);

  const restoredDir = path.join(await tempDir('ooh-numbers-restored-'), 'data');
  const restored = await runPlatformCommand(['restore', backup], { DATA_DIR: restoredDir }, 240_000);
  expect(restored.code, restored.stderr).toBe(0);
  const year = almatyDate(new Date()).slice(0, 4);
  platform = await spawnPlatform([], { DATA_DIR: restoredDir });
  stopLater(platform);
  // The backup's list is served until the next revocation (a player holding v2 refuses it as older: it keeps A2).
  expect(JSON.parse(await world.list()).body.version).toBe(1);
  // Revoking A3 publishes a version above any the lost interval can have published: never 2 again.
  expect(await world.revoke(a3.number)).toBe(2001);
  const list = JSON.parse(await world.list());
  expect(list.body.version).toBe(2001);
  expect(list.body.version).toBeGreaterThan(lostList.body.version);
  expect(list.body.revoked.map((r: { approval_number: string }) => r.approval_number)).toEqual([
    a1.number,
    a3.number,
  ]);
  const root = parsePem(rootPem);
  expect((await verifySignedDocument(JSON.stringify(list), null, root, new Date())).ok).toBe(true);
  // The next revocation follows it.
  const a5 = await world.issue(6);
  expect(await world.revoke(a5.number)).toBe(2002);

  // Approval and submission numbers: past the lost ones, never the same.
  expect(serial(lostApproval.number)).toBe(4);
  expect(a5.number).toBe(`APR-${year}-001004`);
  expect(a5.number).not.toBe(lostApproval.number);
  expect((await verifySignedDocument(a5.envelope, null, root, new Date())).ok).toBe(true);
  const submission = await world.submit();
  expect(serial(lostSubmission.number)).toBe(5);
  expect(submission.number).toBe(`SUB-${year}-001005`);
  expect(await platform.stop('SIGTERM'), platform.output()).toBe(0);

  // The restore said what it skipped, and what the operator must re-do, from when.
  const manifest = JSON.parse(await readFile(path.join(backup, 'manifest.json'), 'utf8'));
  // pg_backup_stop's time: what was committed after it is not in the backup.
  const stoppedAt = manifest.database.stopped_at as string;
  expect(Date.parse(stoppedAt)).toBeLessThanOrEqual(Date.parse(manifest.created_at));

  // Three approvals (each a submission) in the backup, on one day: 1000 numbers of each skipped per lost day (the
  // floor), the list's version past 1 + 2 not revoked + 1000 approvals the interval could issue, to a thousand.
  const lines = restored.stderr.split('\n');
  expect(lines).toContain(`  APR-${year}: serial 3 -> 1003 (the next is 1004)`);
  expect(lines).toContain(`  SUB-${year}: serial 3 -> 1003 (the next is 1004)`);
  expect(lines).toContain('  revocation list: version 1 -> the next is 2001');
  expect(restored.stderr).toContain(
    `APPROVALS, REVOCATIONS AND SUBMISSIONS MADE AFTER ${new Date(stoppedAt).toISOString()} ARE NOT IN THIS DATABASE`,
  );
  // The ledger's fork is said, for the witnesses' operators.
  expect(restored.stderr).toContain('a witness that');
  expect(restored.stderr).toContain('refuses the new ones (a fork)');
}, 900_000);
