import { type ComponentChildren, cloneElement, isValidElement, toChildArray, type VNode } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { ApiError } from '../api/client.js';
import { type MessageKey, useI18n } from '../i18n/index.js';
import { DICTIONARIES } from '../i18n/index.js';

/** Loads data; `reload` runs it again. Errors are kept for display. */
export function useAsync<T>(load: () => Promise<T>, deps: unknown[]) {
  const [state, setState] = useState<{ data: T | null; error: unknown; loading: boolean }>({
    data: null,
    error: null,
    loading: true,
  });
  const generation = useRef(0);
  const run = useCallback(() => {
    const mine = ++generation.current;
    setState((s) => ({ ...s, loading: true }));
    load().then(
      (data) => mine === generation.current && setState({ data, error: null, loading: false }),
      (error: unknown) => mine === generation.current && setState({ data: null, error, loading: false }),
    );
  }, deps);
  useEffect(run, [run]);
  return { ...state, reload: run };
}

/** A message key when the dictionary has it. */
export function knownKey(key: string): MessageKey | null {
  return key in DICTIONARIES.en ? (key as MessageKey) : null;
}

/**
 * The text of a seal check's reason: what the check established or why it did not hold, or, for a signature that
 * does not verify, the @ooh/verify code it failed with. Null for a word this console has no text for.
 */
export function sealReasonKey(reason: string): MessageKey | null {
  return knownKey(`seal.reason.${reason}`) ?? knownKey(`verify.code.${reason}`);
}

export function Notice(props: {
  kind?: 'info' | 'success' | 'warning' | 'error';
  children: ComponentChildren;
}) {
  const kind = props.kind ?? 'info';
  return (
    <div class={`notice notice-${kind}`} role={kind === 'error' ? 'alert' : 'status'}>
      {props.children}
    </div>
  );
}

/**
 * The label of the form field a field error's JSON pointer names: the field's own pointer or the nearest one above it
 * ('/structure_ids/2' → '/structure_ids'); null when the form has no such field.
 */
function fieldLabel(fields: Record<string, string> | undefined, path: string): string | null {
  if (!fields) return null;
  for (
    let pointer = path;
    pointer !== '';
    pointer = pointer.slice(0, Math.max(0, pointer.lastIndexOf('/')))
  ) {
    const label = fields[pointer];
    if (label !== undefined) return label;
  }
  return null;
}

/**
 * A problem document (or any error) in the reader's language: its stable code translated, field errors listed. With
 * `fields` (a form's JSON pointers and their labels), a field error is named by its field's label rather than its
 * pointer: the same error is also shown under the field itself (`useFieldErrors`).
 */
export function ErrorNotice(props: { error: unknown; fields?: Record<string, string> }) {
  const { t } = useI18n();
  const error = props.error;
  if (!error) return null;
  if (error instanceof ApiError) {
    const key = knownKey(`problem.${error.code}`);
    return (
      <Notice kind="error">
        <p>{key ? t(key) : t('problem.other', { code: error.code })}</p>
        {error.code === 'rate_limited' ? (
          <p>
            {error.retryAfterSeconds !== null
              ? t('problem.retryAfter', { minutes: Math.max(1, Math.ceil(error.retryAfterSeconds / 60)) })
              : t('problem.retryLater')}
          </p>
        ) : null}
        {error.errors.length > 0 ? (
          <ul>
            {error.errors.map((e) => {
              const label = fieldLabel(props.fields, e.path);
              return (
                <li key={`${e.path}-${e.code}`}>
                  {label === null ? <code>{e.path}</code> : `${label}:`} {fieldErrorText(t, e.code)}
                </li>
              );
            })}
          </ul>
        ) : null}
      </Notice>
    );
  }
  return (
    <Notice kind="error">{t('problem.other', { code: (error as Error)?.message ?? String(error) })}</Notice>
  );
}

export function fieldErrorText(t: ReturnType<typeof useI18n>['t'], code: string): string {
  const key = knownKey(`fieldError.${code}`);
  return key ? t(key) : t('fieldError.other', { code });
}

/**
 * The field errors of a 422 by JSON pointer, translated: the text to show under the field whose pointer is given
 * (its own errors and those of anything below it, such as '/structure_ids/2'), or null.
 */
export function useFieldErrors(error: unknown): (pointer: string) => string | null {
  const { t } = useI18n();
  return (pointer: string): string | null => {
    if (!(error instanceof ApiError)) return null;
    const found = error.errors.filter((e) => e.path === pointer || e.path.startsWith(`${pointer}/`));
    return found.length > 0 ? found.map((e) => fieldErrorText(t, e.code)).join(' ') : null;
  };
}

export function Loading() {
  const { t } = useI18n();
  return <output class="loading">{t('common.loading')}</output>;
}

export function Field(props: {
  id: string;
  label: string;
  hint?: string;
  error?: string | null;
  children: ComponentChildren;
}) {
  // The control says it is invalid and is described by its error (WCAG 3.3.1), as well as by its hint.
  const children = props.error
    ? toChildArray(props.children).map((child) =>
        isValidElement(child) &&
        typeof child.type === 'string' &&
        (child.props as { id?: string }).id === props.id
          ? cloneElement(child as VNode<Record<string, unknown>>, {
              'aria-invalid': 'true',
              'aria-describedby': [
                (child.props as { 'aria-describedby'?: string })['aria-describedby'],
                `${props.id}-error`,
              ]
                .filter(Boolean)
                .join(' '),
            })
          : child,
      )
    : props.children;
  return (
    <div class={`field${props.error ? ' field-invalid' : ''}`}>
      <label for={props.id} id={`${props.id}-label`}>
        {props.label}
      </label>
      {children}
      {props.hint ? (
        <p class="hint" id={`${props.id}-hint`}>
          {props.hint}
        </p>
      ) : null}
      {props.error ? (
        <p class="field-error" id={`${props.id}-error`}>
          {props.error}
        </p>
      ) : null}
    </div>
  );
}

export function Badge(props: {
  tone?: 'neutral' | 'good' | 'warn' | 'bad' | 'info';
  children: ComponentChildren;
}) {
  return <span class={`badge badge-${props.tone ?? 'neutral'}`}>{props.children}</span>;
}

const STATE_TONES: Record<string, 'neutral' | 'good' | 'warn' | 'bad' | 'info'> = {
  draft: 'neutral',
  in_review: 'info',
  approved: 'good',
  rejected: 'bad',
  revoked: 'bad',
  valid: 'good',
  not_yet_valid: 'info',
  expired: 'warn',
  pending: 'info',
};

/** A submission state or creative status, translated. */
export function StateBadge(props: { state: string; prefix: 'state' | 'status' }) {
  const { t } = useI18n();
  const key = knownKey(`${props.prefix}.${props.state}`);
  return <Badge tone={STATE_TONES[props.state] ?? 'neutral'}>{key ? t(key) : props.state}</Badge>;
}

/** A long hash: whole when `full`, else shortened on screen with the whole value as its title. */
export function Hash(props: { value: string; full?: boolean }) {
  const short = !props.full && props.value.length > 20;
  return (
    <code class={props.full ? 'hash hash-full' : 'hash'} title={short ? props.value : undefined}>
      {short ? `${props.value.slice(0, 10)}…${props.value.slice(-6)}` : props.value}
    </code>
  );
}

/** A choice of a few values shown as radio buttons in a row (day or hour, Almaty or UTC). */
export function Segmented<T extends string>(props: {
  legend: string;
  name: string;
  options: readonly { value: T; label: string }[];
  value: T;
  onChange: (value: T) => void;
}) {
  return (
    <fieldset class="segmented">
      <legend>{props.legend}</legend>
      {props.options.map((o) => (
        <label key={o.value}>
          <input
            type="radio"
            name={props.name}
            value={o.value}
            checked={props.value === o.value}
            onChange={() => props.onChange(o.value)}
          />
          {o.label}
        </label>
      ))}
    </fieldset>
  );
}
