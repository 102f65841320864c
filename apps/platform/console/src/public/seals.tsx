import { type Check, type SealDocument as StatsSeal, verdictOf, verifySeal } from '@ooh/verify';
import { addDays, isCalendarDate } from '@ooh/protocol';
import { useEffect, useState } from 'preact/hooks';
import { getJsonOrNull } from './api.js';
import { type PublicMessageKey, useI18n } from './i18n/index.js';
import type { Trust } from './root.js';
import { Badge, type CheckLine, CheckList, ErrorText, type Tone, useAsync } from './ui.js';

const DAYS_SHOWN = 14;

const fetchSeal = (day: string) => getJsonOrNull<StatsSeal>(`/v1/stats-seals/${day}`);

type Verdict = ReturnType<typeof verdictOf> | 'refused';

const VERDICT_TONE: Record<Verdict, Tone> = {
  ok: 'good',
  ledger_pending: 'warn',
  incomplete: 'warn',
  failed: 'bad',
  refused: 'bad',
};

/** The seal checks as lines of the page, in the reader's language. */
export function useSealLines(): (checks: Check[]) => CheckLine[] {
  const { t, known, number, date } = useI18n();
  return (checks) =>
    checks.map((c) => {
      const failedSignature = c.name === 'signature' && c.state === 'failed';
      // A failed signature carries the @ooh/verify code it failed with (cms_bad_signature, chain_expired, ...).
      const reasonKey =
        known(`reason.${c.reason}`) ??
        known(`code.${c.reason}`) ??
        (failedSignature ? 'reason.signature_bad' : null);
      const height = c.facts?.['block_height'];
      return {
        key: c.name,
        title: t(`check.${c.name}` as PublicMessageKey),
        state: c.state,
        text: reasonKey ? t(reasonKey) : c.reason,
        ...(failedSignature ? { detail: String(c.facts?.['detail'] ?? c.reason) } : {}),
        ...(height !== undefined
          ? {
              note: t('seals.block', { height: number(Number(height)), day: date(String(c.facts?.['day'])) }),
            }
          : c.facts?.['signer']
            ? { note: String(c.facts['signer']) }
            : {}),
      };
    });
}

function SealDay(props: { day: string; seal: StatsSeal | null; previous: StatsSeal | null; trust: Trust }) {
  const { t, number, date, dateTime } = useI18n();
  const lines = useSealLines();
  const [checks, setChecks] = useState<Check[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const { seal, trust } = props;
  const anchor = trust.state === 'pinned' || trust.state === 'unpinned' ? trust.anchor : null;
  useEffect(() => {
    setChecks(null);
    setError(null);
    if (!seal || !anchor) return;
    let current = true;
    const previous = seal.body.prev_seal_sha256 === '0'.repeat(64) ? 'none' : props.previous;
    verifySeal(seal, [anchor], previous, { day: props.day }).then(
      (result) => current && setChecks(result),
      (e: unknown) => current && setError(e),
    );
    return () => {
      current = false;
    };
  }, [seal, props.previous, anchor]);

  const verdict: Verdict | null = trust.state === 'differs' ? 'refused' : checks ? verdictOf(checks) : null;
  const titleId = `seal-${props.day}`;
  return (
    <li class="seal" data-day={props.day} data-verdict={verdict ?? (seal ? 'checking' : 'none')}>
      <h3 id={titleId} class="seal-day">
        {date(props.day)}
      </h3>
      {seal ? (
        <>
          <div class="seal-verdict" aria-live="polite">
            {verdict ? (
              <Badge tone={VERDICT_TONE[verdict]}>{t(`verdict.${verdict}` as PublicMessageKey)}</Badge>
            ) : trust.state === 'loading' || trust.state === 'error' ? null : (
              <span class="muted">{t('seals.checking')}</span>
            )}
          </div>
          <dl class="facts facts-inline">
            <dt>{t('seals.batches')}</dt>
            <dd>{number(seal.body.batch_count)}</dd>
            <dt>{t('seals.plays')}</dt>
            <dd>{number(seal.body.record_count)}</dd>
            <dt>{t('seals.signedAt')}</dt>
            <dd>{dateTime(seal.signed_at)}</dd>
          </dl>
          {checks && verdict !== 'refused' ? (
            <details open={verdict !== 'ok'}>
              <summary>{t('seals.details')}</summary>
              <CheckList lines={lines(checks)} label={`${t('seals.details')}: ${date(props.day)}`} />
            </details>
          ) : null}
          <ErrorText error={error} />
        </>
      ) : (
        <p class="muted seal-none">{t('seals.notSealed')}</p>
      )}
    </li>
  );
}

/** The sealed days of a two-week window, each verified in the browser as soon as it is read. */
export function SealsSection(props: { trust: Trust; today: string }) {
  const { t, date } = useI18n();
  const latest = addDays(props.today, -1);
  const [until, setUntil] = useState(latest);
  const [field, setField] = useState(latest);
  const days = Array.from({ length: DAYS_SHOWN }, (_, i) => addDays(until, -i));
  const seals = useAsync(async () => {
    // One more day than shown: the oldest seal's chain is checked against the seal before it.
    const wanted = [...days, addDays(until, -DAYS_SHOWN)];
    const found = await Promise.all(wanted.map((d) => fetchSeal(d)));
    return new Map(wanted.map((d, i) => [d, found[i] ?? null]));
  }, [until]);
  const show = (day: string) => {
    const chosen = day > latest ? latest : day;
    setUntil(chosen);
    setField(chosen);
  };
  return (
    <section id="seals" class="panel" aria-labelledby="seals-title">
      <h2 id="seals-title">{t('seals.title')}</h2>
      <p class="hint">{t('seals.lead')}</p>
      <form
        class="inline-form"
        onSubmit={(e) => {
          e.preventDefault();
          if (isCalendarDate(field)) show(field);
        }}
      >
        <div class="field">
          <label for="seals-until">{t('seals.until')}</label>
          <input
            id="seals-until"
            type="date"
            required
            max={latest}
            value={field}
            onInput={(e) => setField((e.target as HTMLInputElement).value)}
          />
        </div>
        <button type="submit" class="button">
          {t('seals.show')}
        </button>
        <button
          type="button"
          class="button button-secondary"
          onClick={() => show(addDays(until, -DAYS_SHOWN))}
        >
          {t('seals.earlier')}
        </button>
        <button
          type="button"
          class="button button-secondary"
          disabled={until >= latest}
          onClick={() => show(addDays(until, DAYS_SHOWN))}
        >
          {t('seals.later')}
        </button>
      </form>
      <ErrorText error={seals.error} />
      {seals.loading && !seals.data ? <output class="muted block">{t('seals.checking')}</output> : null}
      {seals.data ? (
        <ul class="seal-list" aria-label={t('seals.list', { day: date(until) })}>
          {days.map((day) => (
            <SealDay
              key={day}
              day={day}
              seal={seals.data!.get(day) ?? null}
              previous={seals.data!.get(addDays(day, -1)) ?? null}
              trust={props.trust}
            />
          ))}
        </ul>
      ) : null}
      <p class="hint">{t('seals.receiveDay')}</p>
    </section>
  );
}
