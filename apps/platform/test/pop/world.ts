import { test as base } from 'vitest';
import {
  type ApprovalFixture,
  createOperator,
  insertApproval,
  insertDevice,
  type Operator,
  type PopCluster,
  registerSource,
  startPopCluster,
  T0,
  type TestDevice,
  type TestSource,
} from './helpers.js';

/*
 * popWorld(): the setup every proof-of-play test file used to write out in beforeAll/afterAll, as vitest fixtures.
 *
 * Once per file (scope 'file', set up when a test of the file first asks for it, closed when the file is done):
 * `world`, the platform on a fresh database of the run's embedded PostgreSQL (one or more instances, each its own
 * servers, pool and frozen clock at T0, as separate processes would be), its bootstrapped admin key, and an operator
 * organisation with a write:plays API key, structures and the approvals the file asks for; `db`, `servers` and
 * `ctx` (instance 0's, `ctx.caches` included), `operator` and `platform` are its parts.
 *
 * Once per test, for tests that must not share state: `device`, a freshly enrolled device (its own key pair) on the
 * operator's first structure; `source`, a freshly registered CMS installation of the operator with screen-1,
 * screen-2... mapped to its structures; `setNow`, which sets every instance's clock, put back to T0 when the test
 * ends, however it ends.
 *
 *   const test = popWorld({ approvals: [{ number: APPROVAL, structures: [0] }] });
 *   test('...', async ({ db, servers, device }) => { ... });
 */

/** The approval number play() and cmsPlay() name unless told otherwise. */
export const APPROVAL = 'A-2026-000001';

export interface WorldApproval extends Omit<ApprovalFixture, 'structureIds'> {
  /** Indexes of the operator's structures it covers; all of them when left out. */
  structures?: number[];
}

export interface PopWorldOptions {
  /** Platform instances on the one database (default 1). */
  instances?: number;
  /** The operator's structures (default 2). */
  structures?: number;
  /** Approvals issued to the operator when the world starts. */
  approvals?: WorldApproval[];
}

export interface PopWorld extends PopCluster {
  operator: Operator;
  /** A device enrolled on one of the operator's structures (the first unless told). */
  newDevice(structure?: { id: string; code: string }): Promise<TestDevice>;
  /** A CMS installation of the operator, its players mapped (screen-1, screen-2... on its structures unless told). */
  newSource(players?: Record<string, { id: string }>): Promise<TestSource>;
}

async function worldOn(cluster: PopCluster, options: PopWorldOptions): Promise<PopWorld> {
  const operator = await createOperator(cluster.platform, options.structures ?? 2);
  for (const { structures, ...approval } of options.approvals ?? []) {
    const covered = structures ? structures.map((i) => operator.structures[i]!) : operator.structures;
    await insertApproval(cluster.db, operator.id, { ...approval, structureIds: covered.map((s) => s.id) });
  }
  const screens = Object.fromEntries(operator.structures.map((s, i) => [`screen-${i + 1}`, s]));
  return {
    ...cluster,
    operator,
    newDevice: (structure = operator.structures[0]!) => insertDevice(cluster.db, structure),
    newSource: (players = screens) => registerSource(cluster.platform, operator, players),
  };
}

export function popWorld(options: PopWorldOptions = {}) {
  return (
    base
      .extend('popOptions', { scope: 'file' }, options)
      .extend('cluster', { scope: 'file' }, async ({ popOptions }, { onCleanup }) => {
        const cluster = await startPopCluster({ instances: popOptions.instances ?? 1 });
        onCleanup(() => cluster.close());
        return cluster;
      })
      // Its own fixture, so that the cluster is closed even when the operator's setup fails.
      .extend('world', { scope: 'file' }, ({ cluster, popOptions }) => worldOn(cluster, popOptions))
      .extend('db', { scope: 'file' }, ({ world }) => world.db)
      .extend('servers', { scope: 'file' }, ({ world }) => world.instances[0]!.servers)
      .extend('ctx', { scope: 'file' }, ({ world }) => world.instances[0]!.ctx)
      .extend('operator', { scope: 'file' }, ({ world }) => world.operator)
      .extend('platform', { scope: 'file' }, ({ world }) => world.platform)
      .extend('device', ({ world }) => world.newDevice())
      .extend('source', ({ world }) => world.newSource())
      .extend('setNow', ({ world }, { onCleanup }) => {
        onCleanup(() => world.setNow(T0));
        return (now: Date) => world.setNow(now);
      })
  );
}
