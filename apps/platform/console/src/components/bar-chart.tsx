import type { ComponentChildren, RefObject } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { useI18n } from '../i18n/index.js';

/** Colour-blind safe palette (Okabe–Ito), darkened where needed for contrast on white. */
export const PALETTE = [
  '#0072b2',
  '#d55e00',
  '#009e73',
  '#cc79a7',
  '#8a6d00',
  '#56b4e9',
  '#6a3d9a',
  '#333333',
];

export interface Series {
  name: string;
  values: (number | null)[];
  /** A colour of its own; otherwise the palette's next. */
  color?: string;
  /** Drawn hatched (e.g. flagged plays): told apart without colour. */
  hatched?: boolean;
}

/** A value per category drawn as a mark across the bar (declared plays): a target, not a part of the stack. */
export interface Reference {
  name: string;
  values: (number | null)[];
}

/*
 * The charts are SVG drawn at the width they are shown at (measured), so their text is the size the style sheet says
 * (13 px), never scaled down with a long period. Each has a text alternative (role img with a summary) and its numbers
 * as a table; without data it says so instead of drawing an empty frame.
 */

const FONT_PX = 13;
const DEFAULT_WIDTH = 720;

/** The width of an element, followed as it changes (a window resized, a print layout). */
function useWidth(): [RefObject<HTMLDivElement>, number] {
  const ref = useRef<HTMLDivElement>(null);
  const [width, setWidth] = useState(DEFAULT_WIDTH);
  useEffect(() => {
    const element = ref.current;
    if (!element) return;
    const measure = () => {
      const w = Math.floor(element.getBoundingClientRect().width);
      if (w > 0) setWidth(w);
    };
    measure();
    if (typeof ResizeObserver === 'undefined') return;
    const observer = new ResizeObserver(measure);
    observer.observe(element);
    return () => observer.disconnect();
  }, []);
  return [ref, width];
}

/** Round tick steps (1, 2, 2.5, 5 × 10^n) giving about `count` ticks from 0 to at least `max`. */
export function niceTicks(max: number, count = 4): number[] {
  if (!(max > 0)) return [0, 1];
  const rough = max / count;
  const power = 10 ** Math.floor(Math.log10(rough));
  // 2.5 only between tenths: counts of plays or devices read best on whole steps.
  const step =
    [1, 2, ...(power < 1 ? [2.5] : []), 5, 10].map((m) => m * power).find((s) => s >= rough) ?? 10 * power;
  const integerStep = step < 1 && Number.isInteger(max) ? 1 : step;
  const ticks: number[] = [];
  for (let v = 0; v < max + integerStep / 2; v += integerStep) ticks.push(Number(v.toPrecision(12)));
  if ((ticks.at(-1) ?? 0) < max) ticks.push(Number((ticks.length * integerStep).toPrecision(12)));
  return ticks;
}

/** Every k-th category label, so labels never overlap. */
function labelEvery(slot: number, labelPx: number): number {
  return Math.max(1, Math.ceil(labelPx / Math.max(1, slot)));
}

interface Frame {
  width: number;
  height: number;
  left: number;
  right: number;
  top: number;
  bottom: number;
}

function frameOf(width: number, height: number, yLabelWidth: number): Frame {
  return { width, height, left: yLabelWidth + 34, right: 12, top: 14, bottom: 54 };
}

function YAxis(props: {
  frame: Frame;
  ticks: number[];
  scale: (v: number) => number;
  format: (v: number) => string;
  label: string;
}) {
  const { frame } = props;
  const plotHeight = frame.height - frame.top - frame.bottom;
  return (
    <g>
      {props.ticks.map((v) => {
        const y = props.scale(v);
        return (
          <g key={`y-${v}`}>
            <line x1={frame.left} x2={frame.width - frame.right} y1={y} y2={y} class="chart-grid" />
            <text x={frame.left - 6} y={y + FONT_PX / 3} text-anchor="end" class="chart-axis">
              {props.format(v)}
            </text>
          </g>
        );
      })}
      <text
        class="chart-axis-title"
        text-anchor="middle"
        transform={`translate(${FONT_PX + 2} ${frame.top + plotHeight / 2}) rotate(-90)`}
      >
        {props.label}
      </text>
    </g>
  );
}

function Legend(props: {
  hatchId?: string;
  items: {
    name: string;
    color: string;
    hatched?: boolean;
    mark?: boolean;
    dashed?: boolean;
    shape?: number;
  }[];
}) {
  return (
    <ul class="legend">
      {props.items.map((item) => (
        <li key={item.name}>
          <svg class="swatch" viewBox="0 0 14 14" aria-hidden="true" focusable="false">
            {item.mark ? (
              <>
                <line x1="0" x2="14" y1="7" y2="7" stroke="#fff" stroke-width="5" />
                <line x1="0" x2="14" y1="7" y2="7" stroke={item.color} stroke-width="3" />
              </>
            ) : item.dashed !== undefined ? (
              <>
                <line
                  x1="0"
                  x2="14"
                  y1="7"
                  y2="7"
                  stroke={item.color}
                  stroke-width="2"
                  stroke-dasharray={item.dashed ? '4 2' : undefined}
                />
                {item.shape !== undefined ? (
                  <g transform="translate(7 7) scale(0.7) translate(-7 -7)">
                    <Marker shape={item.shape} x={7} y={7} color={item.color} title={item.name} />
                  </g>
                ) : null}
              </>
            ) : (
              <>
                <rect width="14" height="14" fill={item.color} />
                {item.hatched && props.hatchId ? (
                  <rect width="14" height="14" fill={`url(#${props.hatchId})`} />
                ) : null}
              </>
            )}
          </svg>
          {item.name}
        </li>
      ))}
    </ul>
  );
}

let hatches = 0;

/** An id of its own for the hatch pattern of a chart (ids are the document's). */
function useHatchId(): string {
  const id = useRef<string | null>(null);
  id.current ??= `chart-hatch-${++hatches}`;
  return id.current;
}

/** The hatch pattern of hatched series (defined once per chart). */
function Hatch(props: { id: string }) {
  return (
    <defs>
      <pattern id={props.id} width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">
        <line x1="0" y1="0" x2="0" y2="6" stroke="#ffffff" stroke-width="2.5" />
      </pattern>
    </defs>
  );
}

/** The numbers of a chart as a table, behind a disclosure (printed open by the print style sheet). */
function NumbersTable(props: {
  caption: string;
  categoryHeader: string;
  categories: string[];
  categoryName: (c: string) => string;
  columns: { name: string; values: (number | null)[]; format?: (v: number) => string }[];
  total?: boolean;
}) {
  const { t, number } = useI18n();
  const format = (v: number | null, f?: (v: number) => string) => (v === null ? '—' : f ? f(v) : number(v));
  return (
    <details class="chart-numbers">
      <summary>{t('charts.showNumbers')}</summary>
      <div class="table-wrap">
        <table>
          <caption class="visually-hidden">{props.caption}</caption>
          <thead>
            <tr>
              <th scope="col">{props.categoryHeader}</th>
              {props.columns.map((c) => (
                <th key={c.name} scope="col" class="num">
                  {c.name}
                </th>
              ))}
            </tr>
          </thead>
          <tbody>
            {props.categories.map((category, i) => (
              <tr key={category}>
                <th scope="row">{props.categoryName(category)}</th>
                {props.columns.map((c) => (
                  <td key={c.name} class="num">
                    {format(c.values[i] ?? null, c.format)}
                  </td>
                ))}
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </details>
  );
}

function Figure(props: {
  title: string;
  /** The page's heading already says it: the caption is for assistive technology only. */
  titleHidden?: boolean;
  empty: boolean;
  emptyText?: string;
  children: ComponentChildren;
}) {
  const { t } = useI18n();
  return (
    <figure class="chart">
      <figcaption class={props.titleHidden ? 'visually-hidden' : 'chart-title'}>{props.title}</figcaption>
      {props.empty ? <p class="chart-empty">{props.emptyText ?? t('charts.empty')}</p> : props.children}
    </figure>
  );
}

/**
 * Vertical bars, stacked by series, one bar per category (a day, an hour), with an optional reference mark per bar
 * (the declared plays). Axis titles name the unit; tick labels are thinned so they never overlap.
 */
export function BarChart(props: {
  title: string;
  categories: string[];
  /** Short tick label of a category (e.g. "20"). */
  categoryLabel: (c: string) => string;
  /** Full name of a category for the table and the text alternative (e.g. "20 Nov 2026"). */
  categoryName: (c: string) => string;
  series: Series[];
  reference?: Reference;
  xLabel: string;
  yLabel: string;
  /** Format of values (ticks, table, summary). */
  format?: (v: number) => string;
  emptyText?: string;
  height?: number;
  /** Highest value of the axis at least (e.g. 100 for percentages). */
  yMax?: number;
  titleHidden?: boolean;
}) {
  const { t, number } = useI18n();
  const [ref, width] = useWidth();
  const hatchId = useHatchId();
  const format = props.format ?? ((v: number) => number(v));
  const n = props.categories.length;
  // A category where every series is null has no value (nothing was measured), unlike one whose values are 0.
  const totals = props.categories.map((_, i) =>
    props.series.every((s) => s.values[i] === null || s.values[i] === undefined)
      ? null
      : props.series.reduce((sum, s) => sum + (s.values[i] ?? 0), 0),
  );
  const references = props.reference?.values ?? [];
  const hasData = totals.some((v) => v !== null && v > 0) || references.some((v) => v !== null && v > 0);
  const max = Math.max(props.yMax ?? 0, ...totals.map((v) => v ?? 0), ...references.map((v) => v ?? 0));
  const ticks = niceTicks(max);
  const top = ticks.at(-1) ?? 1;
  const tickWidth = Math.max(...ticks.map((v) => format(v).length)) * (FONT_PX * 0.62);
  const frame = frameOf(width, props.height ?? 260, tickWidth);
  const plotHeight = frame.height - frame.top - frame.bottom;
  const plotWidth = frame.width - frame.left - frame.right;
  const scale = (v: number) => frame.top + plotHeight - (plotHeight * v) / top;
  const slot = plotWidth / Math.max(1, n);
  const barWidth = Math.max(2, Math.min(40, slot * 0.7));
  const labelPx =
    Math.max(...props.categories.map((c) => props.categoryLabel(c).length)) * FONT_PX * 0.62 + 8;
  const every = labelEvery(slot, labelPx);
  const colors = props.series.map((s, i) => s.color ?? PALETTE[i % PALETTE.length]!);
  const summary = props.categories
    .map((c, i) => {
      const declared = references[i];
      const total = totals[i] ?? null;
      return `${props.categoryName(c)}: ${total === null ? '—' : format(total)}${
        declared !== null && declared !== undefined ? ` (${props.reference!.name}: ${format(declared)})` : ''
      }`;
    })
    .join('; ');
  return (
    <Figure title={props.title} titleHidden={props.titleHidden} empty={!hasData} emptyText={props.emptyText}>
      <div ref={ref} class="chart-box">
        <svg
          width={frame.width}
          height={frame.height}
          viewBox={`0 0 ${frame.width} ${frame.height}`}
          role="img"
          aria-label={`${props.title}. ${summary}`}
          class="chart-svg"
        >
          <Hatch id={hatchId} />
          <YAxis frame={frame} ticks={ticks} scale={scale} format={format} label={props.yLabel} />
          {props.categories.map((c, i) => {
            const x = frame.left + slot * i + (slot - barWidth) / 2;
            let y = scale(0);
            return (
              <g key={c}>
                {props.series.map((s, si) => {
                  const v = s.values[i] ?? 0;
                  if (v <= 0) return null;
                  const h = scale(0) - scale(v);
                  y -= h;
                  return (
                    <g key={s.name}>
                      <rect x={x} y={y} width={barWidth} height={h} fill={colors[si]}>
                        <title>{`${props.categoryName(c)} · ${s.name}: ${format(v)}`}</title>
                      </rect>
                      {s.hatched ? (
                        <rect x={x} y={y} width={barWidth} height={h} fill={`url(#${hatchId})`} />
                      ) : null}
                    </g>
                  );
                })}
                {references[i] !== null && references[i] !== undefined ? (
                  <g class="chart-reference">
                    <line
                      x1={x - 3}
                      x2={x + barWidth + 3}
                      y1={scale(references[i]!)}
                      y2={scale(references[i]!)}
                      stroke="#ffffff"
                      stroke-width="5"
                    />
                    <line
                      x1={x - 3}
                      x2={x + barWidth + 3}
                      y1={scale(references[i]!)}
                      y2={scale(references[i]!)}
                      stroke="#1a1f2b"
                      stroke-width="2.5"
                    >
                      <title>{`${props.categoryName(c)} · ${props.reference!.name}: ${format(references[i]!)}`}</title>
                    </line>
                  </g>
                ) : null}
                {i % every === 0 ? (
                  <text
                    x={x + barWidth / 2}
                    y={scale(0) + FONT_PX + 6}
                    text-anchor="middle"
                    class="chart-axis"
                  >
                    {props.categoryLabel(c)}
                  </text>
                ) : null}
              </g>
            );
          })}
          <line
            x1={frame.left}
            x2={frame.width - frame.right}
            y1={scale(0)}
            y2={scale(0)}
            class="chart-baseline"
          />
          <text
            x={frame.left + plotWidth / 2}
            y={frame.height - 8}
            text-anchor="middle"
            class="chart-axis-title"
          >
            {props.xLabel}
          </text>
        </svg>
      </div>
      <Legend
        hatchId={hatchId}
        items={[
          ...props.series.map((s, i) => ({ name: s.name, color: colors[i]!, hatched: s.hatched === true })),
          ...(props.reference ? [{ name: props.reference.name, color: '#1a1f2b', mark: true }] : []),
        ]}
      />
      <NumbersTable
        caption={props.title}
        categoryHeader={props.xLabel}
        categories={props.categories}
        categoryName={props.categoryName}
        columns={[
          ...props.series.map((s) => ({ name: s.name, values: s.values, format })),
          ...(props.series.length > 1 ? [{ name: t('charts.total'), values: totals, format }] : []),
          ...(props.reference ? [{ name: props.reference.name, values: references, format }] : []),
        ]}
      />
    </Figure>
  );
}

/**
 * A point of a line: a different shape per series (filled circle, square, ring, diamond), so points of equal value
 * stay visible one over the other and the series are told apart without colour.
 */
function Marker(props: { shape: number; x: number; y: number; color: string; title: string }) {
  const { x, y, color } = props;
  const title = <title>{props.title}</title>;
  switch (props.shape % 4) {
    case 1:
      return (
        <rect x={x - 4.5} y={y - 4.5} width="9" height="9" fill="none" stroke={color} stroke-width="2">
          {title}
        </rect>
      );
    case 2:
      return (
        <circle cx={x} cy={y} r="7" fill="none" stroke={color} stroke-width="2">
          {title}
        </circle>
      );
    case 3:
      return (
        <polygon points={`${x},${y - 6} ${x + 6},${y} ${x},${y + 6} ${x - 6},${y}`} fill={color}>
          {title}
        </polygon>
      );
    default:
      return (
        <circle cx={x} cy={y} r="3.5" fill={color}>
          {title}
        </circle>
      );
  }
}

/** Lines over categories (hours, days); a null value leaves a gap. */
export function LineChart(props: {
  title: string;
  categories: string[];
  categoryLabel: (c: string) => string;
  categoryName: (c: string) => string;
  series: (Series & { dashed?: boolean })[];
  xLabel: string;
  yLabel: string;
  format?: (v: number) => string;
  emptyText?: string;
  height?: number;
  titleHidden?: boolean;
}) {
  const { number } = useI18n();
  const [ref, width] = useWidth();
  const format = props.format ?? ((v: number) => number(v));
  const n = props.categories.length;
  const all = props.series.flatMap((s) => s.values.filter((v): v is number => v !== null));
  const hasData = all.length > 0;
  const ticks = niceTicks(Math.max(0, ...all));
  const top = ticks.at(-1) ?? 1;
  const tickWidth = Math.max(...ticks.map((v) => format(v).length)) * (FONT_PX * 0.62);
  const frame = frameOf(width, props.height ?? 240, tickWidth);
  const plotHeight = frame.height - frame.top - frame.bottom;
  const plotWidth = frame.width - frame.left - frame.right;
  const scale = (v: number) => frame.top + plotHeight - (plotHeight * v) / top;
  const slot = plotWidth / Math.max(1, n);
  const xOf = (i: number) => frame.left + slot * i + slot / 2;
  const labelPx =
    Math.max(...props.categories.map((c) => props.categoryLabel(c).length)) * FONT_PX * 0.62 + 8;
  const every = labelEvery(slot, labelPx);
  const colors = props.series.map((s, i) => s.color ?? PALETTE[i % PALETTE.length]!);
  const summary = props.series
    .map(
      (s) =>
        `${s.name}: ${props.categories
          .map((c, i) => `${props.categoryName(c)} ${s.values[i] === null ? '—' : format(s.values[i]!)}`)
          .join(', ')}`,
    )
    .join('; ');
  return (
    <Figure title={props.title} titleHidden={props.titleHidden} empty={!hasData} emptyText={props.emptyText}>
      <div ref={ref} class="chart-box">
        <svg
          width={frame.width}
          height={frame.height}
          viewBox={`0 0 ${frame.width} ${frame.height}`}
          role="img"
          aria-label={`${props.title}. ${summary}`}
          class="chart-svg"
        >
          <YAxis frame={frame} ticks={ticks} scale={scale} format={format} label={props.yLabel} />
          {props.series.map((s, si) => {
            // Runs of consecutive values, drawn as one path each.
            const runs: { i: number; v: number }[][] = [];
            let run: { i: number; v: number }[] = [];
            s.values.forEach((v, i) => {
              if (v === null) {
                if (run.length > 0) runs.push(run);
                run = [];
              } else run.push({ i, v });
            });
            if (run.length > 0) runs.push(run);
            return (
              <g key={s.name}>
                {runs.map((r) => (
                  <polyline
                    key={`${s.name}-${r[0]!.i}`}
                    points={r.map((p) => `${xOf(p.i)},${scale(p.v)}`).join(' ')}
                    fill="none"
                    stroke={colors[si]}
                    stroke-width="2.5"
                    stroke-dasharray={s.dashed ? '6 4' : undefined}
                  />
                ))}
                {s.values.map((v, i) =>
                  v === null ? null : (
                    <Marker
                      key={`${s.name}-${props.categories[i]}`}
                      shape={si}
                      x={xOf(i)}
                      y={scale(v)}
                      color={colors[si]!}
                      title={`${props.categoryName(props.categories[i]!)} · ${s.name}: ${format(v)}`}
                    />
                  ),
                )}
              </g>
            );
          })}
          {props.categories.map((c, i) =>
            i % every === 0 ? (
              <text key={c} x={xOf(i)} y={scale(0) + FONT_PX + 6} text-anchor="middle" class="chart-axis">
                {props.categoryLabel(c)}
              </text>
            ) : null,
          )}
          <line
            x1={frame.left}
            x2={frame.width - frame.right}
            y1={scale(0)}
            y2={scale(0)}
            class="chart-baseline"
          />
          <text
            x={frame.left + plotWidth / 2}
            y={frame.height - 8}
            text-anchor="middle"
            class="chart-axis-title"
          >
            {props.xLabel}
          </text>
        </svg>
      </div>
      <Legend
        items={props.series.map((s, i) => ({
          name: s.name,
          color: colors[i]!,
          dashed: s.dashed === true,
          shape: i,
        }))}
      />
      <NumbersTable
        caption={props.title}
        categoryHeader={props.xLabel}
        categories={props.categories}
        categoryName={props.categoryName}
        columns={props.series.map((s) => ({ name: s.name, values: s.values, format }))}
      />
    </Figure>
  );
}

/** Horizontal bars for a breakdown (plays per approval, records per flag). */
export function HorizontalBars(props: {
  title: string;
  rows: { label: string; value: number; note?: string }[];
  emptyText?: string;
}) {
  const { t, number } = useI18n();
  const max = Math.max(1, ...props.rows.map((r) => r.value));
  return (
    <table class="hbars">
      <caption>{props.title}</caption>
      <tbody>
        {props.rows.length === 0 ? (
          <tr>
            <td class="muted">{props.emptyText ?? t('charts.empty')}</td>
          </tr>
        ) : null}
        {props.rows.map((r) => (
          <tr key={r.label}>
            <th scope="row">{r.label}</th>
            <td class="hbar-cell">
              <svg
                viewBox="0 0 100 10"
                preserveAspectRatio="none"
                class="hbar"
                aria-hidden="true"
                focusable="false"
              >
                <rect x="0" y="0" width={(100 * r.value) / max} height="10" />
              </svg>
            </td>
            <td class="num">
              {number(r.value)}
              {r.note ? <small class="muted block">{r.note}</small> : null}
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
