import { randomUUID } from 'node:crypto';
import { almatyDate } from '@ooh/protocol';
import type { Db } from '../../src/db/pool.js';
import { isWithheld, type MarginTable } from '../../src/open-data/disclosure.js';

/*
 * Seeding for the open-data and city-event tests: organisations, structures, approved submissions and counted plays
 * are written with SQL, so the tests do not depend on the ingestion or approval routes (built by others).
 */

const NOW = new Date('2026-11-20T06:00:00Z');
let serial = 0;
const nextSerial = () => {
  serial += 1;
  return String(serial).padStart(6, '0');
};

export async function seedOrganisation(db: Db, kind: 'operator' | 'advertiser' | 'agency', name?: string) {
  const { rows } = await db.query<{ id: string }>(
    'INSERT INTO organisations (name, kind, created_at) VALUES ($1, $2, $3) RETURNING id',
    [name ?? `${kind} ${nextSerial()}`, kind, NOW],
  );
  return rows[0]!.id;
}

export async function seedStructure(db: Db, operatorId: string, district: string, format: string) {
  const { rows } = await db.query<{ id: string }>(
    `INSERT INTO structures (organisation_id, code, district, format, created_at)
     VALUES ($1, $2, $3, $4, $5) RETURNING id`,
    [operatorId, `ST-${nextSerial()}`, district, format, NOW],
  );
  return rows[0]!.id;
}

export interface SeededApproval {
  submissionId: string;
  submissionNumber: string;
  approvalId: string;
  number: string;
}

/**
 * An approved submission of `organisationId` with one approval row (not revoked) on the structures. The submission
 * names the advertiser `advertiserName` (default: the organisation's own name, an advertiser submitting for itself)
 * and `advertiserBin` (default none).
 */
export async function seedApproval(
  db: Db,
  organisationId: string,
  structureIds: string[],
  options: {
    validFrom?: string;
    validUntil?: string;
    declared?: Record<string, number> | null;
    revokedAt?: Date | null;
    advertiserName?: string;
    advertiserBin?: string | null;
  } = {},
): Promise<SeededApproval> {
  const n = nextSerial();
  const submissionNumber = `SUB-2026-${n}`;
  const { rows: sub } = await db.query<{ id: string }>(
    `INSERT INTO submissions (number, organisation_id, state, advertiser_name, advertiser_bin, period_from,
                              period_to, declared_daily_plays, created_at, updated_at)
     VALUES ($1, $2, 'approved', coalesce($7, (SELECT name FROM organisations WHERE id = $2)), $8, $3, $4, $5, $6,
             $6)
     RETURNING id`,
    [
      submissionNumber,
      organisationId,
      options.validFrom ?? '2026-01-01',
      options.validUntil ?? '2026-12-31',
      options.declared ? JSON.stringify(options.declared) : null,
      NOW,
      options.advertiserName ?? null,
      options.advertiserBin ?? null,
    ],
  );
  const submissionId = sub[0]!.id;
  for (const [i, id] of structureIds.entries()) {
    await db.query(
      'INSERT INTO submission_structures (submission_id, structure_id, position) VALUES ($1, $2, $3)',
      [submissionId, id, i + 1],
    );
  }
  const number = `APR-2026-${n}`;
  const { rows: ap } = await db.query<{ id: string }>(
    `INSERT INTO approvals (number, submission_id, media_sha256, valid_from, valid_until, issued_at, revoked_at,
                            revoke_reason)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id`,
    [
      number,
      submissionId,
      'ab'.repeat(32),
      options.validFrom ?? '2026-01-01',
      options.validUntil ?? '2026-12-31',
      NOW,
      options.revokedAt ?? null,
      options.revokedAt ? 'test' : null,
    ],
  );
  for (const id of structureIds) {
    await db.query('INSERT INTO approval_structures (approval_id, structure_id) VALUES ($1, $2)', [
      ap[0]!.id,
      id,
    ]);
  }
  return { submissionId, submissionNumber, approvalId: ap[0]!.id, number };
}

let batchId = 1_000_000;

/**
 * `count` counted plays on a structure, as the ingestion stores them: pop_records of kind play and the matching
 * play_counts row. The play day is the Almaty day of `startAt`, or `day` (receipt day) for plays without a start.
 */
export async function seedPlays(
  db: Db,
  play: {
    structureId: string;
    count: number;
    startAt: Date | null;
    approvalNumber?: string | null;
    slot?: 'gov' | 'emergency' | null;
    day?: string;
    /** Flags as ingestion would have stored them (src/pop/judge.ts). */
    flags?: string[];
  },
): Promise<void> {
  const day = play.startAt ? almatyDate(play.startAt) : play.day;
  if (!day) throw new Error('seedPlays: a play without startAt needs a day');
  const approvalNumber = play.slot ? null : (play.approvalNumber ?? null);
  const slot = play.slot ?? null;
  const playerKey = `device:${randomUUID()}`;
  batchId += 1;
  await db.query('SELECT pop_records_partition($1::date)', [day]);
  await db.query(
    `INSERT INTO pop_records (receive_day, batch_id, record_index, player_key, structure_id, kind, seq, day,
                              approval_number, slot, start_at, end_at, duration_ms, attested, flags)
     SELECT $1::date, $2, g, $3, $4, 'play', g, $1::date, $5, $6, $7::timestamptz,
            $7::timestamptz + interval '10 seconds', 10000, false, $9::text[]
       FROM generate_series(1, $8::int) AS g`,
    [
      day,
      batchId,
      playerKey,
      play.structureId,
      approvalNumber,
      slot,
      play.startAt,
      play.count,
      play.flags ?? [],
    ],
  );
  await seedPlayCounts(db, {
    ...play,
    day,
    playerKey,
    approvalNumber,
    slot,
    flagged: play.flags?.length ? play.count : 0,
  });
}

/** A play_counts row only (what declared_vs_actual reads). */
export async function seedPlayCounts(
  db: Db,
  row: {
    structureId: string;
    day: string;
    count: number;
    approvalNumber?: string | null;
    slot?: 'gov' | 'emergency' | null;
    playerKey?: string;
    attested?: boolean;
    flagged?: number;
  },
): Promise<void> {
  await db.query(
    `INSERT INTO play_counts (player_key, structure_id, day, approval_number, slot, attested, plays, flagged)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
    [
      row.playerKey ?? `device:${randomUUID()}`,
      row.structureId,
      row.day,
      row.slot ? null : (row.approvalNumber ?? null),
      row.slot ?? null,
      row.attested ?? false,
      row.count,
      row.flagged ?? 0,
    ],
  );
}

/**
 * A strict RFC 4180 parser, written here because no CSV library is installed: fields separated by commas, every
 * record (the last one too) ended by CRLF, a quoted field may hold commas, CR, LF and doubled quotes, a quote
 * anywhere else is an error, and every record has as many fields as the header.
 */
export function parseCsvStrict(text: string): string[][] {
  const records: string[][] = [];
  let i = 0;
  while (i < text.length) {
    const record: string[] = [];
    for (;;) {
      let field = '';
      if (text[i] === '"') {
        i += 1;
        for (;;) {
          if (i >= text.length) throw new Error(`record ${records.length + 1}: unterminated quoted field`);
          const ch = text[i]!;
          if (ch === '"') {
            if (text[i + 1] === '"') {
              field += '"';
              i += 2;
              continue;
            }
            i += 1;
            break;
          }
          field += ch;
          i += 1;
        }
      } else {
        while (i < text.length && text[i] !== ',' && text[i] !== '\r' && text[i] !== '\n') {
          if (text[i] === '"') throw new Error(`record ${records.length + 1}: quote in an unquoted field`);
          field += text[i];
          i += 1;
        }
      }
      record.push(field);
      if (text[i] === ',') {
        i += 1;
        continue;
      }
      if (text[i] === '\r' && text[i + 1] === '\n') {
        i += 2;
        break;
      }
      throw new Error(`record ${records.length + 1}: does not end with CRLF`);
    }
    records.push(record);
  }
  const width = records[0]?.length ?? 0;
  records.forEach((record, index) => {
    if (record.length !== width)
      throw new Error(`record ${index + 1} has ${record.length} fields, not ${width}`);
  });
  return records;
}

/** Parses the release CSV into objects keyed by the header. */
export function csvObjects(text: string): Record<string, string>[] {
  const [header, ...rows] = parseCsvStrict(text);
  if (!header) return [];
  return rows.map((row) => Object.fromEntries(header.map((name, i) => [name, row[i]!])));
}

/*
 * An independent audit of a table after suppression, by linear algebra (not by the graph argument the platform
 * uses): the published relations are one equation per row and per column of the table with its margins; a
 * withheld value is recoverable exactly when its unit vector lies in the row space of those equations restricted
 * to the withheld values. Ranks are computed modulo a prime: the equations form a totally unimodular system (the
 * incidence matrix of a bipartite graph), so every minor is 0 or ±1 and the rank modulo any prime is the rank over
 * the rationals.
 */
const PRIME = 1_000_003;

function rankModP(matrix: number[][]): number {
  const m = matrix.map((row) => row.map((v) => ((v % PRIME) + PRIME) % PRIME));
  let rank = 0;
  const cols = m[0]?.length ?? 0;
  for (let c = 0; c < cols && rank < m.length; c += 1) {
    const pivot = m.findIndex((row, index) => index >= rank && row[c] !== 0);
    if (pivot === -1) continue;
    [m[rank], m[pivot]] = [m[pivot]!, m[rank]!];
    const inv = modInverse(m[rank]![c]!);
    m[rank] = m[rank]!.map((v) => (v * inv) % PRIME);
    for (let r = 0; r < m.length; r += 1) {
      if (r === rank || m[r]![c] === 0) continue;
      const factor = m[r]![c]!;
      m[r] = m[r]!.map((v, k) => (((v - factor * m[rank]![k]!) % PRIME) + PRIME) % PRIME);
    }
    rank += 1;
  }
  return rank;
}

function modInverse(a: number): number {
  let [t, newT, r, newR] = [0, 1, PRIME, a];
  while (newR !== 0) {
    const q = Math.floor(r / newR);
    [t, newT] = [newT, t - q * newT];
    [r, newR] = [newR, r - q * newR];
  }
  return ((t % PRIME) + PRIME) % PRIME;
}

/** Positions [r, c] of the withheld values that the published values and totals would give away. */
export function recoverableWithheld(table: MarginTable): [number, number][] {
  const { rows, cols, status } = table;
  const unknowns: [number, number][] = [];
  for (let r = 0; r <= rows; r += 1) {
    for (let c = 0; c <= cols; c += 1) if (isWithheld(status[r]![c]!)) unknowns.push([r, c]);
  }
  if (unknowns.length === 0) return [];
  const index = new Map(unknowns.map(([r, c], i) => [`${r},${c}`, i]));
  const equations: number[][] = [];
  // Row r (districts and the total row): the entries of the row minus its total.
  for (let r = 0; r <= rows; r += 1) {
    const eq = new Array<number>(unknowns.length).fill(0);
    for (let c = 0; c <= cols; c += 1) {
      const i = index.get(`${r},${c}`);
      if (i !== undefined) eq[i] = c === cols ? -1 : 1;
    }
    equations.push(eq);
  }
  for (let c = 0; c <= cols; c += 1) {
    const eq = new Array<number>(unknowns.length).fill(0);
    for (let r = 0; r <= rows; r += 1) {
      const i = index.get(`${r},${c}`);
      if (i !== undefined) eq[i] = r === rows ? -1 : 1;
    }
    equations.push(eq);
  }
  const base = rankModP(equations);
  return unknowns.filter((_, i) => {
    const unit = new Array<number>(unknowns.length).fill(0);
    unit[i] = 1;
    return rankModP([...equations, unit]) === base;
  });
}

/*
 * An independent audit of protection intervals, by linear programming (not by the maximum flow the platform uses):
 * the bounds a reader can work out for each withheld value from the published values and totals and non-negativity
 * alone. Dense two-phase simplex with Bland's rule, in floating point: the relations form a totally unimodular
 * system with integer right-hand sides, so every vertex is integral and the optima are rounded to integers.
 */
const EPS = 1e-9;

/** max objective·x subject to A x = b, x >= 0; Infinity when unbounded, null when infeasible. */
function simplexMax(a: number[][], b: number[], objective: number[]): number | null {
  const m = a.length;
  const n = objective.length;
  // Rows with a negative right-hand side are negated; an artificial variable per row starts the basis.
  const t = a.map((row, i) => {
    const sign = b[i]! < 0 ? -1 : 1;
    const artificial = Array.from({ length: m }, (_, k) => (k === i ? 1 : 0));
    return [...row.map((v) => v * sign), ...artificial, b[i]! * sign];
  });
  const width = n + m;
  const basis = Array.from({ length: m }, (_, i) => n + i);
  const pivot = (row: number, col: number) => {
    const p = t[row]![col]!;
    t[row] = t[row]!.map((v) => v / p);
    for (let i = 0; i < m; i += 1) {
      if (i === row || Math.abs(t[i]![col]!) < EPS) continue;
      const f = t[i]![col]!;
      t[i] = t[i]!.map((v, k) => v - f * t[row]![k]!);
    }
    basis[row] = col;
  };
  // Maximises cost·x over the columns allowed to enter; returns false when unbounded.
  const run = (cost: number[], allowed: (col: number) => boolean): boolean => {
    for (;;) {
      let entering = -1;
      for (let col = 0; col < width && entering === -1; col += 1) {
        if (!allowed(col) || basis.includes(col)) continue;
        let reduced = cost[col]!;
        for (let i = 0; i < m; i += 1) reduced -= cost[basis[i]!]! * t[i]![col]!;
        if (reduced > EPS) entering = col;
      }
      if (entering === -1) return true;
      let leaving = -1;
      let best = Number.POSITIVE_INFINITY;
      for (let i = 0; i < m; i += 1) {
        const coeff = t[i]![entering]!;
        if (coeff <= EPS) continue;
        const ratio = t[i]![width]! / coeff;
        if (ratio < best - EPS || (Math.abs(ratio - best) <= EPS && basis[i]! < basis[leaving]!)) {
          best = ratio;
          leaving = i;
        }
      }
      if (leaving === -1) return false;
      pivot(leaving, entering);
    }
  };
  // Phase 1: drive the artificial variables to zero.
  const phase1 = Array.from({ length: width }, (_, col) => (col >= n ? -1 : 0));
  run(phase1, () => true);
  const artificialSum = basis.reduce((sum, col, i) => sum + (col >= n ? t[i]![width]! : 0), 0);
  if (artificialSum > 1e-6) return null;
  // Artificial variables still in the basis (at zero) leave it, or their row is redundant.
  for (let i = 0; i < m; i += 1) {
    if (basis[i]! < n) continue;
    const col = t[i]!.findIndex((v, k) => k < n && Math.abs(v) > EPS && !basis.includes(k));
    if (col !== -1) pivot(i, col);
    else t[i] = t[i]!.map(() => 0);
  }
  const phase2 = Array.from({ length: width }, (_, col) => (col < n ? objective[col]! : 0));
  if (!run(phase2, (col) => col < n)) return Number.POSITIVE_INFINITY;
  return basis.reduce((sum, col, i) => sum + (col < n ? objective[col]! * t[i]![width]! : 0), 0);
}

/** For every withheld entry "r,c": the least and the greatest value the published table allows it. */
export function withheldBounds(table: MarginTable): Map<string, { lower: number; upper: number }> {
  const { rows, cols, plays, status } = table;
  const unknowns: [number, number][] = [];
  for (let r = 0; r <= rows; r += 1) {
    for (let c = 0; c <= cols; c += 1) if (isWithheld(status[r]![c]!)) unknowns.push([r, c]);
  }
  const index = new Map(unknowns.map(([r, c], i) => [`${r},${c}`, i]));
  const a: number[][] = [];
  const b: number[] = [];
  // One equation per row and per column: its entries minus its total are 0.
  const lines: [number, number, number][][] = [];
  for (let r = 0; r <= rows; r += 1) {
    lines.push(
      Array.from({ length: cols + 1 }, (_, c) => [r, c, c === cols ? -1 : 1] as [number, number, number]),
    );
  }
  for (let c = 0; c <= cols; c += 1) {
    lines.push(
      Array.from({ length: rows + 1 }, (_, r) => [r, c, r === rows ? -1 : 1] as [number, number, number]),
    );
  }
  for (const line of lines) {
    const eq = new Array<number>(unknowns.length).fill(0);
    let rhs = 0;
    let any = false;
    for (const [r, c, coeff] of line) {
      const i = index.get(`${r},${c}`);
      if (i === undefined) rhs -= coeff * plays[r]![c]!;
      else {
        eq[i] = coeff;
        any = true;
      }
    }
    if (any) {
      a.push(eq);
      b.push(rhs);
    }
  }
  const bounds = new Map<string, { lower: number; upper: number }>();
  unknowns.forEach(([r, c], i) => {
    const objective = unknowns.map((_, k) => (k === i ? 1 : 0));
    const upper = simplexMax(a, b, objective);
    const negLower = simplexMax(
      a,
      b,
      objective.map((v) => -v),
    );
    if (upper === null || negLower === null)
      throw new Error('withheldBounds: the true values are not feasible');
    bounds.set(`${r},${c}`, {
      lower: Math.round(-negLower),
      upper: upper === Number.POSITIVE_INFINITY ? upper : Math.round(upper),
    });
  });
  return bounds;
}
