import { useMemo, useState } from 'preact/hooks';
import { loadStructures } from '../api/catalogue.js';
import { del, get, post, put } from '../api/client.js';
import type { CmsInstallation, Device, FleetList, Organisation, Structure } from '../api/types.js';
import { DataTable } from '../components/table.js';
import { Badge, ErrorNotice, Field, Loading, Notice, useAsync } from '../components/ui.js';
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
  const { t, number, hours } = useI18n();
  const s = props.seconds;
  if (s === null || s === undefined) return <>—</>;
  const text =
    s < 60
      ? t('fleet.lagSeconds', { seconds: number(s) })
      : s < 3600
        ? t('fleet.lagMinutes', { minutes: number(Math.floor(s / 60)) })
        : hours(s * 1000);
  return s >= LAG_WARNING_SECONDS ? <Badge tone="warn">{text}</Badge> : text;
}

export function FleetPage() {
  const { t } = useI18n();
  return (
    <section>
      <h1>{t('fleet.title')}</h1>
      <p class="lead">{t('fleet.lead')}</p>
      <Devices />
      <Installations />
    </section>
  );
}

function Devices() {
  const { t, dateTime } = useI18n();
  const session = useSession();
  const authority = session.organisation.kind === 'authority';
  const fleet = useAsync(() => get<FleetList>('/api/v1/console/devices'), []);
  const list = { ...fleet, data: fleet.data?.items };
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
          rowClass={(d) => (d.revoked_at ? 'row-muted' : d.stuck ? 'row-alert' : undefined)}
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

function Installations() {
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
        <InstallationCard key={i.id} id={i.id} structures={structures.data ?? null} />
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

function InstallationCard(props: { id: string; structures: Structure[] | null }) {
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
          columns={[
            { header: t('fleet.player'), cell: (p) => <code>{p.external_id}</code> },
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
