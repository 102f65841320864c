import {
  almatyDate,
  checkPopRecord,
  hasLoneSurrogate,
  LIMITS,
  type PopAnswerItem,
  type PopChannel,
  type PopRecord,
  parseDateTimeMs,
  parseSrc,
  type RecordFlag,
  type RefusalReason,
} from '@ooh/protocol';

/*
 * Per-record judgement (DESIGN.md section 5). Two steps:
 *  - judgeRecords: everything that needs no lock (schema, kind, player, times, duration, approval), giving each
 *    record a verdict as if it were new;
 *  - settle: inside the transaction that holds the players' rows, the high-water marks decide which records are
 *    duplicates ("Duplicates (seq at or below the player's high-water mark, within the batch too) are duplicate,
 *    not refused"), and the answer, the stored rows and the counts come out.
 */

/** Where a record was played: a device, or a CMS player through its mapping. */
export interface Player {
  /** 'device:<uuid>' or 'cms:<installation uuid>:<external id>'. */
  key: string;
  structureId: string;
  structureCode: string;
}

/** What the flags need to know of an issued approval. */
export interface ApprovalFacts {
  number: string;
  mediaSha256: string;
  /** Almaty dates, inclusive. */
  validFrom: string;
  validUntil: string;
  revokedAt: Date | null;
  /** Structures it covers; at least those of the batch's players that it covers (the reading query reads no more). */
  structureIds: ReadonlySet<string>;
}

export interface JudgeContext {
  channel: PopChannel;
  receivedAt: Date;
  /** spec CMS rule 3: plays from a CMS are "attested plays". */
  attested: boolean;
  /** The player of a record; null refuses it with player_unknown. */
  playerOf: (record: PopRecord) => Player | null;
  approval: (number: string) => ApprovalFacts | undefined;
}

/** A record as it will be stored (pop_records) when it is taken. */
export interface RecordRow {
  index: number;
  playerKey: string;
  structureId: string;
  kind: PopRecord['kind'];
  seq: number | null;
  /** Almaty day of the play's start (of `at` for other kinds), or of receipt when there is none. */
  day: string;
  approvalNumber: string | null;
  slot: string | null;
  mediaSha256: string | null;
  /** Instants as epoch milliseconds (RFC 3339 text is read to the millisecond). */
  startAt: number | null;
  endAt: number | null;
  durationMs: number | null;
  at: number | null;
  flags: RecordFlag[];
  screenPower: string | null;
  code: string | null;
  playId: string | null;
  /** JSON text of a well-formed attribution tag, or null. */
  src: string | null;
  /** JSON text of detail on reject, mode_change and tamper. */
  detail: string | null;
}

/** A record refused, or taken: then the verdict is the row itself (one object a record, 10 000 a CMS batch). */
export type Verdict =
  | { status: 'refused'; reason: RefusalReason; playerKey: string | null; seq: number | null }
  | (RecordRow & { status: 'taken' });

const FUTURE_TOLERANCE_MS = LIMITS.futureToleranceSeconds * 1000;
/** How far duration_ms and end - start may be apart before a play is flagged timing_mismatch (at least 1 %). */
const TIMING_TOLERANCE_MS = 1000;
const TOO_OLD_MS = LIMITS.tooOldDays * 24 * 3600 * 1000;

// Almaty has changed its offset only by whole hours since 1930, so the local date is the same for every instant of
// one UTC hour: one tz lookup per hour instead of per record (10 000 records a batch).
const HOUR_MS = 3600 * 1000;
const WHOLE_HOUR_OFFSETS_SINCE = Date.UTC(1930, 0, 1);
const dayByHour = new Map<number, string>();
/** The Asia/Almaty calendar day of an instant (DESIGN.md section 8). */
export function almatyDayOf(instant: Date): string {
  return almatyDayOfMs(instant.getTime());
}

/** almatyDayOf of an instant given in epoch milliseconds. */
export function almatyDayOfMs(ms: number): string {
  if (ms < WHOLE_HOUR_OFFSETS_SINCE) return almatyDate(new Date(ms));
  const hour = Math.floor(ms / HOUR_MS);
  let day = dayByHour.get(hour);
  if (day === undefined) {
    day = almatyDate(new Date(ms));
    if (dayByHour.size > 50_000) dayByHour.clear();
    dayByHour.set(hour, day);
  }
  return day;
}

/**
 * The instant (epoch milliseconds) of a date-time the record schema has already validated (checkPopRecord: RFC
 * 3339, a day that exists). parseDateTime reads the canonical UTC form players and CMSs send digit by digit.
 */
function instantOf(text: string): number {
  return parseDateTimeMs(text);
}

const NO_FLAGS: RecordFlag[] = [];

function refused(reason: RefusalReason, playerKey: string | null = null, seq: number | null = null): Verdict {
  return { status: 'refused', reason, playerKey, seq };
}

/**
 * A record refused for its shape (invalid_record, kind_not_allowed) that still names a valid seq and a known player:
 * like a record refused by any other rule, its number is read, so that settle() answers it `duplicate` when it is at
 * or below its player's mark (spec: duplicates are "Records at or below the highest number already taken for their
 * player"; DESIGN.md section 5: "Duplicates ... are duplicate, not refused") and takes it otherwise.
 */
function refusedForShape(reason: RefusalReason, value: unknown, ctx: JudgeContext): Verdict {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return refused(reason);
  const { seq, player } = value as { seq?: unknown; player?: unknown };
  if (typeof seq !== 'number' || !Number.isSafeInteger(seq) || seq < 1) return refused(reason);
  // The CMS names the player in the record (a string, mapped in the console); the agent channel's is the device.
  if (player !== undefined && typeof player !== 'string') return refused(reason);
  const known = ctx.playerOf({ player } as PopRecord);
  return known === null ? refused(reason) : refused(reason, known.key, seq);
}

/** The verdict of every record as if none were a duplicate. */
export function judgeRecords(
  records: readonly unknown[],
  ctx: JudgeContext,
  from = 0,
  to = records.length,
): Verdict[] {
  const received = ctx.receivedAt.getTime();
  const verdicts: Verdict[] = new Array(to - from);
  for (let index = from; index < to; index += 1) {
    verdicts[index - from] = judgeOne(records[index], index, ctx, received);
  }
  return verdicts;
}

function judgeOne(value: unknown, index: number, ctx: JudgeContext, received: number): Verdict {
  // invalid_record (schema), kind_not_allowed (spec CMS rule 2: "when its kind is not play").
  const check = checkPopRecord(value, ctx.channel);
  if (!check.ok) return refusedForShape(check.reason, value, ctx);
  const record = check.record;
  // The one free text of a record that is stored as text: PostgreSQL text cannot hold U+0000 and would store a lone
  // surrogate as U+FFFD, and such a number names no approval. Refused like any record of a bad shape, so that the
  // batch can be stored at all and nothing is counted under a number the player never sent.
  const approvalNumber = record.approval_number;
  if (
    approvalNumber !== undefined &&
    (approvalNumber.includes('\u0000') || hasLoneSurrogate(approvalNumber))
  ) {
    return refusedForShape('invalid_record', value, ctx);
  }
  // spec CMS rule 2: "when its player is not mapped or its mapping was removed (reason player_unknown)".
  const player = ctx.playerOf(record);
  if (!player) return refused('player_unknown');
  const seq = record.seq ?? null;

  const start = record.start === undefined ? null : instantOf(record.start);
  const end = record.end === undefined ? null : instantOf(record.end);
  const at = record.at === undefined ? null : instantOf(record.at);
  const latest = Math.max(start ?? -Infinity, end ?? -Infinity, at ?? -Infinity);
  const earliest = Math.min(start ?? Infinity, end ?? Infinity, at ?? Infinity);
  // DESIGN.md section 5: "time_in_future (start, end or at more than 300 s after receipt)".
  if (latest > received + FUTURE_TOLERANCE_MS) return refused('time_in_future', player.key, seq);
  // "too_old (more than 90 days before receipt)".
  if (earliest < received - TOO_OLD_MS) return refused('too_old', player.key, seq);
  const isPlay = record.kind === 'play';
  // spec: end "When the play ended; start is not after it".
  if (start !== null && end !== null && end < start) {
    return refused('end_before_start', player.key, seq);
  }
  // "too_short (duration_ms under 1000)"; spec Limits: "a play counts from duration_ms 1000", however its length is
  // given (issue "The spec to the letter, second pass", item 2): duration_ms, the time on screen, when it is there;
  // otherwise end - start.
  const interval = start !== null && end !== null ? end - start : null;
  const length = record.duration_ms ?? interval;
  if (isPlay && length !== null && length < LIMITS.playMinDurationMs) {
    return refused('too_short', player.key, seq);
  }
  // "approval_missing (a play with neither approval_number nor slot)".
  if (isPlay && record.approval_number === undefined && record.slot === undefined) {
    return refused('approval_missing', player.key, seq);
  }

  const day = almatyDayOfMs((isPlay ? start : at) ?? received);
  const flags = isPlay ? flagsOf(record, player, day, start ?? received, interval, ctx) : NO_FLAGS;
  const src = isPlay ? parseSrc(record.detail) : null;
  const slot = isPlay ? (record.slot ?? null) : null;
  return {
    status: 'taken',
    index,
    playerKey: player.key,
    structureId: player.structureId,
    kind: record.kind,
    seq,
    day,
    // spec slot: "no approval number, never billed, counted apart".
    approvalNumber: isPlay && slot === null ? (record.approval_number ?? null) : null,
    slot,
    mediaSha256: record.media_sha256 ?? null,
    startAt: start,
    endAt: end,
    durationMs: record.duration_ms ?? null,
    at,
    flags,
    // spec: screen is "Agent channel only": a CMS did not see the screen, so what it says of one is not kept.
    screenPower: ctx.channel === 'agent' ? (record.screen?.power ?? null) : null,
    code: record.code ?? null,
    playId: record.play_id ?? null,
    // spec: "A tag of another shape is ignored and the play counts all the same".
    src: src === null ? null : JSON.stringify(src),
    detail: !isPlay && record.detail !== undefined ? JSON.stringify(record.detail) : null,
  };
}

function withFlag(flags: RecordFlag[], flag: RecordFlag): RecordFlag[] {
  if (flags === NO_FLAGS) return [flag];
  flags.push(flag);
  return flags;
}

/** DESIGN.md section 5 "Flags (accepted and counted, listed in items)", in the order of RECORD_FLAGS. */
function flagsOf(
  record: PopRecord,
  player: Player,
  day: string,
  playedAt: number,
  interval: number | null,
  ctx: JudgeContext,
): RecordFlag[] {
  // Most plays carry no flag: the shared empty list saves an allocation per record.
  let flags: RecordFlag[] = NO_FLAGS;
  // spec structure: "Structure code the player believes it stands at; a different one is flagged".
  if (record.structure !== undefined && record.structure !== player.structureCode)
    flags = withFlag(flags, 'structure_mismatch');
  if (record.slot === undefined && record.approval_number !== undefined) {
    const approval = ctx.approval(record.approval_number);
    if (!approval) {
      flags = withFlag(flags, 'approval_unknown');
    } else {
      if (day < approval.validFrom || day > approval.validUntil)
        flags = withFlag(flags, 'approval_not_valid_on_day');
      if (!approval.structureIds.has(player.structureId))
        flags = withFlag(flags, 'approval_not_for_structure');
      if (approval.revokedAt !== null && approval.revokedAt.getTime() <= playedAt) {
        flags = withFlag(flags, 'approval_revoked');
      }
      // "media_mismatch (hash is not the approval's)".
      if (record.media_sha256 !== undefined && record.media_sha256 !== approval.mediaSha256) {
        flags = withFlag(flags, 'media_mismatch');
      }
    }
  }
  if (ctx.channel === 'agent' && record.screen?.power === 'off') flags = withFlag(flags, 'screen_off');
  // Both lengths given and far apart (more than a second, or 1 % of the longer): counted on duration_ms, the time on
  // screen, and shown (docs/decisions.md "A play's length").
  if (record.duration_ms !== undefined && interval !== null) {
    const apart = Math.abs(record.duration_ms - interval);
    if (apart > Math.max(TIMING_TOLERANCE_MS, Math.max(record.duration_ms, interval) / 100)) {
      flags = withFlag(flags, 'timing_mismatch');
    }
  }
  // "timing_missing (agent play with neither duration_ms nor start/end)": no length can be told, so none was judged
  // (too_short); a start without an end, or an end without a start, tells no length either.
  if (
    ctx.channel === 'agent' &&
    record.duration_ms === undefined &&
    (record.start === undefined || record.end === undefined)
  ) {
    flags = withFlag(flags, 'timing_missing');
  }
  return flags;
}

/** Players whose high-water marks a batch reads and may move: every player of a record that carries a seq. */
export function numberedPlayers(verdicts: readonly Verdict[]): string[] {
  const keys = new Set<string>();
  for (const v of verdicts) {
    if (v.seq !== null && v.playerKey !== null) keys.add(v.playerKey);
  }
  return [...keys].sort();
}

export interface CountKey {
  playerKey: string;
  structureId: string;
  day: string;
  approvalNumber: string | null;
  slot: string | null;
  /**
   * The key as one text (player, day, structure, approval, slot), the order in which every writer locks count
   * rows (compareCountKeys).
   */
  sortKey: string;
}

export interface Settled {
  received: number;
  accepted: number;
  duplicates: number;
  refused: number;
  flagged: number;
  items: PopAnswerItem[];
  rows: RecordRow[];
  /** Plays counted, per (player, structure, day, approval or slot). */
  counts: (CountKey & { plays: number; flagged: number })[];
  /** New high-water marks of the players whose mark moved. */
  highWater: Map<string, number>;
  /** The newest instant the taken rows carry (a play's end or start, an event's at), epoch ms; null: none. */
  newestRecordAt: number | null;
  /** Per player, the newest start of the plays counted (epoch ms): its newest_play_start moves to it. */
  newestPlayStarts: Map<string, number>;
  /** The play_ids counted, by player and hour of start (plays with a start and a play_id). */
  playSets: PlaySet[];
}

/** The play_ids already counted, by player key (those of a batch's plays, read with the marks). */
export type CountedPlayIds = ReadonlyMap<string, ReadonlySet<string>>;

const NONE_COUNTED: CountedPlayIds = new Map();

/**
 * Applies the high-water marks to the verdicts, in body order. A record's number is taken when the record is read
 * with a valid seq for a known player, whether it is then counted or refused by a rule; spec: "records at or
 * below the highest number already taken for their player are not counted again". A play whose play_id was
 * already counted for its player (`counted`, or earlier in the same batch) is refused play_id_counted.
 */
export function settle(
  verdicts: readonly Verdict[],
  marks: ReadonlyMap<string, number>,
  counted: CountedPlayIds = NONE_COUNTED,
): Settled {
  const settler = new Settler(marks, counted);
  settler.add(verdicts);
  return settler.finish();
}

/** Hours since 1970-01-01T00:00Z of an instant (epoch ms): the bucket of a play in pop_play_sets (migration 065). */
export const startHourOf = (ms: number): number => Math.floor(ms / 3_600_000);

/** The play_ids a batch counted for one player in one hour of play start (a row of pop_play_sets). */
export interface PlaySet {
  playerKey: string;
  hour: number;
  playIds: string[];
}

type Count = CountKey & { plays: number; flagged: number };

/** settle, verdicts given a part at a time (in body order); `add` gives the rows taken from each part. */
export class Settler {
  private readonly current: Map<string, number>;
  private readonly items: PopAnswerItem[] = [];
  private readonly rows: RecordRow[] = [];
  private readonly counts: Count[] = [];
  // Counts by player, day, then approval number (or NUL + slot). A player stands at one structure, so the
  // structure needs no level of its own; no text is built per record.
  private readonly byPlayer = new Map<string, Map<string, Map<string, Count>>>();
  private received = 0;
  private accepted = 0;
  private duplicates = 0;
  private refused = 0;
  private flagged = 0;
  private newestRecordAt: number | null = null;
  /** play_ids counted in this batch of plays without a start, by player (rare: a CMS play always has one). */
  private readonly countedWithoutStart = new Map<string, Set<string>>();
  /** Per player, the newest start of the plays counted so far in this batch. */
  private readonly newestPlayStarts = new Map<string, number>();
  /** Play sets by player, then hour. */
  private readonly playSets = new Map<string, Map<number, PlaySet>>();
  /** Of a play set, a Set of its play_ids so far, built when a play is first looked for in it. */
  private readonly setIndexes = new Map<PlaySet, { ids: Set<string>; indexed: number }>();

  constructor(
    private readonly marks: ReadonlyMap<string, number>,
    private readonly counted: CountedPlayIds = NONE_COUNTED,
  ) {
    this.current = new Map(marks);
  }

  /**
   * Whether the play_id of a play about to be counted was counted before: among the plays counted earlier
   * (`counted`) or earlier in this batch. In the batch it is looked for the way the store looks among the counted
   * plays (migration 065): a play that starts after every play of its player counted so far repeats none of them
   * (a resent play carries the start it had), which is nearly every play and costs no lookup; the others are looked
   * for in the play sets of their start's hour and the hours beside it.
   */
  private countedBefore(playerKey: string, playId: string, startAt: number | null): boolean {
    if (this.counted.get(playerKey)?.has(playId)) return true;
    if (startAt === null) {
      let here = this.countedWithoutStart.get(playerKey);
      if (!here) {
        here = new Set();
        this.countedWithoutStart.set(playerKey, here);
      }
      if (here.has(playId)) return true;
      here.add(playId);
      return false;
    }
    const newest = this.newestPlayStarts.get(playerKey);
    if (newest === undefined || startAt > newest) return false;
    const byHour = this.playSets.get(playerKey);
    if (!byHour) return false;
    const hour = startHourOf(startAt);
    for (let h = hour - 1; h <= hour + 1; h += 1) {
      const set = byHour.get(h);
      if (set && this.idsOf(set).has(playId)) return true;
    }
    return false;
  }

  /** The play_ids of a play set as a Set, brought up to date with what was added since it was last asked for. */
  private idsOf(set: PlaySet): Set<string> {
    let index = this.setIndexes.get(set);
    if (!index) {
      index = { ids: new Set(), indexed: 0 };
      this.setIndexes.set(set, index);
    }
    for (; index.indexed < set.playIds.length; index.indexed += 1) index.ids.add(set.playIds[index.indexed]!);
    return index.ids;
  }

  add(verdicts: readonly Verdict[]): RecordRow[] {
    const taken: RecordRow[] = [];
    const current = this.current;
    const items = this.items;
    const counts = this.counts;
    const byPlayer = this.byPlayer;
    let newest = this.newestRecordAt ?? Number.NEGATIVE_INFINITY;
    for (const v of verdicts) {
      // Position in the body: verdicts come in body order, a part after the other.
      const index = this.received;
      this.received += 1;
      const { playerKey, seq } = v;
      if (playerKey !== null && seq !== null) {
        const mark = current.get(playerKey) ?? 0;
        if (seq <= mark) {
          this.duplicates += 1;
          items.push({ index, status: 'duplicate' });
          continue;
        }
        current.set(playerKey, seq);
      }
      if (v.status === 'refused') {
        this.refused += 1;
        items.push({ index, status: 'refused', reason: v.reason });
        continue;
      }
      // spec: play_id is the "Identifier of the play, unique for the player": one play is counted once, whatever
      // seq it comes under (its number is taken all the same, like any refused record's).
      if (v.kind === 'play' && v.playId !== null && this.countedBefore(v.playerKey, v.playId, v.startAt)) {
        this.refused += 1;
        items.push({ index, status: 'refused', reason: 'play_id_counted' });
        continue;
      }
      this.accepted += 1;
      taken.push(v);
      if (v.endAt !== null && v.endAt > newest) newest = v.endAt;
      if (v.startAt !== null && v.startAt > newest) newest = v.startAt;
      if (v.at !== null && v.at > newest) newest = v.at;
      const isFlagged = v.flags.length > 0;
      if (isFlagged) {
        this.flagged += 1;
        items.push({ index, status: 'flagged', flags: v.flags });
      }
      if (v.kind === 'play' && v.startAt !== null) {
        const newest = this.newestPlayStarts.get(v.playerKey);
        if (newest === undefined || v.startAt > newest) this.newestPlayStarts.set(v.playerKey, v.startAt);
        if (v.playId !== null) this.playSetOf(v.playerKey, startHourOf(v.startAt)).playIds.push(v.playId);
      }
      if (v.kind === 'play') {
        let byDay = byPlayer.get(v.playerKey);
        if (!byDay) {
          byDay = new Map();
          byPlayer.set(v.playerKey, byDay);
        }
        let byLabel = byDay.get(v.day);
        if (!byLabel) {
          byLabel = new Map();
          byDay.set(v.day, byLabel);
        }
        const label = v.approvalNumber ?? `\u0000${v.slot}`;
        let count = byLabel.get(label);
        if (!count) {
          count = {
            playerKey: v.playerKey,
            structureId: v.structureId,
            day: v.day,
            approvalNumber: v.approvalNumber,
            slot: v.slot,
            sortKey: `${v.playerKey}\u0000${v.day}\u0000${v.structureId}\u0000${v.approvalNumber ?? ''}\u0000${v.slot ?? ''}`,
            plays: 0,
            flagged: 0,
          };
          byLabel.set(label, count);
          counts.push(count);
        }
        count.plays += 1;
        if (isFlagged) count.flagged += 1;
      }
    }
    if (newest !== Number.NEGATIVE_INFINITY) this.newestRecordAt = newest;
    for (const row of taken) this.rows.push(row);
    return taken;
  }

  private playSetOf(playerKey: string, hour: number): PlaySet {
    let byHour = this.playSets.get(playerKey);
    if (!byHour) {
      byHour = new Map();
      this.playSets.set(playerKey, byHour);
    }
    let set = byHour.get(hour);
    if (!set) {
      set = { playerKey, hour, playIds: [] };
      byHour.set(hour, set);
    }
    return set;
  }

  finish(): Settled {
    const current = this.current;
    const marks = this.marks;
    const moved = new Map<string, number>();
    for (const [key, seq] of current) if (seq !== (marks.get(key) ?? 0)) moved.set(key, seq);
    return {
      received: this.received,
      accepted: this.accepted,
      duplicates: this.duplicates,
      refused: this.refused,
      flagged: this.flagged,
      items: this.items,
      rows: this.rows,
      counts: this.counts,
      highWater: moved,
      newestRecordAt: this.newestRecordAt,
      newestPlayStarts: this.newestPlayStarts,
      playSets: [...this.playSets.values()].flatMap((byHour) => [...byHour.values()]),
    };
  }
}
