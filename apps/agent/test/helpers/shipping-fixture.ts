import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { generateEs256KeyPair } from '@ooh/crypto';
import type { Dispatcher } from 'undici';
import { type Clock, CorrectedClock, systemClock } from '../../src/clock.js';
import type { DeviceCredentials } from '../../src/identity/device-credentials.js';
import { AgentState } from '../../src/log/agent-state.js';
import { type Database, openAgentDatabase } from '../../src/log/database.js';
import { PlayLog } from '../../src/log/play-log.js';
import { memoryLogger } from '../../src/logger.js';
import { createHttpClient, type TlsIdentity } from '../../src/net/http-client.js';
import { BatchStore } from '../../src/shipping/batch-store.js';
import { Shipper, type ShipperOptions } from '../../src/shipping/shipper.js';
import { type AgentTestPlatform, FaultyHttp } from './platform.js';
import { SHA_A } from './temp.js';

export interface ShippingFixture {
  deviceId: string;
  keys: ReturnType<typeof generateEs256KeyPair>;
  db: Database;
  log: PlayLog;
  batches: BatchStore;
  state: AgentState;
  /** The agent's real transport, with faults on demand and every exchange recorded. */
  http: FaultyHttp;
  clock: CorrectedClock;
  logger: ReturnType<typeof memoryLogger>;
  shipper: Shipper;
  close(): Promise<void>;
}

export function createShippingFixture(args: {
  dir: string;
  agentsUrl: string;
  devicesUrl?: string;
  tls?: TlsIdentity | null;
  serverCaPem?: string;
  dispatcher?: Dispatcher;
  /** The board clock the agent's corrected clock starts from (default: the system clock). */
  boardClock?: Clock;
  /**
   * An agent run id: records logged while the clock is not synced are then marked, and the shipper settles
   * their times before cutting (as AgentCore wires it). Without it, records are taken as rightly timed.
   */
  run?: string;
  overrides?: Partial<ShipperOptions>;
  /** The device as a platform enrolled it (default: a new id and key pair). */
  deviceId?: string;
  keys?: ReturnType<typeof generateEs256KeyPair>;
}): ShippingFixture {
  const deviceId = args.deviceId ?? randomUUID();
  const keys = args.keys ?? generateEs256KeyPair();
  const db = openAgentDatabase(join(args.dir, 'agent.sqlite'));
  const clock = new CorrectedClock(args.boardClock ?? systemClock, 24 * 3_600_000);
  const run = args.run;
  const log = new PlayLog(
    db,
    run === undefined
      ? () => null
      : () => (clock.synced ? null : { run, steadyMs: clock.monotonicMs(), clockMs: clock.now().getTime() }),
  );
  const batches = new BatchStore(db);
  const state = new AgentState(db);
  const http = new FaultyHttp(
    createHttpClient({
      ...(args.serverCaPem ? { serverCaPem: args.serverCaPem } : {}),
      ...(args.dispatcher ? { dispatcher: args.dispatcher } : {}),
    }),
  );
  const logger = memoryLogger();
  const confirmed: (TlsIdentity | null)[] = [];
  const credentials: DeviceCredentials & { confirmed: typeof confirmed } = {
    confirmed,
    signingKey: () => keys.privateKey,
    tlsIdentity: () => args.tls ?? null,
    confirm: (identity) => confirmed.push(identity),
  };
  const shipper = new Shipper({
    batches,
    state,
    http,
    credentials,
    clock,
    deviceId,
    agentsUrl: args.agentsUrl,
    devicesUrl: args.devicesUrl ?? args.agentsUrl,
    backoff: { baseMs: 1000, capMs: 60_000 },
    minIntervalMs: 0,
    idleIntervalMs: 50,
    logger,
    random: () => 0.5,
    ...(run === undefined ? {} : { clockRun: { log, run } }),
    ...args.overrides,
  });
  return {
    deviceId,
    keys,
    db,
    log,
    batches,
    state,
    http,
    clock,
    logger,
    shipper,
    async close() {
      await http.close();
      db.close();
    },
  };
}

/** A device enrolled on the real platform (its key, no certificate) and the agent's shipping for it. */
export async function enrolledShippingFixture(
  platform: AgentTestPlatform,
  args: Omit<Parameters<typeof createShippingFixture>[0], 'agentsUrl' | 'deviceId' | 'keys'> & {
    agentsUrl?: string;
  },
): Promise<ShippingFixture> {
  const keys = generateEs256KeyPair();
  const { deviceId } = await platform.enrol({ publicKey: keys.publicKey });
  return createShippingFixture({ agentsUrl: platform.agentsUrl, ...args, deviceId, keys });
}

let counter = 0;

/** Logs `count` plays of 2 s ending now-ish. */
export function logPlays(log: PlayLog, count: number, end: Date = new Date()): void {
  // One outer transaction (each append becomes a savepoint): fast set-up of large queues.
  log.inTransaction(() => {
    for (let i = 0; i < count; i++) {
      counter++;
      log.appendPlay({
        playId: `play-${counter}-${i}`,
        approvalNumber: 'APP-2026-000001',
        mediaSha256: SHA_A,
        start: new Date(end.getTime() - 2000),
        end,
        structure: 'ALM-0001',
        screenPower: 'on',
      });
    }
  });
}
