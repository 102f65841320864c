import { useMemo, useState } from 'preact/hooks';
import { loadStructures } from '../api/catalogue.js';
import { del, get, post, put } from '../api/client.js';
import type {
  Alert,
  CmsInstallation,
  Device,
  FleetList,
  Organisation,
  Structure,
  Webhook,
  WebhookCreated,
} from '../api/types.js';
import { Link } from '../components/layout.js';
import { DataTable } from '../components/table.js';
import { Badge, ErrorNotice, Field, Hash, Loading, Notice, useAsync } from '../components/ui.js';
import { en, type MessageKey } from '../i18n/en.js';
import { type I18n, useI18n } from '../i18n/index.js';
import { useSession } from '../lib/session.js';
import { EnrolDevice } from './enrol-device.js';

const DAY_MS = 86_400_000;
/** spec: "A player renews on its own when less than 30 days are left": highlighted below that. */
export const EXPIRY_WARNING_DAYS = 30;
/** A queue lag above this is shown as a warning: the player is an hour or more behind in shipping. */
const LAG_WARNING_SECONDS = 3600;

/** Expiry of the device's current certificate: the list gives it, the device view lists certificates. */
export function certificateExpiry(device: Device): string | null {
  if (device.certificate_not_after !== undefined) return device.certificate_not_after;
  const current = device.certificates?.find((c) => c.state === 'current');
  return current?.not_after ?? null;
}

function Expiry(props: { notAfter: string | null }) {
  const { t, dateTime } = useI18n();
  if (!props.notAfter) return <>{t('fleet.noCertificate')}</>;
  const days = Math.floor((new Date(props.notAfter).getTime() - Date.now()) / DAY_MS);
  return (
    <span class={days < EXPIRY_WARNING_DAYS ? 'expiring' : undefined}>
      <time dateTime={props.notAfter}>{dateTime(props.notAfter)}</time>{' '}
      {days < 0 ? (
        <Badge tone="bad">{t('fleet.expired')}</Badge>
      ) : days < EXPIRY_WARNING_DAYS ? (
        <Badge tone="warn">{t('fleet.expiresInDays', { days })}</Badge>
      ) : null}
    </span>
  );
}

/**
 * Queue lag (apps/platform/console/README.md "Fleet"): how far behind the player's shipping was when its newest batch
 * arrived.
 */
function QueueLag(props: { seconds: number | null | undefined }) {
  const i18n = useI18n();
  const s = props.seconds;
  if (s === null || s === undefined) return <>—</>;
  const text = lagText(i18n, s);
  return s >= LAG_WARNING_SECONDS ? <Badge tone="warn">{text}</Badge> : text;
}

function lagText({ t, number, hours }: I18n, s: number): string {
  return s < 60
    ? t('fleet.lagSeconds', { seconds: number(s) })
    : s < 3600
      ? t('fleet.lagMinutes', { minutes: number(Math.floor(s / 60)) })
      : hours(s * 1000);
}

type FleetState = ReturnType<typeof useAsync<FleetList>>;

export function FleetPage() {
  const { t } = useI18n();
  // One read of the fleet list: its devices and its open alerts (apps/platform/docs/alerts.md).
  const fleet = useAsync(() => get<FleetList>('/api/v1/console/devices'), []);
  const alerts = fleet.data?.alerts ?? [];
  return (
    <section>
      <h1>{t('fleet.title')}</h1>
      <p class="lead">{t('fleet.lead')}</p>
      <p>
        <Link href="/fleet/health">{t('reports.healthLink')}</Link>
      </p>
      <OpenAlerts fleet={fleet} />
      <Devices fleet={fleet} />
      <Installations alerts={alerts} />
      <AlertWebhooks />
    </section>
  );
}

/** Alerts of a device or of a CMS player, in a row of its table. */
function AlertBadges(props: { alerts: Alert[] }) {
  const { t } = useI18n();
  if (props.alerts.length === 0) return null;
  return (
    <small class="block alert-badges">
      {props.alerts.map((a) => (
        <Badge key={a.id} tone="bad">
          {t(`alerts.kind.${a.kind}`)}
        </Badge>
      ))}
    </small>
  );
}

/**
 * The player's disk as its agent last reported it (a mode_change's `detail.storage`, apps/agent/README.md "Retention
 * and disk space"): low, or full (advertising stopped, only the authority's slot content plays). Nothing when fine.
 */
function DiskBadge(props: { storage: Device['storage'] }) {
  const { t, number, dateTime } = useI18n();
  const s = props.storage;
  if (!s || s.state === 'ok') return null;
  const params = {
    free: s.free_bytes === null ? '—' : t('fleet.mib', { n: number(Math.floor(s.free_bytes / 1_048_576)) }),
    at: s.at ? dateTime(s.at) : '—',
  };
  return (
    <small class="block" data-testid="disk-state">
      <Badge tone={s.state === 'full' ? 'bad' : 'warn'}>
        {t(s.state === 'full' ? 'fleet.diskFull' : 'fleet.diskLow')}
      </Badge>{' '}
      {t('fleet.diskDetail', params)}
    </small>
  );
}

/** What an alert is about, in words: its threshold and what was measured. */
function alertDetail(i18n: I18n, alert: Alert): string {
  const { t, number } = i18n;
  const d = alert.detail;
  switch (alert.kind) {
    case 'device_silent':
      return t('alerts.detail.device_silent', { minutes: number(Number(d['silent_after_minutes'])) });
    case 'queue_lag':
      return t('alerts.detail.queue_lag', {
        lag: lagText(i18n, Number(d['queue_lag_seconds'] ?? 0)),
        minutes: number(Number(d['threshold_minutes'])),
      });
    case 'screen_off':
      return t('alerts.detail.screen_off', { hours: String(d['operating_hours'] ?? '') });
    case 'cms_player_no_plays':
      return t('alerts.detail.cms_player_no_plays', { minutes: number(Number(d['quiet_after_minutes'])) });
  }
}

/**
 * Open alerts at the top of the page (issue "an operator's first day", item 5: "shown on the fleet page"): each opens
 * when its condition starts and goes away when it ends.
 */
function OpenAlerts(props: { fleet: FleetState }) {
  const i18n = useI18n();
  const { t, dateTime } = i18n;
  const alerts = props.fleet.data?.alerts;
  if (!alerts) return null;
  return (
    <section class="panel alerts-panel" aria-labelledby="alerts-title">
      <h2 id="alerts-title">{t('alerts.title')}</h2>
      {alerts.length === 0 ? (
        <p>{t('alerts.none')}</p>
      ) : (
        <>
          <Notice kind="error">{t('alerts.openCount', { count: alerts.length })}</Notice>
          <DataTable
            caption={t('alerts.caption')}
            rows={alerts}
            rowKey={(a) => a.id}
            columns={[
              {
                header: t('alerts.kind'),
                rowHeader: true,
                cell: (a) => <Badge tone="bad">{t(`alerts.kind.${a.kind}`)}</Badge>,
              },
              {
                header: t('alerts.subject'),
                cell: (a) =>
                  a.device_id ? (
                    <>
                      {t('alerts.device')} <code title={a.device_id}>{a.device_id.slice(0, 8)}</code>
                    </>
                  ) : (
                    <>
                      {t('alerts.cmsPlayer')} <code>{a.player}</code>
                    </>
                  ),
              },
              { header: t('fleet.structure'), cell: (a) => a.structure_code },
              { header: t('alerts.since'), cell: (a) => dateTime(a.since) },
              { header: t('alerts.lastSeen'), cell: (a) => dateTime(a.last_seen_at) },
              { header: t('alerts.detail'), cell: (a) => alertDetail(i18n, a) },
            ]}
          />
        </>
      )}
    </section>
  );
}

function Devices(props: { fleet: FleetState }) {
  const { t, dateTime } = useI18n();
  const session = useSession();
  const authority = session.organisation.kind === 'authority';
  const fleet = props.fleet;
  const list = { ...fleet, data: fleet.data?.items };
  const alertsOf = (device: Device) =>
    (fleet.data?.alerts ?? []).filter((a) => a.device_id === device.device_id);
  const structures = useAsync(() => loadStructures(authority), [authority]);
  const [reEnrol, setReEnrol] = useState<Device | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [message, setMessage] = useState<string | null>(null);

  const act = async (device: Device, action: 'revoke' | 'allow-force-renewal') => {
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
      list.reload();
    } catch (e) {
      setError(e);
    }
  };

  return (
    <div class="panel">
      <h2>{t('fleet.devices')}</h2>
      {list.loading && !list.data ? <Loading /> : null}
      <ErrorNotice error={list.error ?? error} />
      {message ? <Notice kind="success">{message}</Notice> : null}
      {list.data?.some((d) => d.stuck) ? (
        <Notice kind="error">
          {t('fleet.stuckNotice', { count: list.data.filter((d) => d.stuck).length })}
        </Notice>
      ) : null}
      <Refusals refusals={fleet.data?.handshake_refusals} />
      {list.data && list.data.length === 0 ? <p>{t('fleet.noDevices')}</p> : null}
      {list.data && list.data.length > 0 ? (
        <DataTable
          caption={t('fleet.devices')}
          rows={list.data}
          rowKey={(d) => d.device_id}
          rowClass={(d) =>
            d.revoked_at ? 'row-muted' : d.stuck || alertsOf(d).length > 0 ? 'row-alert' : undefined
          }
          columns={[
            {
              header: t('fleet.device'),
              cell: (d) => (
                <>
                  <code title={d.device_id}>{d.device_id.slice(0, 8)}</code>
                  {d.revoked_at ? (
                    <>
                      {' '}
                      <Badge tone="bad">{t('fleet.revoked')}</Badge>
                    </>
                  ) : null}
                  {d.stuck ? (
                    <small class="block">
                      <Badge tone="bad">{t('fleet.stuck')}</Badge>{' '}
                      {t('fleet.stuckDetail', {
                        since: dateTime(d.stuck.since),
                        count: d.stuck.count,
                        reason: d.stuck.reason,
                        seq: d.stuck.batch_seq ?? '—',
                      })}
                    </small>
                  ) : null}
                  <AlertBadges alerts={alertsOf(d)} />
                  <DiskBadge storage={d.storage} />
                  {d.handshake_refusals_24h ? (
                    <small class="block">
                      <Badge tone="warn">
                        {t('fleet.refusedCount', { count: d.handshake_refusals_24h })}
                      </Badge>
                    </small>
                  ) : null}
                </>
              ),
            },
            { header: t('fleet.structure'), cell: (d) => d.structure_code },
            {
              header: t('fleet.lastBatch'),
              cell: (d) => (
                <>
                  {d.last_batch_at ? dateTime(d.last_batch_at) : '—'}
                  {d.last_batch_seq !== undefined && d.last_batch_seq !== null ? (
                    <small class="muted block">{t('fleet.batchSeq', { seq: d.last_batch_seq })}</small>
                  ) : null}
                </>
              ),
            },
            { header: t('fleet.queueLag'), cell: (d) => <QueueLag seconds={d.queue_lag_seconds} /> },
            { header: t('fleet.certificateExpiry'), cell: (d) => <Expiry notAfter={certificateExpiry(d)} /> },
            {
              header: t('fleet.forceRenewal'),
              cell: (d) =>
                d.force_renewal_until
                  ? t('fleet.allowedUntil', { at: dateTime(d.force_renewal_until) })
                  : '—',
            },
            {
              header: t('common.actions'),
              class: 'row-actions',
              cell: (d) =>
                d.revoked_at ? null : (
                  <>
                    <button
                      type="button"
                      class="button button-small"
                      onClick={() => act(d, 'allow-force-renewal')}
                    >
                      {t('fleet.allowForce')}
                    </button>
                    <button
                      type="button"
                      class="button button-small"
                      aria-expanded={reEnrol?.device_id === d.device_id}
                      onClick={() => setReEnrol(reEnrol?.device_id === d.device_id ? null : d)}
                    >
                      {t('fleet.reEnrol')}
                    </button>
                    <button
                      type="button"
                      class="button button-small button-danger"
                      onClick={() => act(d, 'revoke')}
                    >
                      {t('fleet.revoke')}
                    </button>
                  </>
                ),
            },
          ]}
        />
      ) : null}
      {reEnrol ? (
        <EnrolDevice
          key={reEnrol.device_id}
          structures={structures.data ?? []}
          device={reEnrol}
          onDone={() => list.reload()}
          onClose={() => setReEnrol(null)}
        />
      ) : null}
      <EnrolDevice structures={structures.data ?? []} onDone={() => list.reload()} />
    </div>
  );
}

/** A refusal's reason in words; a code this console does not know yet is shown as it is. */
function refusalLabel(t: I18n['t'], reason: string): string {
  const key = `fleet.refusal.${reason}`;
  return key in en ? t(key as MessageKey) : reason;
}

/** Refused handshakes and certificates of the last 24 hours: why a player cannot connect. */
function Refusals(props: { refusals: FleetList['handshake_refusals'] }) {
  const { t, dateTime } = useI18n();
  const refusals = props.refusals;
  if (!refusals || refusals.last_24h === 0) return null;
  return (
    <details class="refusals">
      <summary>{t('fleet.refusalsSummary', { count: refusals.last_24h })}</summary>
      <DataTable
        caption={t('fleet.refusalsCaption')}
        rows={refusals.recent}
        rowKey={(r) => `${r.at}-${r.serial ?? ''}-${r.address ?? ''}-${r.reason}`}
        columns={[
          { header: t('fleet.refusalAt'), cell: (r) => dateTime(r.at) },
          {
            header: t('fleet.refusalReason'),
            cell: (r) => (
              <>
                {refusalLabel(t, r.reason)}
                <small class="muted block">
                  <code>{r.reason}</code>
                </small>
              </>
            ),
          },
          {
            header: t('fleet.refusalCertificate'),
            cell: (r) =>
              r.serial ? (
                <>
                  <code>{r.serial}</code>
                  <small class="muted block">{r.subject}</small>
                </>
              ) : (
                '—'
              ),
          },
          { header: t('fleet.refusalAddress'), cell: (r) => r.address ?? '—' },
        ]}
      />
    </details>
  );
}

function Installations(props: { alerts: Alert[] }) {
  const { t } = useI18n();
  const session = useSession();
  const authority = session.organisation.kind === 'authority';
  const list = useAsync(
    () => get<{ items: CmsInstallation[] }>('/api/v1/console/cms-installations').then((r) => r.items),
    [],
  );
  const structures = useAsync(() => loadStructures(authority), [authority]);
  const organisations = useAsync(
    () =>
      authority
        ? get<{ items: Organisation[] }>('/api/v1/console/organisations').then((r) => r.items)
        : Promise.resolve([]),
    [authority],
  );

  return (
    <div class="panel">
      <h2>{t('fleet.installations')}</h2>
      {list.loading && !list.data ? <Loading /> : null}
      <ErrorNotice error={list.error} />
      {list.data && list.data.length === 0 ? <p>{t('fleet.noInstallations')}</p> : null}
      {(list.data ?? []).map((i) => (
        <InstallationCard
          key={i.id}
          id={i.id}
          structures={structures.data ?? null}
          alerts={props.alerts.filter((a) => a.cms_installation_id === i.id)}
        />
      ))}
      <RegisterInstallation
        organisations={(organisations.data ?? []).filter((o) => o.kind === 'operator')}
        own={authority ? null : session.organisation.id}
        onRegistered={() => list.reload()}
      />
    </div>
  );
}

function RegisterInstallation(props: {
  organisations: Organisation[];
  own: string | null;
  onRegistered: (id: string) => void;
}) {
  const { t } = useI18n();
  const [organisation, setOrganisation] = useState('');
  const [name, setName] = useState('');
  const [kind, setKind] = useState('');
  const [key, setKey] = useState('');
  const [error, setError] = useState<unknown>(null);
  return (
    <details class="register">
      <summary>{t('fleet.register')}</summary>
      <form
        onSubmit={async (e) => {
          e.preventDefault();
          setError(null);
          try {
            const created = await post<{ id: string }>('/api/v1/console/cms-installations', {
              organisation_id: props.own ?? organisation,
              name,
              kind,
              public_key: key.trim(),
            });
            props.onRegistered(created.id);
            setName('');
            setKind('');
            setKey('');
          } catch (err) {
            setError(err);
          }
        }}
      >
        <ErrorNotice error={error} />
        <div class="form-grid">
          {props.own === null ? (
            <Field id="installation-org" label={t('fleet.operator')}>
              <select
                id="installation-org"
                required
                value={organisation}
                onChange={(e) => setOrganisation((e.target as HTMLSelectElement).value)}
              >
                <option value="">{t('common.choose')}</option>
                {props.organisations.map((o) => (
                  <option key={o.id} value={o.id}>
                    {o.name}
                  </option>
                ))}
              </select>
            </Field>
          ) : null}
          <Field id="installation-name" label={t('fleet.installationName')}>
            <input
              id="installation-name"
              required
              maxLength={200}
              value={name}
              onInput={(e) => setName((e.target as HTMLInputElement).value)}
            />
          </Field>
          <Field id="installation-kind" label={t('fleet.installationKind')}>
            <input
              id="installation-kind"
              required
              maxLength={100}
              value={kind}
              onInput={(e) => setKind((e.target as HTMLInputElement).value)}
            />
          </Field>
        </div>
        <Field id="installation-key" label={t('fleet.publicKey')} hint={t('fleet.publicKeyHint')}>
          <textarea
            id="installation-key"
            aria-describedby="installation-key-hint"
            required
            rows={3}
            value={key}
            onInput={(e) => setKey((e.target as HTMLTextAreaElement).value)}
          />
        </Field>
        <button type="submit" class="button button-primary">
          {t('fleet.registerButton')}
        </button>
      </form>
    </details>
  );
}

function InstallationCard(props: { id: string; structures: Structure[] | null; alerts: Alert[] }) {
  const { t, dateTime } = useI18n();
  const installation = useAsync(
    () => get<CmsInstallation>(`/api/v1/console/cms-installations/${props.id}`),
    [props.id],
  );
  const [key, setKey] = useState('');
  const [player, setPlayer] = useState('');
  const [structure, setStructure] = useState('');
  const [error, setError] = useState<unknown>(null);
  const [message, setMessage] = useState<string | null>(null);
  const own = useMemo(
    () =>
      (props.structures ?? []).filter(
        (s) =>
          !s.retired_at && (!s.organisation_id || s.organisation_id === installation.data?.organisation_id),
      ),
    [props.structures, installation.data?.organisation_id],
  );
  if (installation.loading && !installation.data) return <Loading />;
  if (!installation.data) return <ErrorNotice error={installation.error} />;
  const inst = installation.data;
  const run = async (action: () => Promise<unknown>, done: string) => {
    setError(null);
    setMessage(null);
    try {
      await action();
      setMessage(done);
      installation.reload();
    } catch (e) {
      setError(e);
    }
  };
  return (
    <article class="card">
      <h3>
        {inst.name} <small class="muted">{inst.kind}</small>
      </h3>
      <p class="hint" data-testid="cms-source-id">
        {t('fleet.sourceId')} <code class="hash hash-full">{inst.id}</code>
      </p>
      <ErrorNotice error={error} />
      {message ? <Notice kind="success">{message}</Notice> : null}
      <h4>{t('fleet.keys')}</h4>
      <ul class="plain">
        {(inst.keys ?? []).map((k) => (
          <li key={k.id}>
            {t('fleet.keyRegistered', { at: dateTime(k.registered_at) })}{' '}
            {k.accepted_until ? (
              <Badge tone="warn">{t('fleet.keyAcceptedUntil', { at: dateTime(k.accepted_until) })}</Badge>
            ) : (
              <Badge tone="good">{t('fleet.keyCurrent')}</Badge>
            )}
          </li>
        ))}
      </ul>
      <form
        class="inline-form"
        onSubmit={(e) => {
          e.preventDefault();
          void run(
            () => post(`/api/v1/console/cms-installations/${inst.id}/keys`, { public_key: key.trim() }),
            t('fleet.rotated'),
          );
          setKey('');
        }}
      >
        <Field id={`rotate-${inst.id}`} label={t('fleet.rotateKey')} hint={t('fleet.rotateHint')}>
          <textarea
            id={`rotate-${inst.id}`}
            aria-describedby={`rotate-${inst.id}-hint`}
            rows={2}
            required
            value={key}
            onInput={(e) => setKey((e.target as HTMLTextAreaElement).value)}
          />
        </Field>
        <button type="submit" class="button">
          {t('fleet.rotate')}
        </button>
      </form>
      <h4>{t('fleet.players')}</h4>
      {(inst.players ?? []).length === 0 ? <p>{t('fleet.noPlayers')}</p> : null}
      {(inst.players ?? []).length > 0 ? (
        <DataTable
          caption={t('fleet.players')}
          rows={inst.players ?? []}
          rowKey={(p) => p.external_id}
          rowClass={(p) => (props.alerts.some((a) => a.player === p.external_id) ? 'row-alert' : undefined)}
          columns={[
            {
              header: t('fleet.player'),
              cell: (p) => (
                <>
                  <code>{p.external_id}</code>
                  <AlertBadges alerts={props.alerts.filter((a) => a.player === p.external_id)} />
                </>
              ),
            },
            { header: t('fleet.structure'), cell: (p) => p.structure_code },
            { header: t('fleet.mappedAt'), cell: (p) => dateTime(p.mapped_at) },
            {
              header: t('common.actions'),
              cell: (p) => (
                <button
                  type="button"
                  class="button button-small button-danger"
                  onClick={() =>
                    void run(
                      () =>
                        del(
                          `/api/v1/console/cms-installations/${inst.id}/players/${encodeURIComponent(p.external_id)}`,
                        ),
                      t('fleet.unmapped'),
                    )
                  }
                >
                  {t('fleet.unmap')}
                </button>
              ),
            },
          ]}
        />
      ) : null}
      <form
        class="inline-form"
        onSubmit={(e) => {
          e.preventDefault();
          void run(
            () =>
              put(
                `/api/v1/console/cms-installations/${inst.id}/players/${encodeURIComponent(player.trim())}`,
                { structure_id: structure },
              ),
            t('fleet.mapped'),
          );
          setPlayer('');
        }}
      >
        <Field id={`player-${inst.id}`} label={t('fleet.player')}>
          <input
            id={`player-${inst.id}`}
            required
            pattern="[A-Za-z0-9._:@\-]{1,128}"
            value={player}
            onInput={(e) => setPlayer((e.target as HTMLInputElement).value)}
          />
        </Field>
        <Field id={`player-structure-${inst.id}`} label={t('fleet.structure')}>
          {props.structures ? (
            <select
              id={`player-structure-${inst.id}`}
              required
              value={structure}
              onChange={(e) => setStructure((e.target as HTMLSelectElement).value)}
            >
              <option value="">{t('common.choose')}</option>
              {own.map((s) => (
                <option key={s.id} value={s.id}>
                  {s.code}
                </option>
              ))}
            </select>
          ) : (
            <input
              id={`player-structure-${inst.id}`}
              required
              value={structure}
              onInput={(e) => setStructure((e.target as HTMLInputElement).value)}
            />
          )}
        </Field>
        <button type="submit" class="button">
          {t('fleet.map')}
        </button>
      </form>
    </article>
  );
}

/** The alert types of a webhook subscription (apps/platform/docs/alerts.md). */
const ALERT_EVENT_TYPES = ['alert_opened', 'alert_resolved'] as const;

/**
 * Webhooks of alerts: an operator's receive the alerts of its own devices and players, the authority's every alert.
 * Each alert is sent once when it opens and once when it resolves, signed like every city event.
 */
function AlertWebhooks() {
  const { t, dateTime } = useI18n();
  const list = useAsync(
    () =>
      get<{ items: Webhook[] }>('/api/v1/console/webhooks').then((r) =>
        r.items.filter((h) =>
          h.types.some((type) => (ALERT_EVENT_TYPES as readonly string[]).includes(type)),
        ),
      ),
    [],
  );
  const [url, setUrl] = useState('');
  const [secret, setSecret] = useState('');
  const [types, setTypes] = useState<string[]>([...ALERT_EVENT_TYPES]);
  const [created, setCreated] = useState<WebhookCreated | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [message, setMessage] = useState<string | null>(null);
  const typeLabel = (type: string) =>
    type === 'alert_opened'
      ? t('alerts.typeOpened')
      : type === 'alert_resolved'
        ? t('alerts.typeResolved')
        : type;

  const remove = async (hook: Webhook) => {
    if (!window.confirm(t('webhooks.removeConfirm', { url: hook.url }))) return;
    setError(null);
    setMessage(null);
    setCreated(null);
    try {
      await del(`/api/v1/console/webhooks/${hook.id}`);
      setMessage(t('webhooks.removed'));
      list.reload();
    } catch (e) {
      setError(e);
    }
  };

  return (
    <div class="panel">
      <h2>{t('alerts.webhooks')}</h2>
      <p class="hint">{t('alerts.webhooksLead')}</p>
      <ErrorNotice error={list.error ?? error} />
      {message ? <Notice kind="success">{message}</Notice> : null}
      {created?.secret ? (
        <Notice kind="warning">
          <p>{t('webhooks.secretOnce', { url: created.url })}</p>
          <p>
            <Hash value={created.secret} full />
          </p>
        </Notice>
      ) : null}
      {list.data && list.data.length === 0 ? <p>{t('alerts.webhooksNone')}</p> : null}
      {list.data && list.data.length > 0 ? (
        <DataTable
          caption={t('alerts.webhooks')}
          rows={list.data}
          rowKey={(h) => h.id}
          columns={[
            { header: t('webhooks.url'), cell: (h) => <code>{h.url}</code> },
            { header: t('webhooks.types'), cell: (h) => h.types.map(typeLabel).join(', ') },
            { header: t('webhooks.created'), cell: (h) => dateTime(h.created_at) },
            {
              header: t('webhooks.deliveries'),
              cell: (h) => (
                <>
                  {t('webhooks.counts', { delivered: h.deliveries.delivered, pending: h.deliveries.pending })}
                  {h.deliveries.failed > 0 ? (
                    <small class="block">
                      <Badge tone="bad">{t('webhooks.failed', { failed: h.deliveries.failed })}</Badge>
                    </small>
                  ) : null}
                </>
              ),
            },
            {
              header: t('common.actions'),
              cell: (h) => (
                <button
                  type="button"
                  class="button button-small button-danger"
                  onClick={() => void remove(h)}
                >
                  {t('webhooks.remove')}
                </button>
              ),
            },
          ]}
        />
      ) : null}
      <details class="register">
        <summary>{t('alerts.webhookAdd')}</summary>
        <form
          onSubmit={async (e) => {
            e.preventDefault();
            setError(null);
            setMessage(null);
            setCreated(null);
            try {
              const answer = await post<WebhookCreated>('/api/v1/console/webhooks', {
                url: url.trim(),
                types,
                ...(secret.trim() ? { secret: secret.trim() } : {}),
              });
              setCreated(answer);
              if (!answer.secret) setMessage(t('webhooks.added'));
              setUrl('');
              setSecret('');
              list.reload();
            } catch (err) {
              setError(err);
            }
          }}
        >
          <Field id="alert-webhook-url" label={t('webhooks.url')} hint={t('webhooks.urlHint')}>
            <input
              id="alert-webhook-url"
              type="url"
              required
              maxLength={2000}
              aria-describedby="alert-webhook-url-hint"
              value={url}
              onInput={(e) => setUrl((e.target as HTMLInputElement).value)}
            />
          </Field>
          <Field id="alert-webhook-secret" label={t('alerts.webhookSecret')} hint={t('webhooks.secretHint')}>
            <input
              id="alert-webhook-secret"
              type="password"
              autoComplete="new-password"
              minLength={16}
              maxLength={256}
              aria-describedby="alert-webhook-secret-hint"
              value={secret}
              onInput={(e) => setSecret((e.target as HTMLInputElement).value)}
            />
          </Field>
          <fieldset class="picker">
            <legend>{t('webhooks.types')}</legend>
            {ALERT_EVENT_TYPES.map((type) => (
              <label key={type}>
                <input
                  type="checkbox"
                  checked={types.includes(type)}
                  onChange={(e) =>
                    setTypes((now) =>
                      (e.target as HTMLInputElement).checked
                        ? [...now.filter((x) => x !== type), type]
                        : now.filter((x) => x !== type),
                    )
                  }
                />{' '}
                {typeLabel(type)}
              </label>
            ))}
          </fieldset>
          <button type="submit" class="button button-primary" disabled={types.length === 0}>
            {t('alerts.webhookAddButton')}
          </button>
        </form>
      </details>
    </div>
  );
}
