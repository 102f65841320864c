import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { HttpError, NetworkError } from './api.js';
import { type PublicMessageKey, useI18n } from './i18n/index.js';

export type Tone = 'good' | 'bad' | 'warn' | 'info';

/** One line of a check list: a mark, the check's name, its state and why. */
export interface CheckLine {
  key: string;
  title: string;
  state: 'ok' | 'failed' | 'pending' | 'unknown';
  text: string;
  /** Technical detail (the verifier's own words, in English). */
  detail?: string;
  /** Further facts, already translated. */
  note?: string;
}

const MARKS: Record<CheckLine['state'], string> = { ok: '✓', failed: '✗', pending: '…', unknown: '?' };

export function CheckList(props: { lines: CheckLine[]; label: string }) {
  const { t } = useI18n();
  return (
    <ul class="checks" aria-label={props.label}>
      {props.lines.map((line) => (
        <li key={line.key} class={`check check-${line.state}`} data-check={line.key}>
          <span class="check-mark" aria-hidden="true">
            {MARKS[line.state]}
          </span>
          <span>
            <strong>{line.title}</strong>: {t(`state.${line.state}` as PublicMessageKey)} — {line.text}
            {line.note ? <small class="block muted">{line.note}</small> : null}
            {line.detail ? (
              <small class="block muted">
                <code lang="en">{line.detail}</code>
              </small>
            ) : null}
          </span>
        </li>
      ))}
    </ul>
  );
}

export function Badge(props: { tone: Tone; children: ComponentChildren; testId?: string }) {
  return (
    <span class={`badge badge-${props.tone}`} data-testid={props.testId}>
      {props.children}
    </span>
  );
}

/** A hash in full, breakable anywhere, in a monospaced face. */
export function Hash(props: { value: string; label?: string }) {
  return (
    <code class="hash" title={props.label}>
      {props.value}
    </code>
  );
}

/** An error of a read, in the reader's language. */
export function ErrorText(props: { error: unknown }) {
  const { t } = useI18n();
  if (!props.error) return null;
  const e = props.error;
  const text =
    e instanceof HttpError
      ? e.status === 429
        ? t('error.rate', { seconds: e.retryAfter ?? 1 })
        : t('error.status', { status: e.status })
      : e instanceof NetworkError && e.kind === 'parse'
        ? t('error.parse')
        : t('error.network');
  return (
    <p class="notice notice-bad" role="alert">
      {text}
    </p>
  );
}

export function Loading() {
  const { t } = useI18n();
  return <output class="muted block">{t('seals.checking')}</output>;
}

/** An async value that reloads when its dependencies change; the last answer wins. */
export function useAsync<T>(load: () => Promise<T>, deps: unknown[]) {
  const [state, setState] = useState<{ data: T | null; error: unknown; loading: boolean }>({
    data: null,
    error: null,
    loading: true,
  });
  useEffect(() => {
    let current = true;
    setState((s) => ({ ...s, loading: true, error: null }));
    load().then(
      (data) => current && setState({ data, error: null, loading: false }),
      (error: unknown) => current && setState({ data: null, error, loading: false }),
    );
    return () => {
      current = false;
    };
  }, deps);
  return state;
}
