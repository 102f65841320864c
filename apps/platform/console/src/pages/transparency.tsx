import { addDays, almatyDate, type OpenDataDictionary, type StatsSeal } from '@ooh/protocol';
import {
  type AnchorCheck,
  type AnchorSource,
  type Certificate,
  type Check,
  parsePem,
  readVkey,
  SIG_COSIGNATURE_V1,
  SIG_ED25519,
  sha256Hex,
  type TimestampResult,
  type Vkey,
  type VkeyResult,
  verdictOf,
  verifyAnchoring,
  verifyBlockTimestamp,
  verifySeal,
} from '@ooh/verify';
import { useEffect, useState } from 'preact/hooks';
import { FilePicker } from '../components/dropzone.js';
import { ApiError, get, put, reach, verifyGet, verifyUrl } from '../api/client.js';
import type { OpenDataConsole, OpenDataRelease } from '../api/types.js';
import { DataTable, TableFrame } from '../components/table.js';
import {
  Badge,
  ErrorNotice,
  Field,
  Hash,
  knownKey,
  Loading,
  Notice,
  sealReasonKey,
  useAsync,
} from '../components/ui.js';
import { type MessageKey, useI18n } from '../i18n/index.js';
import { can, useSession } from '../lib/session.js';
import { almatyWallClock } from '../lib/working-hours.js';

const DAYS_SHOWN = 14;

/** The seal of a day from the public verify host; null when the day is not sealed (404). */
async function fetchSeal(day: string): Promise<StatsSeal | null> {
  try {
    return await verifyGet<StatsSeal>(`/v1/stats-seals/${day}`);
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) return null;
    throw error;
  }
}

interface Root {
  certificate: Certificate;
  fingerprint: string;
}

async function fetchRoot(): Promise<Root> {
  const pem = await verifyGet<string>('/v1/authority-root.pem', 'text');
  const [certificate] = parsePem(pem);
  if (!certificate) throw new Error('the authority root is not a PEM certificate');
  return { certificate, fingerprint: await sha256Hex(certificate.der) };
}

const CHECK_TITLES: Record<Check['name'], MessageKey> = {
  signature: 'seal.check.signature',
  content: 'seal.check.content',
  chain: 'seal.check.chain',
  ledger: 'seal.check.ledger',
};

function CheckList(props: { checks: Check[] }) {
  const { t, number, date } = useI18n();
  return (
    <ul class="checks">
      {props.checks.map((c) => {
        const reason = sealReasonKey(c.reason);
        return (
          <li key={c.name} class={`check check-${c.state}`}>
            <span class="check-icon" aria-hidden="true">
              {c.state === 'ok' ? '✓' : c.state === 'failed' ? '✗' : '…'}
            </span>
            <span>
              <strong>{t(CHECK_TITLES[c.name])}</strong>: {t(`seal.state.${c.state}`)}
              {' — '}
              {reason ? t(reason) : c.reason}
              {c.facts?.['block_height'] !== undefined ? (
                <small class="muted block">
                  {t('seal.block', {
                    height: number(Number(c.facts['block_height'])),
                    day: date(String(c.facts['day'])),
                  })}
                </small>
              ) : null}
              {c.facts?.['signer'] ? <small class="muted block">{String(c.facts['signer'])}</small> : null}
            </span>
          </li>
        );
      })}
    </ul>
  );
}

/** GET /v1/ledger/witnesses (src/ledger/schema.ts LedgerWitnesses). */
interface LedgerWitnesses {
  origin: string;
  ledger_vkey: string;
  quorum: number;
  checkpoint: { size: number; anchored_size: number | null; url: string } | null;
  witnesses: {
    name: string;
    vkey: string;
    url: string;
    cosigned_size: number;
    last_cosigned_at: string | null;
    state: 'ok' | 'behind' | 'failing';
  }[];
}

/**
 * The witness keys the reader pins in this page, how many of them must have cosigned, and the ledger's own
 * checkpoint key if the reader pins it (issue 23; `ooh-verify --witness`, `--require-anchored`, `--ledger-key`).
 */
interface Pins {
  keys: Vkey[];
  quorum: number;
  ledgerKey: Vkey | null;
}

const pinsSet = (pins: Pins) => pins.keys.length > 0 || pins.ledgerKey !== null;

async function orNull<T>(read: Promise<T>): Promise<T | null> {
  try {
    return await read;
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) return null;
    throw error;
  }
}

const ANCHOR_SOURCE: AnchorSource = {
  checkpoint: (path) => orNull(verifyGet<string>(path, 'text')),
  block: (day) => orNull(verifyGet(`/v1/ledger/blocks/${day}`)),
};

function AnchorLine(props: { check: AnchorCheck }) {
  const { t, number } = useI18n();
  const c = props.check;
  const reason = knownKey(`transparency.witness.reason.${c.reason}`);
  return (
    <ul class="checks" data-testid="anchor-check">
      <li class={`check check-${c.state}`}>
        <span class="check-icon" aria-hidden="true">
          {c.state === 'ok' ? '✓' : c.state === 'failed' ? '✗' : '…'}
        </span>
        <span>
          <strong>{t('transparency.witness.check')}</strong>: {t(`seal.state.${c.state}`)}
          {' — '}
          {reason
            ? t(reason, { size: number(c.size ?? 0), witnesses: (c.witnesses ?? []).join(', ') })
            : c.reason}
        </span>
      </li>
    </ul>
  );
}

/**
 * The text of why readVkey refused a pasted key: its code's own for a key (transparency.keyCode.*, where the
 * verify.code.* text speaks of signed data), else the verify.code.* one, else the code itself.
 */
function vkeyRefusalKey(code: string): MessageKey | null {
  return knownKey(`transparency.keyCode.${code}`) ?? knownKey(`verify.code.${code}`);
}

/**
 * The ledger's witnesses as the platform lists them, and the keys the reader pins. The listed keys come from this
 * platform and prove nothing alone: a reader pins keys obtained from the witnesses themselves (or takes the listed
 * ones knowingly); the seals below are then checked against those.
 */
function Witnesses(props: { pins: Pins; onPins: (pins: Pins) => void }) {
  const { t, number, dateTime } = useI18n();
  const listed = useAsync(() => orNull(verifyGet<LedgerWitnesses>('/v1/ledger/witnesses')), []);
  const [text, setText] = useState('');
  const [required, setRequired] = useState('1');
  const [ledgerText, setLedgerText] = useState('');
  const [problem, setProblem] = useState<string | null>(null);
  const [ledgerProblem, setLedgerProblem] = useState<string | null>(null);
  /** The page's message for a refused key, and after it why readVkey refused it (a key of the other type: nothing). */
  const refused = (message: string, read: VkeyResult) => {
    if (read.ok) return message;
    const reason = vkeyRefusalKey(read.error.code);
    return `${message} — ${reason ? t(reason) : read.error.code}`;
  };
  const apply = async (keysText: string, quorumText: string, ledgerKeyText: string) => {
    let ledgerKey: Vkey | null = null;
    if (ledgerKeyText.trim() !== '') {
      const read = await readVkey(ledgerKeyText);
      if (!read.ok || read.vkey.type !== SIG_ED25519) {
        setLedgerProblem(refused(t('transparency.ledgerKey.bad', { key: ledgerKeyText.trim() }), read));
        return;
      }
      ledgerKey = read.vkey;
    }
    setLedgerProblem(null);
    const keys: Vkey[] = [];
    for (const line of keysText
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '')) {
      const read = await readVkey(line);
      if (!read.ok || read.vkey.type !== SIG_COSIGNATURE_V1) {
        setProblem(refused(t('transparency.witness.badKey', { key: line }), read));
        return;
      }
      keys.push(read.vkey);
    }
    const quorum = Number(quorumText);
    if (!Number.isInteger(quorum) || quorum < 1 || (keys.length > 0 && quorum > keys.length)) {
      setProblem(t('transparency.witness.badQuorum', { count: number(keys.length) }));
      return;
    }
    setProblem(null);
    props.onPins({ keys, quorum, ledgerKey });
  };
  const data = listed.data;
  return (
    <section class="witnesses" aria-labelledby="witnesses-title" data-testid="witnesses">
      <h3 id="witnesses-title">{t('transparency.witness.title')}</h3>
      <p class="hint">{t('transparency.witness.lead')}</p>
      <ErrorNotice error={listed.error} />
      {data ? (
        <>
          <dl class="facts">
            <dt>{t('transparency.witness.origin')}</dt>
            <dd>
              <code>{data.origin}</code>
            </dd>
            <dt>{t('transparency.witness.ledgerKey')}</dt>
            <dd>
              <code class="hash hash-full">{data.ledger_vkey}</code>
            </dd>
            <dt>{t('transparency.witness.quorum')}</dt>
            <dd>{number(data.quorum)}</dd>
            <dt>{t('transparency.witness.checkpoint')}</dt>
            <dd>
              {data.checkpoint ? (
                <a href={data.checkpoint.url}>{number(data.checkpoint.size)}</a>
              ) : (
                t('seal.state.unknown')
              )}
            </dd>
            <dt>{t('transparency.witness.anchored')}</dt>
            <dd data-testid="anchored-size">
              {data.checkpoint?.anchored_size ? number(data.checkpoint.anchored_size) : '—'}
            </dd>
          </dl>
          {data.witnesses.length === 0 ? (
            <Notice>{t('transparency.witness.none')}</Notice>
          ) : (
            <DataTable
              caption={t('transparency.witness.title')}
              rows={data.witnesses}
              rowKey={(w) => w.vkey}
              columns={[
                { header: t('transparency.witness.name'), cell: (w) => <code>{w.name}</code> },
                { header: t('transparency.witness.cosigned'), cell: (w) => number(w.cosigned_size) },
                {
                  header: t('transparency.witness.lastCosigned'),
                  cell: (w) => (w.last_cosigned_at ? dateTime(w.last_cosigned_at) : '—'),
                },
                {
                  header: t('transparency.witness.state'),
                  cell: (w) => (
                    <Badge tone={w.state === 'ok' ? 'good' : w.state === 'behind' ? 'info' : 'warn'}>
                      {t(`transparency.witness.state.${w.state}`)}
                    </Badge>
                  ),
                },
              ]}
            />
          )}
        </>
      ) : null}
      <form
        class="stack"
        onSubmit={(e) => {
          e.preventDefault();
          void apply(text, required, ledgerText);
        }}
      >
        <Field
          id="witness-keys"
          label={t('transparency.witness.pin')}
          hint={t('transparency.witness.pinHint')}
          error={problem}
        >
          <textarea
            id="witness-keys"
            rows={3}
            value={text}
            onInput={(e) => setText((e.target as HTMLTextAreaElement).value)}
          />
        </Field>
        <Field id="witness-required" label={t('transparency.witness.required')}>
          <input
            id="witness-required"
            type="number"
            min={1}
            value={required}
            onInput={(e) => setRequired((e.target as HTMLInputElement).value)}
          />
        </Field>
        <Field
          id="ledger-key"
          label={t('transparency.ledgerKey.pin')}
          hint={t('transparency.ledgerKey.hint')}
          error={ledgerProblem}
        >
          <input
            id="ledger-key"
            type="text"
            spellcheck={false}
            value={ledgerText}
            onInput={(e) => setLedgerText((e.target as HTMLInputElement).value)}
          />
        </Field>
        <div class="inline-form">
          <button type="submit" class="button">
            {t('transparency.witness.apply')}
          </button>
          {data && data.witnesses.length > 0 ? (
            <button
              type="button"
              class="button button-secondary"
              onClick={() => {
                const listedKeys = data.witnesses.map((w) => w.vkey).join('\n');
                setText(listedKeys);
                setRequired(String(data.quorum));
                setLedgerText(data.ledger_vkey);
                void apply(listedKeys, String(data.quorum), data.ledger_vkey);
              }}
            >
              {t('transparency.witness.useListed')}
            </button>
          ) : null}
          <output data-testid="pinned">
            {t('transparency.witness.pinned', { count: number(props.pins.keys.length) })}
            {props.pins.ledgerKey ? ` · ${t('transparency.ledgerKey.pinned')}` : ''}
          </output>
        </div>
      </form>
    </section>
  );
}

/** The time-stamping authority's certificate the reader pins (issue 23), or the CA that issued it. */
interface TsaPin {
  certificates: Certificate[];
  name: string;
  fingerprint: string;
}

/**
 * The TSA certificate the reader pins: pasted as PEM or read from a file. Like the witness keys, it comes from the
 * time-stamping authority itself, never from this platform; each seal's ledger block is then checked for an RFC 3161
 * timestamp of its digest that verifies against it.
 */
function TimestampAuthority(props: { pin: TsaPin | null; onPin: (pin: TsaPin | null) => void }) {
  const { t } = useI18n();
  const [text, setText] = useState('');
  const [problem, setProblem] = useState<string | null>(null);
  const apply = async (pem: string) => {
    if (pem.trim() === '') {
      setProblem(null);
      props.onPin(null);
      return;
    }
    let certificates: Certificate[] = [];
    try {
      certificates = parsePem(pem);
    } catch {
      certificates = [];
    }
    const first = certificates[0];
    if (!first) {
      setProblem(t('transparency.tsa.badPem'));
      return;
    }
    setProblem(null);
    props.onPin({
      certificates,
      name: first.subjectCommonName ?? '?',
      fingerprint: await sha256Hex(first.der),
    });
  };
  return (
    <section class="witnesses" aria-labelledby="tsa-title" data-testid="tsa">
      <h3 id="tsa-title">{t('transparency.tsa.title')}</h3>
      <p class="hint">{t('transparency.tsa.lead')}</p>
      <form
        class="stack"
        onSubmit={(e) => {
          e.preventDefault();
          void apply(text);
        }}
      >
        <Field
          id="tsa-pem"
          label={t('transparency.tsa.pem')}
          hint={t('transparency.tsa.pemHint')}
          error={problem}
        >
          <textarea
            id="tsa-pem"
            rows={3}
            spellcheck={false}
            value={text}
            onInput={(e) => setText((e.target as HTMLTextAreaElement).value)}
          />
        </Field>
        <Field id="tsa-file" label={t('transparency.tsa.file')}>
          <FilePicker
            id="tsa-file"
            labelledBy="tsa-file-label"
            accept=".pem,.crt,.cer,application/x-pem-file"
            onFiles={async (files) => {
              const file = files?.[0];
              if (!file) return;
              const pem = await file.text();
              setText(pem);
              await apply(pem);
            }}
          />
        </Field>
        <div class="inline-form">
          <button type="submit" class="button">
            {t('transparency.tsa.apply')}
          </button>
          {props.pin ? (
            <button
              type="button"
              class="button button-secondary"
              onClick={() => {
                setText('');
                setProblem(null);
                props.onPin(null);
              }}
            >
              {t('transparency.tsa.clear')}
            </button>
          ) : null}
          <output data-testid="tsa-pinned">
            {props.pin
              ? t('transparency.tsa.pinned', { name: props.pin.name })
              : t('transparency.tsa.notPinned')}
          </output>
        </div>
        {props.pin ? (
          <p class="root">
            {t('transparency.tsa.fingerprint')} <Hash value={props.pin.fingerprint} full />
          </p>
        ) : null}
      </form>
    </section>
  );
}

/** The timestamp check of a seal's ledger block: none published, verified (with its time), or refused. */
type TimestampCheck = { state: 'unknown'; reason: 'none' | 'not_digested' } | TimestampResult;

/** The RFC 3161 reply of a block, as bytes; null when the verify host has none (404). */
async function fetchTimestamp(day: string): Promise<Uint8Array | null> {
  const response = await reach(() =>
    fetch(`${verifyUrl()}/v1/ledger/blocks/${day}/timestamp.tsr`, { credentials: 'omit' }),
  );
  if (response.status === 404) return null;
  if (!response.ok) {
    // A problem document (429 rate_limited, ...) as verifyGet reads it; anything else by its status.
    const problem = (await response.json().catch(() => null)) as { code?: string; detail?: string } | null;
    throw new ApiError(response.status, problem?.code ?? `http_${response.status}`, problem?.detail ?? '');
  }
  return new Uint8Array(await response.arrayBuffer());
}

const TIMESTAMP_REFUSALS: Record<Exclude<TimestampResult, { ok: true }>['code'], MessageKey> = {
  not_granted: 'transparency.tsa.reason.not_granted',
  other_digest: 'transparency.tsa.reason.other_digest',
  changed: 'transparency.tsa.reason.changed',
  signature: 'transparency.tsa.reason.signature',
  not_pinned: 'transparency.tsa.reason.not_pinned',
  not_for_timestamping: 'transparency.tsa.reason.not_for_timestamping',
  not_valid_then: 'transparency.tsa.reason.not_valid_then',
  before_day_end: 'transparency.tsa.reason.before_day_end',
  malformed: 'transparency.tsa.reason.malformed',
};

function TimestampLine(props: { check: TimestampCheck }) {
  const { t, dateTime } = useI18n();
  const c = props.check;
  const state = 'state' in c ? 'unknown' : c.ok ? 'ok' : 'failed';
  return (
    <ul class="checks" data-testid="timestamp-check">
      <li class={`check check-${state}`}>
        <span class="check-icon" aria-hidden="true">
          {state === 'ok' ? '✓' : state === 'failed' ? '✗' : '…'}
        </span>
        <span>
          <strong>{t('transparency.tsa.check')}</strong>: {t(`seal.state.${state}`)}
          {' — '}
          {'state' in c
            ? t(
                c.reason === 'none'
                  ? 'transparency.tsa.reason.none'
                  : 'transparency.witness.reason.not_digested',
              )
            : c.ok
              ? t('transparency.tsa.reason.verified', {
                  time: dateTime(c.genTime),
                  tsa: c.tsa ?? '?',
                })
              : t(TIMESTAMP_REFUSALS[c.code])}
          {/* The English detail only where the translated reason is generic. */}
          {'ok' in c && !c.ok && c.code === 'malformed' ? (
            <small class="muted block" lang="en">
              {c.reason}
            </small>
          ) : null}
        </span>
      </li>
    </ul>
  );
}

const VERDICT_TEXT: Record<ReturnType<typeof verdictOf>, MessageKey> = {
  ok: 'seal.allOk',
  ledger_pending: 'seal.ledgerPending',
  incomplete: 'seal.incomplete',
  failed: 'seal.notAllOk',
};

function SealRow(props: {
  day: string;
  seal: StatsSeal | null;
  previous: () => Promise<StatsSeal | null>;
  root: Root | null;
  /** The newest sealed day shown: verified as soon as the page opens. */
  open?: boolean;
  pins: Pins;
  tsa: TsaPin | null;
}) {
  const { t, number, dateTime, date } = useI18n();
  const [checks, setChecks] = useState<Check[] | null>(null);
  const [anchor, setAnchor] = useState<AnchorCheck | null>(null);
  const [stamp, setStamp] = useState<TimestampCheck | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const seal = props.seal;
  const verify = async () => {
    if (!seal || !props.root) return;
    setBusy(true);
    setError(null);
    try {
      const previous = seal.body.prev_seal_sha256 === '0'.repeat(64) ? 'none' : await props.previous();
      const found = await verifySeal(seal, [props.root.certificate], previous, { day: props.day });
      setChecks(found);
      // Issue 23: with witness keys pinned, the seal's block must be anchored by a quorum of them; with a TSA
      // certificate pinned, it must carry an RFC 3161 timestamp of its digest by that TSA.
      const ledger = found.find((c) => c.name === 'ledger' && c.state === 'ok');
      const ledgerOk = ledger !== undefined;
      const block =
        seal.ledger && ledgerOk && (pinsSet(props.pins) || props.tsa)
          ? await orNull(
              verifyGet<{ anchored_by?: number | null; timestamp?: { gen_time: string } }>(
                `/v1/ledger/blocks/${seal.ledger.day}`,
              ),
            )
          : null;
      if (props.tsa && seal.ledger && ledgerOk) {
        const reply = block?.timestamp ? await fetchTimestamp(seal.ledger.day) : null;
        setStamp(
          reply
            ? await verifyBlockTimestamp(
                reply,
                // The digest the ledger check recomputed from the proof, never the one the server states.
                String(ledger.facts?.['digest'] ?? seal.ledger.digest),
                props.tsa.certificates,
                // No honest stamp of a day's block exists before the day ended in Almaty.
                new Date(almatyWallClock(addDays(seal.ledger.day, 1), 0)),
              )
            : { state: 'unknown', reason: 'none' },
        );
      } else {
        setStamp(props.tsa && !seal.ledger ? { state: 'unknown', reason: 'not_digested' } : null);
      }
      if (pinsSet(props.pins) && seal.ledger && ledgerOk) {
        setAnchor(
          await verifyAnchoring(
            {
              day: seal.ledger.day,
              block_height: seal.ledger.block_height,
              digest: seal.ledger.digest,
              anchored_by: block?.anchored_by ?? null,
            },
            props.pins.keys,
            props.pins.quorum,
            ANCHOR_SOURCE,
            { ledgerKey: props.pins.ledgerKey },
          ),
        );
      } else {
        setAnchor(pinsSet(props.pins) && !seal.ledger ? { state: 'unknown', reason: 'not_digested' } : null);
      }
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  // Verified once, when the root and the seal are there.
  useEffect(() => {
    if (props.open && seal && props.root && !checks && !busy) void verify();
  }, [props.open, seal, props.root]);
  // Verified again when the pinned keys or the pinned TSA change.
  useEffect(() => {
    if (checks && !busy) void verify();
  }, [props.pins, props.tsa]);
  const stampFailed = stamp !== null && 'ok' in stamp && !stamp.ok;
  const stampMissing = stamp !== null && 'state' in stamp && stamp.reason === 'none';
  const base = checks ? verdictOf(checks) : null;
  const verdict =
    base === null
      ? null
      : anchor?.state === 'failed' || stampFailed
        ? 'failed'
        : base === 'ok' && stampMissing
          ? 'incomplete'
          : base;
  return (
    <tr data-day={props.day} class={props.open ? 'seal-latest' : undefined}>
      <th scope="row" class="nowrap">
        {date(props.day)}
      </th>
      {seal ? (
        <>
          <td class="num">{number(seal.body.batch_count)}</td>
          <td class="num">{number(seal.body.record_count)}</td>
          <td>{dateTime(seal.signed_at)}</td>
          <td>
            {seal.ledger ? (
              <Badge tone="good">{t(knownKey(`ledger.${seal.ledger.status}`) ?? 'ledger.digested')}</Badge>
            ) : (
              <Badge tone="info">{t('ledger.pending')}</Badge>
            )}
          </td>
          <td>
            <button type="button" class="button button-small" onClick={verify} disabled={busy || !props.root}>
              {busy ? t('seal.verifying') : t('seal.verify')}
            </button>
            {verdict ? (
              <output
                class={`verdict ${verdict === 'ok' ? 'verdict-ok' : verdict === 'failed' ? 'verdict-bad' : 'verdict-pending'}`}
              >
                {t(VERDICT_TEXT[verdict])}
              </output>
            ) : null}
            {checks ? <CheckList checks={checks} /> : null}
            {anchor ? <AnchorLine check={anchor} /> : null}
            {stamp ? <TimestampLine check={stamp} /> : null}
            <ErrorNotice error={error} />
          </td>
        </>
      ) : (
        <td colSpan={5} class="muted">
          {t('seal.notSealed')}
        </td>
      )}
    </tr>
  );
}

function Seals() {
  const { t } = useI18n();
  const [until, setUntil] = useState(addDays(almatyDate(Date.now()), -1));
  const [shownUntil, setShownUntil] = useState(until);
  const root = useAsync(fetchRoot, []);
  const [pins, setPins] = useState<Pins>({ keys: [], quorum: 1, ledgerKey: null });
  const [tsa, setTsa] = useState<TsaPin | null>(null);
  const days = Array.from({ length: DAYS_SHOWN }, (_, i) => addDays(shownUntil, -i));
  const seals = useAsync(async () => {
    const found = await Promise.all(days.map((d) => fetchSeal(d)));
    return new Map(days.map((d, i) => [d, found[i] ?? null]));
  }, [shownUntil]);
  const base = verifyUrl();
  const previousOf = (day: string) => async () =>
    seals.data?.get(addDays(day, -1)) ?? fetchSeal(addDays(day, -1));
  const example = days.find((d) => seals.data?.get(d)) ?? shownUntil;
  const latestSealed = days.find((d) => seals.data?.get(d));

  return (
    <div class="panel">
      <h2>{t('seal.title')}</h2>
      <p class="hint">{t('seal.lead')}</p>
      <ErrorNotice error={root.error} />
      <Witnesses pins={pins} onPins={setPins} />
      <TimestampAuthority pin={tsa} onPin={setTsa} />
      {root.data ? (
        <p class="root">
          {t('seal.root', { name: root.data.certificate.subjectCommonName ?? '?' })}{' '}
          <Hash value={root.data.fingerprint} full />
        </p>
      ) : null}
      <form
        class="inline-form"
        onSubmit={(e) => {
          e.preventDefault();
          setShownUntil(until);
        }}
      >
        <Field id="seal-until" label={t('seal.until')}>
          <input
            id="seal-until"
            type="date"
            required
            value={until}
            onInput={(e) => setUntil((e.target as HTMLInputElement).value)}
          />
        </Field>
        <button type="submit" class="button">
          {t('plays.show')}
        </button>
      </form>
      {seals.loading && !seals.data ? <Loading /> : null}
      <ErrorNotice error={seals.error} />
      {seals.data ? (
        <TableFrame
          caption={t('seal.title')}
          class="seals"
          headers={[
            { header: t('plays.day') },
            { header: t('seal.batches'), numeric: true },
            { header: t('seal.records'), numeric: true },
            { header: t('seal.signedAt') },
            { header: t('seal.ledger') },
            { header: t('seal.verification') },
          ]}
        >
          {days.map((d) => (
            <SealRow
              key={d}
              day={d}
              seal={seals.data!.get(d) ?? null}
              previous={previousOf(d)}
              root={root.data}
              open={d === latestSealed}
              pins={pins}
              tsa={tsa}
            />
          ))}
        </TableFrame>
      ) : null}
      <p class="hint">{t('seal.receiveDay')}</p>
      <details>
        <summary>{t('seal.manual')}</summary>
        <p class="hint">{t('seal.manualHint')}</p>
        <pre class="code">
          {`curl -s ${base}/v1/authority-root.pem -o authority-root.pem
curl -s "${base}/v1/stats-seals/${example}?format=p7s" -o seal.p7s
openssl cms -verify -binary -inform DER -in seal.p7s -CAfile authority-root.pem -out body.json
curl -s ${base}/v1/stats-seals/${example}`}
        </pre>
      </details>
    </div>
  );
}

function Releases(props: { releases: OpenDataRelease[] }) {
  const { t, dateTime, number } = useI18n();
  if (props.releases.length === 0) return <p>{t('openData.noReleases')}</p>;
  return (
    <DataTable
      caption={t('openData.releases')}
      rows={props.releases}
      rowKey={(r) => r.month}
      columns={[
        { header: t('openData.month'), cell: (r) => r.month },
        { header: t('openData.built'), cell: (r) => dateTime(r.built_at) },
        {
          header: t('openData.files'),
          cell: (r) => (
            <ul class="plain">
              {r.files.map((f) => (
                <li key={f.name}>
                  <a href={f.url}>{f.name}</a>{' '}
                  <small class="muted">{t('check.bytes', { size: number(f.bytes) })}</small>{' '}
                  <Hash value={f.sha256} />
                </li>
              ))}
            </ul>
          ),
        },
      ]}
    />
  );
}

type DisclosureValues = OpenDataConsole['disclosure'];

function DisclosureFacts(props: { rules: DisclosureValues }) {
  const { t, number } = useI18n();
  const r = props.rules;
  return (
    <dl class="facts" data-testid="disclosure-rules">
      <dt>{t('openData.minOperators')}</dt>
      <dd>{number(r.min_operators)}</dd>
      <dt>{t('openData.minAdvertisers')}</dt>
      <dd>{number(r.min_advertisers)}</dd>
      <dt>{t('openData.maxShare')}</dt>
      <dd>{t('plays.percent', { value: r.max_party_share_pct })}</dd>
      <dt>{t('openData.lag')}</dt>
      <dd>{number(r.lag_months)}</dd>
    </dl>
  );
}

/**
 * The disclosure rules in force, read-only, as the public open-data dictionary states them (spec OpenDataDictionary
 * disclosure). While publication is off the dictionary is not public: the authority then sees the values a release
 * would be built with (`unpublished`), everyone else that nothing is published.
 */
function DisclosureRules(props: { unpublished?: DisclosureValues }) {
  const { t, language } = useI18n();
  const dictionary = useAsync(async () => {
    try {
      return await verifyGet<OpenDataDictionary>('/v1/open/dictionary.json');
    } catch (error) {
      if (error instanceof ApiError && error.code === 'not_published') return null;
      throw error;
    }
  }, []);
  return (
    <>
      <h3>{t('openData.rules')}</h3>
      {dictionary.loading && !dictionary.data ? <Loading /> : null}
      <ErrorNotice error={dictionary.error} />
      {dictionary.data ? (
        <>
          <p class="muted">
            {t('openData.rulesSource', { version: dictionary.data.version })}{' '}
            <a href={`${verifyUrl()}/v1/open/dictionary.json`}>dictionary.json</a>
          </p>
          <DisclosureFacts rules={dictionary.data.disclosure} />
          <p class="hint">{dictionary.data.disclosure.description[language]}</p>
        </>
      ) : null}
      {!dictionary.loading && dictionary.data === null && !dictionary.error ? (
        props.unpublished ? (
          <>
            <p class="hint">{t('openData.rulesUnpublished')}</p>
            <DisclosureFacts rules={props.unpublished} />
          </>
        ) : (
          <Notice>{t('openData.notPublished')}</Notice>
        )
      ) : null}
    </>
  );
}

function OpenDataAdmin(props: { canSwitch: boolean }) {
  const { t, dateTime } = useI18n();
  const data = useAsync(() => get<OpenDataConsole>('/api/v1/console/open-data'), []);
  const [error, setError] = useState<unknown>(null);
  if (data.loading && !data.data) return <Loading />;
  if (!data.data) return <ErrorNotice error={data.error} />;
  const d = data.data;
  return (
    <>
      <ErrorNotice error={error} />
      <div class="switch-row">
        <input
          id="publication"
          type="checkbox"
          role="switch"
          aria-checked={d.publication.enabled}
          disabled={!props.canSwitch}
          checked={d.publication.enabled}
          onChange={async (e) => {
            setError(null);
            try {
              await put('/api/v1/console/open-data/publication', {
                enabled: (e.target as HTMLInputElement).checked,
              });
            } catch (err) {
              setError(err);
            }
            data.reload();
          }}
        />
        <label for="publication">{t('openData.publish')}</label>
        <span class="muted">
          {d.publication.enabled ? t('openData.on') : t('openData.off')}
          {d.publication.changed_at
            ? ` · ${t('openData.changed', { at: dateTime(d.publication.changed_at) })}`
            : ''}
        </span>
      </div>
      {/* Read again when the switch turns: the public dictionary comes and goes with it. */}
      <DisclosureRules key={String(d.publication.enabled)} unpublished={d.disclosure} />
      <h3>{t('openData.releases')}</h3>
      <Releases releases={d.releases} />
    </>
  );
}

function OpenDataPublic() {
  const { t } = useI18n();
  const data = useAsync(async () => {
    try {
      return (await verifyGet<{ releases: OpenDataRelease[] }>('/v1/open/releases')).releases;
    } catch (error) {
      if (error instanceof ApiError && error.code === 'not_published') return null;
      throw error;
    }
  }, []);
  return (
    <>
      <DisclosureRules />
      <h3>{t('openData.releases')}</h3>
      {data.loading && data.data === null && !data.error ? <Loading /> : null}
      <ErrorNotice error={data.error} />
      {!data.loading && data.data === null && !data.error ? (
        <Notice>{t('openData.notPublished')}</Notice>
      ) : null}
      {data.data ? <Releases releases={data.data} /> : null}
    </>
  );
}

/** Transparency: daily seals checked in the browser from public data, and open data. */
export function TransparencyPage() {
  const { t } = useI18n();
  const session = useSession();
  return (
    <section>
      <h1>{t('transparency.title')}</h1>
      <p class="lead">{t('transparency.lead')}</p>
      <Seals />
      <div class="panel">
        <h2>{t('openData.title')}</h2>
        {can.plays(session) ? <OpenDataAdmin canSwitch={can.administer(session)} /> : <OpenDataPublic />}
      </div>
    </section>
  );
}
