import {
  addDays,
  almatyDate,
  type CampaignListItem,
  type PlaysAnswer,
  type PopQualityAnswer,
} from '@ooh/protocol';
import { useMemo, useState } from 'preact/hooks';
import { loadStructures } from '../api/catalogue.js';
import { get } from '../api/client.js';
import { BarChart, HorizontalBars, PALETTE, type Series } from '../components/bar-chart.js';
import { dayAndHour, percent, shortDay, shortHour } from '../components/chart-labels.js';
import { Link } from '../components/layout.js';
import { DataTable } from '../components/table.js';
import { ErrorNotice, Field, knownKey, Loading, Segmented, useAsync } from '../components/ui.js';
import { useI18n } from '../i18n/index.js';
import { groupSeries } from '../lib/series.js';
import { can, useSession } from '../lib/session.js';
import { EventSettings } from './city-events.js';

/** Structures drawn apart in the stacked chart; the rest are summed as "Other". */
const MAX_SERIES = 7;
/** Campaigns drawn as small charts; all of them are in the table. */
const MAX_CAMPAIGN_CHARTS = 6;

interface CityEvent {
  id: string;
  day: string;
  created_at: string;
  data: {
    submission_number?: string;
    advertiser_name?: string;
    structure_code?: string | null;
    declared_plays?: number;
    actual_plays?: number;
    deviation_pct?: number | null;
    direction?: 'over' | 'under';
    band_pct?: number;
  };
}

/** Hours drawn at most: the API answers at most 3 days per hour. */
const HOUR_DAYS = 3;

type Bucket = 'day' | 'hour';

/** The bars of an answer: its days, or its hours for bucket=hour. */
function categoriesOf(data: PlaysAnswer): string[] {
  return data.bucket === 'hour' && data.hours ? data.hours : data.days;
}

/** Series of the largest structures by plays, the rest folded into one. */
function structureSeries(data: PlaysAnswer, other: (count: number) => string): Series[] {
  return groupSeries(
    data.structures.map((s) => ({ name: s.code, values: s.plays })),
    { length: categoriesOf(data).length, least: MAX_SERIES, other },
  ).map((g) =>
    g.other ? { name: g.name, values: g.values, color: '#7a8494' } : { name: g.name, values: g.values },
  );
}

function sumOf(values: readonly (number | null)[]): number {
  return values.reduce<number>((n, v) => n + (v ?? 0), 0);
}

/**
 * Proof of play: counted plays per Almaty day by structure and by campaign against the declared plays
 * (GET /api/v1/console/reports/plays, scoped to what the session may see), and for the authority the flagged and
 * refused records and the declared-vs-actual city events.
 */
export function PlaysPage() {
  const { t, date, number, dateTime, language } = useI18n();
  const session = useSession();
  const authority = can.plays(session);
  const today = almatyDate(Date.now());
  const [from, setFrom] = useState(addDays(today, -13));
  const [to, setTo] = useState(today);
  const [structure, setStructure] = useState('');
  const [campaign, setCampaign] = useState('');
  const [applied, setApplied] = useState({ from, to, structure, campaign });
  const [bucket, setBucket] = useState<Bucket>('day');
  const structures = useAsync(() => loadStructures(authority), []);
  const campaigns = useAsync(
    () => get<{ items: CampaignListItem[] }>('/api/v1/console/reports/campaigns').then((r) => r.items),
    [],
  );
  const plays = useAsync(() => {
    const q = new URLSearchParams({ from: applied.from, to: applied.to });
    if (applied.structure) q.set('structure_id', applied.structure);
    if (applied.campaign) q.set('submission_id', applied.campaign);
    return get<PlaysAnswer>(`/api/v1/console/reports/plays?${q}`);
  }, [applied]);
  // Hours of the last days of the period (at most HOUR_DAYS), fetched when the switch asks for them.
  const hourFrom =
    applied.from > addDays(applied.to, 1 - HOUR_DAYS) ? applied.from : addDays(applied.to, 1 - HOUR_DAYS);
  const hourly = useAsync(() => {
    if (bucket !== 'hour') return Promise.resolve(null);
    const q = new URLSearchParams({ bucket: 'hour', from: hourFrom, to: applied.to });
    if (applied.structure) q.set('structure_id', applied.structure);
    if (applied.campaign) q.set('submission_id', applied.campaign);
    return get<PlaysAnswer>(`/api/v1/console/reports/plays?${q}`);
  }, [applied, bucket]);
  const quality = useAsync(
    () =>
      authority
        ? get<PopQualityAnswer>(
            `/api/v1/console/pop/quality?${new URLSearchParams({ from: applied.from, to: applied.to })}`,
          )
        : Promise.resolve(null),
    [applied, authority],
  );
  const events = useAsync(
    () =>
      authority
        ? get<{ items: CityEvent[] }>('/api/v1/console/events?type=declared_vs_actual&limit=50').then(
            (r) => r.items,
          )
        : Promise.resolve(null),
    [authority],
  );
  const data = plays.data;
  // The charts draw days, or hours when the switch says so; the figures and tables stay the period's days.
  const chart = bucket === 'hour' ? (hourly.data ?? null) : (data ?? null);
  const hours = chart?.bucket === 'hour';
  const categories = chart ? categoriesOf(chart) : [];
  const categoryLabel = hours
    ? (h: string) => {
        const hour = shortHour(language, h);
        return hour === '00:00' ? shortDay(language, h.slice(0, 10)) : hour;
      }
    : (d: string) => shortDay(language, d);
  const categoryName = hours ? (h: string) => dayAndHour(language, h) : (d: string) => date(d);
  const xLabel = t(hours ? 'charts.axisHour' : 'charts.axisDay');
  const bySeries = useMemo(
    () => (chart ? structureSeries(chart, (count) => t('plays.otherCount', { count })) : []),
    [chart, t],
  );
  const declaredPerDay = useMemo(() => {
    if (!chart) return [];
    return categoriesOf(chart).map((_, i) => {
      const values = chart.structures.map((s) => s.declared[i]).filter((v): v is number => v !== null);
      return values.length === 0 ? null : values.reduce((a, b) => a + b, 0);
    });
  }, [chart]);
  const chartCampaigns = useMemo(
    () =>
      (chart?.campaigns ?? [])
        .slice()
        .sort((a, b) => b.totals.plays - a.totals.plays || b.totals.declared - a.totals.declared),
    [chart],
  );
  const hasDeclared = declaredPerDay.some((v) => v !== null);
  const campaignRows = useMemo(
    () =>
      (data?.campaigns ?? [])
        .slice()
        .sort((a, b) => b.totals.plays - a.totals.plays || b.totals.declared - a.totals.declared),
    [data],
  );
  const deviation =
    data && data.totals.declared > 0
      ? Math.round(((data.totals.plays_compared - data.totals.declared) * 10_000) / data.totals.declared) /
        100
      : null;

  return (
    <section>
      <h1>{t('plays.title')}</h1>
      <p class="lead">{t('reports.playsLead')}</p>
      <form
        class="filters"
        onSubmit={(e) => {
          e.preventDefault();
          setApplied({ from, to, structure, campaign });
        }}
      >
        <Field id="plays-from" label={t('plays.from')}>
          <input
            id="plays-from"
            type="date"
            required
            value={from}
            onInput={(e) => setFrom((e.target as HTMLInputElement).value)}
          />
        </Field>
        <Field id="plays-to" label={t('plays.to')}>
          <input
            id="plays-to"
            type="date"
            required
            min={from}
            value={to}
            onInput={(e) => setTo((e.target as HTMLInputElement).value)}
          />
        </Field>
        <Field id="plays-structure" label={t('fleet.structure')}>
          <select
            id="plays-structure"
            value={structure}
            onChange={(e) => setStructure((e.target as HTMLSelectElement).value)}
          >
            <option value="">{t('plays.allStructures')}</option>
            {(structures.data ?? []).map((s) => (
              <option key={s.id} value={s.id}>
                {s.code}
              </option>
            ))}
          </select>
        </Field>
        <Field id="plays-campaign" label={t('reports.campaign')}>
          <select
            id="plays-campaign"
            value={campaign}
            onChange={(e) => setCampaign((e.target as HTMLSelectElement).value)}
          >
            <option value="">{t('reports.allCampaigns')}</option>
            {(campaigns.data ?? []).map((c) => (
              <option key={c.submission_id} value={c.submission_id}>
                {c.submission_number} · {c.advertiser_name}
              </option>
            ))}
          </select>
        </Field>
        <button type="submit" class="button button-primary">
          {t('plays.show')}
        </button>
      </form>
      <p class="hint">
        <Link href="/reports">{t('reports.toReports')}</Link>
        {/* The fleet's health is the authority's to read whether or not it holds the fleet (an authority member has
            no fleet page to find it on). */}
        {authority ? (
          <>
            {' · '}
            <Link href="/fleet/health">{t('reports.healthLink')}</Link>
          </>
        ) : null}
      </p>
      <Segmented
        legend={t('plays.bucket')}
        name="plays-bucket"
        options={[
          { value: 'day' as const, label: t('plays.bucketDay') },
          { value: 'hour' as const, label: t('plays.bucketHour') },
        ]}
        value={bucket}
        onChange={setBucket}
      />

      {plays.loading && !data ? <Loading /> : null}
      <ErrorNotice error={plays.error} />
      {data ? (
        <>
          <dl class="stats">
            <div>
              <dt>{t('plays.total')}</dt>
              <dd data-testid="plays-total">{number(data.totals.plays)}</dd>
            </div>
            <div>
              <dt>{t('plays.flagged')}</dt>
              <dd data-testid="plays-flagged">{number(data.totals.flagged)}</dd>
            </div>
            <div>
              <dt>{t('plays.attested')}</dt>
              <dd>{number(data.totals.attested)}</dd>
            </div>
            <div>
              <dt>{t('reports.declaredOver')}</dt>
              <dd data-testid="plays-declared">{number(data.totals.declared)}</dd>
            </div>
            <div>
              <dt>{t('reports.deviation')}</dt>
              <dd>
                {deviation === null ? '—' : t('plays.percent', { value: percent(language, deviation) })}
              </dd>
            </div>
            <div>
              <dt>{t('reports.slotPlays')}</dt>
              <dd>{number(data.totals.slot)}</dd>
            </div>
          </dl>

          <div class="panel">
            <h2>{t(bucket === 'hour' ? 'plays.byStructureHours' : 'plays.byStructure')}</h2>
            <p class="hint">{t('reports.byStructureHint')}</p>
            {bucket === 'hour' ? (
              <p class="hint" data-testid="plays-hours-hint">
                {t('plays.hoursHint', { from: date(hourFrom), to: date(applied.to) })}
              </p>
            ) : null}
            {bucket === 'hour' && hourly.loading && !hourly.data ? <Loading /> : null}
            <ErrorNotice error={bucket === 'hour' ? hourly.error : null} />
            {chart ? (
              <BarChart
                title={t(hours ? 'plays.byStructureHours' : 'plays.byStructure')}
                titleHidden
                categories={categories}
                categoryLabel={categoryLabel}
                categoryName={categoryName}
                series={bySeries}
                reference={hasDeclared ? { name: t('charts.declared'), values: declaredPerDay } : undefined}
                xLabel={xLabel}
                yLabel={t('charts.axisPlays')}
                emptyText={t('plays.none')}
              />
            ) : null}
          </div>

          <div class="panel">
            <h2>{t(bucket === 'hour' ? 'reports.byCampaignHours' : 'reports.byCampaign')}</h2>
            <p class="hint">{t('reports.byCampaignHint')}</p>
            {campaignRows.length === 0 ? <p>{t('reports.noCampaigns')}</p> : null}
            <div class="chart-grid-small">
              {chartCampaigns.slice(0, MAX_CAMPAIGN_CHARTS).map((c) => (
                <div key={c.submission_id} class="small-chart">
                  <h3>
                    {c.submission_number} · {c.advertiser_name}
                  </h3>
                  <BarChart
                    title={t(hours ? 'reports.campaignChartHours' : 'reports.campaignChart', {
                      number: c.submission_number,
                      advertiser: c.advertiser_name,
                    })}
                    categories={categories}
                    categoryLabel={categoryLabel}
                    categoryName={categoryName}
                    series={[
                      {
                        name: t('reports.unflagged'),
                        values: c.plays.map((v, i) => v - (c.flagged[i] ?? 0)),
                        color: PALETTE[0],
                      },
                      { name: t('plays.flagged'), values: c.flagged, color: PALETTE[1], hatched: true },
                    ]}
                    reference={hours ? undefined : { name: t('charts.declared'), values: c.declared }}
                    xLabel={xLabel}
                    yLabel={t('charts.axisPlays')}
                    emptyText={t('plays.none')}
                    height={220}
                  />
                  <p>
                    <Link href={`/reports/${c.submission_id}`}>{t('reports.openReport')}</Link>
                  </p>
                </div>
              ))}
            </div>
            {campaignRows.length > 0 ? (
              <DataTable
                caption={t('reports.byCampaign')}
                rows={campaignRows}
                rowKey={(c) => c.submission_id}
                columns={[
                  {
                    header: t('reports.campaign'),
                    rowHeader: true,
                    cell: (c) => (
                      <>
                        <Link href={`/reports/${c.submission_id}`}>{c.submission_number}</Link>
                        <small class="muted block">{c.advertiser_name}</small>
                      </>
                    ),
                  },
                  { header: t('plays.total'), numeric: true, cell: (c) => number(c.totals.plays) },
                  { header: t('plays.flagged'), numeric: true, cell: (c) => number(c.totals.flagged) },
                  {
                    header: t('reports.declaredOver'),
                    numeric: true,
                    cell: (c) => number(c.totals.declared),
                  },
                  {
                    header: t('reports.playsCompared'),
                    numeric: true,
                    cell: (c) => number(c.totals.plays_compared),
                  },
                  {
                    header: t('reports.deviation'),
                    numeric: true,
                    cell: (c) =>
                      c.totals.declared === 0
                        ? '—'
                        : t('plays.percent', {
                            value: percent(
                              language,
                              Math.round(
                                ((c.totals.plays_compared - c.totals.declared) * 10_000) / c.totals.declared,
                              ) / 100,
                            ),
                          }),
                  },
                ]}
              />
            ) : null}
          </div>

          <div class="panel">
            <h2>{t('reports.apart')}</h2>
            <DataTable
              caption={t('reports.apart')}
              rows={[
                {
                  key: 'unknown',
                  label: t('reports.unknownApprovals'),
                  values: data.unknown_approvals.plays,
                },
                { key: 'gov', label: t('slot.gov'), values: data.slots.gov },
                { key: 'emergency', label: t('slot.emergency'), values: data.slots.emergency },
              ]}
              rowKey={(r) => r.key}
              columns={[
                { header: t('reports.kind'), rowHeader: true, cell: (r) => r.label },
                { header: t('plays.total'), numeric: true, cell: (r) => number(sumOf(r.values)) },
              ]}
            />
            <p class="hint">{t('reports.apartHint')}</p>
          </div>
        </>
      ) : null}

      {authority ? (
        <div class="panel">
          <h2>{t('plays.quality')}</h2>
          {quality.loading && !quality.data ? <Loading /> : null}
          <ErrorNotice error={quality.error} />
          {quality.data ? (
            <div class="two-columns">
              <HorizontalBars
                title={t('plays.byFlag')}
                rows={quality.data.flags.map((f) => ({
                  label: t(knownKey(`flag.${f.flag}`) ?? 'flag.other'),
                  value: f.records,
                }))}
              />
              <HorizontalBars
                title={t('plays.byReason')}
                rows={quality.data.refusals.map((r) => ({
                  label: t(knownKey(`reason.${r.reason}`) ?? 'reason.other'),
                  value: r.records,
                }))}
              />
            </div>
          ) : null}
        </div>
      ) : null}

      {authority ? (
        <div class="panel">
          <h2>{t('plays.declared')}</h2>
          <p class="hint">{t('plays.declaredHint')}</p>
          {events.loading && !events.data ? <Loading /> : null}
          <ErrorNotice error={events.error} />
          {events.data && events.data.length === 0 ? <p>{t('plays.noEvents')}</p> : null}
          {events.data && events.data.length > 0 ? (
            <DataTable
              caption={t('plays.declared')}
              rows={events.data}
              rowKey={(e) => e.id}
              columns={[
                { header: t('plays.day'), cell: (e) => date(e.day) },
                {
                  header: t('submission.number'),
                  cell: (e) => (
                    <>
                      {e.data.submission_number ?? '—'}
                      {e.data.advertiser_name ? (
                        <small class="muted block">{e.data.advertiser_name}</small>
                      ) : null}
                    </>
                  ),
                },
                { header: t('fleet.structure'), cell: (e) => e.data.structure_code ?? '—' },
                {
                  header: t('plays.declaredPlays'),
                  numeric: true,
                  cell: (e) => number(e.data.declared_plays),
                },
                { header: t('plays.actualPlays'), numeric: true, cell: (e) => number(e.data.actual_plays) },
                {
                  header: t('plays.deviation'),
                  numeric: true,
                  cell: (e) => (
                    <>
                      {e.data.deviation_pct === null || e.data.deviation_pct === undefined
                        ? '—'
                        : t('plays.percent', { value: e.data.deviation_pct })}
                      {e.data.direction ? (
                        <small class="muted block">
                          {t(e.data.direction === 'over' ? 'plays.over' : 'plays.under')}
                        </small>
                      ) : null}
                    </>
                  ),
                },
                { header: t('plays.raised'), cell: (e) => dateTime(e.created_at) },
              ]}
            />
          ) : null}
        </div>
      ) : null}

      {authority ? <EventSettings canChange={can.administer(session)} /> : null}
    </section>
  );
}
