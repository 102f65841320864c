import {
  addDays,
  almatyDate,
  almatyDayEnd,
  almatyDayStart,
  formatAlmaty,
  isCalendarDate,
  type PlaysAnswer,
  type PlaysSeries,
} from '@ooh/protocol';
import type { Db } from '../db/pool.js';
import { validationFailed } from '../http/problem.js';
import { scopeOf, type Viewer } from './access.js';
import type { Gate } from './campaign.js';
import { type LiveInterval, daysFromTo, daySpan, declaredMap, declaredOnDay, liveInterval } from './days.js';

/*
 * Plays per Almaty day by structure and by campaign, against the declared plays (GET /api/v1/console/reports/plays):
 * the console's proof-of-play charts. Read from the running counters (play_counts: one row per player, structure,
 * day and approval or slot, written with every batch; index play_counts_day), so a quarter of a city's plays is a
 * few hundred thousand rows at most, never the play records.
 */

/** At most a quarter: one bar per day stays readable, and the answer stays small. */
export const MAX_RANGE_DAYS = 92;
/** Hours: at most 3 days (72 bars), read from the play records (see playsByHour). */
export const MAX_HOUR_RANGE_DAYS = 3;

export type PlaysBucket = PlaysAnswer['bucket'];

export interface PlaysQuery {
  bucket: PlaysBucket;
  from: string;
  to: string;
  structureId: string | null;
  submissionId: string | null;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * A calendar date the reports can count with: plays are later than 1970, and a range's arithmetic must never step
 * past year 9999 (`to=9999-12-31` once made the day after unwritable: a 500).
 */
function isDate(value: string): boolean {
  return isCalendarDate(value) && value >= '1970-01-01' && value <= '9000-12-31';
}

/**
 * bucket (`day`, the default, or `hour`), from and to (Almaty dates, both included, at most MAX_RANGE_DAYS days, or
 * MAX_HOUR_RANGE_DAYS for hours; default the last 14 days, or today for hours), structure_id and submission_id
 * (optional).
 */
export function parsePlaysQuery(query: Record<string, unknown>, today: Date): PlaysQuery {
  const errors: { path: string; code: string; message: string }[] = [];
  const text = (name: string): string | null => {
    const v = query[name];
    if (v === undefined) return null;
    if (typeof v !== 'string') {
      errors.push({ path: `querystring:/${name}`, code: 'type', message: 'given once' });
      return null;
    }
    return v;
  };
  for (const key of Object.keys(query)) {
    if (!['bucket', 'from', 'to', 'structure_id', 'submission_id'].includes(key))
      errors.push({ path: `querystring:/${key}`, code: 'unknown_key', message: `unknown parameter ${key}` });
  }
  const bucketText = text('bucket');
  let bucket: PlaysBucket = 'day';
  if (bucketText === 'hour') bucket = 'hour';
  else if (bucketText !== null && bucketText !== 'day')
    errors.push({ path: 'querystring:/bucket', code: 'not_allowed', message: 'day or hour' });
  const maxDays = bucket === 'hour' ? MAX_HOUR_RANGE_DAYS : MAX_RANGE_DAYS;
  const to = text('to') ?? almatyDate(today);
  // Without a from, the period ends at to: only a from that was given can be wrong.
  const from = text('from') ?? (isDate(to) ? addDays(to, bucket === 'hour' ? 0 : -13) : null);
  if (from !== null && !isDate(from))
    errors.push({
      path: 'querystring:/from',
      code: 'format',
      message: 'a date YYYY-MM-DD from 1970 to 9000',
    });
  if (!isDate(to))
    errors.push({ path: 'querystring:/to', code: 'format', message: 'a date YYYY-MM-DD from 1970 to 9000' });
  if (from !== null && isDate(from) && isDate(to)) {
    if (from > to)
      errors.push({ path: 'querystring:/to', code: 'not_allowed', message: 'to is before from' });
    else if (daySpan(from, to) > maxDays)
      errors.push({
        path: 'querystring:/to',
        code: 'not_allowed',
        message: `at most ${maxDays} days from from${bucket === 'hour' ? ' with bucket=hour' : ''}`,
      });
  }
  const uuid = (name: string): string | null => {
    const v = text(name);
    if (v === null || v === '') return null;
    if (!UUID.test(v)) {
      errors.push({ path: `querystring:/${name}`, code: 'format', message: 'a uuid' });
      return null;
    }
    return v.toLowerCase();
  };
  const structureId = uuid('structure_id');
  const submissionId = uuid('submission_id');
  if (errors.length > 0) throw validationFailed(errors);
  // from is null only when to is not a date, which is an error above.
  return { bucket, from: from ?? to, to, structureId, submissionId };
}

/* The answer (PlaysAnswer, PlaysSeries) is @ooh/protocol's schemas/console.ts. */
export type { PlaysAnswer, PlaysSeries };

const zeros = (n: number) => Array.from({ length: n }, () => 0);
const series = (n: number): PlaysSeries => ({
  plays: zeros(n),
  flagged: zeros(n),
  attested: zeros(n),
  declared: Array.from({ length: n }, () => null),
});

/**
 * A campaign ($3: the viewer's organisation, null for the authority) the viewer may see, as the campaign list and
 * report decide it (list.ts, campaign.ts loadCampaign): the authority every one, an organisation its own, an operator
 * also one whose approvals cover one of its structures. A play names its approval number itself, and approval
 * numbers are public (GET {verify_url}/v1/approvals/{number}): an operator's device playing, or claiming to play,
 * another organisation's creative on a structure the campaign does not cover must not open that campaign's
 * submission, number and advertiser to the operator. Such a play counts as one under an approval the viewer does not
 * know, as a number never issued does: telling them apart would tell which numbers were issued to whom.
 */
const CAMPAIGN_VISIBLE = `($3::uuid IS NULL OR sub.organisation_id = $3
     OR EXISTS (SELECT 1 FROM approvals va JOIN approval_structures vas ON vas.approval_id = va.id
                  JOIN structures vst ON vst.id = vas.structure_id
                 WHERE va.submission_id = sub.id AND vst.organisation_id = $3))`;

/**
 * A row is visible to the authority; to the operator that owns its structure; to the organisation whose submission
 * its approval belongs to. Slot plays and plays under unknown approval numbers belong to no submission: the
 * authority and the structure's operator see them; so do plays under the approval of a campaign the viewer may not
 * see (CAMPAIGN_VISIBLE).
 */
export async function playsReport(
  db: Db,
  viewer: Viewer,
  q: PlaysQuery,
  now: Date,
  gate: Gate,
): Promise<PlaysAnswer> {
  const daily = await playsPerDay(db, viewer, q, now);
  return q.bucket === 'hour' ? playsByHour(db, viewer, q, daily, gate) : daily;
}

async function playsPerDay(db: Db, viewer: Viewer, q: PlaysQuery, now: Date): Promise<PlaysAnswer> {
  const org = scopeOf(viewer);
  const days = daysFromTo(q.from, q.to);
  const index = new Map(days.map((d, i) => [d, i]));
  const [counts, live] = await Promise.all([
    db.query<{
      structure_id: string;
      code: string;
      day: string;
      submission_id: string | null;
      submission_number: string | null;
      advertiser_name: string | null;
      slot: 'gov' | 'emergency' | null;
      plays: string;
      flagged: string;
      attested: string;
    }>(
      `SELECT pc.structure_id, st.code, to_char(pc.day, 'YYYY-MM-DD') AS day, sub.id AS submission_id,
              sub.number AS submission_number, sub.advertiser_name, pc.slot,
              sum(pc.plays)::bigint AS plays, sum(pc.flagged)::bigint AS flagged,
              coalesce(sum(pc.plays) FILTER (WHERE pc.attested), 0)::bigint AS attested
         FROM play_counts pc
         JOIN structures st ON st.id = pc.structure_id
         LEFT JOIN approvals a ON pc.approval_number IS NOT NULL AND a.number = pc.approval_number
         LEFT JOIN submissions sub ON sub.id = a.submission_id AND ${CAMPAIGN_VISIBLE}
        WHERE pc.day BETWEEN $1::date AND $2::date
          AND ($3::uuid IS NULL OR st.organisation_id = $3 OR sub.organisation_id = $3)
          AND ($4::uuid IS NULL OR pc.structure_id = $4)
          AND ($5::uuid IS NULL OR sub.id = $5)
        GROUP BY pc.structure_id, st.code, pc.day, sub.id, sub.number, sub.advertiser_name, pc.slot`,
      [q.from, q.to, org, q.structureId, q.submissionId],
    ),
    db.query<{
      submission_id: string;
      submission_number: string;
      advertiser_name: string;
      declared_daily_plays: unknown;
      valid_from: string;
      valid_until: string;
      revoked_at: Date | null;
      structure_id: string;
      code: string;
    }>(
      // Approvals live in the range, per covered structure the viewer may see.
      `SELECT sub.id AS submission_id, sub.number AS submission_number, sub.advertiser_name, sub.declared_daily_plays,
              to_char(a.valid_from, 'YYYY-MM-DD') AS valid_from, to_char(a.valid_until, 'YYYY-MM-DD') AS valid_until,
              a.revoked_at, st.id AS structure_id, st.code
         FROM approvals a
         JOIN submissions sub ON sub.id = a.submission_id
         JOIN approval_structures aps ON aps.approval_id = a.id
         JOIN structures st ON st.id = aps.structure_id
        WHERE a.valid_from <= $2::date AND a.valid_until >= $1::date
          AND ($3::uuid IS NULL OR st.organisation_id = $3 OR sub.organisation_id = $3)
          AND ($4::uuid IS NULL OR st.id = $4)
          AND ($5::uuid IS NULL OR sub.id = $5)`,
      [q.from, q.to, org, q.structureId, q.submissionId],
    ),
  ]);

  const structures = new Map<string, { structure_id: string; code: string; slot: number[] } & PlaysSeries>();
  const structureOf = (id: string, code: string) => {
    let s = structures.get(id);
    if (!s) {
      s = { structure_id: id, code, slot: zeros(days.length), ...series(days.length) };
      structures.set(id, s);
    }
    return s;
  };
  const campaigns = new Map<string, PlaysAnswer['campaigns'][number]>();
  const campaignOf = (id: string, number: string, advertiser: string) => {
    let c = campaigns.get(id);
    if (!c) {
      c = {
        submission_id: id,
        submission_number: number,
        advertiser_name: advertiser,
        totals: { plays: 0, flagged: 0, declared: 0, plays_compared: 0 },
        ...series(days.length),
      };
      campaigns.set(id, c);
    }
    return c;
  };
  const unknown = { plays: zeros(days.length), flagged: zeros(days.length) };
  const slots = { gov: zeros(days.length), emergency: zeros(days.length) };
  const totals = { plays: 0, flagged: 0, attested: 0, slot: 0, declared: 0, plays_compared: 0 };
  // Plays of a campaign on a structure on a day (by day index): what its declared plays are compared with.
  const cellPlays = new Map<string, number>();

  for (const r of counts.rows) {
    const i = index.get(r.day);
    if (i === undefined) continue;
    const plays = Number(r.plays);
    const flagged = Number(r.flagged);
    const attested = Number(r.attested);
    const s = structureOf(r.structure_id, r.code);
    if (r.slot !== null) {
      s.slot[i]! += plays;
      slots[r.slot][i]! += plays;
      totals.slot += plays;
      continue;
    }
    s.plays[i]! += plays;
    s.flagged[i]! += flagged;
    s.attested[i]! += attested;
    totals.plays += plays;
    totals.flagged += flagged;
    totals.attested += attested;
    if (r.submission_id === null) {
      unknown.plays[i]! += plays;
      unknown.flagged[i]! += flagged;
      continue;
    }
    const c = campaignOf(r.submission_id, r.submission_number!, r.advertiser_name!);
    const cell = `${r.submission_id}|${r.structure_id}|${i}`;
    cellPlays.set(cell, (cellPlays.get(cell) ?? 0) + plays);
    c.plays[i]! += plays;
    c.flagged[i]! += flagged;
    c.attested[i]! += attested;
    c.totals.plays += plays;
    c.totals.flagged += flagged;
  }

  // Declared plays: per campaign and structure, on the days the campaign was live all day (as declared_vs_actual).
  const intervals = new Map<string, { declared: number | null; intervals: LiveInterval[]; code: string }>();
  for (const r of live.rows) {
    const key = `${r.submission_id}|${r.structure_id}`;
    const entry = intervals.get(key) ?? {
      declared: declaredMap(r.declared_daily_plays).get(r.structure_id) ?? null,
      intervals: [],
      code: r.code,
    };
    const interval = liveInterval({
      validFrom: r.valid_from,
      validUntil: r.valid_until,
      revokedAt: r.revoked_at,
    });
    if (interval) entry.intervals.push(interval);
    intervals.set(key, entry);
    campaignOf(r.submission_id, r.submission_number, r.advertiser_name);
  }
  for (const [key, entry] of intervals) {
    if (entry.declared === null) continue;
    const [submissionId, structureId] = key.split('|') as [string, string];
    const c = campaigns.get(submissionId)!;
    const s = structureOf(structureId, entry.code);
    days.forEach((day, i) => {
      const { declared, compared } = declaredOnDay('Asia/Almaty', day, entry.intervals, entry.declared, now);
      if (declared === null) return;
      c.declared[i] = (c.declared[i] ?? 0) + declared;
      s.declared[i] = (s.declared[i] ?? 0) + declared;
      if (!compared) return;
      const played = cellPlays.get(`${submissionId}|${structureId}|${i}`) ?? 0;
      totals.declared += declared;
      totals.plays_compared += played;
      c.totals.declared += declared;
      c.totals.plays_compared += played;
    });
  }
  const byCode = (a: { code: string }, b: { code: string }) =>
    a.code < b.code ? -1 : a.code > b.code ? 1 : 0;
  return {
    bucket: 'day',
    from: q.from,
    to: q.to,
    time_zone: 'Asia/Almaty',
    days,
    totals,
    structures: [...structures.values()].sort(byCode),
    campaigns: [...campaigns.values()].sort((a, b) =>
      a.submission_number < b.submission_number ? -1 : a.submission_number > b.submission_number ? 1 : 0,
    ),
    unknown_approvals: unknown,
    slots,
  };
}

/**
 * The play records per Almaty hour, scoped exactly as the counters are (the same joins and conditions as playsPerDay,
 * on pop_records instead of play_counts). A play's hour is that of its start, or of its batch's receipt when it has
 * none, as its day is (pop_records.day, which bounds the rows to the range). Almaty's offset is a whole number of
 * hours, so an hour is one epoch hour.
 *
 * Cost: play_counts holds days only, and pop_records has no index by play time or structure (an index entry per
 * record on the write path was measured too dear: docs/decisions.md), so this reads the month partitions the range's
 * plays can have been received in (receive day from `from` - 1 to `to` + 92, DESIGN.md section 5, as the campaign
 * report does) and runs through the same gate as the campaign report: two at once per process, four waiting, more
 * 503. With at most 3 days, the months are at most two of the current ones for a recent range.
 */
const HOURLY_SQL = `
  SELECT r.structure_id, st.code,
         floor(extract(epoch FROM coalesce(r.start_at,
               (SELECT b.received_at FROM pop_batches b WHERE b.id = r.batch_id))) / 3600)::bigint AS hour,
         sub.id AS submission_id, sub.number AS submission_number, sub.advertiser_name, r.slot,
         count(*)::bigint AS plays, count(*) FILTER (WHERE cardinality(r.flags) > 0)::bigint AS flagged,
         count(*) FILTER (WHERE r.attested)::bigint AS attested
    FROM pop_records r
    JOIN structures st ON st.id = r.structure_id
    LEFT JOIN approvals a ON r.approval_number IS NOT NULL AND a.number = r.approval_number
    LEFT JOIN submissions sub ON sub.id = a.submission_id AND ${CAMPAIGN_VISIBLE}
   WHERE r.kind = 'play'
     AND r.day BETWEEN $1::date AND $2::date
     AND r.receive_day BETWEEN $1::date - 1 AND $2::date + 92
     AND ($3::uuid IS NULL OR st.organisation_id = $3 OR sub.organisation_id = $3)
     AND ($4::uuid IS NULL OR r.structure_id = $4)
     AND ($5::uuid IS NULL OR sub.id = $5)
   GROUP BY 1, 2, 3, 4, 5, 6, 7`;

const HOUR_MS = 3_600_000;

/** The first instant of every Almaty hour from the start of `from` to the end of `to`. */
export function almatyHours(from: string, to: string): Date[] {
  const out: Date[] = [];
  const end = almatyDayEnd(to).getTime();
  for (let t = almatyDayStart(from).getTime(); t < end; t += HOUR_MS) out.push(new Date(t));
  return out;
}

async function playsByHour(
  db: Db,
  viewer: Viewer,
  q: PlaysQuery,
  daily: PlaysAnswer,
  gate: Gate,
): Promise<PlaysAnswer> {
  const hours = almatyHours(q.from, q.to);
  const n = hours.length;
  const first = hours[0]!.getTime() / HOUR_MS;
  const rows = (
    await gate(() =>
      db.query<{
        structure_id: string;
        code: string;
        hour: string;
        submission_id: string | null;
        submission_number: string | null;
        advertiser_name: string | null;
        slot: 'gov' | 'emergency' | null;
        plays: string;
        flagged: string;
        attested: string;
      }>(HOURLY_SQL, [q.from, q.to, scopeOf(viewer), q.structureId, q.submissionId]),
    )
  ).rows;
  const hourly = (): PlaysSeries => series(n);
  // The same structures and campaigns as the daily answer (its totals stay), with their series per hour.
  const structures = new Map(
    daily.structures.map((s) => [
      s.structure_id,
      { structure_id: s.structure_id, code: s.code, slot: zeros(n), ...hourly() },
    ]),
  );
  const campaigns = new Map(
    daily.campaigns.map((c) => [
      c.submission_id,
      {
        submission_id: c.submission_id,
        submission_number: c.submission_number,
        advertiser_name: c.advertiser_name,
        totals: c.totals,
        ...hourly(),
      },
    ]),
  );
  const unknown = { plays: zeros(n), flagged: zeros(n) };
  const slots = { gov: zeros(n), emergency: zeros(n) };
  for (const r of rows) {
    const i = Number(r.hour) - first;
    if (!(i >= 0 && i < n)) continue;
    const plays = Number(r.plays);
    const flagged = Number(r.flagged);
    const attested = Number(r.attested);
    let s = structures.get(r.structure_id);
    if (!s) {
      // Counted after the daily answer was read: shown, though the totals do not hold it yet.
      s = { structure_id: r.structure_id, code: r.code, slot: zeros(n), ...hourly() };
      structures.set(r.structure_id, s);
    }
    if (r.slot !== null) {
      s.slot[i]! += plays;
      slots[r.slot][i]! += plays;
      continue;
    }
    s.plays[i]! += plays;
    s.flagged[i]! += flagged;
    s.attested[i]! += attested;
    if (r.submission_id === null) {
      unknown.plays[i]! += plays;
      unknown.flagged[i]! += flagged;
      continue;
    }
    let c = campaigns.get(r.submission_id);
    if (!c) {
      c = {
        submission_id: r.submission_id,
        submission_number: r.submission_number!,
        advertiser_name: r.advertiser_name!,
        totals: { plays: 0, flagged: 0, declared: 0, plays_compared: 0 },
        ...hourly(),
      };
      campaigns.set(r.submission_id, c);
    }
    c.plays[i]! += plays;
    c.flagged[i]! += flagged;
    c.attested[i]! += attested;
  }
  const byCode = (a: { code: string }, b: { code: string }) =>
    a.code < b.code ? -1 : a.code > b.code ? 1 : 0;
  return {
    ...daily,
    bucket: 'hour',
    hours: hours.map((h) => formatAlmaty(h)),
    structures: [...structures.values()].sort(byCode),
    campaigns: [...campaigns.values()].sort((a, b) =>
      a.submission_number < b.submission_number ? -1 : a.submission_number > b.submission_number ? 1 : 0,
    ),
    unknown_approvals: unknown,
    slots,
  };
}
