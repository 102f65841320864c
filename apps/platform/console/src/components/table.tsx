import type { ComponentChildren, JSX } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';

/** A column of a table: its header, and how a row fills its cell. */
export interface Column<T> {
  header: ComponentChildren;
  cell: (row: T) => ComponentChildren;
  /** Right-aligned figures. */
  numeric?: boolean;
  /** The cell names its row (`<th scope="row">`). */
  rowHeader?: boolean;
  /** A class of the column's cells. */
  class?: string;
}

/**
 * The frame every table of the console shares: a scrolling wrapper, a caption for assistive technology (the page's
 * heading already says it on screen) and column headers. Rows come as children, for rows with state of their own.
 */
export function TableFrame(props: {
  caption: string;
  headers: { header: ComponentChildren; numeric?: boolean }[];
  class?: string;
  children: ComponentChildren;
}) {
  // A table wider than the page scrolls inside its frame; a keyboard must be able to scroll it too, so the frame
  // takes focus (named by the caption) exactly while it overflows (WCAG 2.1.1; axe "scrollable-region-focusable").
  const frame = useRef<HTMLDivElement>(null);
  const [overflows, setOverflows] = useState(false);
  useEffect(() => {
    const element = frame.current;
    if (!element) return;
    const measure = () => setOverflows(element.scrollWidth > element.clientWidth + 1);
    measure();
    const observer = new ResizeObserver(measure);
    observer.observe(element);
    const table = element.firstElementChild;
    if (table) observer.observe(table);
    return () => observer.disconnect();
  }, []);
  return (
    <div
      class="table-wrap"
      ref={frame}
      {...(overflows ? { tabIndex: 0, role: 'group', 'aria-label': props.caption } : {})}
    >
      <table class={props.class}>
        <caption class="visually-hidden">{props.caption}</caption>
        <thead>
          <tr>
            {props.headers.map((h, i) => (
              <th key={i} scope="col" class={h.numeric ? 'num' : undefined}>
                {h.header}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>{props.children}</tbody>
      </table>
    </div>
  );
}

/** A table of rows, one cell per column. */
export function DataTable<T>(props: {
  caption: string;
  columns: Column<T>[];
  rows: readonly T[];
  rowKey: (row: T) => string;
  rowClass?: (row: T) => string | undefined;
  class?: string;
}) {
  return (
    <TableFrame caption={props.caption} headers={props.columns} class={props.class}>
      {props.rows.map((row) => (
        <tr key={props.rowKey(row)} class={props.rowClass?.(row)}>
          {props.columns.map((column, i) => cellOf(column, row, i))}
        </tr>
      ))}
    </TableFrame>
  );
}

function cellOf<T>(column: Column<T>, row: T, index: number): JSX.Element {
  const cls = [column.numeric ? 'num' : '', column.class ?? ''].filter(Boolean).join(' ') || undefined;
  return column.rowHeader ? (
    <th key={index} scope="row" class={cls}>
      {column.cell(row)}
    </th>
  ) : (
    <td key={index} class={cls}>
      {column.cell(row)}
    </td>
  );
}
