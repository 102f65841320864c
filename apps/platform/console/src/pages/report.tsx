import {
  addDays,
  type CampaignListItem,
  type CampaignReport,
  type ReportCell,
  type ReportTotals,
  type StatsSeal,
} from '@ooh/protocol';
import { type Check, parsePem, sha256Hex, verifySeal } from '@ooh/verify';
import { useState } from 'preact/hooks';
import { ApiError, get, verifyGet } from '../api/client.js';
import { BarChart, PALETTE } from '../components/bar-chart.js';
import { dateTimeInZone, percent, shortDay } from '../components/chart-labels.js';
import { Link } from '../components/layout.js';
import { DataTable, TableFrame } from '../components/table.js';
import {
  Badge,
  ErrorNotice,
  Field,
  Hash,
  knownKey,
  Loading,
  Notice,
  Segmented,
  sealReasonKey,
  useAsync,
} from '../components/ui.js';
import { type Language, type MessageKey, useI18n } from '../i18n/index.js';

type Zone = 'almaty' | 'utc';

/** Reports: the campaigns the session may report on, each with its printable proof-of-play report. */
export function ReportsPage() {
  const { t, number, dateRange } = useI18n();
  const campaigns = useAsync(
    () => get<{ items: CampaignListItem[] }>('/api/v1/console/reports/campaigns').then((r) => r.items),
    [],
  );
  return (
    <section>
      <h1>{t('reports.title')}</h1>
      <p class="lead">{t('reports.lead')}</p>
      {campaigns.loading && !campaigns.data ? <Loading /> : null}
      <ErrorNotice error={campaigns.error} />
      {campaigns.data && campaigns.data.length === 0 ? <p>{t('reports.noCampaigns')}</p> : null}
      {campaigns.data && campaigns.data.length > 0 ? (
        <DataTable
          caption={t('reports.title')}
          rows={campaigns.data}
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
            { header: t('reports.submittedBy'), cell: (c) => c.submitted_by },
            { header: t('reports.period'), cell: (c) => dateRange(c.valid_from, c.valid_until) },
            {
              header: t('reports.approvals'),
              cell: (c) => (
                <ul class="plain">
                  {c.approvals.map((a) => (
                    <li key={a.approval_number}>
                      {a.approval_number} {a.revoked ? <Badge tone="bad">{t('status.revoked')}</Badge> : null}
                    </li>
                  ))}
                </ul>
              ),
            },
            {
              header: t('reports.structures'),
              numeric: true,
              cell: (c) => (
                <>
                  {number(c.structures)}
                  {c.scope === 'own_structures' ? (
                    <small class="muted block">{t('reports.yoursOnly')}</small>
                  ) : null}
                </>
              ),
            },
            {
              header: t('reports.declaredPerDay'),
              numeric: true,
              cell: (c) => number(c.declared_daily_plays),
            },
            { header: t('plays.total'), numeric: true, cell: (c) => number(c.plays) },
            { header: t('plays.flagged'), numeric: true, cell: (c) => number(c.flagged) },
          ]}
        />
      ) : null}
    </section>
  );
}

function zoneOfUrl(): Zone {
  return new URLSearchParams(window.location.search).get('tz') === 'utc' ? 'utc' : 'almaty';
}

/**
 * The proof-of-play report of one campaign, for the operator to hand to the advertiser: a page that prints as a
 * document (no navigation, tables whole) and a CSV file, with days in Almaty time or in UTC.
 */
export function CampaignReportPage(props: { id: string }) {
  const { t } = useI18n();
  const [zone, setZoneState] = useState<Zone>(zoneOfUrl);
  const setZone = (next: Zone) => {
    setZoneState(next);
    const url = new URL(window.location.href);
    if (next === 'utc') url.searchParams.set('tz', 'utc');
    else url.searchParams.delete('tz');
    window.history.replaceState(window.history.state, '', url);
  };
  const report = useAsync(
    () => get<CampaignReport>(`/api/v1/console/reports/campaigns/${props.id}?tz=${zone}`),
    [props.id, zone],
  );
  const csvUrl = `/api/v1/console/reports/campaigns/${props.id}/plays.csv?tz=${zone}`;
  return (
    <section class="report">
      <div class="report-toolbar no-print">
        <Link href="/reports">{t('reports.back')}</Link>
        <Segmented
          legend={t('reports.timeZone')}
          name="report-zone"
          options={[
            { value: 'almaty' as const, label: t('reports.zoneAlmaty') },
            { value: 'utc' as const, label: t('reports.zoneUtc') },
          ]}
          value={zone}
          onChange={setZone}
        />
        <button type="button" class="button" onClick={() => window.print()} disabled={!report.data}>
          {t('reports.print')}
        </button>
        <a class="button" href={csvUrl} download>
          {t('reports.downloadCsv')}
        </a>
      </div>
      {report.loading && !report.data ? <Loading /> : null}
      <ErrorNotice error={report.error} />
      {report.data ? <ReportDocument report={report.data} /> : null}
    </section>
  );
}

function deviationText(language: Parameters<typeof percent>[0], value: number | null): string {
  if (value === null) return '—';
  return `${value > 0 ? '+' : ''}${percent(language, value)} %`;
}

function ReportDocument(props: { report: CampaignReport }) {
  const { t, date, dateRange, number, language } = useI18n();
  const r = props.report;
  const utc = r.report.time_zone === 'UTC';
  const zoneName = t(utc ? 'reports.zoneUtc' : 'reports.zoneAlmaty');
  const instant = (value: string | null) => (value ? formatInZone(language, value, utc) : '—');
  const codes = new Map(r.structures.map((s) => [s.structure_id, s.code]));
  const dayName = (d: string) => date(d);
  const declaredPerDay = r.days.map((d) => {
    const cells = r.cells.filter((c) => c.day === d.day && c.declared !== null);
    return cells.length === 0 ? null : cells.reduce((n, c) => n + (c.declared ?? 0), 0);
  });
  const [showCells, setShowCells] = useState(r.cells.length <= 60);
  // Per hour: the 24 hours of one day (in the report's zone), the last day with plays at first.
  const [bucket, setBucket] = useState<'day' | 'hour'>('day');
  const [hourDay, setHourDay] = useState(r.hours.at(-1)?.day ?? r.days.at(-1)?.day ?? '');
  const hourKeys = Array.from({ length: 24 }, (_, h) => `${hourDay}|${h}`);
  const hourOf = new Map(r.hours.filter((h) => h.day === hourDay).map((h) => [`${h.day}|${h.hour}`, h]));
  const hh = (key: string) => `${key.split('|')[1]!.padStart(2, '0')}:00`;
  return (
    <article class="report-document" aria-labelledby="report-title">
      <header class="report-head">
        <p class="eyebrow">{t('reports.documentKind')}</p>
        <h1 id="report-title">
          {r.campaign.advertiser_name} · {r.campaign.submission_number}
        </h1>
        <p>
          {t('reports.daysIn', { zone: zoneName })}{' '}
          {t('reports.generated', {
            at: instant(r.report.generated_at),
            organisation: r.report.viewer_organisation,
          })}
        </p>
        {r.report.scope === 'own_structures' ? <Notice>{t('reports.scopeOwn')}</Notice> : null}
      </header>

      <section class="report-section">
        <h2>{t('reports.campaignFacts')}</h2>
        <dl class="facts">
          <dt>{t('reports.advertiser')}</dt>
          <dd>{r.campaign.advertiser_name}</dd>
          {r.campaign.advertiser_bin ? (
            <>
              <dt>{t('reports.bin')}</dt>
              <dd>{r.campaign.advertiser_bin}</dd>
            </>
          ) : null}
          <dt>{t('reports.submittedBy')}</dt>
          <dd>{r.campaign.submitted_by}</dd>
          <dt>{t('reports.requestedPeriod')}</dt>
          <dd>{dateRange(r.campaign.period_from, r.campaign.period_to)}</dd>
          <dt>{t('reports.band')}</dt>
          <dd>{t('plays.percent', { value: r.report.band_pct })}</dd>
        </dl>
        <DataTable
          caption={t('reports.approvals')}
          rows={r.approvals}
          rowKey={(a) => a.approval_number}
          columns={[
            { header: t('creative.approval'), rowHeader: true, cell: (a) => a.approval_number },
            { header: t('reports.creativeHash'), cell: (a) => <Hash value={a.media_sha256} full /> },
            { header: t('creative.validity'), cell: (a) => dateRange(a.valid_from, a.valid_until) },
            { header: t('reports.issued'), cell: (a) => instant(a.issued_at) },
            {
              header: t('status.revoked'),
              cell: (a) => (a.revoked_at ? <Badge tone="bad">{instant(a.revoked_at)}</Badge> : '—'),
            },
            {
              header: t('reports.structures'),
              cell: (a) =>
                a.structure_ids
                  .map((id) => codes.get(id) ?? id.slice(0, 8))
                  .sort()
                  .join(', '),
            },
            {
              header: t('reports.ledgerEntry'),
              cell: (a) => (
                <a href={a.ledger_url} class="break">
                  {a.ledger_url}
                </a>
              ),
            },
          ]}
        />
      </section>

      <section class="report-section">
        <h2>{t('reports.summary')}</h2>
        <Totals totals={r.totals} />
        <p class="hint">{t('reports.summaryHint', { band: r.report.band_pct })}</p>
      </section>

      <section class="report-section">
        <h2>{t(bucket === 'hour' ? 'reports.perHour' : 'reports.perDay')}</h2>
        <div class="chart-switch no-print">
          <Segmented
            legend={t('plays.bucket')}
            name="report-bucket"
            options={[
              { value: 'day' as const, label: t('plays.bucketDay') },
              { value: 'hour' as const, label: t('plays.bucketHour') },
            ]}
            value={bucket}
            onChange={setBucket}
          />
          {bucket === 'hour' ? (
            <Field id="report-hour-day" label={t('reports.hourDay')}>
              <select
                id="report-hour-day"
                value={hourDay}
                onChange={(e) => setHourDay((e.target as HTMLSelectElement).value)}
              >
                {r.days.map((d) => (
                  <option key={d.day} value={d.day}>
                    {date(d.day)}
                  </option>
                ))}
              </select>
            </Field>
          ) : null}
        </div>
        {bucket === 'hour' ? (
          <BarChart
            title={t('reports.perHourOn', { day: date(hourDay) })}
            titleHidden
            categories={hourKeys}
            categoryLabel={hh}
            categoryName={(key) => `${date(hourDay)}, ${hh(key)}`}
            series={[
              {
                name: t('reports.unflagged'),
                values: hourKeys.map((k) => {
                  const h = hourOf.get(k);
                  return h ? h.plays - h.flagged : 0;
                }),
                color: PALETTE[0],
              },
              {
                name: t('plays.flagged'),
                values: hourKeys.map((k) => hourOf.get(k)?.flagged ?? 0),
                color: PALETTE[1],
                hatched: true,
              },
            ]}
            xLabel={t(utc ? 'reports.axisHourUtc' : 'charts.axisHour')}
            yLabel={t('charts.axisPlays')}
            emptyText={t('plays.none')}
          />
        ) : null}
        {bucket === 'day' ? (
          <BarChart
            title={t('reports.perDay')}
            titleHidden
            categories={r.days.map((d) => d.day)}
            categoryLabel={(d) => shortDay(language, d)}
            categoryName={dayName}
            series={[
              { name: t('reports.unflagged'), values: r.days.map((d) => d.unflagged), color: PALETTE[0] },
              {
                name: t('plays.flagged'),
                values: r.days.map((d) => d.flagged),
                color: PALETTE[1],
                hatched: true,
              },
            ]}
            reference={{ name: t('charts.declared'), values: declaredPerDay }}
            xLabel={t(utc ? 'charts.axisDayUtc' : 'charts.axisDay')}
            yLabel={t('charts.axisPlays')}
            emptyText={t('plays.none')}
          />
        ) : null}
        <TableFrame
          caption={t('reports.perDay')}
          class="report-days"
          headers={[
            { header: t('plays.day') },
            { header: t('charts.declared'), numeric: true },
            { header: t('plays.total'), numeric: true },
            { header: t('plays.flagged'), numeric: true },
            { header: t('plays.attested'), numeric: true },
            { header: t('reports.deviation'), numeric: true },
          ]}
        >
          {r.days.map((d, i) => (
            <tr key={d.day} data-day={d.day}>
              <th scope="row">
                <span class="nowrap">{date(d.day)}</span>
                {d.live_hours > 0 && d.live_hours < 24 ? (
                  <small class="muted block">{t('reports.partialDay', { hours: d.live_hours })}</small>
                ) : null}
              </th>
              <td class="num">{declaredPerDay[i] === null ? '—' : number(declaredPerDay[i])}</td>
              <td class="num">{number(d.plays)}</td>
              <td class="num">{number(d.flagged)}</td>
              <td class="num">{number(d.attested)}</td>
              <td class="num">
                {d.compared_days === 0 ? (
                  <small class="muted">{t('reports.notCompared')}</small>
                ) : (
                  <>
                    {deviationText(language, d.deviation_pct)}
                    {d.days_outside_band > 0 ? (
                      <small class="block deviation-out">
                        {t('reports.outsideCount', { count: d.days_outside_band })}
                      </small>
                    ) : null}
                  </>
                )}
              </td>
            </tr>
          ))}
        </TableFrame>
        <p class="hint">{t('reports.comparedHint')}</p>
      </section>

      <section class="report-section">
        <h2>{t('reports.structures')}</h2>
        <DataTable
          caption={t('reports.structures')}
          rows={r.structures}
          rowKey={(s) => s.structure_id}
          columns={[
            {
              header: t('fleet.structure'),
              rowHeader: true,
              cell: (s) => (
                <>
                  {s.code}
                  {s.address ? <small class="muted block">{s.address}</small> : null}
                  {!s.covered ? (
                    <small class="block deviation-out">{t('flag.approval_not_for_structure')}</small>
                  ) : null}
                </>
              ),
            },
            { header: t('fleet.operator'), cell: (s) => s.operator },
            {
              header: t('reports.declaredPerDay'),
              numeric: true,
              cell: (s) => number(s.declared_daily_plays),
            },
            { header: t('plays.total'), numeric: true, cell: (s) => number(s.totals.plays) },
            { header: t('plays.flagged'), numeric: true, cell: (s) => number(s.totals.flagged) },
            { header: t('reports.declaredOver'), numeric: true, cell: (s) => number(s.totals.declared) },
            {
              header: t('reports.playsCompared'),
              numeric: true,
              cell: (s) => number(s.totals.plays_compared),
            },
            {
              header: t('reports.deviation'),
              numeric: true,
              cell: (s) => deviationText(language, s.totals.deviation_pct),
            },
          ]}
        />
      </section>

      <section class="report-section">
        <h2>{t('reports.byStructureAndDay')}</h2>
        <p class="no-print">
          <button
            type="button"
            class="button button-small"
            onClick={() => setShowCells(!showCells)}
            aria-expanded={showCells}
          >
            {showCells ? t('reports.hideCells') : t('reports.showCells', { count: r.cells.length })}
          </button>
        </p>
        <div class="report-cells" hidden={!showCells}>
          <CellsTable cells={r.cells} codes={codes} />
        </div>
      </section>

      <section class="report-section">
        <h2>{t('reports.flaggedTitle')}</h2>
        {r.flags.length === 0 ? <p>{t('reports.noFlags')}</p> : null}
        {r.flags.length > 0 ? (
          <DataTable
            caption={t('reports.flaggedTitle')}
            rows={r.flags}
            rowKey={(f) => f.flag}
            columns={[
              {
                header: t('reports.flag'),
                rowHeader: true,
                cell: (f) => t(knownKey(`flag.${f.flag}`) ?? 'flag.other'),
              },
              { header: t('reports.code'), cell: (f) => <code>{f.flag}</code> },
              { header: t('plays.total'), numeric: true, cell: (f) => number(f.plays) },
            ]}
          />
        ) : null}
        <p class="hint">{t('reports.flaggedHint')}</p>
      </section>

      <Seals report={r} />

      <footer class="report-foot">
        {r.consistency.agree ? (
          <p>{t('reports.consistent', { count: r.consistency.counted_plays })}</p>
        ) : (
          <Notice kind="warning">
            {t('reports.inconsistent', {
              counted: r.consistency.counted_plays,
              recorded: r.consistency.recorded_plays,
            })}
          </Notice>
        )}
      </footer>
    </article>
  );
}

function Totals(props: { totals: ReportTotals }) {
  const { t, number, language } = useI18n();
  const x = props.totals;
  return (
    <dl class="stats">
      <div>
        <dt>{t('plays.total')}</dt>
        <dd data-testid="report-plays">{number(x.plays)}</dd>
      </div>
      <div>
        <dt>{t('reports.unflagged')}</dt>
        <dd>{number(x.unflagged)}</dd>
      </div>
      <div>
        <dt>{t('plays.flagged')}</dt>
        <dd data-testid="report-flagged">{number(x.flagged)}</dd>
      </div>
      <div>
        <dt>{t('plays.attested')}</dt>
        <dd>{number(x.attested)}</dd>
      </div>
      <div>
        <dt>{t('reports.declaredOver')}</dt>
        <dd data-testid="report-declared">{number(x.declared)}</dd>
      </div>
      <div>
        <dt>{t('reports.playsCompared')}</dt>
        <dd>{number(x.plays_compared)}</dd>
      </div>
      <div>
        <dt>{t('reports.deviation')}</dt>
        <dd data-testid="report-deviation">{deviationText(language, x.deviation_pct)}</dd>
      </div>
      <div>
        <dt>{t('reports.daysOutside')}</dt>
        <dd>
          {number(x.days_outside_band)} / {number(x.compared_days)}
        </dd>
      </div>
    </dl>
  );
}

function CellsTable(props: { cells: ReportCell[]; codes: Map<string, string> }) {
  const { t, date, number, language } = useI18n();
  return (
    <TableFrame
      caption={t('reports.byStructureAndDay')}
      class="report-cells-table"
      headers={[
        { header: t('plays.day') },
        { header: t('fleet.structure') },
        { header: t('charts.declared'), numeric: true },
        { header: t('plays.total'), numeric: true },
        { header: t('plays.flagged'), numeric: true },
        { header: t('plays.attested'), numeric: true },
        { header: t('reports.deviation'), numeric: true },
      ]}
    >
      {props.cells.map((c) => (
        <tr key={`${c.day}-${c.structure_id}`} class={c.outside_band ? 'row-out' : undefined}>
          <th scope="row">
            <span class="nowrap">{date(c.day)}</span>
            {c.live_hours > 0 && c.live_hours < 24 ? (
              <small class="muted block">{t('reports.partialDay', { hours: c.live_hours })}</small>
            ) : null}
          </th>
          <td>{props.codes.get(c.structure_id) ?? c.structure_id.slice(0, 8)}</td>
          <td class="num">{number(c.declared)}</td>
          <td class="num">{number(c.plays)}</td>
          <td class="num">{number(c.flagged)}</td>
          <td class="num">{number(c.attested)}</td>
          <td class="num">
            {c.compared ? (
              <>
                {deviationText(language, c.deviation_pct)}
                {c.outside_band ? <small class="block deviation-out">{t('reports.outside')}</small> : null}
              </>
            ) : (
              <small class="muted">{t('reports.notCompared')}</small>
            )}
          </td>
        </tr>
      ))}
    </TableFrame>
  );
}

const CHECK_TITLES: Record<Check['name'], MessageKey> = {
  signature: 'seal.check.signature',
  content: 'seal.check.content',
  chain: 'seal.check.chain',
  ledger: 'seal.check.ledger',
};

async function publicSeal(day: string): Promise<StatsSeal | null> {
  try {
    return await verifyGet<StatsSeal>(`/v1/stats-seals/${day}`);
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) return null;
    throw error;
  }
}

/** The seals covering the campaign's plays, each checkable in the browser from public data, and how to check by hand. */
function Seals(props: { report: CampaignReport }) {
  const { t, date, number } = useI18n();
  const r = props.report;
  const utc = r.report.time_zone === 'UTC';
  const v = r.verification;
  const sealed = r.seals.filter((s) => s.sealed);
  const example = sealed[0]?.receive_day ?? r.seals[0]?.receive_day ?? '2026-01-01';
  const next = addDays(example, 1);
  return (
    <section class="report-section">
      <h2>{t('reports.sealsTitle')}</h2>
      <p class="hint">{t('reports.sealsLead')}</p>
      {r.seals.length === 0 ? <p>{t('reports.noSeals')}</p> : null}
      {r.seals.length > 0 ? (
        <TableFrame
          caption={t('reports.sealsTitle')}
          class="report-seals"
          headers={[
            { header: t('reports.receiveDay') },
            { header: t('reports.playsReceived'), numeric: true },
            { header: t('seal.signedAt') },
            { header: t('reports.sealHash') },
            { header: t('seal.ledger') },
            { header: t('seal.verification') },
          ]}
        >
          {r.seals.map((s) => (
            <SealRow key={s.receive_day} seal={s} utc={utc} rootSha256={v.authority_root_sha256} />
          ))}
        </TableFrame>
      ) : null}
      <h3>{t('reports.howToCheck')}</h3>
      <ol class="report-steps">
        <li>
          {t('reports.stepRoot')} <code class="break">{v.authority_root_url}</code>
          <br />
          {t('reports.rootFingerprint')} <Hash value={v.authority_root_sha256} full />
        </li>
        <li>
          {t('reports.stepSeal')}
          <pre class="code">{`curl -fsS "${v.verify_url}/v1/stats-seals/${example}?format=p7s" -o seal.p7s
openssl cms -verify -binary -inform DER -in seal.p7s -CAfile authority-root.pem -out body.json
sha256sum body.json`}</pre>
        </li>
        <li>
          {t('reports.stepChain')}
          <pre class="code">{`curl -fsS "${v.verify_url}/v1/stats-seals/${next}" | grep -o '"prev_seal_sha256":"[0-9a-f]*"'`}</pre>
        </li>
        <li>
          {t('reports.stepTool')}
          <pre class="code">{`npm run verify -- seal ${example} --from ${v.verify_url} --root authority-root.pem`}</pre>
        </li>
        <li>
          {t('reports.stepApproval')}{' '}
          {r.approvals.map((a) => (
            <code key={a.approval_number} class="break block">
              {a.ledger_url}
            </code>
          ))}
        </li>
      </ol>
      <p class="hint">
        {t('reports.sealsNote', {
          sealed: number(sealed.length),
          days: number(r.seals.length),
          first: r.seals[0] ? date(r.seals[0].receive_day) : '—',
        })}
      </p>
    </section>
  );
}

function SealRow(props: { seal: CampaignReport['seals'][number]; utc: boolean; rootSha256: string }) {
  const { t, date, number, language } = useI18n();
  const s = props.seal;
  const [checks, setChecks] = useState<Check[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const verify = async () => {
    setBusy(true);
    setError(null);
    try {
      const [seal, rootPem] = await Promise.all([
        publicSeal(s.receive_day),
        verifyGet<string>('/v1/authority-root.pem', 'text'),
      ]);
      const [root] = parsePem(rootPem);
      if (!seal || !root) throw new Error(t('seal.notSealed'));
      // The root the browser fetched must be the one the report names (a reader compares it with the city's).
      if ((await sha256Hex(root.der)) !== props.rootSha256) throw new Error(t('reports.rootDiffers'));
      const previous =
        seal.body.prev_seal_sha256 === '0'.repeat(64) ? 'none' : await publicSeal(addDays(s.receive_day, -1));
      setChecks(await verifySeal(seal, [root], previous, { day: s.receive_day }));
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  const allOk = checks?.every((c) => c.state === 'ok');
  return (
    <tr data-day={s.receive_day}>
      <th scope="row" class="nowrap">
        {date(s.receive_day)}
      </th>
      <td class="num">{number(s.plays)}</td>
      {s.sealed ? (
        <>
          <td>{s.signed_at ? formatInZone(language, s.signed_at, props.utc) : '—'}</td>
          <td>
            <Hash value={s.body_sha256 ?? ''} full />
            <small class="muted block">
              {t('reports.sealCounts', { batches: number(s.batch_count), records: number(s.record_count) })}
            </small>
          </td>
          <td>
            {s.ledger ? (
              <Badge tone="good">{t(knownKey(`ledger.${s.ledger.status}`) ?? 'ledger.digested')}</Badge>
            ) : (
              <Badge tone="info">{t('ledger.pending')}</Badge>
            )}
          </td>
          <td>
            <button type="button" class="button button-small no-print" onClick={verify} disabled={busy}>
              {busy ? t('seal.verifying') : t('seal.verify')}
            </button>
            {checks ? (
              <output class={allOk ? 'verdict verdict-ok' : 'verdict verdict-bad'}>
                {allOk ? t('seal.allOk') : t('seal.notAllOk')}
              </output>
            ) : null}
            {checks ? (
              <ul class="checks">
                {checks.map((c) => (
                  <li key={c.name} class={`check check-${c.state}`}>
                    <span class="check-icon" aria-hidden="true">
                      {c.state === 'ok' ? '✓' : c.state === 'failed' ? '✗' : '…'}
                    </span>
                    <span>
                      <strong>{t(CHECK_TITLES[c.name])}</strong>: {t(`seal.state.${c.state}`)}
                      {' — '}
                      {sealReasonKey(c.reason) ? t(sealReasonKey(c.reason)!) : c.reason}
                    </span>
                  </li>
                ))}
              </ul>
            ) : null}
            <ErrorNotice error={error} />
          </td>
        </>
      ) : (
        <td colSpan={4} class="muted">
          {t('reports.notSealedYet')}
        </td>
      )}
    </tr>
  );
}

/** An RFC 3339 instant in the report's zone: Almaty, or UTC. */
function formatInZone(language: Language, value: string, utc: boolean): string {
  const text = dateTimeInZone(language, value, utc ? 'UTC' : 'Asia/Almaty');
  return utc ? `${text} UTC` : text;
}
