import { createHash } from 'node:crypto';
import type { CampaignReport, ReportCell, ReportTotals, ReportZone } from '@ooh/protocol';
import { loadAuthority } from '../authority/index.js';
import { bandVerdict } from '../city-events/declared-vs-actual.js';
import { readBandPct } from '../city-events/repository.js';
import type { PlatformContext } from '../context.js';
import type { Db } from '../db/pool.js';
import { ProblemError } from '../http/problem.js';
import { notFound } from '../shared/ids.js';
import type { Viewer } from './access.js';
import {
  type LiveInterval,
  daysTouched,
  declaredMap,
  declaredOnDay,
  formatInstant,
  liveInterval,
} from './days.js';

/*
 * The proof-of-play report of one campaign (issue 17 item 4): a campaign is a submission with its approvals (spec:
 * "declared_daily_plays: plays per day per chosen structure"; an approval may narrow the period and the structures).
 * Plays are the counted plays (DESIGN.md section 5: "Flags (accepted and counted, listed in items)") whose approval
 * number is one of the campaign's; flagged ones are counted and shown apart; slot plays carry no approval number and
 * are never part of a campaign ("never billed, counted apart").
 */

export interface CampaignApproval {
  id: string;
  number: string;
  mediaSha256: string;
  validFrom: string;
  validUntil: string;
  issuedAt: Date;
  revokedAt: Date | null;
  manifestSha256: string | null;
  structureIds: string[];
}

export interface CampaignStructure {
  id: string;
  code: string;
  address: string | null;
  district: string;
  format: string;
  operatorId: string;
  operatorName: string;
}

export interface Campaign {
  submissionId: string;
  submissionNumber: string;
  organisationId: string;
  organisationName: string;
  advertiserName: string;
  advertiserBin: string | null;
  periodFrom: string | null;
  periodTo: string | null;
  categoryId: number | null;
  declared: Map<string, number>;
  approvals: CampaignApproval[];
  /** Structures the approvals cover, as far as the viewer may see them. */
  structures: Map<string, CampaignStructure>;
  /** `full`: the submitter and the authority; `own_structures`: an operator whose structures the campaign uses. */
  scope: 'full' | 'own_structures';
  /** An operator that sees only the plays on its own structures; null: all plays of the campaign. */
  onlyOperatorId: string | null;
}

const STRUCTURE_SQL = `SELECT st.id, st.code, st.address, st.district, st.format, st.organisation_id AS operator_id,
       o.name AS operator_name
  FROM structures st JOIN organisations o ON o.id = st.organisation_id`;

interface StructureRow {
  id: string;
  code: string;
  address: string | null;
  district: string;
  format: string;
  operator_id: string;
  operator_name: string;
}

const structureOf = (r: StructureRow): CampaignStructure => ({
  id: r.id,
  code: r.code,
  address: r.address,
  district: r.district,
  format: r.format,
  operatorId: r.operator_id,
  operatorName: r.operator_name,
});

/**
 * The campaign of a submission as `viewer` may see it. 404 not_found when it is not visible (whether or not it
 * exists: as GET /api/v1/submissions/{id}); 409 state_conflict for a submission of the viewer's that has no approval
 * yet (there is nothing to report on).
 */
export async function loadCampaign(db: Db, submissionId: string, viewer: Viewer): Promise<Campaign> {
  const { rows } = await db.query<{
    id: string;
    number: string;
    organisation_id: string;
    organisation_name: string;
    advertiser_name: string;
    advertiser_bin: string | null;
    period_from: string | null;
    period_to: string | null;
    category_id: number | null;
    declared_daily_plays: unknown;
  }>(
    `SELECT s.id, s.number, s.organisation_id, o.name AS organisation_name, s.advertiser_name, s.advertiser_bin,
            to_char(s.period_from, 'YYYY-MM-DD') AS period_from, to_char(s.period_to, 'YYYY-MM-DD') AS period_to,
            s.category_id, s.declared_daily_plays
       FROM submissions s JOIN organisations o ON o.id = s.organisation_id
      WHERE s.id = $1`,
    [submissionId],
  );
  const submission = rows[0];
  if (!submission) throw notFound('campaign', submissionId);
  const approvals = await db.query<{
    id: string;
    number: string;
    media_sha256: string;
    valid_from: string;
    valid_until: string;
    issued_at: Date;
    revoked_at: Date | null;
    manifest_sha256: string | null;
    structure_ids: string[];
  }>(
    `SELECT a.id, a.number, a.media_sha256, to_char(a.valid_from, 'YYYY-MM-DD') AS valid_from,
            to_char(a.valid_until, 'YYYY-MM-DD') AS valid_until, a.issued_at, a.revoked_at, a.manifest_sha256,
            ARRAY(SELECT aps.structure_id::text FROM approval_structures aps WHERE aps.approval_id = a.id
                   ORDER BY aps.structure_id) AS structure_ids
       FROM approvals a WHERE a.submission_id = $1 ORDER BY a.issued_at, a.number`,
    [submissionId],
  );
  const coveredIds = [...new Set(approvals.rows.flatMap((a) => a.structure_ids))];
  const covered = await db.query<StructureRow>(
    `${STRUCTURE_SQL} WHERE st.id = ANY($1::uuid[]) ORDER BY st.code`,
    [coveredIds],
  );
  const own = viewer.authority || submission.organisation_id === viewer.organisationId;
  const ownStructures = covered.rows.filter((s) => s.operator_id === viewer.organisationId);
  if (!own && !(viewer.operator && ownStructures.length > 0)) throw notFound('campaign', submissionId);
  if (approvals.rows.length === 0) {
    throw new ProblemError(
      'state_conflict',
      `submission ${submission.number} has no approval: there is no campaign to report on yet`,
    );
  }
  const shown = own ? covered.rows : ownStructures;
  const declared = declaredMap(submission.declared_daily_plays);
  if (!own)
    for (const key of [...declared.keys()]) if (!shown.some((s) => s.id === key)) declared.delete(key);
  return {
    submissionId: submission.id,
    submissionNumber: submission.number,
    organisationId: submission.organisation_id,
    organisationName: submission.organisation_name,
    advertiserName: submission.advertiser_name,
    advertiserBin: own ? submission.advertiser_bin : null,
    periodFrom: submission.period_from,
    periodTo: submission.period_to,
    categoryId: submission.category_id,
    declared,
    approvals: approvals.rows.map((a) => ({
      id: a.id,
      number: a.number,
      mediaSha256: a.media_sha256,
      validFrom: a.valid_from,
      validUntil: a.valid_until,
      issuedAt: a.issued_at,
      revokedAt: a.revoked_at,
      manifestSha256: a.manifest_sha256,
      structureIds: own ? a.structure_ids : a.structure_ids.filter((id) => shown.some((s) => s.id === id)),
    })),
    structures: new Map(shown.map((s) => [s.id, structureOf(s)])),
    scope: own ? 'full' : 'own_structures',
    onlyOperatorId: own ? null : viewer.organisationId,
  };
}

// ---- the report ---------------------------------------------------------------------------------------------

/* The answer (CampaignReport, ReportCell, ReportTotals) is @ooh/protocol's schemas/console.ts, the schema the route
 * serializes through and the console reads. */
export type { CampaignReport, ReportCell, ReportTotals };

interface RecordGroup {
  cell: boolean;
  by_hour: boolean;
  hour: string | null;
  flagged: string;
  structure_id: string | null;
  day: string | null;
  attested: boolean | null;
  flags: string[] | null;
  receive_day: string | null;
  plays: string;
}

/**
 * The campaign's play records, grouped three times in one pass: by structure, day (in the zone), source and flags; by
 * receive day (the seals that cover them); and by hour of the play's start (of its batch's receipt when it has none,
 * as its day), an epoch hour: Almaty's offset and UTC's are whole hours. Partition pruning keeps it to the months the plays can have been received
 * in: a play is received at most 300 s before its start and, to be counted, within 90 days after it (DESIGN.md
 * section 5), so its receive day lies in [day - 1, day + 92].
 */
const RECORDS_SQL = `
  SELECT GROUPING(x.receive_day, x.hour) = 3 AS cell, GROUPING(x.hour) = 0 AS by_hour, x.hour::text AS hour,
         x.structure_id, x.day, x.attested, x.flags,
         to_char(x.receive_day, 'YYYY-MM-DD') AS receive_day, count(*)::bigint AS plays,
         count(*) FILTER (WHERE cardinality(x.flags) > 0)::bigint AS flagged
    FROM (SELECT r.structure_id, r.attested, r.flags, r.receive_day,
                 floor(extract(epoch FROM coalesce(r.start_at,
                       (SELECT b.received_at FROM pop_batches b WHERE b.id = r.batch_id))) / 3600)::bigint AS hour,
                 CASE WHEN $3::boolean
                      THEN to_char((coalesce(r.start_at, (SELECT b.received_at FROM pop_batches b WHERE b.id = r.batch_id))
                                    AT TIME ZONE 'UTC')::date, 'YYYY-MM-DD')
                      ELSE to_char(r.day, 'YYYY-MM-DD') END AS day
            FROM pop_records r
           WHERE r.kind = 'play' AND r.approval_number = ANY($1::text[])
             AND ($2::uuid IS NULL OR r.structure_id IN (SELECT st.id FROM structures st WHERE st.organisation_id = $2))
             AND r.day BETWEEN $4::date AND $5::date
             AND r.receive_day BETWEEN $4::date - 1 AND $5::date + 92) x
   GROUP BY GROUPING SETS ((x.structure_id, x.day, x.attested, x.flags), (x.receive_day), (x.hour))`;

const emptyTotals = (): ReportTotals => ({
  plays: 0,
  flagged: 0,
  unflagged: 0,
  attested: 0,
  declared: 0,
  plays_compared: 0,
  deviation_pct: null,
  compared_days: 0,
  days_outside_band: 0,
});

function addCell(totals: ReportTotals, cell: ReportCell): void {
  totals.plays += cell.plays;
  totals.flagged += cell.flagged;
  totals.unflagged += cell.plays - cell.flagged;
  totals.attested += cell.attested;
  if (cell.compared && cell.declared !== null) {
    totals.declared += cell.declared;
    totals.plays_compared += cell.plays;
    totals.compared_days += 1;
    if (cell.outside_band) totals.days_outside_band += 1;
  }
}

function finish(totals: ReportTotals, bandPct: number): ReportTotals {
  totals.deviation_pct =
    totals.compared_days === 0
      ? null
      : bandVerdict(totals.declared, totals.plays_compared, bandPct).deviationPct;
  return totals;
}

/** Runs the report's heavy query a few at a time per process (it reads play records: see README "Cost"). */
export type Gate = <T>(work: () => Promise<T>) => Promise<T>;

/** The report of a campaign in the zone the reader chose, as the platform's data stand at `now`. */
export async function campaignReport(
  ctx: PlatformContext,
  campaign: Campaign,
  zone: ReportZone,
  viewer: Viewer,
  gate: Gate,
): Promise<CampaignReport> {
  const db = ctx.db;
  const now = ctx.clock.now();
  const numbers = campaign.approvals.map((a) => a.number);
  const visible = campaign.onlyOperatorId;
  const { bandPct } = await readBandPct(db);

  // The running counters (play_counts, written with every batch) say which days hold plays; the records then give
  // the hours, the flags and the receive days, and must add up to the same number.
  const counters = await db.query<{ first: string | null; last: string | null; plays: string }>(
    `SELECT to_char(min(day), 'YYYY-MM-DD') AS first, to_char(max(day), 'YYYY-MM-DD') AS last,
            coalesce(sum(plays), 0)::bigint AS plays
       FROM play_counts
      WHERE approval_number = ANY($1::text[])
        AND ($2::uuid IS NULL OR structure_id IN (SELECT st.id FROM structures st WHERE st.organisation_id = $2))`,
    [numbers, visible],
  );
  const counted = Number(counters.rows[0]?.plays ?? 0);
  const first = counters.rows[0]?.first ?? null;
  const last = counters.rows[0]?.last ?? null;
  const groups =
    first !== null && last !== null
      ? (
          await gate(() =>
            db.query<RecordGroup>(RECORDS_SQL, [numbers, visible, zone === 'UTC', first, last]),
          )
        ).rows
      : [];

  // Live intervals per structure: the approvals that cover it.
  const intervals = new Map<string, LiveInterval[]>();
  for (const a of campaign.approvals) {
    const live = liveInterval(a);
    if (!live) continue;
    for (const id of a.structureIds) {
      if (!campaign.structures.has(id)) continue;
      const list = intervals.get(id) ?? [];
      list.push(live);
      intervals.set(id, list);
    }
  }

  // Plays by structure and day.
  const plays = new Map<string, { plays: number; flagged: number; attested: number }>();
  const flagCounts = new Map<string, number>();
  const received = new Map<string, number>();
  let recorded = 0;
  const hours: { epochHour: number; entry: CampaignReport['hours'][number] }[] = [];
  for (const g of groups) {
    const n = Number(g.plays);
    if (g.by_hour) {
      const epochHour = Number(g.hour);
      const start = formatInstant(zone, new Date(epochHour * 3_600_000));
      hours.push({
        epochHour,
        entry: {
          start,
          day: start.slice(0, 10),
          hour: Number(start.slice(11, 13)),
          plays: n,
          flagged: Number(g.flagged),
        },
      });
      continue;
    }
    if (!g.cell) {
      if (g.receive_day !== null) received.set(g.receive_day, (received.get(g.receive_day) ?? 0) + n);
      continue;
    }
    recorded += n;
    const key = `${g.structure_id}|${g.day}`;
    const v = plays.get(key) ?? { plays: 0, flagged: 0, attested: 0 };
    v.plays += n;
    if ((g.flags ?? []).length > 0) v.flagged += n;
    if (g.attested) v.attested += n;
    plays.set(key, v);
    for (const flag of g.flags ?? []) flagCounts.set(flag, (flagCounts.get(flag) ?? 0) + n);
  }

  // Structures with plays that no approval covers (the plays are flagged approval_not_for_structure).
  const playedIds = [...new Set(groups.filter((g) => g.cell).map((g) => g.structure_id!))];
  const extra = playedIds.filter((id) => !campaign.structures.has(id));
  const extraRows =
    extra.length === 0
      ? []
      : (await db.query<StructureRow>(`${STRUCTURE_SQL} WHERE st.id = ANY($1::uuid[])`, [extra])).rows;
  const structures = new Map(campaign.structures);
  for (const r of extraRows) structures.set(r.id, structureOf(r));

  const allIntervals = [...intervals.values()].flat();
  const days = [
    ...new Set([...daysTouched(zone, allIntervals), ...groups.filter((g) => g.cell).map((g) => g.day!)]),
  ].sort();

  const cells: ReportCell[] = [];
  const orderedStructures = [...structures.values()].sort((a, b) =>
    a.code < b.code ? -1 : a.code > b.code ? 1 : 0,
  );
  for (const day of days) {
    for (const s of orderedStructures) {
      const { declared, liveHours, compared } = declaredOnDay(
        zone,
        day,
        intervals.get(s.id) ?? [],
        campaign.declared.get(s.id) ?? null,
        now,
      );
      const v = plays.get(`${s.id}|${day}`) ?? { plays: 0, flagged: 0, attested: 0 };
      if (liveHours === 0 && v.plays === 0) continue;
      const verdict = compared && declared !== null ? bandVerdict(declared, v.plays, bandPct) : null;
      cells.push({
        day,
        structure_id: s.id,
        live_hours: liveHours,
        declared,
        compared,
        plays: v.plays,
        flagged: v.flagged,
        attested: v.attested,
        deviation_pct: verdict?.deviationPct ?? null,
        outside_band: verdict?.outside ?? null,
      });
    }
  }

  const total = emptyTotals();
  const byDay = new Map<string, ReportTotals & { live_hours: number }>();
  const byStructure = new Map<string, ReportTotals>();
  for (const cell of cells) {
    addCell(total, cell);
    const d = byDay.get(cell.day) ?? { ...emptyTotals(), live_hours: 0 };
    addCell(d, cell);
    d.live_hours = Math.max(d.live_hours, cell.live_hours);
    byDay.set(cell.day, d);
    const s = byStructure.get(cell.structure_id) ?? emptyTotals();
    addCell(s, cell);
    byStructure.set(cell.structure_id, s);
  }

  const seals = await sealsOf(db, [...received.keys()].sort());
  const verifyUrl = ctx.config.publicUrls.verify.replace(/\/$/, '');
  const authority = await loadAuthority(ctx);

  return {
    report: {
      generated_at: formatInstant(zone, now),
      time_zone: zone,
      scope: campaign.scope,
      viewer_organisation: viewer.organisationName,
      band_pct: bandPct,
    },
    campaign: {
      submission_id: campaign.submissionId,
      submission_number: campaign.submissionNumber,
      advertiser_name: campaign.advertiserName,
      advertiser_bin: campaign.advertiserBin,
      submitted_by: campaign.organisationName,
      period_from: campaign.periodFrom,
      period_to: campaign.periodTo,
      category_id: campaign.categoryId,
    },
    approvals: campaign.approvals.map((a) => ({
      approval_number: a.number,
      media_sha256: a.mediaSha256,
      valid_from: a.validFrom,
      valid_until: a.validUntil,
      issued_at: formatInstant(zone, a.issuedAt),
      revoked_at: a.revokedAt ? formatInstant(zone, a.revokedAt) : null,
      manifest_sha256: a.manifestSha256,
      structure_ids: a.structureIds,
      ledger_url: `${verifyUrl}/v1/approvals/${encodeURIComponent(a.number)}`,
    })),
    structures: orderedStructures.map((s) => ({
      structure_id: s.id,
      code: s.code,
      address: s.address,
      district: s.district,
      format: s.format,
      operator: s.operatorName,
      declared_daily_plays: campaign.declared.get(s.id) ?? null,
      covered: intervals.has(s.id),
      totals: finish(byStructure.get(s.id) ?? emptyTotals(), bandPct),
    })),
    days: days.map((day) => {
      const d = byDay.get(day) ?? { ...emptyTotals(), live_hours: 0 };
      const { live_hours, ...rest } = d;
      return { day, live_hours, ...finish(rest, bandPct) };
    }),
    hours: hours.sort((a, b) => a.epochHour - b.epochHour).map((h) => h.entry),
    cells,
    totals: finish(total, bandPct),
    flags: [...flagCounts.entries()]
      .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
      .map(([flag, n]) => ({ flag, plays: n })),
    seals: seals.map(({ signedAt, ...s }) => ({
      ...s,
      signed_at: signedAt ? formatInstant(zone, signedAt) : null,
      plays: received.get(s.receive_day) ?? 0,
      url: `${verifyUrl}/v1/stats-seals/${s.receive_day}`,
    })),
    verification: {
      verify_url: verifyUrl,
      authority_root_url: `${verifyUrl}/v1/authority-root.pem`,
      authority_root_sha256: pemSha256(authority.rootPem),
      ledger_head_url: `${verifyUrl}/v1/ledger/head`,
    },
    consistency: { counted_plays: counted, recorded_plays: recorded, agree: counted === recorded },
  };
}

/** SHA-256 of a PEM certificate's DER: the fingerprint `openssl x509 -fingerprint -sha256` prints. */
function pemSha256(pem: string): string {
  const base64 = pem
    .replace(/-----(BEGIN|END) CERTIFICATE-----/g, '')
    .replace(/\s+/g, '')
    .trim();
  return createHash('sha256').update(Buffer.from(base64, 'base64')).digest('hex');
}

interface SealFacts {
  receive_day: string;
  sealed: boolean;
  signedAt: Date | null;
  body_sha256: string | null;
  root: string | null;
  batch_count: number | null;
  record_count: number | null;
  ledger: { day: string; status: string; block_height: number; digest: string } | null;
}

/** The seal of each receive day (Almaty days: a seal covers the batches received on its day), and its ledger block. */
async function sealsOf(db: Db, days: string[]): Promise<SealFacts[]> {
  if (days.length === 0) return [];
  const { rows } = await db.query<{
    day: string;
    signed_at: Date;
    body: Buffer;
    body_sha256: string;
    ledger_day: string | null;
    status: string | null;
    block_height: number | null;
    digest: string | null;
  }>(
    `SELECT to_char(s.day, 'YYYY-MM-DD') AS day, s.signed_at, s.body, s.body_sha256,
            to_char(k.day, 'YYYY-MM-DD') AS ledger_day, k.status, k.block_height, k.digest
       FROM stats_seals s
       LEFT JOIN ledger_block_leaves bl ON bl.leaf_id = s.ledger_leaf_id
       LEFT JOIN ledger_blocks k ON k.day = bl.day
      WHERE s.day = ANY($1::date[])`,
    [days],
  );
  const byDay = new Map(rows.map((r) => [r.day, r]));
  return days.map((day) => {
    const r = byDay.get(day);
    if (!r) {
      return {
        receive_day: day,
        sealed: false,
        signedAt: null,
        body_sha256: null,
        root: null,
        batch_count: null,
        record_count: null,
        ledger: null,
      };
    }
    const body = JSON.parse(r.body.toString('utf8')) as {
      root: string;
      batch_count: number;
      record_count: number;
    };
    return {
      receive_day: day,
      sealed: true,
      signedAt: r.signed_at,
      body_sha256: r.body_sha256,
      root: body.root,
      batch_count: body.batch_count,
      record_count: body.record_count,
      ledger:
        r.ledger_day && r.status && r.block_height !== null && r.digest
          ? { day: r.ledger_day, status: r.status, block_height: Number(r.block_height), digest: r.digest }
          : null,
    };
  });
}
