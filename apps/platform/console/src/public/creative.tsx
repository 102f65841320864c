import { useState } from 'preact/hooks';
import { canonicalBytes, type LedgerInfo, sha256Hex, verifyLedgerInfo } from '@ooh/verify';
import { getJson, getJsonOrNull } from './api.js';
import { type PublicMessageKey, useI18n } from './i18n/index.js';
import { Badge, type CheckLine, CheckList, ErrorText, Hash, type Tone } from './ui.js';

/** GET {verify_url}/v1/approvals/{number} (src/ledger/schema.ts ApprovalPublicStatus). */
interface ApprovalPublic {
  approval_number: string;
  status: 'valid' | 'not_yet_valid' | 'expired' | 'revoked';
  valid_from: string;
  valid_until: string;
  structures: string[];
  media_sha256: string;
  issued_at: string;
  revoked_at: string | null;
  manifest_sha256: string | null;
  manifest: Record<string, unknown> | null;
  ledger: { approval: LedgerInfo | null; revocation: LedgerInfo | null };
}

/** GET {verify_url}/v1/approvals?media_sha256= (src/public-page/lookup.ts). */
interface ApprovalsOfMedia {
  media_sha256: string;
  items: { approval_number: string }[];
}

const STATUS_TONE: Record<ApprovalPublic['status'], Tone> = {
  valid: 'good',
  not_yet_valid: 'info',
  expired: 'warn',
  revoked: 'bad',
};

const sameList = (a: unknown, b: string[]) =>
  Array.isArray(a) && a.length === b.length && a.every((x, i) => x === b[i]);

/**
 * Checks an approval's public answer from its own parts: the manifest (the signed approval's body) hashes to
 * manifest_sha256 and says what the answer says (number, file, dates, structures); the ledger proof of its issue
 * (and of its revocation) names that manifest and reaches a block digest; with a file, the approval names it.
 */
async function checkApproval(
  a: ApprovalPublic,
  fileSha256: string | null,
  t: (key: PublicMessageKey, params?: Record<string, string | number>) => string,
  date: (d: string) => string,
  known: (key: string) => PublicMessageKey | null,
): Promise<CheckLine[]> {
  const lines: CheckLine[] = [];
  const m = a.manifest;
  const manifestSha = m ? await sha256Hex(canonicalBytes(m)) : null;
  const contentOk =
    m !== null &&
    manifestSha === a.manifest_sha256 &&
    m['approval_number'] === a.approval_number &&
    m['media_sha256'] === a.media_sha256 &&
    m['valid_from'] === a.valid_from &&
    m['valid_until'] === a.valid_until &&
    sameList(m['structures'], a.structures);
  lines.push({
    key: 'content',
    title: t('ccheck.content'),
    state: contentOk ? 'ok' : 'failed',
    text: t(contentOk ? 'creative.reason.content_ok' : 'creative.reason.content_bad'),
  });
  const ledgerLine = async (info: LedgerInfo | null, kind: 'approval' | 'revocation'): Promise<CheckLine> => {
    const title = t(kind === 'approval' ? 'ccheck.ledger' : 'ccheck.revocation');
    if (!info) return { key: kind, title, state: 'pending', text: t('creative.reason.ledger_pending') };
    const failure = a.manifest_sha256
      ? await verifyLedgerInfo(info, {
          kind,
          approval_number: a.approval_number,
          manifest_sha256: a.manifest_sha256,
        })
      : 'leaf_not_this_manifest';
    if (failure) {
      const reason = known(`reason.${failure}`);
      return { key: kind, title, state: 'failed', text: reason ? t(reason) : failure };
    }
    const params = { height: info.block_height, day: date(info.day) };
    return {
      key: kind,
      title,
      state: 'ok',
      text: t(kind === 'approval' ? 'creative.reason.ledger_ok' : 'creative.reason.revocation_ok', params),
    };
  };
  lines.push(await ledgerLine(a.ledger.approval, 'approval'));
  if (a.revoked_at) lines.push(await ledgerLine(a.ledger.revocation, 'revocation'));
  if (fileSha256) {
    const same = a.media_sha256 === fileSha256 && m?.['media_sha256'] === fileSha256;
    lines.push({
      key: 'file',
      title: t('ccheck.file'),
      state: same ? 'ok' : 'failed',
      text: t(same ? 'creative.reason.file_ok' : 'creative.reason.file_bad'),
    });
  }
  return lines;
}

interface Checked {
  approval: ApprovalPublic;
  lines: CheckLine[];
}

function ApprovalCard(props: { checked: Checked }) {
  const { t, date, dateTime } = useI18n();
  const { approval: a, lines } = props.checked;
  const verdict = lines.some((l) => l.state === 'failed')
    ? 'failed'
    : lines.every((l) => l.state === 'ok')
      ? 'ok'
      : 'ledger_pending';
  return (
    <article class="approval" data-approval={a.approval_number} data-status={a.status} data-verdict={verdict}>
      <h4>
        {a.approval_number}{' '}
        <Badge tone={STATUS_TONE[a.status]} testId="approval-status">
          {t(`status.${a.status}` as PublicMessageKey)}
        </Badge>
      </h4>
      <dl class="facts">
        <dt>{t('creative.period')}</dt>
        <dd>{t('creative.periodValue', { from: date(a.valid_from), until: date(a.valid_until) })}</dd>
        <dt>{t('creative.where')}</dt>
        <dd>
          <ul class="codes">
            {a.structures.map((code) => (
              <li key={code}>{code}</li>
            ))}
          </ul>
        </dd>
        {a.revoked_at ? (
          <>
            <dt>{t('creative.revokedAt')}</dt>
            <dd>{dateTime(a.revoked_at)}</dd>
          </>
        ) : null}
        <dt>{t('creative.media')}</dt>
        <dd>
          <Hash value={a.media_sha256} />
        </dd>
      </dl>
      <p class="verdict-line">
        <Badge
          tone={verdict === 'ok' ? 'good' : verdict === 'failed' ? 'bad' : 'warn'}
          testId="approval-verdict"
        >
          {t(`verdict.${verdict}` as PublicMessageKey)}
        </Badge>
      </p>
      <CheckList lines={lines} label={`${t('creative.checks')}: ${a.approval_number}`} />
    </article>
  );
}

const APPROVAL_NUMBER = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;

/** "Is this creative approved, where and until when?" by approval number or by the file, hashed here. */
export function CreativeSection() {
  const i18n = useI18n();
  const { t } = i18n;
  const [number, setNumber] = useState('');
  const [busy, setBusy] = useState<'number' | 'file' | null>(null);
  const [result, setResult] = useState<
    | { kind: 'approvals'; checked: Checked[]; file: { name: string; sha256: string } | null }
    | { kind: 'message'; text: string; file: { name: string; sha256: string } | null }
    | { kind: 'error'; error: unknown }
    | null
  >(null);
  const check = (a: ApprovalPublic, fileSha: string | null) =>
    checkApproval(a, fileSha, i18n.t, i18n.date, i18n.known).then((lines) => ({ approval: a, lines }));

  const byNumber = async () => {
    const wanted = number.trim().toUpperCase();
    if (!APPROVAL_NUMBER.test(wanted)) {
      setResult({ kind: 'message', text: t('creative.numberInvalid'), file: null });
      return;
    }
    setBusy('number');
    setResult(null);
    try {
      const a = await getJsonOrNull<ApprovalPublic>(`/v1/approvals/${encodeURIComponent(wanted)}`);
      setResult(
        a
          ? { kind: 'approvals', checked: [await check(a, null)], file: null }
          : { kind: 'message', text: t('creative.notFound', { number: wanted }), file: null },
      );
    } catch (error) {
      setResult({ kind: 'error', error });
    } finally {
      setBusy(null);
    }
  };

  const byFile = async (file: File) => {
    setBusy('file');
    setResult(null);
    try {
      // Read and hashed here with WebCrypto; only the hash leaves the browser.
      const sha256 = await sha256Hex(new Uint8Array(await file.arrayBuffer()));
      const info = { name: file.name, sha256 };
      const found = await getJson<ApprovalsOfMedia>(`/v1/approvals?media_sha256=${sha256}`);
      if (found.items.length === 0) {
        setResult({ kind: 'message', text: t('creative.noneForFile'), file: info });
        return;
      }
      const details = await Promise.all(
        found.items.map((item) =>
          getJson<ApprovalPublic>(`/v1/approvals/${encodeURIComponent(item.approval_number)}`),
        ),
      );
      setResult({
        kind: 'approvals',
        checked: await Promise.all(details.map((a) => check(a, sha256))),
        file: info,
      });
    } catch (error) {
      setResult({ kind: 'error', error });
    } finally {
      setBusy(null);
    }
  };

  const file = result && 'file' in result ? result.file : null;
  return (
    <section id="creative" class="panel" aria-labelledby="creative-title">
      <h2 id="creative-title">{t('creative.title')}</h2>
      <p class="hint">{t('creative.lead')}</p>
      <div class="two-forms">
        <form
          class="card-form"
          aria-labelledby="by-number-title"
          onSubmit={(e) => {
            e.preventDefault();
            void byNumber();
          }}
        >
          <h3 id="by-number-title">{t('creative.byNumber')}</h3>
          <label for="approval-number">{t('creative.number')}</label>
          <input
            id="approval-number"
            type="text"
            autoComplete="off"
            spellcheck={false}
            placeholder="APR-2026-000123"
            value={number}
            onInput={(e) => setNumber((e.target as HTMLInputElement).value)}
          />
          <button type="submit" class="button" disabled={busy !== null}>
            {t('creative.check')}
          </button>
        </form>
        <form class="card-form" aria-labelledby="by-file-title" onSubmit={(e) => e.preventDefault()}>
          <h3 id="by-file-title">{t('creative.byFile')}</h3>
          {/* The browser's own file button speaks the browser's language; this one speaks the page's. */}
          <div class="file-picker">
            <input
              id="creative-file"
              class="file-input"
              type="file"
              aria-describedby="file-hint"
              disabled={busy !== null}
              onChange={(e) => {
                const chosen = (e.target as HTMLInputElement).files?.[0];
                if (chosen) void byFile(chosen);
              }}
            />
            <label for="creative-file" class="button">
              {t('creative.chooseFile')}
            </label>
            <span class="muted file-name">{file?.name ?? t('creative.noFile')}</span>
          </div>
          <p class="notice notice-info" id="file-hint">
            {t('creative.fileHint')}
          </p>
        </form>
      </div>
      <div class="creative-result" aria-live="polite">
        {busy === 'file' ? <output class="muted block">{t('creative.hashing')}</output> : null}
        {busy === 'number' ? <output class="muted block">{t('seals.checking')}</output> : null}
        {file ? (
          <p class="file-hash" data-testid="file-hash">
            {t('creative.fileHash', { name: file.name })}: <Hash value={file.sha256} />
          </p>
        ) : null}
        {result?.kind === 'message' ? (
          <p class="notice notice-warn" data-testid="creative-message">
            {result.text}
          </p>
        ) : null}
        {result?.kind === 'error' ? <ErrorText error={result.error} /> : null}
        {result?.kind === 'approvals'
          ? result.checked.map((c) => <ApprovalCard key={c.approval.approval_number} checked={c} />)
          : null}
      </div>
    </section>
  );
}
