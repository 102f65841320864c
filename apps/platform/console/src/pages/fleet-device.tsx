import { useState } from 'preact/hooks';
import { get, post } from '../api/client.js';
import type { Device, DeviceActivity } from '../api/types.js';
import { Link } from '../components/layout.js';
import { DataTable } from '../components/table.js';
import { Badge, ErrorNotice, Hash, Loading, Notice, useAsync } from '../components/ui.js';
import { en, type MessageKey } from '../i18n/en.js';
import { type I18n, useI18n } from '../i18n/index.js';
import { EnrolDevice } from './enrol-device.js';
import { DeviceMarks, Expiry, QueueLag, StatusBadge } from './fleet.js';

/** An offset of the agent's clock under this is within what a round trip explains: shown without a warning. */
const OFFSET_WARNING_MS = 5_000;

/** A clock offset in words: ahead or behind the platform, in seconds or minutes. */
export function offsetText({ t, number }: I18n, ms: number): string {
  const abs = Math.abs(ms);
  const amount =
    abs < 60_000
      ? t('fleet.lagSeconds', { seconds: number(Math.round(abs / 100) / 10) })
      : t('fleet.lagMinutes', { minutes: number(Math.round(abs / 6_000) / 10) });
  return ms === 0
    ? t('fleet.device.offsetNone')
    : t(ms > 0 ? 'fleet.device.ahead' : 'fleet.device.behind', { amount });
}

function ClockOffset(props: { ms: number | null }) {
  const i18n = useI18n();
  if (props.ms === null) return <>—</>;
  const text = offsetText(i18n, props.ms);
  return Math.abs(props.ms) >= OFFSET_WARNING_MS ? <Badge tone="warn">{text}</Badge> : text;
}

const label = (t: I18n['t'], prefix: string, code: string): string => {
  const key = `${prefix}${code}`;
  return key in en ? t(key as MessageKey) : code;
};

/**
 * One device's page (issue 22, item 2: "per-device details on their own page: recent batches and their answers,
 * rejects, clock offset, certificate history"), with the actions the list rows used to carry: allow a forced
 * renewal, re-enrol, revoke.
 */
export function FleetDevicePage(props: { id: string }) {
  const i18n = useI18n();
  const { t, dateTime, number } = i18n;
  const identity = useAsync(() => get<Device>(`/api/v1/console/devices/${props.id}`), [props.id]);
  const activity = useAsync(
    () => get<DeviceActivity>(`/api/v1/console/devices/${props.id}/activity`),
    [props.id],
  );
  const [reEnrol, setReEnrol] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [message, setMessage] = useState<string | null>(null);
  const reload = () => {
    identity.reload();
    activity.reload();
  };

  const device = identity.data;
  const row = activity.data?.device;
  const act = async (action: 'revoke' | 'allow-force-renewal') => {
    if (!device) return;
    setError(null);
    setMessage(null);
    if (
      action === 'revoke' &&
      !window.confirm(t('fleet.revokeConfirm', { structure: device.structure_code }))
    )
      return;
    try {
      await post(`/api/v1/console/devices/${device.device_id}/${action}`);
      setMessage(action === 'revoke' ? t('fleet.revokedDone') : t('fleet.forceDone'));
      reload();
    } catch (e) {
      setError(e);
    }
  };

  if ((identity.loading && !device) || (activity.loading && !activity.data && !activity.error))
    return <Loading />;
  if (!device || !row) {
    return (
      <section>
        <p>
          <Link href="/fleet">{t('fleet.device.back')}</Link>
        </p>
        <ErrorNotice error={identity.error ?? activity.error} />
      </section>
    );
  }
  const a = activity.data!;
  return (
    <section>
      <p>
        <Link href="/fleet">{t('fleet.device.back')}</Link>
      </p>
      <h1>{t('fleet.device.title', { structure: device.structure_code })}</h1>
      <ErrorNotice error={error} />
      {message ? <Notice kind="success">{message}</Notice> : null}
      <dl class="facts" data-testid="device-facts">
        <dt>{t('fleet.device.id')}</dt>
        <dd>
          <code class="hash hash-full">{device.device_id}</code>
        </dd>
        <dt>{t('fleet.structure')}</dt>
        <dd>{device.structure_code}</dd>
        <dt>{t('fleet.status')}</dt>
        <dd>
          <StatusBadge device={row} />
          <DeviceMarks device={row} />
        </dd>
        <dt>{t('fleet.device.enrolled')}</dt>
        <dd>
          {dateTime(device.created_at)}
          {device.re_enrolled_at ? (
            <small class="muted block">
              {t('fleet.device.reEnrolledAt', { at: dateTime(device.re_enrolled_at) })}
            </small>
          ) : null}
        </dd>
        <dt>{t('fleet.lastBatch')}</dt>
        <dd>
          {row.last_batch_at ? dateTime(row.last_batch_at) : '—'}
          {row.last_batch_seq !== null && row.last_batch_seq !== undefined ? (
            <small class="muted block">{t('fleet.batchSeq', { seq: row.last_batch_seq })}</small>
          ) : null}
        </dd>
        <dt>{t('fleet.queueLag')}</dt>
        <dd>
          <QueueLag seconds={row.queue_lag_seconds} />
        </dd>
        <dt>{t('fleet.device.clockOffset')}</dt>
        <dd data-testid="clock-offset">
          <ClockOffset ms={a.clock_offset?.ms ?? null} />
          {a.clock_offset ? (
            <small class="muted block">
              {t('fleet.device.offsetAt', { at: dateTime(a.clock_offset.at) })}
            </small>
          ) : null}
        </dd>
        <dt>{t('fleet.certificateExpiry')}</dt>
        <dd>
          <Expiry notAfter={row.certificate_not_after ?? null} />
        </dd>
        <dt>{t('fleet.forceRenewal')}</dt>
        <dd>
          {/* A grant left open on a revoked device allows nothing: the renewal route refuses a revoked device. */}
          {device.force_renewal_until && !device.revoked_at
            ? t('fleet.allowedUntil', { at: dateTime(device.force_renewal_until) })
            : '—'}
        </dd>
      </dl>

      {device.revoked_at ? (
        <Notice kind="warning">{t('fleet.device.revokedAt', { at: dateTime(device.revoked_at) })}</Notice>
      ) : (
        <div class="panel">
          <h2>{t('common.actions')}</h2>
          <div class="actions device-actions">
            <button type="button" class="button" onClick={() => void act('allow-force-renewal')}>
              {t('fleet.allowForce')}
            </button>
            <button type="button" class="button" aria-expanded={reEnrol} onClick={() => setReEnrol(!reEnrol)}>
              {t('fleet.reEnrol')}
            </button>
            <button type="button" class="button button-danger" onClick={() => void act('revoke')}>
              {t('fleet.revoke')}
            </button>
          </div>
          <p class="hint">{t('fleet.device.actionsHint')}</p>
          {reEnrol ? (
            <EnrolDevice structures={[]} device={device} onDone={reload} onClose={() => setReEnrol(false)} />
          ) : null}
        </div>
      )}

      <div class="panel">
        <h2>{t('fleet.device.batches')}</h2>
        {a.batches.length === 0 ? (
          <p>{t('fleet.device.noBatches')}</p>
        ) : (
          <DataTable
            caption={t('fleet.device.batches')}
            rows={a.batches}
            rowKey={(b) => String(b.batch_seq)}
            rowClass={(b) => (b.answer.refused > 0 ? 'row-alert' : undefined)}
            columns={[
              {
                header: t('fleet.device.batch'),
                rowHeader: true,
                numeric: true,
                cell: (b) => number(b.batch_seq),
              },
              { header: t('fleet.device.received'), cell: (b) => dateTime(b.received_at) },
              { header: t('fleet.device.plays'), numeric: true, cell: (b) => number(b.record_count) },
              {
                header: t('fleet.device.answer'),
                cell: (b) => (
                  <>
                    {t('fleet.device.answerCounts', {
                      received: b.answer.received,
                      accepted: b.answer.accepted,
                      refused: b.answer.refused,
                    })}
                    {b.answer.duplicates > 0 ? (
                      <small class="block">
                        {t('fleet.device.duplicates', { count: b.answer.duplicates })}
                      </small>
                    ) : null}
                    {b.answer.flagged > 0 ? (
                      <small class="block">
                        <Badge tone="warn">{t('fleet.device.flagged', { count: b.answer.flagged })}</Badge>
                      </small>
                    ) : null}
                    {b.answer.duplicate ? (
                      <small class="block">
                        <Badge>{t('fleet.device.repeat')}</Badge>
                      </small>
                    ) : null}
                    {b.answer.refusals.map((r) => (
                      <small class="block" key={r.reason}>
                        <Badge tone="bad">{label(t, 'reason.', r.reason)}</Badge> {number(r.records)}{' '}
                        <code>{r.reason}</code>
                      </small>
                    ))}
                  </>
                ),
              },
              { header: t('fleet.queueLag'), cell: (b) => <QueueLag seconds={b.queue_lag_seconds} /> },
              { header: t('fleet.device.clockOffset'), cell: (b) => <ClockOffset ms={b.clock_offset_ms} /> },
            ]}
          />
        )}
      </div>

      <div class="panel">
        <h2>{t('fleet.device.rejects')}</h2>
        <p class="hint">{t('fleet.device.rejectsHint')}</p>
        {a.rejects.length === 0 ? (
          <p>{t('fleet.device.noRejects')}</p>
        ) : (
          <DataTable
            caption={t('fleet.device.rejects')}
            rows={a.rejects}
            rowKey={(r) => `${r.received_at}-${r.seq ?? ''}-${r.at ?? ''}`}
            columns={[
              { header: t('fleet.device.when'), cell: (r) => dateTime(r.at ?? r.received_at) },
              { header: t('fleet.device.code'), cell: (r) => (r.code ? <code>{r.code}</code> : '—') },
              {
                header: t('fleet.device.file'),
                cell: (r) => (
                  <>
                    {r.file ?? '—'}
                    {r.media_sha256 ? (
                      <small class="block">
                        <Hash value={r.media_sha256} />
                      </small>
                    ) : null}
                  </>
                ),
              },
              { header: t('fleet.device.approval'), cell: (r) => r.approval_number ?? '—' },
              { header: t('fleet.device.reason'), cell: (r) => r.reason ?? '—' },
            ]}
          />
        )}
      </div>

      <div class="panel">
        <h2>{t('fleet.device.certificates')}</h2>
        {(device.certificates ?? []).length === 0 ? (
          <p>{t('fleet.noCertificate')}</p>
        ) : (
          <DataTable
            caption={t('fleet.device.certificates')}
            rows={device.certificates ?? []}
            rowKey={(c) => c.serial}
            columns={[
              {
                header: t('fleet.device.serial'),
                rowHeader: true,
                cell: (c) => <code title={c.serial}>{c.serial.slice(0, 16)}</code>,
              },
              {
                header: t('fleet.device.certificateState'),
                cell: (c) => (
                  <Badge tone={c.state === 'current' ? 'good' : c.state === 'revoked' ? 'bad' : 'neutral'}>
                    {label(t, 'fleet.device.certState.', c.state)}
                  </Badge>
                ),
              },
              {
                header: t('fleet.device.validity'),
                cell: (c) => `${dateTime(c.not_before)} – ${dateTime(c.not_after)}`,
              },
              {
                header: t('fleet.device.issued'),
                cell: (c) => (
                  <>
                    {dateTime(c.issued_at)}
                    {c.issued_by ? (
                      <small class="muted block">{label(t, 'fleet.device.issuedBy.', c.issued_by)}</small>
                    ) : null}
                  </>
                ),
              },
              { header: t('fleet.device.firstUsed'), cell: (c) => dateTime(c.first_used_at) },
              {
                header: t('fleet.device.replaced'),
                cell: (c) =>
                  c.replaced_at ? (
                    <>
                      {dateTime(c.replaced_at)}
                      {c.old_valid_until ? (
                        <small class="muted block">
                          {t('fleet.keyAcceptedUntil', { at: dateTime(c.old_valid_until) })}
                        </small>
                      ) : null}
                    </>
                  ) : (
                    '—'
                  ),
              },
            ]}
          />
        )}
        <h3>{t('fleet.device.keys')}</h3>
        <ul class="plain">
          {(device.keys ?? []).map((k) => (
            <li key={k.fingerprint}>
              <Hash value={k.fingerprint} /> {t('fleet.keyRegistered', { at: dateTime(k.registered_at) })}{' '}
              {k.accepted_until ? (
                <Badge tone="warn">{t('fleet.keyAcceptedUntil', { at: dateTime(k.accepted_until) })}</Badge>
              ) : (
                <Badge tone="good">{t('fleet.keyCurrent')}</Badge>
              )}
            </li>
          ))}
        </ul>
      </div>

      <div class="panel">
        <h2>{t('fleet.device.refusals')}</h2>
        {a.refusals.length === 0 ? (
          <p>{t('fleet.device.noRefusals')}</p>
        ) : (
          <DataTable
            caption={t('fleet.device.refusals')}
            rows={a.refusals}
            rowKey={(r) => `${r.at}-${r.reason}-${r.serial ?? ''}-${r.address ?? ''}`}
            columns={[
              { header: t('fleet.refusalAt'), cell: (r) => dateTime(r.at) },
              {
                header: t('fleet.refusalReason'),
                cell: (r) => (
                  <>
                    {label(t, 'fleet.refusal.', r.reason)}
                    <small class="muted block">
                      <code>{r.reason}</code>
                    </small>
                  </>
                ),
              },
              {
                header: t('fleet.refusalCertificate'),
                cell: (r) => (r.serial ? <code>{r.serial}</code> : '—'),
              },
              { header: t('fleet.refusalAddress'), cell: (r) => r.address ?? '—' },
              { header: t('fleet.device.times'), numeric: true, cell: (r) => number(r.refusals) },
            ]}
          />
        )}
      </div>
    </section>
  );
}
