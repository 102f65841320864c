import { useState } from 'preact/hooks';
import { get } from '../api/client.js';
import type { FleetHealth, FleetHealthBucket } from '@ooh/protocol';
import { BarChart, LineChart, PALETTE } from '../components/bar-chart.js';
import { dayAndHour, percent, shortDay, shortHour } from '../components/chart-labels.js';
import { Link } from '../components/layout.js';
import { ErrorNotice, Field, Loading, useAsync } from '../components/ui.js';
import { type MessageKey, useI18n } from '../i18n/index.js';

/** The periods offered: hours for up to three days, days for up to a month (the platform's bounds). */
const PERIODS: { key: string; bucket: 'hour' | 'day'; days: number; label: MessageKey }[] = [
  { key: 'hour-1', bucket: 'hour', days: 1, label: 'reports.period24h' },
  { key: 'hour-3', bucket: 'hour', days: 3, label: 'reports.period3d' },
  { key: 'day-7', bucket: 'day', days: 7, label: 'reports.period7d' },
  { key: 'day-14', bucket: 'day', days: 14, label: 'reports.period14d' },
  { key: 'day-31', bucket: 'day', days: 31, label: 'reports.period31d' },
];

/** A lag in the unit that reads best for the largest value of the chart. */
function lagUnit(max: number): { divisor: number; label: MessageKey; unit: MessageKey } {
  if (max >= 2 * 3600) return { divisor: 3600, label: 'charts.axisLagHours', unit: 'reports.unitHours' };
  if (max >= 120) return { divisor: 60, label: 'charts.axisLagMinutes', unit: 'reports.unitMinutes' };
  return { divisor: 1, label: 'charts.axisLagSeconds', unit: 'reports.unitSeconds' };
}

/**
 * Fleet health over time (GET /api/v1/console/reports/fleet-health): devices reporting, queue lag and screens
 * reported off per Almaty hour or day, each chart with its numbers.
 */
export function FleetHealthPage() {
  const { t, number, date, dateTime, language } = useI18n();
  const [period, setPeriod] = useState('day-14');
  const chosen = PERIODS.find((p) => p.key === period) ?? PERIODS[3]!;
  const health = useAsync(
    () =>
      get<FleetHealth>(
        `/api/v1/console/reports/fleet-health?${new URLSearchParams({ bucket: chosen.bucket, days: String(chosen.days) })}`,
      ),
    [chosen.bucket, chosen.days],
  );
  const data = health.data;
  const items = data?.items ?? [];
  const keys = items.map((i) => i.start);
  const byStart = new Map(items.map((i) => [i.start, i]));
  const hourly = data?.bucket === 'hour';
  const label = (start: string) => {
    const bucket = byStart.get(start);
    if (!hourly) return shortDay(language, bucketDay(start));
    const hour = shortHour(language, start);
    return hour === '00:00' && bucket ? shortDay(language, bucketDay(start)) : hour;
  };
  const name = (start: string) => {
    const bucket = byStart.get(start);
    const text = hourly ? dayAndHour(language, start) : date(bucketDay(start));
    return bucket?.partial ? `${text} (${t('reports.underWay')})` : text;
  };
  const xLabel = t(hourly ? 'charts.axisHour' : 'charts.axisDay');
  const maxLag = Math.max(0, ...items.map((i) => i.queue_lag_max_seconds ?? 0));
  const unit = lagUnit(maxLag);
  const lag = (pick: (i: FleetHealthBucket) => number | null) =>
    items.map((i) => {
      const v = pick(i);
      return v === null ? null : Math.round((v / unit.divisor) * 10) / 10;
    });
  const last = items.at(-1);
  return (
    <section>
      <p class="breadcrumbs">
        <Link href="/fleet">{t('nav.fleet')}</Link>
      </p>
      <h1>{t('reports.healthTitle')}</h1>
      <p class="lead">{t('reports.healthLead')}</p>
      <form class="filters" onSubmit={(e) => e.preventDefault()}>
        <Field id="health-period" label={t('reports.period')}>
          <select
            id="health-period"
            value={period}
            onChange={(e) => setPeriod((e.target as HTMLSelectElement).value)}
          >
            {PERIODS.map((p) => (
              <option key={p.key} value={p.key}>
                {t(p.label)}
              </option>
            ))}
          </select>
        </Field>
      </form>
      {health.loading && !data ? <Loading /> : null}
      <ErrorNotice error={health.error} />
      {data ? (
        <>
          <dl class="stats">
            <div>
              <dt>{t('reports.devices')}</dt>
              <dd data-testid="health-devices">{number(data.devices)}</dd>
            </div>
            <div>
              <dt>{t('reports.neverReported')}</dt>
              <dd>{number(data.devices_never_reported)}</dd>
            </div>
            <div>
              <dt>{t(hourly ? 'reports.reportingThisHour' : 'reports.reportingToday')}</dt>
              <dd data-testid="health-reporting">
                {last ? `${number(last.devices_reporting)} / ${number(last.devices_expected)}` : '—'}
              </dd>
            </div>
          </dl>
          <p class="hint">
            {t('reports.healthAsOf', { at: dateTime(data.generated_at) })} {t('reports.healthNote')}
          </p>
          <div class="panel">
            <h2>{t('reports.reportingTitle')}</h2>
            <BarChart
              title={t('reports.reportingTitle')}
              titleHidden
              categories={keys}
              categoryLabel={label}
              categoryName={name}
              series={[
                {
                  name: t('reports.reporting'),
                  values: items.map((i) => i.devices_reporting),
                  color: PALETTE[0],
                },
                {
                  name: t('reports.silent'),
                  values: items.map((i) => i.devices_silent),
                  color: PALETTE[1],
                  hatched: true,
                },
              ]}
              xLabel={xLabel}
              yLabel={t('charts.axisDevices')}
              emptyText={t('reports.noDevicesReported')}
            />
          </div>
          <div class="panel">
            <h2>{t('reports.lagTitle')}</h2>
            <p class="hint">{t('reports.lagHint')}</p>
            <LineChart
              title={t('reports.lagTitle')}
              titleHidden
              categories={keys}
              categoryLabel={label}
              categoryName={name}
              series={[
                {
                  name: t('reports.lagMedian'),
                  values: lag((i) => i.queue_lag_p50_seconds),
                  color: PALETTE[0],
                },
                {
                  name: t('reports.lagP95'),
                  values: lag((i) => i.queue_lag_p95_seconds),
                  color: PALETTE[1],
                  dashed: true,
                },
                { name: t('reports.lagMax'), values: lag((i) => i.queue_lag_max_seconds), color: PALETTE[7] },
              ]}
              xLabel={xLabel}
              yLabel={t(unit.label)}
              format={(v) => `${percent(language, v)} ${t(unit.unit)}`}
              emptyText={t('reports.noLag')}
            />
          </div>
          <div class="panel">
            <h2>{t('reports.screenOffTitle')}</h2>
            <p class="hint">{t('reports.screenOffHint')}</p>
            <BarChart
              title={t('reports.screenOffTitle')}
              titleHidden
              categories={keys}
              categoryLabel={label}
              categoryName={name}
              series={[
                {
                  name: t('reports.screenOffShare'),
                  values: items.map((i) => i.screen_off_share_pct),
                  color: PALETTE[4],
                },
              ]}
              xLabel={xLabel}
              yLabel={t('charts.axisShare')}
              format={(v) => `${percent(language, v)} %`}
              emptyText={t('reports.noScreenOff')}
            />
          </div>
        </>
      ) : null}
    </section>
  );
}

/** The Almaty calendar day an Almaty-time instant ('2026-11-20T00:00:00+05:00') begins on. */
function bucketDay(start: string): string {
  return start.slice(0, 10);
}
