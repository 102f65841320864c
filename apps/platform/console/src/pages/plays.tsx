import { useMemo, useState } from 'preact/hooks';
import { loadStructures } from '../api/catalogue.js';
import { get } from '../api/client.js';
import type { PlayCount } from '../api/types.js';
import { HorizontalBars, type Series, StackedBars } from '../components/bar-chart.js';
import { DataTable } from '../components/table.js';
import { ErrorNotice, Field, knownKey, Loading, useAsync } from '../components/ui.js';
import { can, useSession } from '../lib/session.js';
import { EventSettings } from './city-events.js';
import { useI18n } from '../i18n/index.js';
import { almatyDate } from '../lib/working-hours.js';

const DAY_MS = 86_400_000;
const MAX_SERIES = 7;

function addDays(day: string, days: number): string {
  const [y, m, d] = day.split('-').map(Number) as [number, number, number];
  return new Date(Date.UTC(y, m - 1, d) + days * DAY_MS).toISOString().slice(0, 10);
}

function daysBetween(from: string, to: string): string[] {
  const out: string[] = [];
  for (let day = from; day <= to && out.length < 370; day = addDays(day, 1)) out.push(day);
  return out;
}

/** Counts summed by a key, the largest first; the rest folded into "other". */
function seriesBy(
  counts: PlayCount[],
  days: string[],
  keyOf: (c: PlayCount) => string,
  other: string,
): Series[] {
  const totals = new Map<string, number>();
  for (const c of counts) totals.set(keyOf(c), (totals.get(keyOf(c)) ?? 0) + c.plays);
  const ranked = [...totals.entries()].sort((a, b) => b[1] - a[1]).map(([k]) => k);
  const kept = new Set(ranked.slice(0, MAX_SERIES));
  const byName = new Map<string, number[]>();
  const dayIndex = new Map(days.map((d, i) => [d, i]));
  for (const c of counts) {
    const name = kept.has(keyOf(c)) ? keyOf(c) : other;
    const values = byName.get(name) ?? days.map(() => 0);
    const i = dayIndex.get(c.day);
    if (i !== undefined) values[i] = (values[i] ?? 0) + c.plays;
    byName.set(name, values);
  }
  const order = [...ranked.filter((k) => kept.has(k)), other];
  return order.filter((n) => byName.has(n)).map((name) => ({ name, values: byName.get(name)! }));
}

interface Quality {
  flags: { flag: string; records: number }[];
  refusals: { reason: string; records: number }[];
}

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

/**
 * Proof of play (authority): counted plays per day by structure and by approval (GET /api/v1/console/pop/counts),
 * flagged and refused records by flag and reason, and the declared-vs-actual city events.
 */
export function PlaysPage() {
  const { t, date, number, dateTime } = useI18n();
  const session = useSession();
  const today = almatyDate(Date.now());
  const [from, setFrom] = useState(addDays(today, -13));
  const [to, setTo] = useState(today);
  const [structure, setStructure] = useState('');
  const [approval, setApproval] = useState('');
  const [applied, setApplied] = useState({ from, to, structure, approval });
  const structures = useAsync(() => loadStructures(true), []);
  const counts = useAsync(() => {
    const q = new URLSearchParams({ from: applied.from, to: applied.to });
    if (applied.structure) q.set('structure_id', applied.structure);
    if (applied.approval.trim()) q.set('approval_number', applied.approval.trim());
    return get<{ items: PlayCount[] }>(`/api/v1/console/pop/counts?${q}`).then((r) => r.items);
  }, [applied]);
  const quality = useAsync(
    () =>
      get<Quality>(
        `/api/v1/console/pop/quality?${new URLSearchParams({ from: applied.from, to: applied.to })}`,
      ),
    [applied],
  );
  const events = useAsync(
    () =>
      get<{ items: CityEvent[] }>('/api/v1/console/events?type=declared_vs_actual&limit=50').then(
        (r) => r.items,
      ),
    [],
  );
  const codes = useMemo(() => new Map((structures.data ?? []).map((s) => [s.id, s.code])), [structures.data]);
  const days = useMemo(() => daysBetween(applied.from, applied.to), [applied]);
  const items = counts.data ?? [];
  const structureName = (id: string) => codes.get(id) ?? id.slice(0, 8);
  const approvalName = (c: PlayCount) =>
    c.approval_number ?? (c.slot ? t(knownKey(`slot.${c.slot}`) ?? 'slot.other') : t('slot.other'));
  const byStructure = seriesBy(items, days, (c) => structureName(c.structure_id), t('plays.other'));
  const byApproval = seriesBy(items, days, approvalName, t('plays.other'));
  const total = items.reduce((n, c) => n + c.plays, 0);
  const flagged = items.reduce((n, c) => n + c.flagged, 0);
  const attested = items.filter((c) => c.attested).reduce((n, c) => n + c.plays, 0);
  const shortDay = (d: string) => d.slice(8, 10);

  const perApproval = new Map<string, { plays: number; flagged: number }>();
  for (const c of items) {
    const key = approvalName(c);
    const v = perApproval.get(key) ?? { plays: 0, flagged: 0 };
    perApproval.set(key, { plays: v.plays + c.plays, flagged: v.flagged + c.flagged });
  }

  return (
    <section>
      <h1>{t('plays.title')}</h1>
      <p class="lead">{t('plays.lead')}</p>
      <form
        class="filters"
        onSubmit={(e) => {
          e.preventDefault();
          setApplied({ from, to, structure, approval });
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
        <Field id="plays-approval" label={t('creative.approval')}>
          <input
            id="plays-approval"
            value={approval}
            onInput={(e) => setApproval((e.target as HTMLInputElement).value)}
          />
        </Field>
        <button type="submit" class="button button-primary">
          {t('plays.show')}
        </button>
      </form>

      {counts.loading && !counts.data ? <Loading /> : null}
      <ErrorNotice error={counts.error} />
      {counts.data ? (
        <>
          <dl class="stats">
            <div>
              <dt>{t('plays.total')}</dt>
              <dd data-testid="plays-total">{number(total)}</dd>
            </div>
            <div>
              <dt>{t('plays.flagged')}</dt>
              <dd>{number(flagged)}</dd>
            </div>
            <div>
              <dt>{t('plays.attested')}</dt>
              <dd>{number(attested)}</dd>
            </div>
          </dl>
          {items.length === 0 ? (
            <p>{t('plays.none')}</p>
          ) : (
            <div class="two-columns">
              <div class="panel">
                <h2>{t('plays.byStructure')}</h2>
                <StackedBars
                  title={t('plays.byStructure')}
                  categories={days}
                  series={byStructure}
                  categoryLabel={shortDay}
                />
              </div>
              <div class="panel">
                <h2>{t('plays.byApproval')}</h2>
                <StackedBars
                  title={t('plays.byApproval')}
                  categories={days}
                  series={byApproval}
                  categoryLabel={shortDay}
                />
              </div>
            </div>
          )}
          {items.length > 0 ? (
            <div class="panel">
              <HorizontalBars
                title={t('plays.perApproval')}
                rows={[...perApproval.entries()]
                  .sort((a, b) => b[1].plays - a[1].plays)
                  .map(([label, v]) => ({
                    label,
                    value: v.plays,
                    note: t('plays.flaggedNote', { count: v.flagged }),
                  }))}
              />
              <details>
                <summary>{t('plays.asTable')}</summary>
                <DataTable
                  caption={t('plays.asTable')}
                  rows={items}
                  rowKey={(c) => `${c.player}-${c.day}-${c.approval_number ?? c.slot}-${c.attested}`}
                  columns={[
                    { header: t('plays.day'), cell: (c) => date(c.day) },
                    { header: t('fleet.structure'), cell: (c) => structureName(c.structure_id) },
                    { header: t('creative.approval'), cell: approvalName },
                    {
                      header: t('plays.channel'),
                      cell: (c) => (c.attested ? t('plays.attestedShort') : t('plays.device')),
                    },
                    { header: t('plays.total'), numeric: true, cell: (c) => number(c.plays) },
                    { header: t('plays.flagged'), numeric: true, cell: (c) => number(c.flagged) },
                  ]}
                />
              </details>
            </div>
          ) : null}
        </>
      ) : null}

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
              { header: t('plays.declaredPlays'), numeric: true, cell: (e) => number(e.data.declared_plays) },
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

      <EventSettings canChange={can.administer(session)} />
    </section>
  );
}
