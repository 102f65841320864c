import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { setUpAgent } from './helpers/agent-setup.js';
import { writeMedia } from './helpers/media.js';
import { createTestPki, type TestPki } from './helpers/pki.js';
import { type AgentTestPlatform, startAgentTestPlatform } from './helpers/platform.js';
import { tempDir } from './helpers/temp.js';

const AGENT_ROOT = join(import.meta.dirname, '..');
const ROUNDS = 4;

function startChild(
  configPath: string,
  mode?: '--drain',
): { child: ChildProcess; output: Promise<string>; started: Promise<void> } {
  const child = spawn(
    process.execPath,
    [
      '--conditions=source',
      '--import',
      'tsx',
      'test/helpers/power-cut-child.ts',
      configPath,
      ...(mode ? [mode] : []),
    ],
    { cwd: AGENT_ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let stdout = '';
  let stderr = '';
  let resolveStarted: () => void;
  let rejectStarted: (error: Error) => void;
  const started = new Promise<void>((resolve, reject) => {
    resolveStarted = resolve;
    rejectStarted = reject;
  });
  child.stdout!.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
    if (stdout.includes('started')) resolveStarted();
  });
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const output = new Promise<string>((resolve) => {
    child.on('exit', (code, signal) => {
      if (!stdout.includes('started'))
        rejectStarted(new Error(`child exited (${code ?? signal}) before starting: ${stderr}`));
      resolve(`${stdout}\n${stderr}`);
    });
  });
  return { child, output, started };
}

interface DiskState {
  seqs: number[];
  acknowledged: Map<number, string>;
  plays: Map<number, string>;
}

function readDisk(dbPath: string): DiskState {
  const db = new BetterSqlite3(dbPath);
  try {
    const rows = db
      .prepare(
        `SELECT r.seq, r.kind, r.event, b.answer IS NOT NULL AS acked
           FROM records r LEFT JOIN batches b ON b.batch_seq = r.batch_seq ORDER BY r.seq`,
      )
      .all() as { seq: number; kind: string; event: string; acked: number }[];
    return {
      seqs: rows.map((r) => r.seq),
      acknowledged: new Map(rows.filter((r) => r.acked).map((r) => [r.seq, r.event])),
      plays: new Map(rows.filter((r) => r.kind === 'play').map((r) => [r.seq, r.event])),
    };
  } finally {
    db.close();
  }
}

describe('power cut (SIGKILL while logging and shipping)', () => {
  let pki: TestPki;
  let platform: AgentTestPlatform;
  let dir: ReturnType<typeof tempDir>;

  beforeAll(async () => {
    pki = await createTestPki();
    platform = await startAgentTestPlatform();
    dir = tempDir();
  });
  afterAll(async () => {
    await platform?.close();
    dir.cleanup();
  });

  it('reuses no seq, loses no acknowledged record, and the platform counts exactly the plays logged', async () => {
    const setup = await setUpAgent({ dir: dir.path, platform, pki, certificate: null });
    await writeMedia(pki, setup.config.mediaDir, 'a.png', 'image a');
    await writeMedia(pki, setup.config.mediaDir, 'b.png', 'image b', {
      manifest: { approval_number: 'APP-B' },
    });
    const dbPath = join(setup.config.dataDir, 'agent.sqlite');
    let previous: DiskState | null = null;
    // The child logs plays as fast as its database takes them and ships each as it comes: far more than the
    // platform's batch every ten seconds. Its rate limit is not the subject here, so the device's bucket is kept
    // full and the agent ships (and is cut off) while it logs.
    const refilling = setInterval(() => {
      platform.refill(setup.deviceId).catch(() => {});
    }, 50);
    onTestFinished(() => clearInterval(refilling));

    for (let round = 0; round < ROUNDS; round++) {
      const { child, output, started } = startChild(setup.configPath);
      await started;
      await new Promise((resolve) => setTimeout(resolve, 700 + Math.floor(Math.random() * 1500)));
      child.kill('SIGKILL');
      await output;
      const disk = readDisk(dbPath);
      // Numbers run 1..n with no gap and no repeat.
      expect(disk.seqs).toEqual(disk.seqs.map((_, i) => i + 1));
      if (previous) {
        expect(disk.seqs.length).toBeGreaterThan(previous.seqs.length);
        // Every record acknowledged before the cut is still there, byte for byte, still acknowledged.
        for (const [seq, event] of previous.acknowledged) expect(disk.acknowledged.get(seq)).toBe(event);
        for (const [seq, event] of previous.plays) expect(disk.plays.get(seq)).toBe(event);
      }
      previous = disk;
    }

    // Restart without a display and let it ship everything.
    const drain = startChild(setup.configPath, '--drain');
    await drain.started;
    expect(await drain.output).toContain('drained');

    const disk = readDisk(dbPath);
    expect(disk.acknowledged.size).toBe(disk.seqs.length);
    expect(disk.plays.size).toBeGreaterThan(50);
    expect(await platform.plays(setup.deviceId)).toBe(disk.plays.size);
    // What the platform holds for each seq is the record the agent logged under it (no seq reused).
    const received = new Map<number, string>();
    for (const batch of await platform.batches(setup.deviceId)) {
      for (const event of JSON.parse(batch.body.toString()).events as { seq: number }[]) {
        const text = JSON.stringify(event);
        const earlier = received.get(event.seq);
        if (earlier !== undefined) expect(text).toBe(earlier);
        received.set(event.seq, text);
      }
    }
    expect(received.size).toBe(disk.seqs.length);
    for (const [seq, event] of disk.plays) expect(received.get(seq)).toBe(event);
  }, 240_000);
});
