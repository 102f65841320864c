import type { ComponentChildren } from 'preact';
import { useCallback, useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { FLEET_STATES } from '@ooh/protocol';
import { loadStructures } from '../api/catalogue.js';
import { del, get, post, put } from '../api/client.js';
import type {
  Alert,
  CmsInstallation,
  Device,
  FleetList,
  FleetSort,
  FleetState,
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
import { navigate, useRoute } from '../lib/router.js';
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

export function Expiry(props: { notAfter: string | null }) {
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
export function QueueLag(props: { seconds: number | null | undefined }) {
  const i18n = useI18n();
  const s = props.seconds;
  if (s === null || s === undefined) return <>—</>;
  const text = lagText(i18n, s);
  return s >= LAG_WARNING_SECONDS ? <Badge tone="warn">{text}</Badge> : text;
}

export function lagText({ t, number, hours }: I18n, s: number): string {
  return s < 60
    ? t('fleet.lagSeconds', { seconds: number(s) })
    : s < 3600
      ? t('fleet.lagMinutes', { minutes: number(Math.floor(s / 60)) })
      : hours(s * 1000);
}

// ---- The list's view, in the URL (issue 22, item 2: a view can be linked, the back button works) ----

/** The sort choices: a key and its direction (GET /api/v1/console/devices sort and order). */
const SORTS = [
  { value: 'structure', sort: 'structure', order: 'asc' },
  { value: 'last_batch', sort: 'last_batch', order: 'asc' },
  { value: '-last_batch', sort: 'last_batch', order: 'desc' },
  { value: '-queue_lag', sort: 'queue_lag', order: 'desc' },
  { value: 'queue_lag', sort: 'queue_lag', order: 'asc' },
] as const satisfies readonly { value: string; sort: FleetSort; order: 'asc' | 'desc' }[];
type SortChoice = (typeof SORTS)[number]['value'];
/** Devices on a page of the list. */
export const FLEET_PAGE_SIZE = 50;

export interface FleetView {
  q: string;
  state: FleetState | '';
  sort: SortChoice;
  page: number;
}

/** The view a URL asks for; what it cannot mean is left at its default (the URL is the reader's to edit). */
export function fleetViewOf(query: URLSearchParams): FleetView {
  const state = query.get('state') ?? '';
  const sort = query.get('sort') ?? '';
  const page = Number(query.get('page') ?? '1');
  return {
    q: (query.get('q') ?? '').slice(0, 100),
    state: (FLEET_STATES as readonly string[]).includes(state) ? (state as FleetState) : '',
    sort: SORTS.some((s) => s.value === sort) ? (sort as SortChoice) : 'structure',
    page: Number.isSafeInteger(page) && page >= 1 && page <= 200_000 ? page : 1,
  };
}

/** The console path of a view (defaults left out, so the plain list is /fleet). */
export function fleetPathOf(view: FleetView): string {
  const query = new URLSearchParams();
  if (view.q) query.set('q', view.q);
  if (view.state) query.set('state', view.state);
  if (view.sort !== 'structure') query.set('sort', view.sort);
  if (view.page > 1) query.set('page', String(view.page));
  const text = query.toString();
  return text ? `/fleet?${text}` : '/fleet';
}

/** The API query of a view. */
function apiQueryOf(view: FleetView): string {
  const choice = SORTS.find((s) => s.value === view.sort) ?? SORTS[0];
  const query = new URLSearchParams();
  if (view.q.trim()) query.set('q', view.q.trim());
  if (view.state) query.set('state', view.state);
  query.set('sort', choice.sort);
  query.set('order', choice.order);
  query.set('limit', String(FLEET_PAGE_SIZE));
  query.set('offset', String((view.page - 1) * FLEET_PAGE_SIZE));
  return query.toString();
}

type FleetData = ReturnType<typeof useAsync<FleetList>>;

export function FleetPage() {
  const { t } = useI18n();
  const route = useRoute();
  const view = fleetViewOf(route.query);
  const apiQuery = apiQueryOf(view);
  // One read per view: the page of devices, the fleet's counts, refused handshakes and open alerts.
  const fleet = useAsync(() => get<FleetList>(`/api/v1/console/devices?${apiQuery}`), [apiQuery]);
  const alerts = fleet.data?.alerts ?? [];
  const go = (next: Partial<FleetView>) => navigate(fleetPathOf({ ...view, page: 1, ...next }));
  // The structures the enrolment form and the CMS players' mapping choose from: read once for both, once the list
  // has answered and one of them comes near the screen or is used. A city's 10,000 structures are megabytes, and a
  // form of 10,000 choices a long task, that the list need not wait for (the fleet page benchmark,
  // apps/platform/bench/fleet-page.bench.ts).
  const session = useSession();
  const authority = session.organisation.kind === 'authority';
  const listAnswered = fleet.data !== null || fleet.error !== null;
  const [structuresAsked, setStructuresAsked] = useState(false);
  const askStructures = useCallback(() => setStructuresAsked(true), []);
  const structuresWanted = listAnswered && structuresAsked;
  const structures = useAsync(
    () => (structuresWanted ? loadStructures(authority) : Promise.resolve(null)),
    [authority, structuresWanted],
  );
  return (
    <section>
      <h1>{t('fleet.title')}</h1>
      <p class="lead">{t('fleet.lead')}</p>
      <p>
        <Link href="/fleet/health">{t('reports.healthLink')}</Link>
      </p>
      <FleetSummary fleet={fleet} view={view} />
      <OpenAlerts fleet={fleet} />
      <Devices
        fleet={fleet}
        view={view}
        go={go}
        structures={structures.data}
        onStructuresWanted={askStructures}
      />
      <NeedsStructures listed={listAnswered} onWanted={askStructures}>
        <Installations alerts={alerts} structures={structures.data} />
      </NeedsStructures>
      <AlertWebhooks />
    </section>
  );
}

/** Each state's tile: its label, its count in the summary, a tone when it needs looking at. */
const SUMMARY_TILES: { state: FleetState; label: MessageKey; tone: 'good' | 'warn' | 'bad' | 'neutral' }[] = [
  { state: 'reporting', label: 'fleet.summary.reporting', tone: 'good' },
  { state: 'silent', label: 'fleet.summary.silent', tone: 'bad' },
  { state: 'screen_off', label: 'fleet.summary.screenOff', tone: 'bad' },
  { state: 'expiring', label: 'fleet.summary.expiring', tone: 'warn' },
  { state: 'refused', label: 'fleet.summary.refused', tone: 'warn' },
  { state: 'stuck', label: 'fleet.summary.stuck', tone: 'bad' },
  { state: 'never_reported', label: 'fleet.summary.neverReported', tone: 'neutral' },
  { state: 'revoked', label: 'fleet.summary.revoked', tone: 'neutral' },
];

/**
 * The whole fleet counted by state, from the server (issue 22, item 2: "a summary at the top"); each count is a link to
 * the list filtered on its state.
 */
function FleetSummary(props: { fleet: FleetData; view: FleetView }) {
  const { t, number } = useI18n();
  const summary = props.fleet.data?.summary;
  if (!summary) return null;
  return (
    <nav class="fleet-summary" aria-label={t('fleet.summary.label')}>
      <p class="fleet-summary-total">
        {t('fleet.summary.devices', { count: number(summary.devices) })}
        {props.view.state ? (
          <>
            {' '}
            <Link href={fleetPathOf({ ...props.view, state: '', page: 1 })}>{t('fleet.filter.showAll')}</Link>
          </>
        ) : null}
      </p>
      <ul>
        {SUMMARY_TILES.map((tile) => {
          const count = summary[tile.state];
          const current = props.view.state === tile.state;
          return (
            <li
              key={tile.state}
              class={`tile tile-${count > 0 ? tile.tone : 'neutral'}${current ? ' tile-current' : ''}`}
            >
              <Link
                href={fleetPathOf({ ...props.view, state: current ? '' : tile.state, page: 1 })}
                current={current}
              >
                <span class="tile-count" data-testid={`fleet-count-${tile.state}`}>
                  {number(count)}
                </span>
                <span class="tile-label">{t(tile.label)}</span>
              </Link>
            </li>
          );
        })}
      </ul>
    </nav>
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
export function DiskBadge(props: { storage: Device['storage'] }) {
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

/** Open alerts shown before "show all": a city-wide outage must not bury the list under its alerts. */
const ALERTS_SHOWN = 10;

/**
 * Open alerts at the top of the page (issue "an operator's first day", item 5: "shown on the fleet page"): each opens
 * when its condition starts and goes away when it ends.
 */
function OpenAlerts(props: { fleet: FleetData }) {
  const i18n = useI18n();
  const { t, dateTime } = i18n;
  const [all, setAll] = useState(false);
  const alerts = props.fleet.data?.alerts;
  if (!alerts) return null;
  const shown = all ? alerts : alerts.slice(0, ALERTS_SHOWN);
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
            rows={shown}
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
                      {t('alerts.device')}{' '}
                      <Link href={`/fleet/${a.device_id}`}>
                        <code title={a.device_id}>{a.device_id.slice(0, 8)}</code>
                      </Link>
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
          {alerts.length > ALERTS_SHOWN ? (
            <button
              type="button"
              class="button button-small"
              onClick={() => setAll(!all)}
              aria-expanded={all}
            >
              {all ? t('fleet.alertsFewer') : t('fleet.alertsAll', { count: alerts.length })}
            </button>
          ) : null}
        </>
      )}
    </section>
  );
}

/** A device's state as a badge: reporting, silent, never reported or revoked (the server's `status`). */
export function StatusBadge(props: { device: Device }) {
  const { t } = useI18n();
  switch (props.device.status) {
    case 'reporting':
      return <Badge tone="good">{t('fleet.status.reporting')}</Badge>;
    case 'silent':
      return <Badge tone="bad">{t('fleet.status.silent')}</Badge>;
    case 'never_reported':
      return <Badge>{t('fleet.status.neverReported')}</Badge>;
    case 'revoked':
      return <Badge tone="bad">{t('fleet.revoked')}</Badge>;
    default:
      return null;
  }
}

/** The marks of a device's row: screen off, stuck, its other alerts, its disk, refused handshakes. */
export function DeviceMarks(props: { device: Device; detailed?: boolean }) {
  const { t, dateTime } = useI18n();
  const d = props.device;
  // The status badge already says silent, and the screen mark says screen off: their alerts are not repeated.
  const alerts = (d.open_alerts ?? []).filter((k) => k !== 'device_silent' && k !== 'screen_off');
  return (
    <>
      {d.screen_off ? (
        <small class="block">
          <Badge tone="bad">{t('fleet.screenOff')}</Badge>
        </small>
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
      {alerts.length > 0 ? (
        <small class="block alert-badges">
          {alerts.map((kind) => (
            <Badge key={kind} tone="bad">
              {t(`alerts.kind.${kind}`)}
            </Badge>
          ))}
        </small>
      ) : null}
      <DiskBadge storage={d.storage} />
      {d.handshake_refusals_24h ? (
        <small class="block">
          <Badge tone="warn">{t('fleet.refusedCount', { count: d.handshake_refusals_24h })}</Badge>
        </small>
      ) : null}
    </>
  );
}

/**
 * A part of the page that chooses from the structures: it asks for them when it comes within a screen of being seen,
 * or is focused, pressed or dropped on, once the list is on screen (so the observer sees it below the list's rows).
 */
function NeedsStructures(props: { listed: boolean; onWanted: () => void; children: ComponentChildren }) {
  const ref = useRef<HTMLDivElement>(null);
  const { listed, onWanted } = props;
  useEffect(() => {
    const element = ref.current;
    if (!listed || !element) return;
    const observer = new IntersectionObserver(
      (entries) => {
        if (!entries.some((e) => e.isIntersecting)) return;
        observer.disconnect();
        onWanted();
      },
      { rootMargin: '600px 0px' },
    );
    observer.observe(element);
    return () => observer.disconnect();
  }, [listed, onWanted]);
  return (
    <div
      ref={ref}
      onFocusCapture={onWanted}
      onPointerDownCapture={onWanted}
      onDragEnterCapture={onWanted}
      onDropCapture={onWanted}
    >
      {props.children}
    </div>
  );
}

function Devices(props: {
  fleet: FleetData;
  view: FleetView;
  go: (next: Partial<FleetView>) => void;
  structures: Structure[] | null;
  onStructuresWanted: () => void;
}) {
  const { t, dateTime, number } = useI18n();
  const { fleet, view, go } = props;
  const data = fleet.data;
  // The enrolment form lists every structure (thousands in a city): made again only when they change, not on each
  // change of the list's view. The reload it calls is the newest view's.
  const reload = useRef(fleet.reload);
  reload.current = fleet.reload;
  const enrol = useMemo(
    () => <EnrolDevice structures={props.structures ?? []} onDone={() => reload.current()} />,
    [props.structures],
  );
  // The search box keeps what is typed until it is sent; a view reached by the back button shows its own search.
  // Only a change of the view's search replaces the box's text: the effect runs after the first paint, and set
  // unconditionally it wiped what was typed in between (seen on a busy machine).
  const [search, setSearch] = useState(view.q);
  const shownQ = useRef(view.q);
  useEffect(() => {
    if (shownQ.current === view.q) return;
    shownQ.current = view.q;
    setSearch(view.q);
  }, [view.q]);
  const pages = data ? Math.max(1, Math.ceil(data.total / FLEET_PAGE_SIZE)) : 1;
  const first = data && data.items.length > 0 ? data.offset + 1 : 0;
  const last = data ? data.offset + data.items.length : 0;

  return (
    <div class="panel">
      <h2 id="devices-title">{t('fleet.devices')}</h2>
      <form
        class="filters fleet-filters"
        aria-label={t('fleet.filter.label')}
        onSubmit={(e) => {
          e.preventDefault();
          go({ q: search.trim() });
        }}
      >
        {/* The search on a line of its own, the state and the order below it: the three side by side do not fit
            in Russian and Kazakh at 1366 pixels, and a search box as wide as its hint needs the room. */}
        <div class="fleet-search">
          <Field id="fleet-search" label={t('fleet.filter.search')}>
            <input
              id="fleet-search"
              type="search"
              autocomplete="off"
              maxLength={100}
              aria-describedby="fleet-search-hint"
              value={search}
              onInput={(e) => setSearch((e.target as HTMLInputElement).value)}
            />
          </Field>
          <button type="submit" class="button">
            {t('fleet.filter.searchButton')}
          </button>
          {/* Under the box and its button, not inside the box as a placeholder: a hint that goes when typing starts
              was also cut short on a phone in Kazakh. */}
          <p class="hint" id="fleet-search-hint">
            {t('fleet.filter.searchHint')}
          </p>
        </div>
        <Field id="fleet-state" label={t('fleet.filter.state')}>
          <select
            id="fleet-state"
            value={view.state}
            onChange={(e) => go({ state: (e.target as HTMLSelectElement).value as FleetState | '' })}
          >
            <option value="">{t('fleet.filter.anyState')}</option>
            {SUMMARY_TILES.map((tile) => (
              <option key={tile.state} value={tile.state}>
                {t(tile.label)}
              </option>
            ))}
          </select>
        </Field>
        <Field id="fleet-sort" label={t('fleet.filter.sort')}>
          <select
            id="fleet-sort"
            value={view.sort}
            onChange={(e) => go({ sort: (e.target as HTMLSelectElement).value as SortChoice })}
          >
            {SORTS.map((s) => (
              <option key={s.value} value={s.value}>
                {t(
                  `fleet.sort.${s.value.startsWith('-') ? `${s.value.slice(1)}Desc` : s.value}` as MessageKey,
                )}
              </option>
            ))}
          </select>
        </Field>
      </form>
      {fleet.loading && !data ? <Loading /> : null}
      <ErrorNotice error={fleet.error} />
      {data && data.summary.stuck > 0 ? (
        <Notice kind="error">{t('fleet.stuckNotice', { count: data.summary.stuck })}</Notice>
      ) : null}
      <Refusals refusals={data?.handshake_refusals} />
      {data ? (
        <p class="fleet-range" aria-live="polite" data-testid="fleet-range">
          {data.total === 0
            ? view.q || view.state
              ? t('fleet.filter.noMatch')
              : t('fleet.noDevices')
            : t('fleet.range', { first: number(first), last: number(last), total: number(data.total) })}
          {fleet.loading ? <> {t('common.loading')}</> : null}
        </p>
      ) : null}
      {data && data.items.length > 0 ? (
        <DataTable
          caption={t('fleet.devices')}
          class="fleet-devices"
          rows={data.items}
          rowKey={(d) => d.device_id}
          rowClass={(d) =>
            d.revoked_at
              ? 'row-muted'
              : d.stuck || d.status === 'silent' || d.screen_off || (d.open_alerts ?? []).length > 0
                ? 'row-alert'
                : undefined
          }
          columns={[
            {
              header: t('fleet.device'),
              cell: (d) => (
                <>
                  <Link href={`/fleet/${d.device_id}`}>
                    <code title={d.device_id}>{d.device_id.slice(0, 8)}</code>
                  </Link>
                  <DeviceMarks device={d} />
                </>
              ),
            },
            { header: t('fleet.structure'), cell: (d) => d.structure_code },
            { header: t('fleet.status'), cell: (d) => <StatusBadge device={d} /> },
            {
              header: t('fleet.lastBatch'),
              cell: (d) => (
                <>
                  {d.last_batch_at ? (
                    <time dateTime={d.last_batch_at}>{dateTime(d.last_batch_at)}</time>
                  ) : (
                    '—'
                  )}
                  {d.last_batch_seq !== undefined && d.last_batch_seq !== null ? (
                    <small class="muted block">{t('fleet.batchSeq', { seq: d.last_batch_seq })}</small>
                  ) : null}
                </>
              ),
            },
            { header: t('fleet.queueLag'), cell: (d) => <QueueLag seconds={d.queue_lag_seconds} /> },
            { header: t('fleet.certificateExpiry'), cell: (d) => <Expiry notAfter={certificateExpiry(d)} /> },
          ]}
        />
      ) : null}
      {data && pages > 1 ? (
        <nav class="pager actions" aria-label={t('fleet.pages')}>
          <button
            type="button"
            class="button"
            disabled={view.page <= 1}
            onClick={() => go({ ...view, page: view.page - 1 })}
          >
            {t('fleet.previous')}
          </button>
          <span>{t('fleet.pageOf', { page: number(view.page), pages: number(pages) })}</span>
          <button
            type="button"
            class="button"
            disabled={view.page >= pages}
            onClick={() => go({ ...view, page: view.page + 1 })}
          >
            {t('fleet.next')}
          </button>
        </nav>
      ) : null}
      <NeedsStructures listed={data !== null || fleet.error !== null} onWanted={props.onStructuresWanted}>
        {enrol}
      </NeedsStructures>
    </div>
  );
}

/** A refusal's reason in words; a code this console does not know yet is shown as it is. */
function refusalLabel(t: I18n['t'], reason: string): string {
  const key = `fleet.refusal.${reason}`;
  return key in en ? t(key as MessageKey) : reason;
}

/** Refused handshakes and certificates of the last 24 hours: why a player cannot connect. */
function Refusals(props: { refusals: FleetList['handshake_refusals'] | undefined }) {
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

function Installations(props: { alerts: Alert[]; structures: Structure[] | null }) {
  const { t } = useI18n();
  const session = useSession();
  const authority = session.organisation.kind === 'authority';
  const list = useAsync(
    () => get<{ items: CmsInstallation[] }>('/api/v1/console/cms-installations').then((r) => r.items),
    [],
  );
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
          structures={props.structures}
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
