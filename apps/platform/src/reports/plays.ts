import { almatyDate } from '@ooh/protocol';
import type { Db } from '../db/pool.js';
import { validationFailed } from '../http/problem.js';
import { scopeOf, type Viewer } from './access.js';
import { type LiveInterval, daysFromTo, declaredMap, declaredOnDay, liveInterval } from './days.js';

/*
 * Plays per Almaty day by structure and by campaign, against the declared plays (GET /api/v1/console/reports/plays):
 * the console's proof-of-play charts. Read from the running counters (play_counts: one row per player, structure,
 * day and approval or slot, written with every batch; index play_counts_day), so a quarter of a city's plays is a
 * few hundred thousand rows at most, never the play records.
 */

/** At most a quarter: one bar per day stays readable, and the answer stays small. */
export const MAX_RANGE_DAYS = 92;

export interface PlaysQuery {
  from: string;
  to: string;
  structureId: string | null;
  submissionId: string | null;
}

const DATE = /^(?!0000)\d{4}-\d{2}-\d{2}$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function isDate(value: string): boolean {
  if (!DATE.test(value)) return false;
  const d = new Date(`${value}T00:00:00Z`);
  return !Number.isNaN(d.getTime()) && d.toISOString().slice(0, 10) === value;
}

/** from and to (Almaty dates, both included, at most MAX_RANGE_DAYS), structure_id and submission_id (optional). */
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
    if (!['from', 'to', 'structure_id', 'submission_id'].includes(key))
      errors.push({ path: `querystring:/${key}`, code: 'unknown_key', message: `unknown parameter ${key}` });
  }
  const to = text('to') ?? almatyDate(today);
  const from = text('from') ?? addDaysUtc(to, -13);
  if (!isDate(from)) errors.push({ path: 'querystring:/from', code: 'format', message: 'a date YYYY-MM-DD' });
  if (!isDate(to)) errors.push({ path: 'querystring:/to', code: 'format', message: 'a date YYYY-MM-DD' });
  if (isDate(from) && isDate(to)) {
    if (from > to)
      errors.push({ path: 'querystring:/to', code: 'not_allowed', message: 'to is before from' });
    else if (daysFromTo(from, to).length > MAX_RANGE_DAYS)
      errors.push({
        path: 'querystring:/to',
        code: 'not_allowed',
        message: `at most ${MAX_RANGE_DAYS} days from from`,
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
  return { from, to, structureId, submissionId };
}

function addDaysUtc(day: string, days: number): string {
  if (!isDate(day)) return day;
  return new Date(new Date(`${day}T00:00:00Z`).getTime() + days * 86_400_000).toISOString().slice(0, 10);
}

export interface PlaysSeries {
  plays: number[];
  flagged: number[];
  attested: number[];
  /** Declared plays of the day where a campaign was live the whole day (also today and later, for reference); null
   * where none was. Totals compare only days that are over. */
  declared: (number | null)[];
}

export interface PlaysAnswer {
  from: string;
  to: string;
  time_zone: 'Asia/Almaty';
  days: string[];
  /** declared and plays_compared: over the days that are over (as the campaign report compares them). */
  totals: {
    plays: number;
    flagged: number;
    attested: number;
    slot: number;
    declared: number;
    plays_compared: number;
  };
  structures: ({ structure_id: string; code: string; slot: number[] } & PlaysSeries)[];
  campaigns: ({
    submission_id: string;
    submission_number: string;
    advertiser_name: string;
    /** Over the range; declared and plays_compared over the days that are over. */
    totals: { plays: number; flagged: number; declared: number; plays_compared: number };
  } & PlaysSeries)[];
  /** Plays under approval numbers the platform never issued (flagged approval_unknown). */
  unknown_approvals: { plays: number[]; flagged: number[] };
  /** Authority content (slot gov / emergency): counted apart, never billed. */
  slots: { gov: number[]; emergency: number[] };
}

const zeros = (n: number) => Array.from({ length: n }, () => 0);
const series = (n: number): PlaysSeries => ({
  plays: zeros(n),
  flagged: zeros(n),
  attested: zeros(n),
  declared: Array.from({ length: n }, () => null),
});

/**
 * A row is visible to the authority; to the operator that owns its structure; to the organisation whose submission
 * its approval belongs to. Slot plays and plays under unknown approval numbers belong to no submission: the
 * authority and the structure's operator see them.
 */
export async function playsReport(db: Db, viewer: Viewer, q: PlaysQuery, now: Date): Promise<PlaysAnswer> {
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
         LEFT JOIN submissions sub ON sub.id = a.submission_id
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
