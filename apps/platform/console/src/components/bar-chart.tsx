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
  values: number[];
}

/**
 * Stacked vertical bars: one bar per category (e.g. day), one stacked part per series (e.g. structure). An SVG with
 * a text alternative; the same numbers are in the table the page shows beside it.
 */
export function StackedBars(props: {
  title: string;
  categories: string[];
  series: Series[];
  categoryLabel: (c: string) => string;
}) {
  const { number } = useI18n();
  const width = Math.max(320, props.categories.length * 44 + 60);
  const height = 220;
  const top = 12;
  const bottom = 48;
  const left = 48;
  const totals = props.categories.map((_, i) => props.series.reduce((n, s) => n + (s.values[i] ?? 0), 0));
  const max = Math.max(1, ...totals);
  const scale = (v: number) => ((height - top - bottom) * v) / max;
  const barWidth = Math.min(32, (width - left - 10) / Math.max(1, props.categories.length) - 8);
  const ticks = [0, max / 2, max].map((v) => Math.round(v));
  const summary = props.categories
    .map((c, i) => `${props.categoryLabel(c)}: ${number(totals[i]!)}`)
    .join('; ');
  return (
    <figure class="chart">
      <svg
        viewBox={`0 0 ${width} ${height}`}
        role="img"
        aria-label={`${props.title}. ${summary}`}
        class="chart-svg"
      >
        {ticks.map((v) => {
          const y = height - bottom - scale(v);
          return (
            <g key={`tick-${v}`}>
              <line x1={left - 4} x2={width - 4} y1={y} y2={y} class="chart-grid" />
              <text x={left - 8} y={y + 4} text-anchor="end" class="chart-axis">
                {number(v)}
              </text>
            </g>
          );
        })}
        {props.categories.map((c, i) => {
          const x = left + 6 + i * ((width - left - 10) / props.categories.length);
          let y = height - bottom;
          return (
            <g key={c}>
              {props.series.map((s, si) => {
                const h = scale(s.values[i] ?? 0);
                y -= h;
                return h > 0 ? (
                  <rect
                    key={s.name}
                    x={x}
                    y={y}
                    width={barWidth}
                    height={h}
                    fill={PALETTE[si % PALETTE.length]}
                  />
                ) : null;
              })}
              <text x={x + barWidth / 2} y={height - bottom + 14} text-anchor="middle" class="chart-axis">
                {props.categoryLabel(c)}
              </text>
            </g>
          );
        })}
      </svg>
      <figcaption>
        <ul class="legend">
          {props.series.map((s, si) => (
            <li key={s.name}>
              <svg class="swatch" viewBox="0 0 10 10" aria-hidden="true" focusable="false">
                <rect width="10" height="10" fill={PALETTE[si % PALETTE.length]} />
              </svg>
              {s.name}
            </li>
          ))}
        </ul>
      </figcaption>
    </figure>
  );
}

/** Horizontal bars for a breakdown (plays per approval, records per flag). */
export function HorizontalBars(props: {
  title: string;
  rows: { label: string; value: number; note?: string }[];
}) {
  const { number } = useI18n();
  const max = Math.max(1, ...props.rows.map((r) => r.value));
  return (
    <table class="hbars">
      <caption>{props.title}</caption>
      <tbody>
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
