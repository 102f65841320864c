import type { Database } from 'better-sqlite3';
import { AgentError } from '../errors.js';

/**
 * Schema migrations of the agent's SQLite file, numbered by `PRAGMA user_version`.
 * Players in the field upgrade in place, so migrations are additive only (new tables, new columns, new
 * indexes): an older agent binary never meets a column it does not know how to ignore, and no data is
 * rewritten. (Rows are removed by retention only, never by a migration: storage/retention.ts.) A file whose version is newer than this build knows is refused instead of being touched.
 */
export interface Migration {
  readonly version: number;
  readonly name: string;
  readonly sql: string;
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'records and batches',
    sql: `
      -- Monotonic counters: a number handed out is never handed out again, even if rows were ever removed.
      CREATE TABLE counters (
        name  TEXT PRIMARY KEY,
        value INTEGER NOT NULL
      ) STRICT;
      INSERT INTO counters (name, value) VALUES ('record_seq', 0), ('batch_seq', 0);

      -- One row per proof-of-play record; event is the exact JSON text sent on the wire (seq included).
      CREATE TABLE records (
        seq       INTEGER PRIMARY KEY,
        kind      TEXT NOT NULL CHECK (kind IN ('play', 'reject', 'mode_change', 'tamper')),
        play_id   TEXT UNIQUE,
        event     TEXT NOT NULL,
        logged_at TEXT NOT NULL,
        batch_seq INTEGER
      ) STRICT;
      CREATE INDEX records_unbatched ON records (seq) WHERE batch_seq IS NULL;
      CREATE INDEX records_batch ON records (batch_seq) WHERE batch_seq IS NOT NULL;

      -- One row per batch cut; body holds the exact bytes sent (resent byte for byte until answered).
      CREATE TABLE batches (
        batch_seq     INTEGER PRIMARY KEY,
        first_seq     INTEGER NOT NULL,
        last_seq      INTEGER NOT NULL,
        event_count   INTEGER NOT NULL,
        prev_sha256   TEXT NOT NULL,
        sent_at       TEXT NOT NULL,
        ts            TEXT NOT NULL,
        body          BLOB NOT NULL,
        body_sha256   TEXT NOT NULL,
        cut_at        TEXT NOT NULL,
        attempts      INTEGER NOT NULL DEFAULT 0,
        answer        TEXT,
        answered_at   TEXT,
        channel       TEXT
      ) STRICT;
      CREATE INDEX batches_unanswered ON batches (batch_seq) WHERE answer IS NULL;
    `,
  },
  {
    version: 2,
    name: 'reject memory and agent state',
    sql: `
      -- A refused file (by path, content hash and reason) is reported once, not once per scan or restart.
      CREATE TABLE rejects_logged (
        file_key  TEXT NOT NULL,
        code      TEXT NOT NULL,
        seq       INTEGER NOT NULL,
        PRIMARY KEY (file_key, code)
      ) STRICT;

      -- Small named values that must survive restarts (display mode, shipping alert, last send).
      CREATE TABLE agent_state (
        key   TEXT PRIMARY KEY,
        value TEXT NOT NULL
      ) STRICT;

      ALTER TABLE batches ADD COLUMN terminal_code TEXT;
    `,
  },
  {
    version: 3,
    name: 'record times awaiting the clock',
    sql: `
      -- A record logged while the agent's clock was not synced with the platform: the run whose steady clock
      -- measured it (clock_run), that steady instant (clock_steady_ms) and the clock's reading then
      -- (clock_read_ms). Once the clock is synced in the same run, its times are corrected by what the
      -- steady clock says really passed; the columns are then cleared. Only records not yet in a batch change.
      ALTER TABLE records ADD COLUMN clock_run TEXT;
      ALTER TABLE records ADD COLUMN clock_steady_ms REAL;
      ALTER TABLE records ADD COLUMN clock_read_ms INTEGER;
      CREATE INDEX records_unsettled ON records (seq) WHERE clock_run IS NOT NULL;
    `,
  },
  {
    version: 4,
    name: 'failing batches, probes and records set aside',
    sql: `
      -- How a batch's sends went (shipping/shipper.ts, "Nothing resent forever" in the README): failed sends of
      -- its bytes, of which answered 5xx, the first and last failure and what it was.
      ALTER TABLE batches ADD COLUMN failures INTEGER NOT NULL DEFAULT 0;
      ALTER TABLE batches ADD COLUMN server_errors INTEGER NOT NULL DEFAULT 0;
      ALTER TABLE batches ADD COLUMN first_failed_at TEXT;
      ALTER TABLE batches ADD COLUMN last_failed_at TEXT;
      ALTER TABLE batches ADD COLUMN last_failure TEXT;
      -- 'records', or 'probe': a batch of no records that asks whether the platform takes batches at all.
      ALTER TABLE batches ADD COLUMN kind TEXT NOT NULL DEFAULT 'records' CHECK (kind IN ('records', 'probe'));
      -- A batch given up: 'recut' (its records cut again, in smaller batches under new numbers), 'set_aside' (its one
      -- record is one the platform cannot take) or 'probe' (a probe not taken). Its batch_seq is never used again,
      -- and its bytes stay here.
      ALTER TABLE batches ADD COLUMN abandoned_at TEXT;
      ALTER TABLE batches ADD COLUMN abandon_reason TEXT
        CHECK (abandon_reason IS NULL OR abandon_reason IN ('recut', 'set_aside', 'probe'));
      CREATE INDEX batches_pending ON batches (batch_seq) WHERE answer IS NULL AND abandoned_at IS NULL;
      -- A record the platform could not take while it took others: kept, reported, never sent again.
      ALTER TABLE records ADD COLUMN set_aside_at TEXT;
      ALTER TABLE records ADD COLUMN set_aside_reason TEXT;
      CREATE INDEX records_set_aside ON records (seq) WHERE set_aside_at IS NOT NULL;
    `,
  },
  {
    version: 5,
    name: 'retention and incremental vacuum',
    sql: `
      -- Retention (storage/retention.ts): batches the platform answered, and batches given up, are removed with their
      -- records once old enough; these find the oldest of each without reading the table.
      CREATE INDEX batches_answered_at ON batches (answered_at) WHERE answer IS NOT NULL;
      CREATE INDEX batches_abandoned_at ON batches (abandoned_at) WHERE abandoned_at IS NOT NULL;
      -- Pages freed by retention are given back to the file system a few at a time (PRAGMA incremental_vacuum). A file
      -- made before this takes the setting only through one VACUUM, which cannot run inside this transaction: the
      -- agent runs it once at start when the file is small enough and the disk has room (storage/retention.ts,
      -- vacuumOnce); until then freed pages are reused, so the file does not grow either. A new file has the
      -- setting from its first page (log/database.ts).
      PRAGMA auto_vacuum = INCREMENTAL;
    `,
  },
  {
    version: 6,
    name: 'earlier signings of a re-signed batch',
    sql: `
      -- The bytes a pending batch carried before it was re-signed after 401 stale_request (BatchStore.refreshTs). A send
      -- of them may still be committing at the platform when the answer to a later one says stale_request (a request
      -- whose answer was lost): the re-signed bytes then get 409 batch_conflict, and the platform's stored answer is
      -- read by sending these again (idempotency is judged before freshness). Removed when the batch is answered or
      -- given up; at most a few per batch.
      CREATE TABLE batch_versions (
        batch_seq   INTEGER NOT NULL,
        replaced_at TEXT NOT NULL,
        ts          TEXT NOT NULL,
        body        BLOB NOT NULL,
        body_sha256 TEXT NOT NULL,
        PRIMARY KEY (batch_seq, body_sha256)
      ) STRICT;
    `,
  },
];

export const LATEST_SCHEMA_VERSION = MIGRATIONS[MIGRATIONS.length - 1]?.version ?? 0;

/**
 * Brings the file up to `target` (default: latest). Each migration runs in its own transaction together
 * with its `user_version` bump, so a power cut leaves the file at one version or the next, never between.
 */
export function migrate(db: Database, target: number = LATEST_SCHEMA_VERSION): number {
  const current = db.pragma('user_version', { simple: true }) as number;
  if (current > LATEST_SCHEMA_VERSION) {
    throw new AgentError(
      'database_newer',
      `database schema version ${current} is newer than this agent knows (${LATEST_SCHEMA_VERSION})`,
    );
  }
  for (let index = 0; index < MIGRATIONS.length; index++) {
    const migration = MIGRATIONS[index]!;
    if (migration.version !== index + 1) {
      throw new AgentError('database_invalid', `migration list out of order at ${migration.version}`);
    }
    if (migration.version <= current || migration.version > target) continue;
    db.transaction(() => {
      db.exec(migration.sql);
      db.pragma(`user_version = ${migration.version}`);
    })();
  }
  return db.pragma('user_version', { simple: true }) as number;
}
