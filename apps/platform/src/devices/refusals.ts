import { createHash } from 'node:crypto';
import { readCertificate, sha256Hex } from '@ooh/crypto';
import type { PlatformContext } from '../context.js';
import type { Db } from '../db/pool.js';

/*
 * Refused client certificates on the devices host (issue "Trust under attack", item 6: "log every refused handshake
 * (reason, certificate subject and serial, peer address) and count it in the fleet view, so an operator can see why
 * a player cannot connect"; migration 070).
 *
 * Both kinds of refusal count: a certificate refused at the TLS layer (none, another CA, outside its dates: tls.ts)
 * and one refused by the platform after the handshake (unknown, superseded, revoked device: authenticate.ts).
 *
 * A flood of bad handshakes must fill neither the disk nor the log, so each process:
 * - aggregates refusals in memory by their facts and writes them at most once per FLUSH_INTERVAL_MS (a few
 *   statements whatever their number); at most MAX_PENDING distinct facts wait, further ones are still counted (by
 *   reason, without their details);
 * - keeps counts per minute, device and reason (a device only for certificates the platform issued to it, so the
 *   rows are bounded by the fleet) for 48 hours, and the newest distinct refusals (200 naming no device, 20 per
 *   device);
 * - logs at most LOG_LINES_PER_MINUTE refusals one by one, then one line a minute saying how many were not.
 */

/** Stable codes of why a client certificate was refused (the fleet view's `reason`). */
export type RefusalReason =
  /** No client certificate was presented. */
  | 'no_certificate'
  /** The certificate does not chain to the device CA (another CA, self-signed, a broken chain). */
  | 'unknown_ca'
  /** The certificate (or one above it) has expired (TLS checks the machine clock). */
  | 'certificate_expired'
  /** The certificate (or one above it) is not valid yet. */
  | 'certificate_not_yet_valid'
  /** TLS refused the certificate for another reason (its signature, a purpose, a malformed extension ...). */
  | 'certificate_invalid'
  /** The certificate passed by a TLS-terminating proxy could not be read. */
  | 'certificate_unreadable'
  /** A certificate of the device CA that the platform never issued to a device (or not this very one). */
  | 'certificate_unknown'
  /** The device's certificate was replaced and its 24 hours after the renewal are over (or a re-enrolment ended it). */
  | 'certificate_superseded'
  /** The certificate is outside its dates by the platform clock. */
  | 'certificate_outside_dates'
  /** The device is revoked. */
  | 'device_revoked'
  /** Behind a TLS-terminating proxy: the request came from an address that is not a configured proxy. */
  | 'untrusted_proxy'
  /** The TLS handshake itself failed (no common protocol or cipher, an alert from the client, ...). */
  | 'handshake_failed';

/** One refused certificate or handshake, as the devices host saw it. */
export interface Refusal {
  at: Date;
  reason: RefusalReason;
  /** The DER of the certificate presented, when there was one. */
  certificate: Buffer | null;
  /** The peer address (behind a proxy: the client's address as the proxy names it). */
  address: string | null;
  /** The device, when the platform already knows it (authenticate.ts); else found by the certificate's digest. */
  deviceId: string | null;
}

/** What is kept of a refusal: the certificate is read once, into its subject, serial and digest. */
interface RefusalFacts {
  reason: RefusalReason;
  subject: string | null;
  serial: string | null;
  certificateSha256: string | null;
  address: string | null;
  deviceId: string | null;
}

interface Pending {
  facts: RefusalFacts;
  count: number;
  first: Date;
  last: Date;
}

export const FLUSH_INTERVAL_MS = 1000;
const MAX_PENDING = 500;
/** Distinct refusals written to the recent list per flush (the newest). */
const RECENT_PER_FLUSH = 50;
const RECENT_ANONYMOUS_KEPT = 200;
const RECENT_PER_DEVICE_KEPT = 20;
const COUNTS_KEPT_MS = 48 * 3_600_000;
const PURGE_EVERY_MS = 3_600_000;
const LOG_LINES_PER_MINUTE = 20;

const SUBJECT_MAX = 512;
const SERIAL_MAX = 128;
const ADDRESS_MAX = 64;

function factsOf(refusal: Refusal): RefusalFacts {
  let subject: string | null = null;
  let serial: string | null = null;
  let certificateSha256: string | null = null;
  if (refusal.certificate && refusal.certificate.length > 0) {
    certificateSha256 = sha256Hex(refusal.certificate);
    try {
      const info = readCertificate(new Uint8Array(refusal.certificate));
      subject = info.subject.slice(0, SUBJECT_MAX);
      serial = info.serialHex.slice(0, SERIAL_MAX);
    } catch {
      // An unreadable certificate is refused all the same; its digest still names it.
    }
  }
  return {
    reason: refusal.reason,
    subject,
    serial,
    certificateSha256,
    address: refusal.address?.slice(0, ADDRESS_MAX) ?? null,
    deviceId: refusal.deviceId,
  };
}

const keyOf = (f: RefusalFacts) =>
  JSON.stringify([f.reason, f.subject, f.serial, f.certificateSha256, f.address, f.deviceId]);

const minuteOf = (at: Date) => new Date(Math.floor(at.getTime() / 60_000) * 60_000);

/**
 * The refusals of one process, written in the background (see the top of this file). `note` never waits and never
 * throws; `close` writes what is left.
 */
export class RefusalRecorder {
  private pending = new Map<string, Pending>();
  /** Refusals beyond MAX_PENDING distinct facts: counted by minute and reason only. */
  private overflow = new Map<string, { minute: Date; reason: RefusalReason; count: number }>();
  private timer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> | null = null;
  private lastFlushMs = Number.NEGATIVE_INFINITY;
  private lastPurgeMs = Number.NEGATIVE_INFINITY;
  private closed = false;
  private logWindow = { startMs: Number.NEGATIVE_INFINITY, lines: 0, suppressed: 0 };

  constructor(private readonly ctx: PlatformContext) {}

  note(refusal: Refusal): void {
    let facts: RefusalFacts;
    try {
      facts = factsOf(refusal);
    } catch (error) {
      this.ctx.log.warn({ err: error }, 'a refused handshake could not be read');
      return;
    }
    this.log(facts, refusal.at);
    const key = keyOf(facts);
    const known = this.pending.get(key);
    if (known) {
      known.count += 1;
      if (refusal.at > known.last) known.last = refusal.at;
    } else if (this.pending.size < MAX_PENDING) {
      this.pending.set(key, { facts, count: 1, first: refusal.at, last: refusal.at });
    } else {
      const minute = minuteOf(refusal.at);
      const overflowKey = `${minute.getTime()} ${facts.reason}`;
      const entry = this.overflow.get(overflowKey) ?? { minute, reason: facts.reason, count: 0 };
      entry.count += 1;
      this.overflow.set(overflowKey, entry);
    }
    this.schedule();
  }

  /** Writes what is waiting now (tests, shutdown); resolves when written. */
  async flush(): Promise<void> {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    while (this.flushing) await this.flushing;
    if (this.pending.size === 0 && this.overflow.size === 0) return;
    const pending = [...this.pending.values()];
    const overflow = [...this.overflow.values()];
    this.pending = new Map();
    this.overflow = new Map();
    this.lastFlushMs = performance.now();
    this.flushing = this.write(pending, overflow)
      .catch((error: unknown) => {
        const lost = pending.reduce((n, p) => n + p.count, 0) + overflow.reduce((n, o) => n + o.count, 0);
        this.ctx.log.warn({ err: error, refusals: lost }, 'refused handshakes could not be recorded');
      })
      .finally(() => {
        this.flushing = null;
      });
    await this.flushing;
    this.schedule();
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.flush();
    this.flushLogWindow(Number.POSITIVE_INFINITY);
  }

  private schedule(): void {
    if (this.timer || this.flushing || this.closed) return;
    if (this.pending.size === 0 && this.overflow.size === 0) return;
    // The first refusal after a quiet while is written at once; under a flood, once per interval.
    const delay = Math.max(0, this.lastFlushMs + FLUSH_INTERVAL_MS - performance.now());
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.flush();
    }, delay);
    this.timer.unref();
  }

  private log(facts: RefusalFacts, at: Date): void {
    const nowMs = performance.now();
    this.flushLogWindow(nowMs);
    if (this.logWindow.lines >= LOG_LINES_PER_MINUTE) {
      this.logWindow.suppressed += 1;
      return;
    }
    this.logWindow.lines += 1;
    this.ctx.log.warn(
      {
        reason: facts.reason,
        subject: facts.subject,
        serial: facts.serial,
        address: facts.address,
        device: facts.deviceId,
        at: at.toISOString(),
      },
      'device client certificate refused',
    );
  }

  /** Starts a new minute of log lines once the current one is over, saying how many were not logged in it. */
  private flushLogWindow(nowMs: number): void {
    if (nowMs - this.logWindow.startMs < 60_000) return;
    if (this.logWindow.suppressed > 0) {
      this.ctx.log.warn(
        { refusals: this.logWindow.suppressed },
        'more device client certificates were refused than are logged one by one (all are counted)',
      );
    }
    this.logWindow = { startMs: nowMs, lines: 0, suppressed: 0 };
  }

  private async write(
    pending: Pending[],
    overflow: { minute: Date; reason: RefusalReason; count: number }[],
  ): Promise<void> {
    const db = this.ctx.db;
    await attributeToDevices(db, pending);

    // Counts per minute, device and reason. A refusal waiting since an earlier minute is counted in its last one.
    const counts = new Map<
      string,
      { minute: Date; deviceId: string | null; reason: string; count: number }
    >();
    const add = (minute: Date, deviceId: string | null, reason: string, count: number) => {
      const key = `${minute.getTime()} ${deviceId ?? ''} ${reason}`;
      const entry = counts.get(key) ?? { minute, deviceId, reason, count: 0 };
      entry.count += count;
      counts.set(key, entry);
    };
    for (const p of pending) add(minuteOf(p.last), p.facts.deviceId, p.facts.reason, p.count);
    for (const o of overflow) add(o.minute, null, o.reason, o.count);
    const rows = [...counts.values()];
    const countsSql = `INSERT INTO device_handshake_refusal_counts AS c (minute, device_id, reason, refusals)
       SELECT * FROM unnest($1::timestamptz[], $2::uuid[], $3::text[], $4::int[])
       ON CONFLICT (minute, device_id, reason) DO UPDATE SET refusals = c.refusals + EXCLUDED.refusals`;
    const countsParams = [
      rows.map((r) => r.minute),
      rows.map((r) => r.deviceId),
      rows.map((r) => r.reason),
      rows.map((r) => r.count),
    ];

    const recent = [...pending]
      .sort((a, b) => b.last.getTime() - a.last.getTime())
      .slice(0, RECENT_PER_FLUSH);
    if (recent.length === 0) {
      await db.query(countsSql, countsParams);
    } else {
      const f = recent.map((r) => r.facts);
      // The counts and the recent list in one statement: the fleet view never shows a refusal counted whose entry
      // is not there yet.
      await db.query(
        `WITH counted AS (${countsSql} RETURNING 1)
         INSERT INTO device_handshake_refusals_recent AS r
           (key_sha256, at, reason, subject, serial, address, device_id, refusals)
         SELECT * FROM unnest($5::text[], $6::timestamptz[], $7::text[], $8::text[], $9::text[], $10::text[],
                              $11::uuid[], $12::bigint[])
         ON CONFLICT (key_sha256) DO UPDATE SET at = greatest(r.at, EXCLUDED.at), refusals = r.refusals + EXCLUDED.refusals`,
        [
          ...countsParams,
          f.map(recentKey),
          recent.map((r) => r.last),
          f.map((x) => x.reason),
          f.map((x) => x.subject),
          f.map((x) => x.serial),
          f.map((x) => x.address),
          f.map((x) => x.deviceId),
          recent.map((r) => r.count),
        ],
      );
      await db.query(
        `DELETE FROM device_handshake_refusals_recent r
          USING (SELECT key_sha256, device_id,
                        row_number() OVER (PARTITION BY device_id ORDER BY at DESC, key_sha256) AS n
                   FROM device_handshake_refusals_recent) ranked
          WHERE r.key_sha256 = ranked.key_sha256
            AND ranked.n > CASE WHEN ranked.device_id IS NULL THEN $1::int ELSE $2::int END`,
        [RECENT_ANONYMOUS_KEPT, RECENT_PER_DEVICE_KEPT],
      );
    }

    const nowMs = performance.now();
    if (nowMs - this.lastPurgeMs >= PURGE_EVERY_MS) {
      this.lastPurgeMs = nowMs;
      await db.query('DELETE FROM device_handshake_refusal_counts WHERE minute < $1', [
        new Date(this.ctx.clock.now().getTime() - COUNTS_KEPT_MS),
      ]);
    }
  }
}

/** The recent list is keyed by what an operator tells apart: reason, subject, serial, address and device. */
function recentKey(f: RefusalFacts): string {
  return createHash('sha256')
    .update(JSON.stringify([f.reason, f.subject, f.serial, f.address, f.deviceId]))
    .digest('hex');
}

/**
 * A certificate refused at the TLS layer names a device only if it is the very certificate the platform issued to
 * that device (its digest): a certificate of another CA that copies a device's subject and serial names none.
 */
async function attributeToDevices(db: Db, pending: Pending[]): Promise<void> {
  const digests = [
    ...new Set(
      pending
        .filter((p) => p.facts.deviceId === null && p.facts.certificateSha256 !== null)
        .map((p) => p.facts.certificateSha256!),
    ),
  ];
  if (digests.length === 0) return;
  const { rows } = await db.query<{ certificate_sha256: string; device_id: string }>(
    'SELECT certificate_sha256, device_id FROM device_certificates WHERE certificate_sha256 = ANY($1::text[])',
    [digests],
  );
  const devices = new Map(rows.map((r) => [r.certificate_sha256, r.device_id]));
  for (const p of pending) {
    if (p.facts.deviceId === null && p.facts.certificateSha256 !== null) {
      p.facts.deviceId = devices.get(p.facts.certificateSha256) ?? null;
    }
  }
}

/** The fleet view of refusals: refusals in the 24 hours before `now`, and the newest distinct ones (at most 20). */
export async function refusalsView(
  db: Db,
  organisationId: string | null,
  now: Date,
): Promise<{
  last_24h: number;
  recent: {
    at: string;
    reason: string;
    subject: string | null;
    serial: string | null;
    address: string | null;
    device_id: string | null;
  }[];
}> {
  // An operator sees the refusals of its own devices only; the authority sees every one, anonymous ones included.
  const [total, recent] = await Promise.all([
    db.query<{ refusals: number }>(
      `SELECT coalesce(sum(c.refusals), 0)::int AS refusals FROM device_handshake_refusal_counts c
        WHERE c.minute > $2::timestamptz - interval '24 hours' AND c.minute <= $2::timestamptz
          AND ($1::uuid IS NULL OR c.device_id IN (SELECT d.id FROM devices d JOIN structures s ON s.id = d.structure_id
                                                   WHERE s.organisation_id = $1))`,
      [organisationId, now],
    ),
    db.query<{
      at: Date;
      reason: string;
      subject: string | null;
      serial: string | null;
      address: string | null;
      device_id: string | null;
    }>(
      `SELECT r.at, r.reason, r.subject, r.serial, r.address, r.device_id FROM device_handshake_refusals_recent r
        WHERE $1::uuid IS NULL OR r.device_id IN (SELECT d.id FROM devices d JOIN structures s ON s.id = d.structure_id
                                                  WHERE s.organisation_id = $1)
        ORDER BY r.at DESC, r.key_sha256 LIMIT 20`,
      [organisationId],
    ),
  ]);
  return {
    last_24h: total.rows[0]?.refusals ?? 0,
    recent: recent.rows.map((r) => ({ ...r, at: r.at.toISOString() })),
  };
}
