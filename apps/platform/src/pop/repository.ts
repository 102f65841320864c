import { almatyDayStart, type PopAnswer } from '@ooh/protocol';
import type { Db, DbClient } from '../db/pool.js';
import { BinaryCopyWriter, CopyStream, copyFrom } from './copy.js';
import {
  type ApprovalFacts,
  type CountedPlayIds,
  type CountKey,
  type Player,
  type RecordRow,
  type Settled,
  Settler,
  type Verdict,
} from './judge.js';

/** A batch already stored under (owner, batch_seq). */
export interface StoredBatch {
  bodySha256: string;
  answer: PopAnswer;
}

interface ApprovalJson {
  number: string;
  media_sha256: string;
  valid_from: string;
  valid_until: string;
  revoked_at: string | null;
  structure_ids: string[];
}

function approvalsFrom(rows: ApprovalJson[] | null): Map<string, ApprovalFacts> {
  const approvals = new Map<string, ApprovalFacts>();
  for (const row of rows ?? []) {
    approvals.set(row.number, {
      number: row.number,
      mediaSha256: row.media_sha256,
      validFrom: row.valid_from,
      validUntil: row.valid_until,
      revokedAt: row.revoked_at === null ? null : new Date(row.revoked_at),
      structureIds: new Set(row.structure_ids),
    });
  }
  return approvals;
}

/**
 * The issued approvals a batch names, with what the flags need, as one JSON value of a reading query.
 * `structures` is an SQL expression of the structures of the batch's players: an approval's structure list is
 * read only where it meets them (approval_not_for_structure asks nothing else), so an approval that covers
 * hundreds of structures does not ship hundreds of ids with every batch.
 */
const approvalsJson = (numbers: string, structures: string) => `(SELECT json_agg(json_build_object(
     'number', a.number, 'media_sha256', a.media_sha256, 'valid_from', a.valid_from::text,
     'valid_until', a.valid_until::text, 'revoked_at', a.revoked_at,
     'structure_ids', ARRAY(SELECT s.structure_id FROM approval_structures s
                             WHERE s.approval_id = a.id AND s.structure_id = ANY(${structures}))))
   FROM approvals a WHERE a.number = ANY(${numbers}::text[]))`;

function countedFrom(pairs: [string, string][] | null): Map<string, Set<string>> {
  const counted = new Map<string, Set<string>>();
  for (const [playerKey, playId] of pairs ?? []) {
    let ids = counted.get(playerKey);
    if (!ids) {
      ids = new Set();
      counted.set(playerKey, ids);
    }
    ids.add(playId);
  }
  return counted;
}

/** Plays a batch may count that start at or before their player's newest counted start (migration 065). */
export interface PlayCandidates {
  playerKeys: string[];
  /** startHourOf(start) of each. */
  hours: number[];
  playIds: string[];
}

/**
 * Of `candidates`, the play_ids already counted for their players: looked for in the play sets of the hour of the
 * play's start and the hours beside it (and of the other candidates of the player). Read after the players' marks (never before), so that a play counted
 * meanwhile is caught by the store's compare-and-set instead. Equal 64-bit hashes of two play_ids of one player
 * would make a play look counted; the sender that chose them is the only one who can lose by it.
 */
export async function findCountedPlays(
  db: Db,
  candidates: PlayCandidates,
): Promise<Map<string, Set<string>>> {
  if (candidates.playIds.length === 0) return new Map();
  // Players by number; the hours of play sets to look in, per player (each start's hour and those beside it).
  const players: string[] = [];
  const playerNumber = new Map<string, number>();
  const hoursOf = new Map<number, Set<number>>();
  const candidatePlayers: number[] = [];
  candidates.playIds.forEach((_, n) => {
    const playerKey = candidates.playerKeys[n]!;
    let number = playerNumber.get(playerKey);
    if (number === undefined) {
      number = players.push(playerKey);
      playerNumber.set(playerKey, number);
      hoursOf.set(number, new Set());
    }
    candidatePlayers.push(number);
    const hour = candidates.hours[n]!;
    for (let h = hour - 1; h <= hour + 1; h += 1) hoursOf.get(number)!.add(h);
  });
  const windowPlayers: number[] = [];
  const windowHours: number[] = [];
  for (const [number, hours] of hoursOf) {
    for (const hour of hours) {
      windowPlayers.push(number);
      windowHours.push(hour);
    }
  }
  const { rows } = await db.query<{ counted: [string, string][] | null }>({
    name: 'pop-counted-plays',
    // The sets are unnested once and joined by hash: a batch out of order (every play a candidate) costs a hash
    // probe a play. Numbers and play_ids (A-Za-z0-9_- only: playCandidates) go as array literals built here: pg's
    // serialisation escapes 10 000 elements one by one.
    text: `WITH known AS (
             SELECT w.p, e.x
               FROM unnest($4::int[], $5::int[]) AS w(p, hour)
               JOIN pop_play_sets s ON s.player_key = ($1::text[])[w.p] AND s.start_hour = w.hour,
                    unnest(s.play_keys) AS e(x)
           )
           SELECT json_agg(json_build_array(($1::text[])[q.p], q.i)) AS counted
             FROM unnest($2::int[], $3::text[]) AS q(p, i)
            WHERE EXISTS (SELECT 1 FROM known WHERE known.x = hashtextextended(q.i, 0) AND known.p = q.p)`,
    values: [
      players,
      `{${candidatePlayers.join(',')}}`,
      // Quoted: an unquoted NULL would be SQL's null.
      `{"${candidates.playIds.join('","')}"}`,
      `{${windowPlayers.join(',')}}`,
      `{${windowHours.join(',')}}`,
    ],
  });
  return countedFrom(rows[0]?.counted ?? null);
}

export interface DeviceForTelemetry {
  id: string;
  revokedAt: Date | null;
  structureId: string;
  structureCode: string;
  /** base64 SPKI of the keys accepted at `now` (DESIGN.md section 3), newest first. */
  keys: string[];
  existing: StoredBatch | null;
  /** The device's high-water mark (0 before its first record). */
  highWaterSeq: number;
  /** Whether a service.pop/1 batch of the device was accepted (DESIGN.md section 5, legacy). */
  hadPopBatch: boolean;
  approvals: Map<string, ApprovalFacts>;
  /** The newest start of the device's counted plays, epoch ms (migration 065); null before the first. */
  newestPlayStart: number | null;
}

export interface DeviceLookup {
  deviceId: string;
  batchSeq: number;
  now: Date;
  approvalNumbers: readonly string[];
}

/**
 * Everything the agent channels need to decide on a batch, for several batches in one round trip: per lookup the
 * device, its keys accepted at `now` (accepted_until NULL or later), the batch it may already have stored under
 * `batchSeq`, its high-water mark, and the approvals the batches name (read once for all of them: batches
 * arriving together mostly name the same approvals). Nothing here is cached: a revocation takes effect on the
 * next call. Results in the order of `lookups`; null for an unknown device.
 */
export async function findDevicesForTelemetry(
  db: Db,
  lookups: readonly DeviceLookup[],
): Promise<(DeviceForTelemetry | null)[]> {
  const numbers = new Set<string>();
  for (const lookup of lookups) for (const number of lookup.approvalNumbers) numbers.add(number);
  const { rows } = await db.query<{
    n: number;
    id: string;
    revoked_at: Date | null;
    structure_id: string;
    structure_code: string;
    keys: string[];
    existing_sha256: string | null;
    existing_answer: PopAnswer | null;
    high_water_seq: number | null;
    newest_play_start: Date | null;
    had_pop_batch: boolean;
    approvals: ApprovalJson[] | null;
  }>({
    // Named: parsed once per connection (the hot path of the agent channel).
    name: 'pop-devices-for-telemetry',
    text: `WITH q AS (
             SELECT * FROM unnest($1::uuid[], $2::bigint[], $3::timestamptz[]) WITH ORDINALITY AS q(device_id, batch_seq, now, n)
           )
           SELECT q.n, d.id, d.revoked_at, d.structure_id, s.code AS structure_code,
            ARRAY(SELECT k.public_key_spki FROM device_keys k
                   WHERE k.device_id = d.id AND (k.accepted_until IS NULL OR k.accepted_until > q.now)
                   ORDER BY k.registered_at DESC) AS keys,
            b.body_sha256 AS existing_sha256, b.answer AS existing_answer,
            p.high_water_seq, p.newest_play_start,
            EXISTS (SELECT 1 FROM pop_batches x
                     WHERE x.owner = 'device:' || d.id::text AND x.channel IN ('agent', 'cert')) AS had_pop_batch,
            -- Once, on the first row found (an uncorrelated subquery is computed once).
            CASE WHEN q.n = (SELECT min(q2.n) FROM q q2 JOIN devices d2 ON d2.id = q2.device_id)
                 THEN ${approvalsJson('$4', 'ARRAY(SELECT d3.structure_id FROM devices d3 WHERE d3.id = ANY($1::uuid[]))')}
            END AS approvals
       FROM q
       JOIN devices d ON d.id = q.device_id
       JOIN structures s ON s.id = d.structure_id
       LEFT JOIN pop_batches b ON b.owner = 'device:' || d.id::text AND b.batch_seq = q.batch_seq
       LEFT JOIN pop_players p ON p.player_key = 'device:' || d.id::text`,
    values: [
      lookups.map((l) => l.deviceId),
      lookups.map((l) => l.batchSeq),
      lookups.map((l) => l.now),
      [...numbers],
    ],
  });
  let approvals = new Map<string, ApprovalFacts>();
  for (const row of rows) if (row.approvals !== null) approvals = approvalsFrom(row.approvals);
  const found: (DeviceForTelemetry | null)[] = lookups.map(() => null);
  for (const row of rows) {
    found[row.n - 1] = {
      id: row.id,
      revokedAt: row.revoked_at,
      structureId: row.structure_id,
      structureCode: row.structure_code,
      keys: row.keys,
      existing:
        row.existing_sha256 === null
          ? null
          : { bodySha256: row.existing_sha256, answer: row.existing_answer! },
      highWaterSeq: row.high_water_seq ?? 0,
      hadPopBatch: row.had_pop_batch,
      approvals,
      newestPlayStart: row.newest_play_start?.getTime() ?? null,
    };
  }
  return found;
}

export interface MappedPlayer extends Player {
  highWaterSeq: number;
  /** The newest start of the player's counted plays, epoch ms; null before the first. */
  newestPlayStart: number | null;
}

/**
 * SQL: seconds until the buckets named by the four array parameters would all hold their cost at `at` (0: now),
 * read without taking or locking anything. The arithmetic of pop_take_tokens (020_pop.sql).
 */
const rateLook = (keys: string, capacities: string, perSecond: string, costs: string, at: string) => `(
  SELECT coalesce(max(CASE WHEN have + 1e-9 < t.cost THEN (t.cost - have) / t.per_second ELSE 0 END), 0)
    FROM unnest(${keys}::text[], ${capacities}::float8[], ${perSecond}::float8[], ${costs}::float8[])
         AS t(key, capacity, per_second, cost)
    LEFT JOIN pop_rate_buckets rb ON rb.bucket_key = t.key,
         LATERAL (SELECT CASE WHEN rb.bucket_key IS NULL THEN t.capacity
                              ELSE least(t.capacity, rb.tokens + t.per_second
                                         * greatest(0, extract(epoch FROM (${at}::timestamptz - rb.updated_at))))
                         END AS have) AS h)`;

export interface SourceForBatch {
  id: string;
  organisationId: string;
  /** Keys still accepted at `now`: the current one and any rotated out less than `graceMs` ago. */
  acceptedKeys: string[];
  /** Keys rotated out longer ago than the grace. */
  expiredKeys: string[];
  existing: StoredBatch | null;
  /** Mapped players (removed mappings left out: spec "player_unknown") by external id, with their marks. */
  players: Map<string, MappedPlayer>;
  approvals: Map<string, ApprovalFacts>;
  /** Seconds until the rate buckets would take this batch (0: now), looked at without taking tokens. */
  rateWait: number;
  /** A batch number taken for this batch, so its records can be written before the batch row. */
  nextBatchId: number;
}

/** A CMS installation, its keys by state at `now`, its batch under `batchSeq`, the players and approvals named. */
export async function findSourceForBatch(
  db: Db,
  args: {
    installationId: string;
    batchSeq: number;
    now: Date;
    graceMs: number;
    externalIds: readonly string[];
    approvalNumbers: readonly string[];
    buckets: readonly Bucket[];
  },
): Promise<SourceForBatch | null> {
  const { rows } = await db.query<{
    id: string;
    organisation_id: string;
    accepted: string[];
    expired: string[];
    existing_sha256: string | null;
    existing_answer: PopAnswer | null;
    players: { e: string; s: string; c: string; h: number | null; n: string | null }[] | null;
    approvals: ApprovalJson[] | null;
    rate_wait: number;
    next_batch_id: number;
  }>({
    name: 'pop-source-for-batch',
    text: `SELECT i.id, i.organisation_id,
            ARRAY(SELECT k.public_key_spki FROM cms_keys k
                   WHERE k.installation_id = i.id
                     AND (k.superseded_at IS NULL OR k.superseded_at + make_interval(secs => $4 / 1000.0) > $3)
                   ORDER BY k.registered_at DESC) AS accepted,
            ARRAY(SELECT k.public_key_spki FROM cms_keys k
                   WHERE k.installation_id = i.id
                     AND k.superseded_at IS NOT NULL
                     AND k.superseded_at + make_interval(secs => $4 / 1000.0) <= $3
                   ORDER BY k.registered_at DESC) AS expired,
            b.body_sha256 AS existing_sha256, b.answer AS existing_answer,
            (SELECT json_agg(json_build_object('e', m.external_id, 's', m.structure_id, 'c', st.code,
                                               'h', pp.high_water_seq, 'n', pp.newest_play_start))
               FROM cms_players m
               JOIN structures st ON st.id = m.structure_id
               LEFT JOIN pop_players pp ON pp.player_key = 'cms:' || m.installation_id::text || ':' || m.external_id
              WHERE m.installation_id = i.id AND m.external_id = ANY($5::text[]) AND m.removed_at IS NULL) AS players,
            ${approvalsJson(
              '$6',
              `ARRAY(SELECT m.structure_id FROM cms_players m
                      WHERE m.installation_id = i.id AND m.external_id = ANY($5::text[]) AND m.removed_at IS NULL)`,
            )} AS approvals,
            ${rateLook('$7', '$8', '$9', '$10', '$3')} AS rate_wait,
            nextval(pg_get_serial_sequence('pop_batches', 'id')) AS next_batch_id
       FROM cms_installations i
       LEFT JOIN pop_batches b ON b.owner = 'source:' || i.id::text AND b.batch_seq = $2
      WHERE i.id = $1`,
    values: [
      args.installationId,
      args.batchSeq,
      args.now,
      args.graceMs,
      args.externalIds,
      args.approvalNumbers,
      args.buckets.map((b) => b.key),
      args.buckets.map((b) => b.capacity),
      args.buckets.map((b) => b.perSecond),
      args.buckets.map((b) => b.cost),
    ],
  });
  const row = rows[0];
  if (!row) return null;
  const players = new Map<string, MappedPlayer>();
  for (const p of row.players ?? []) {
    players.set(p.e, {
      key: cmsPlayerKey(row.id, p.e),
      structureId: p.s,
      structureCode: p.c,
      highWaterSeq: p.h ?? 0,
      newestPlayStart: p.n === null ? null : Date.parse(p.n),
    });
  }
  return {
    id: row.id,
    organisationId: row.organisation_id,
    acceptedKeys: row.accepted,
    expiredKeys: row.expired,
    existing:
      row.existing_sha256 === null ? null : { bodySha256: row.existing_sha256, answer: row.existing_answer! },
    players,
    approvals: approvalsFrom(row.approvals),
    rateWait: row.rate_wait,
    nextBatchId: row.next_batch_id,
  };
}

/** The batch stored under (owner, batch_seq), read after a racing instance stored it first. */
export async function findBatch(
  db: Db | DbClient,
  owner: string,
  batchSeq: number,
): Promise<StoredBatch | null> {
  const { rows } = await db.query<{ body_sha256: string; answer: PopAnswer }>(
    'SELECT body_sha256, answer FROM pop_batches WHERE owner = $1 AND batch_seq = $2',
    [owner, batchSeq],
  );
  const row = rows[0];
  return row ? { bodySha256: row.body_sha256, answer: row.answer } : null;
}

/** Current high-water marks of `keys` (absent players: 0), read again after another instance moved one. */
export async function readMarks(db: Db, keys: readonly string[]): Promise<Map<string, number>> {
  const marks = new Map<string, number>(keys.map((key) => [key, 0]));
  if (keys.length === 0) return marks;
  const { rows } = await db.query<{ player_key: string; high_water_seq: number }>(
    'SELECT player_key, high_water_seq FROM pop_players WHERE player_key = ANY($1::text[])',
    [keys],
  );
  for (const row of rows) marks.set(row.player_key, row.high_water_seq);
  return marks;
}

/** readMarks, with each player's newest counted play start (epoch ms; absent players: none). */
export async function readPlayerStates(
  db: Db,
  keys: readonly string[],
): Promise<{ marks: Map<string, number>; newestPlayStarts: Map<string, number> }> {
  const marks = new Map<string, number>(keys.map((key) => [key, 0]));
  const newestPlayStarts = new Map<string, number>();
  if (keys.length === 0) return { marks, newestPlayStarts };
  const { rows } = await db.query<{
    player_key: string;
    high_water_seq: number;
    newest_play_start: Date | null;
  }>(
    'SELECT player_key, high_water_seq, newest_play_start FROM pop_players WHERE player_key = ANY($1::text[])',
    [keys],
  );
  for (const row of rows) {
    marks.set(row.player_key, row.high_water_seq);
    if (row.newest_play_start) newestPlayStarts.set(row.player_key, row.newest_play_start.getTime());
  }
  return { marks, newestPlayStarts };
}

export const devicePlayerKey = (deviceId: string) => `device:${deviceId}`;
export const cmsPlayerKey = (installationId: string, externalId: string) =>
  `cms:${installationId}:${externalId}`;

export interface Bucket {
  key: string;
  capacity: number;
  perSecond: number;
  cost: number;
}

/** Month partitions of pop_records known to exist, per database (they are never dropped while it runs). */
const knownPartitions = new WeakMap<Db, Set<string>>();

/** Creates the month partition of pop_records that holds `receiveDay` unless it is known to exist. */
export async function ensureRecordPartition(db: Db, receiveDay: string): Promise<void> {
  const month = receiveDay.slice(0, 7);
  let known = knownPartitions.get(db);
  if (!known) {
    known = new Set();
    knownPartitions.set(db, known);
  }
  if (known.has(month)) return;
  for (let attempt = 0; ; attempt += 1) {
    try {
      await db.query('SELECT pop_records_partition($1::date)', [receiveDay]);
      break;
    } catch (error) {
      // Instances on other databases' catalogues can still race; the second try finds the table.
      if (attempt >= 2 || (error as { code?: string }).code !== '42P07') throw error;
    }
  }
  known.add(month);
}

export interface NewBatch {
  owner: string;
  batchSeq: number;
  channel: 'agent' | 'cert' | 'cms' | 'legacy';
  /** The exact bytes signed (decompressed on the CMS channel). */
  body: Buffer;
  /**
   * The gzip bytes the body came in, when they are smaller: stored instead of `body`, which gunzip restores from
   * them on every read (migration 062).
   */
  gzipped?: Buffer;
  bodySha256: string;
  receivedAt: Date;
  receiveDay: string;
  recordCount: number;
  answer: PopAnswer;
  attested: boolean;
}

export type StoreResult =
  | { kind: 'stored'; id: number }
  /** The rate limits refused it: nothing stored; seconds to wait. */
  | { kind: 'rate_limited'; wait: number }
  /** (owner, batch_seq) was taken meanwhile by another instance. */
  | { kind: 'taken' }
  /** A high-water mark moved since it was read: nothing stored; read the marks again and judge again. */
  | { kind: 'marks_moved' };

/**
 * The first thing every transaction that stores batches does (migration 064): takes the receive days' locks shared
 * and gives, for each day asked, the day its batches are stored under: the day itself, or the next day without a
 * seal when the seal of the day was made meanwhile (the spec: "a day is sealed once, after it is over, so a batch
 * that arrives late belongs to the day it arrived"). The sealing of a day waits for these locks, so a batch stored
 * under a day is always covered by that day's seal.
 */
export async function openReceiveDays(
  client: DbClient,
  days: readonly string[],
): Promise<Map<string, string>> {
  const { rows } = await client.query<{ wanted_day: string; open_day: string }>({
    name: 'pop-open-receive-days',
    text: `SELECT to_char(wanted_day, 'YYYY-MM-DD') AS wanted_day, to_char(open_day, 'YYYY-MM-DD') AS open_day
             FROM pop_open_receive_days($1::date[])`,
    values: [days],
  });
  return new Map(rows.map((r) => [r.wanted_day, r.open_day]));
}

/**
 * The batch as stored under `openDay`: unchanged when that is its receive day; otherwise (its day was sealed while it
 * was on its way) received when it is stored, and at the earliest at the start of that day, so that its leaf's
 * receive time lies on the day it is sealed in (a verifier checks that).
 */
export function stampedInto<B extends Pick<NewBatch, 'receivedAt' | 'receiveDay'>>(
  batch: B,
  openDay: string,
  now: Date,
): B {
  if (openDay === batch.receiveDay) return batch;
  const start = almatyDayStart(openDay);
  return { ...batch, receiveDay: openDay, receivedAt: now.getTime() > start.getTime() ? now : start };
}

/** The newest counted play start of `key` in a settled batch, as a JSON time (null: none had a start). */
export function newestStartOf(settled: Settled, key: string): string | null {
  const ms = settled.newestPlayStarts.get(key);
  return ms === undefined ? null : new Date(ms).toISOString();
}

export const RECORD_COLUMNS =
  'receive_day, batch_id, record_index, player_key, structure_id, kind, seq, day, approval_number, slot, ' +
  'media_sha256, start_at, end_at, duration_ms, at, attested, flags, screen_power, code, play_id, src, detail';
const RECORD_FIELDS = 22;

/** The COPY statement of the taken records (recordsCopyData). */
export const COPY_RECORDS_SQL = `COPY pop_records (${RECORD_COLUMNS}) FROM STDIN (FORMAT binary)`;

interface StoreArgs {
  batch: NewBatch;
  settled: Settled;
  /** The marks the judgement read (0 for a player without a row). */
  readMarks: ReadonlyMap<string, number>;
  buckets: readonly Bucket[];
  /** A legacy batch is stored only while the owner has no service.pop/1 batch (checked again here). */
  legacy: boolean;
  /** The platform clock: the receive time of a batch moved past a day sealed meanwhile (stampedInto). */
  now: () => Date;
}

const byKey = (a: Bucket, b: Bucket) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0);

/**
 * In an open transaction: the statement that stores the batch row, the counts and the moved marks (STORE_SQL),
 * given `id` or a new number; 'stored' when all of it was written.
 */
async function runStoreStatement(client: DbClient, args: StoreArgs, id: number | null): Promise<StoreResult> {
  const { batch, settled } = args;
  const buckets = [...args.buckets].sort(byKey);
  const moved = [...settled.highWater.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const counts = [...settled.counts].sort((a, b) => compareCountKeys(a, b));
  const {
    rows: [row],
  } = await client.query<{ wait: number; id: number | null }>({
    name: 'pop-store-batch',
    text: STORE_SQL,
    values: [
      batch.owner,
      batch.batchSeq,
      batch.channel,
      batch.gzipped ?? batch.body,
      batch.bodySha256,
      batch.receivedAt,
      batch.receiveDay,
      batch.recordCount,
      batch.answer,
      batch.attested,
      args.legacy,
      buckets.map((b) => b.key),
      buckets.map((b) => b.capacity),
      buckets.map((b) => b.perSecond),
      buckets.map((b) => b.cost),
      // Marks and counts as JSON (one parameter each): a CMS batch has hundreds of count rows, and pg's array
      // literals are escaped element by element.
      JSON.stringify(
        moved.map(([key, seq]) => ({
          k: key,
          e: args.readMarks.get(key) ?? 0,
          s: seq,
          t: newestStartOf(settled, key),
        })),
      ),
      JSON.stringify(
        counts.map((c) => ({
          k: c.playerKey,
          t: c.structureId,
          d: c.day,
          a: c.approvalNumber,
          l: c.slot,
          p: c.plays,
          f: c.flagged,
        })),
      ),
      id,
      batch.gzipped ? 'gzip' : 'identity',
      batch.gzipped ? batch.body.length : null,
      settled.newestRecordAt === null ? null : new Date(settled.newestRecordAt),
      settled.playSets.map((set) => set.playerKey),
      `{${settled.playSets.map((set) => set.hour).join(',')}}`,
      // play_ids are A-Za-z0-9_- only (playCandidates, the record schema): ',' and ';' cannot occur in them.
      settled.playSets
        .map((set) => set.playIds.join(','))
        .join(';'),
    ],
  });
  return row!.wait > 0
    ? { kind: 'rate_limited', wait: row!.wait }
    : row!.id === null
      ? { kind: 'taken' }
      : { kind: 'stored', id: row!.id };
}

/**
 * In an open transaction, last before COMMIT: takes the batch's rate tokens. Their bucket rows (one per
 * organisation is shared by all its installations) stay locked until the COMMIT that follows at once.
 */
async function takeTokens(client: DbClient, buckets: readonly Bucket[], at: Date): Promise<number> {
  const sorted = [...buckets].sort(byKey);
  const {
    rows: [taken],
  } = await client.query<{ wait: number }>({
    name: 'pop-take-tokens',
    text: 'SELECT pop_take_tokens($1::text[], $2::float8[], $3::float8[], $4::float8[], $5) AS wait',
    values: [
      sorted.map((b) => b.key),
      sorted.map((b) => b.capacity),
      sorted.map((b) => b.perSecond),
      sorted.map((b) => b.cost),
      at,
    ],
  });
  return taken!.wait;
}

/** Takes `bucket`'s cost now, on its own (autocommit): 0 when granted, else the seconds to wait. */
export async function takeCallToken(db: Db, bucket: Bucket, at: Date): Promise<number> {
  const { rows } = await db.query<{ wait: number }>({
    name: 'pop-take-call-token',
    text: 'SELECT pop_take_tokens($1::text[], $2::float8[], $3::float8[], $4::float8[], $5) AS wait',
    values: [[bucket.key], [bucket.capacity], [bucket.perSecond], [bucket.cost], at],
  });
  return rows[0]!.wait;
}

/** Runs `work` in a transaction on its own client; a moved mark (PHWM1) is the result marks_moved. */
async function inTransaction(db: Db, work: (client: DbClient) => Promise<StoreResult>): Promise<StoreResult> {
  const client = await db.connect();
  let broken = false;
  try {
    await client.query('BEGIN');
    try {
      const result = await work(client);
      await client.query(result.kind === 'stored' ? 'COMMIT' : 'ROLLBACK');
      return result;
    } catch (error) {
      await client.query('ROLLBACK').catch(() => {
        broken = true;
      });
      if ((error as { code?: string }).code === 'PHWM1') return { kind: 'marks_moved' };
      throw error;
    }
  } catch (error) {
    broken = true;
    throw error;
  } finally {
    client.release(broken);
  }
}

/**
 * Stores a batch, its taken records, the counts and the moved high-water marks atomically, after taking its rate
 * tokens, or nothing at all. The marks are compared and set in the same statement (each row locked in key order):
 * if another instance moved one after it was read, the statement aborts and the caller judges again, so a mark
 * is exact across instances without holding locks while judging. The records follow by COPY, then the tokens are
 * taken (a look at them at the statement's start refuses a batch over the limit before it costs more).
 */
export function storeBatch(db: Db, args: StoreArgs): Promise<StoreResult> {
  return inTransaction(db, async (client) => {
    const open = await openReceiveDays(client, [args.batch.receiveDay]);
    const batch = stampedInto(args.batch, open.get(args.batch.receiveDay)!, args.now());
    const result = await runStoreStatement(client, { ...args, batch }, null);
    if (result.kind !== 'stored') return result;
    if (args.settled.rows.length > 0) {
      await copyFrom(client, COPY_RECORDS_SQL, [
        recordsCopyData([{ batchId: result.id, batch, settled: args.settled }]),
      ]);
    }
    const wait = await takeTokens(client, args.buckets, args.batch.receivedAt);
    // Spent since the look (another batch took them): nothing is stored.
    return wait > 0 ? { kind: 'rate_limited', wait } : result;
  });
}

/**
 * Records judged a part at a time while the previous part is being copied (storeBatchStreaming). A part (about
 * 150 kB of COPY data) fits in the embedded PostgreSQL's Unix socket buffer (about 200 kB by default), so it
 * leaves for the server at once while the next part is judged; parts of 2 000 records waited in the process for
 * the judging to yield, and the server sat idle (measured: 96 000 against 113 000 records/s, one sender).
 */
const STREAM_PART = 500;

/**
 * storeBatch for a large batch whose number was taken beforehand (`batchId`): its records are judged a part at a
 * time and each part is sent to a COPY at once, so PostgreSQL writes the first parts while the platform judges
 * the next; the batch row, marks and counts follow when all are judged, then the tokens, in one transaction as
 * in storeBatch. The marks are those the judgement reads (`readMarks`); gives the settled batch and its answer.
 */
export async function storeBatchStreaming(
  db: Db,
  args: {
    batchId: number;
    batch: Omit<NewBatch, 'answer'>;
    records: number;
    judge: (from: number, to: number) => Verdict[];
    readMarks: ReadonlyMap<string, number>;
    countedPlayIds?: CountedPlayIds;
    buckets: readonly Bucket[];
    legacy: boolean;
    answerOf: (settled: Settled) => PopAnswer;
    now: () => Date;
  },
): Promise<{ result: StoreResult; settled: Settled; answer: PopAnswer }> {
  const settler = new Settler(args.readMarks, args.countedPlayIds);
  let settled: Settled | null = null;
  let answer: PopAnswer | null = null;
  const result = await inTransaction(db, async (client) => {
    let stamped: Omit<NewBatch, 'answer'> | null = null;
    // The records are copied before the batch row: the day they go under is settled first. The receive-day
    // statement and the COPY go out together, and the first part is judged while the server answers them (the
    // judgement reads the receipt as it came, not the day the rows go under; one sender waits one round trip less).
    const opening = openReceiveDays(client, [args.batch.receiveDay]);
    opening.catch(() => {}); // awaited below, after the first part is judged
    const copy = new CopyStream(COPY_RECORDS_SQL);
    copy.start(client);
    try {
      const out = new BinaryCopyWriter(STREAM_PART * 320);
      for (let from = 0; from < args.records; from += STREAM_PART) {
        const rows = settler.add(args.judge(from, Math.min(args.records, from + STREAM_PART)));
        stamped ??= stampedInto(args.batch, (await opening).get(args.batch.receiveDay)!, args.now());
        writeRecordRows(out, args.batchId, stamped, rows);
        copy.push(out.drain(STREAM_PART * 320));
        // The socket takes the part, and other requests get their turn, while the server copies it.
        await new Promise((resolve) => setImmediate(resolve));
      }
      stamped ??= stampedInto(args.batch, (await opening).get(args.batch.receiveDay)!, args.now());
      copy.push(out.finish());
      copy.end();
    } catch (error) {
      copy.fail('the batch could not be judged');
      await copy.done.catch(() => {});
      throw error;
    }
    await copy.done;
    const batch = stamped;
    settled = settler.finish();
    answer = args.answerOf(settled);
    const stored = await runStoreStatement(
      client,
      {
        batch: { ...batch, answer },
        settled,
        readMarks: args.readMarks,
        buckets: args.buckets,
        legacy: args.legacy,
        now: args.now,
      },
      args.batchId,
    );
    if (stored.kind !== 'stored') return stored;
    const wait = await takeTokens(client, args.buckets, args.batch.receivedAt);
    return wait > 0 ? { kind: 'rate_limited', wait } : stored;
  });
  // The judgement of the records not reached (an error before the end) is not needed: the caller judges again.
  settled ??= settler.finish();
  answer ??= args.answerOf(settled);
  return { result, settled, answer };
}

/** The one order in which count rows are locked by every writer (no deadlock between instances). */
export function compareCountKeys(a: CountKey, b: CountKey): number {
  return a.sortKey < b.sortKey ? -1 : a.sortKey > b.sortKey ? 1 : 0;
}

/**
 * The taken records of stored batches as one COPY stream in binary format (pop_records' columns, in
 * RECORD_COLUMNS order). Binary: the server reads dates, instants and ids without parsing text.
 */
export function recordsCopyData(
  batches: readonly { batchId: number; batch: Pick<NewBatch, 'receiveDay' | 'attested'>; settled: Settled }[],
): Buffer {
  let rows = 0;
  for (const b of batches) rows += b.settled.rows.length;
  const out = new BinaryCopyWriter(rows * 320 + 64);
  for (const { batchId, batch, settled } of batches) writeRecordRows(out, batchId, batch, settled.rows);
  return out.finish();
}

function writeRecordRows(
  out: BinaryCopyWriter,
  batchId: number,
  batch: Pick<NewBatch, 'receiveDay' | 'attested'>,
  rows: readonly RecordRow[],
): void {
  for (const r of rows) {
    out.row(RECORD_FIELDS);
    out.date(batch.receiveDay);
    out.int64(batchId);
    out.int32(r.index);
    out.text(r.playerKey);
    out.uuid(r.structureId);
    out.text(r.kind);
    r.seq === null ? out.null() : out.int64(r.seq);
    out.date(r.day);
    r.approvalNumber === null ? out.null() : out.text(r.approvalNumber);
    r.slot === null ? out.null() : out.text(r.slot);
    r.mediaSha256 === null ? out.null() : out.text(r.mediaSha256);
    r.startAt === null ? out.null() : out.timestamp(r.startAt);
    r.endAt === null ? out.null() : out.timestamp(r.endAt);
    r.durationMs === null ? out.null() : out.int64(r.durationMs);
    r.at === null ? out.null() : out.timestamp(r.at);
    out.bool(batch.attested);
    out.textArray(r.flags);
    r.screenPower === null ? out.null() : out.text(r.screenPower);
    r.code === null ? out.null() : out.text(r.code);
    r.playId === null ? out.null() : out.text(r.playId);
    r.src === null ? out.null() : out.text(r.src);
    r.detail === null ? out.null() : out.text(r.detail);
  }
}

// One statement: a look at the rate tokens (without taking them: a batch over the limit costs no more than this
// statement), the batch, the counts and the marks (compare-and-set, in key order); then the records by COPY and
// the tokens taken (pop_take_tokens), all in one transaction. Nothing is written when the tokens are short or
// (owner, batch_seq) is taken.
const STORE_SQL = `
WITH rate AS (
  SELECT ${rateLook('$12', '$13', '$14', '$15', '$6')} AS wait
), batch AS (
  INSERT INTO pop_batches (id, owner, batch_seq, channel, body, body_sha256, received_at, receive_day, record_count,
                           answer, body_encoding, body_size, newest_record_at)
  SELECT coalesce($18::bigint, nextval(pg_get_serial_sequence('pop_batches', 'id'))), $1, $2, $3, $4, $5, $6, $7, $8, $9,
         $19, $20, $21
   WHERE (SELECT wait FROM rate) = 0
     AND NOT ($11 AND EXISTS (SELECT 1 FROM pop_batches x WHERE x.owner = $1 AND x.channel IN ('agent', 'cert')))
  ON CONFLICT (owner, batch_seq) DO NOTHING
  RETURNING id
), marks AS (
  INSERT INTO pop_players (player_key, high_water_seq, previous_seq, newest_play_start)
  SELECT m.k, m.s, m.e, m.t
    FROM batch, ROWS FROM (json_to_recordset($16::json) AS (k text, e bigint, s bigint, t timestamptz))
                WITH ORDINALITY AS m(k, e, s, t, n)
   ORDER BY m.n
  ON CONFLICT (player_key) DO UPDATE
     SET high_water_seq = EXCLUDED.high_water_seq, previous_seq = pop_players.high_water_seq,
         newest_play_start = greatest(pop_players.newest_play_start, EXCLUDED.newest_play_start)
   WHERE pop_players.high_water_seq = EXCLUDED.previous_seq
  RETURNING 1
), play_sets AS (
  -- The sets as split text ($24: sets split by ';', play_ids by ','), which PostgreSQL reads in about half the
  -- time of the same in JSON; with no set, an empty string is no row.
  INSERT INTO pop_play_sets (player_key, start_hour, batch_id, play_keys)
  SELECT ($22::text[])[p.n], ($23::int[])[p.n], batch.id,
         ARRAY(SELECT hashtextextended(x, 0) FROM string_to_table(p.i, ',') AS x)
    FROM batch, string_to_table(nullif($24::text, ''), ';') WITH ORDINALITY AS p(i, n)
), counted AS (
  INSERT INTO play_counts (player_key, structure_id, day, approval_number, slot, attested, plays, flagged)
  SELECT c.k, c.t, c.d, c.a, c.l, $10, c.p, c.f
    FROM batch, ROWS FROM (json_to_recordset($17::json)
                           AS (k text, t uuid, d date, a text, l text, p bigint, f bigint)) WITH ORDINALITY
                AS c(k, t, d, a, l, p, f, n)
   ORDER BY c.n
  ON CONFLICT (player_key, day, structure_id, approval_number, slot, attested)
  DO UPDATE SET plays = play_counts.plays + EXCLUDED.plays, flagged = play_counts.flagged + EXCLUDED.flagged
)
SELECT (SELECT wait FROM rate) AS wait,
       (SELECT id FROM batch) AS id,
       pop_check_marks(CASE WHEN EXISTS (SELECT 1 FROM batch) THEN json_array_length($16::json) ELSE 0 END,
                       (SELECT count(*) FROM marks)::int) AS marks_ok`;

// ---- reading (seals, open data, declared-vs-actual, the console) ----

export interface PlayCountRow {
  playerKey: string;
  structureId: string;
  /** Almaty day of the play's start, or of receipt when there is no start. */
  day: string;
  approvalNumber: string | null;
  slot: string | null;
  attested: boolean;
  plays: number;
  flagged: number;
}

export interface PlayCountFilter {
  from?: string;
  to?: string;
  structureIds?: readonly string[];
  approvalNumber?: string;
  playerKey?: string;
}

/** Counted plays per player, structure, day and approval (billable) or slot (counted apart). */
export async function playCounts(db: Db | DbClient, filter: PlayCountFilter = {}): Promise<PlayCountRow[]> {
  const { rows } = await db.query<{
    player_key: string;
    structure_id: string;
    day: string;
    approval_number: string | null;
    slot: string | null;
    attested: boolean;
    plays: number;
    flagged: number;
  }>(
    `SELECT player_key, structure_id, day::text AS day, approval_number, slot, attested, plays, flagged
       FROM play_counts
      WHERE ($1::date IS NULL OR day >= $1::date)
        AND ($2::date IS NULL OR day <= $2::date)
        AND ($3::uuid[] IS NULL OR structure_id = ANY($3::uuid[]))
        AND ($4::text IS NULL OR approval_number = $4)
        AND ($5::text IS NULL OR player_key = $5)
      ORDER BY day, player_key, structure_id, approval_number NULLS LAST, slot NULLS LAST, attested`,
    [
      filter.from ?? null,
      filter.to ?? null,
      filter.structureIds ?? null,
      filter.approvalNumber ?? null,
      filter.playerKey ?? null,
    ],
  );
  return rows.map((r) => ({
    playerKey: r.player_key,
    structureId: r.structure_id,
    day: r.day,
    approvalNumber: r.approval_number,
    slot: r.slot,
    attested: r.attested,
    plays: r.plays,
    flagged: r.flagged,
  }));
}

export interface PopEvent {
  batchId: number;
  index: number;
  kind: 'reject' | 'mode_change' | 'tamper';
  seq: number | null;
  at: string | null;
  code: string | null;
  detail: unknown;
  receiveDay: string;
}

/** The reject, mode_change and tamper events a player sent, oldest batch first. */
export async function popEvents(
  db: Db | DbClient,
  playerKey: string,
  filter: { kinds?: readonly string[]; fromReceiveDay?: string; toReceiveDay?: string } = {},
): Promise<PopEvent[]> {
  const { rows } = await db.query<{
    batch_id: number;
    record_index: number;
    kind: PopEvent['kind'];
    seq: number | null;
    at: Date | null;
    code: string | null;
    detail: unknown;
    receive_day: string;
  }>(
    `SELECT batch_id, record_index, kind, seq, at, code, detail, receive_day::text AS receive_day
       FROM pop_records
      WHERE player_key = $1 AND kind <> 'play'
        AND ($2::text[] IS NULL OR kind = ANY($2::text[]))
        AND ($3::date IS NULL OR receive_day >= $3::date)
        AND ($4::date IS NULL OR receive_day <= $4::date)
      ORDER BY batch_id, record_index`,
    [playerKey, filter.kinds ?? null, filter.fromReceiveDay ?? null, filter.toReceiveDay ?? null],
  );
  return rows.map((r) => ({
    batchId: r.batch_id,
    index: r.record_index,
    kind: r.kind,
    seq: r.seq,
    at: r.at?.toISOString() ?? null,
    code: r.code,
    detail: r.detail,
    receiveDay: r.receive_day,
  }));
}
