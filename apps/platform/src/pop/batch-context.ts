import type { PopAnswer } from '@ooh/protocol';
import type { Db, DbClient } from '../db/pool.js';
import { ApprovalCache, KEPT_STRUCTURES_PER_APPROVAL } from './approval-cache.js';
import type { ApprovalFacts, Player } from './judge.js';
import { type Bucket, rateLook, windowMinutesOf } from './rate-limits.js';

// What a batch is judged against, read before judging: the device or CMS installation, its keys, the batch already
// stored under its number, the players' marks, the approvals named, the play_ids counted before.

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
 * Everything the agent channels need to decide on a batch, for several batches in one query: per lookup the
 * device, its keys accepted at `now` (accepted_until NULL or later), the batch it may already have stored under
 * `batchSeq`, its high-water mark, and the approvals the batches name (read once for all of them: batches
 * arriving together mostly name the same approvals). The approvals' facts may come from `cache`, but only those of
 * the very version the query read (approval-cache.ts): a revocation takes effect on the next call, as if nothing
 * were kept. Results in the order of `lookups`; null for an unknown device.
 *
 * The query is the function pop_devices_for_telemetry (migration 081), which runs it on its generic plan, in one
 * round trip. For one or two devices (batches arriving spread out: the usual case of a city's players) its custom
 * plans look cheaper, so PostgreSQL planned it anew at every execution, about 0.6 ms of its CPU more than the round
 * trips cost; and custom plans chosen for small lookups kept it planning the larger ones too. For larger lookups,
 * which PostgreSQL may settle on a plan for itself, the generic plan costs about 0.1 ms more a query, shared by its
 * batches (docs/pop-ingestion.md, "Plans"). Before, a read-only transaction of its own gave it the setting, two
 * round trips more.
 */
export async function findDevicesForTelemetry(
  db: Db,
  lookups: readonly DeviceLookup[],
  cache: ApprovalCache = new ApprovalCache(),
): Promise<(DeviceForTelemetry | null)[]> {
  const numbers = new Set<string>();
  for (const lookup of lookups) for (const number of lookup.approvalNumbers) numbers.add(number);
  // Read in full: the approvals the cache holds nothing of. A kept one whose version moved is read again by a second
  // query (and a third reads every one in full, so that a change between each cannot keep it going).
  let inFull = cache.missing(numbers);
  for (let attempt = 1; ; attempt += 1) {
    // One statement: the devices and the approvals' versions are read in one snapshot. (A client whose connection
    // was lost is not taken back by the pool.)
    const client = await db.connect();
    const { rows } = await lookupQuery(client, lookups, [...numbers], inFull).finally(() => client.release());
    const named = rows.find((row) => row.approvals !== null)?.approvals ?? [];
    const approvals = new Map<string, ApprovalFacts>();
    const moved: string[] = [];
    for (const [number, version, read] of named) {
      if (read !== null) {
        const facts = factsFrom(number, read);
        approvals.set(number, facts);
        // One too wide to keep (read cut to the lookup's structures) goes, should it have been kept narrower.
        if (read[4]) cache.set(number, version, facts);
        else cache.remove(number);
        continue;
      }
      const kept = cache.get(number, version);
      if (kept === undefined) moved.push(number);
      else approvals.set(number, kept);
    }
    if (moved.length > 0) {
      inFull = attempt === 1 ? [...inFull, ...moved] : [...numbers];
      continue;
    }
    // Named and not found: not issued, or deleted since it was kept.
    if (rows.length > 0) for (const number of numbers) if (!approvals.has(number)) cache.remove(number);
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
}

/**
 * An approval as the lookup reads it in full: media, first and last day, revocation, whether `structure_ids` is every
 * structure it covers (true up to KEPT_STRUCTURES_PER_APPROVAL; beyond, only those of the batches' players).
 */
type ApprovalRead = [string, string, string, string | null, boolean, string[]];

function factsFrom(number: string, read: ApprovalRead): ApprovalFacts {
  return {
    number,
    mediaSha256: read[0],
    validFrom: read[1],
    validUntil: read[2],
    revokedAt: read[3] === null ? null : new Date(read[3]),
    structureIds: new Set(read[5]),
  };
}

function lookupQuery(
  client: DbClient,
  lookups: readonly DeviceLookup[],
  numbers: string[],
  inFull: string[],
) {
  return client.query<{
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
    /** Each approval named and issued: number, cache_version, and what it is when asked for in full. */
    approvals: [string, string, ApprovalRead | null][] | null;
  }>({
    // Named: parsed once per connection (the hot path of the agent channel).
    name: 'pop-devices-for-telemetry',
    text: `SELECT * FROM pop_devices_for_telemetry($1::uuid[], $2::bigint[], $3::timestamptz[], $4::text[], $5::text[],
                                                $6::int)`,
    values: [
      lookups.map((l) => l.deviceId),
      lookups.map((l) => l.batchSeq),
      lookups.map((l) => l.now),
      numbers,
      inFull,
      KEPT_STRUCTURES_PER_APPROVAL,
    ],
  });
}

export interface MappedPlayer extends Player {
  highWaterSeq: number;
  /** The newest start of the player's counted plays, epoch ms; null before the first. */
  newestPlayStart: number | null;
}

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
            ${rateLook('$7', '$8', '$9', '$10', '$11', '$3')} AS rate_wait,
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
      args.buckets.map(windowMinutesOf),
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
