import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { startEmbeddedPostgres } from '../../src/db/embedded.js';

declare module 'vitest' {
  export interface ProvidedContext {
    pgAdminUrl: string;
  }
}

/**
 * One real PostgreSQL server for the whole run: DATABASE_URL when set, else an
 * embedded one in a fresh temp folder. Every test file makes its own database.
 */
export default async function setup(project: TestProject) {
  const given = process.env['DATABASE_URL'];
  if (given) {
    project.provide('pgAdminUrl', given);
    return;
  }
  const dir = await mkdtemp(path.join(os.tmpdir(), 'ooh-test-pg-'));
  const pg = await startEmbeddedPostgres({ dir: path.join(dir, 'data'), fsync: false });
  project.provide('pgAdminUrl', pg.url);
  return async () => {
    await pg.stop();
    await rm(dir, { recursive: true, force: true });
  };
}
