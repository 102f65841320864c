import type { CreativeEntry, CreativeLookupResponse } from '@ooh/protocol';
import { useState } from 'preact/hooks';
import { post } from '../api/client.js';
import { DropZone } from '../components/dropzone.js';
import { Link } from '../components/layout.js';
import { type Column, DataTable } from '../components/table.js';
import { ErrorNotice, Field, Hash, Notice, StateBadge } from '../components/ui.js';
import { useI18n } from '../i18n/index.js';
import { fileSha256 } from '../lib/hash.js';
import { can, useSession } from '../lib/session.js';

interface Checked {
  sha256: string;
  name: string | null;
  size: number | null;
  approvals: CreativeEntry[];
}

/** spec creatives lookup: "at most 500" hashes per call. */
const MAX_HASHES = 500;
const SHA256 = /^[0-9a-f]{64}$/;

/**
 * Creative check (spec POST /api/v1/creatives/lookup): files dropped here are hashed in the browser (SHA-256 with
 * WebCrypto; the file never leaves the machine) and looked up; statuses are the spec's.
 */
export function CheckPage() {
  const { t, number } = useI18n();
  const session = useSession();
  const [results, setResults] = useState<Checked[] | null>(null);
  const [version, setVersion] = useState<number | null>(null);
  const [hashing, setHashing] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [pasted, setPasted] = useState('');
  const entryColumns = useEntryColumns(can.decide(session));

  const lookup = async (entries: { sha256: string; name: string | null; size: number | null }[]) => {
    setError(null);
    const unique = entries
      .filter((e, i) => entries.findIndex((o) => o.sha256 === e.sha256) === i)
      .slice(0, MAX_HASHES);
    if (unique.length === 0) return;
    try {
      const answer = await post<CreativeLookupResponse>('/api/v1/creatives/lookup', {
        hashes: unique.map((e) => e.sha256),
      });
      setVersion(answer.revocation_list_version);
      setResults(unique.map((entry, i) => ({ ...entry, approvals: answer.items[i]?.approvals ?? [] })));
    } catch (e) {
      setError(e);
    }
  };

  const checkFiles = async (files: FileList | null | undefined) => {
    if (!files || files.length === 0) return;
    const entries: { sha256: string; name: string; size: number }[] = [];
    for (const file of Array.from(files)) {
      setHashing(file.name);
      entries.push({ sha256: await fileSha256(file), name: file.name, size: file.size });
    }
    setHashing(null);
    await lookup(entries);
  };

  const checkPasted = async (event: Event) => {
    event.preventDefault();
    const hashes = pasted
      .toLowerCase()
      .split(/[\s,;]+/)
      .filter(Boolean);
    const bad = hashes.filter((h) => !SHA256.test(h));
    if (bad.length > 0) {
      setError(new Error(t('check.badHash', { value: bad[0]! })));
      return;
    }
    await lookup(hashes.map((sha256) => ({ sha256, name: null, size: null })));
  };

  return (
    <section>
      <h1>{t('check.title')}</h1>
      <p class="lead">{t('check.lead')}</p>
      <DropZone
        id="check-files"
        label={t('check.choose')}
        large
        multiple
        testId="check-dropzone"
        onFiles={(files) => void checkFiles(files)}
      >
        <p>{t('check.drop')}</p>
      </DropZone>
      <p class="hint">{t('check.privacy')}</p>
      {hashing ? <output class="block">{t('check.hashing', { name: hashing })}</output> : null}

      <form class="inline-form" onSubmit={checkPasted}>
        <Field id="check-hashes" label={t('check.pasteLabel')} hint={t('check.pasteHint')}>
          <textarea
            id="check-hashes"
            rows={2}
            aria-describedby="check-hashes-hint"
            value={pasted}
            onInput={(e) => setPasted((e.target as HTMLTextAreaElement).value)}
          />
        </Field>
        <button type="submit" class="button">
          {t('check.lookUp')}
        </button>
      </form>

      <ErrorNotice error={error} />
      {results ? (
        <div class="results" aria-live="polite">
          <h2>{t('check.results')}</h2>
          {version !== null ? <p class="muted">{t('check.revocationVersion', { version })}</p> : null}
          {results.map((r) => (
            <article class="result" key={r.sha256}>
              <h3>{r.name ?? t('check.pastedHash')}</h3>
              <p>
                <span class="muted">{t('media.sha256')}:</span> <Hash value={r.sha256} full />
                {r.size !== null ? (
                  <span class="muted"> · {t('check.bytes', { size: number(r.size) })}</span>
                ) : null}
              </p>
              {r.approvals.length === 0 ? (
                <Notice kind="warning">{t('check.noApproval')}</Notice>
              ) : (
                <DataTable
                  caption={t('check.results')}
                  rows={r.approvals}
                  rowKey={(a) => `${a.approval_number ?? a.submission_number ?? a.status}`}
                  columns={entryColumns}
                />
              )}
            </article>
          ))}
        </div>
      ) : null}
    </section>
  );
}

/** The columns of a creative entry (spec "Creative entry"). */
function useEntryColumns(decide: boolean): Column<CreativeEntry>[] {
  const { t, dateRange, number } = useI18n();
  return [
    {
      header: t('creative.status'),
      cell: (a) => (
        <>
          <StateBadge state={a.status} prefix="status" />{' '}
          <small class="muted block">{t(`statusHelp.${a.status}`)}</small>
        </>
      ),
    },
    { header: t('creative.approval'), cell: (a) => a.approval_number ?? '—' },
    { header: t('submission.number'), cell: (a) => a.submission_number ?? '—' },
    { header: t('creative.validity'), cell: (a) => dateRange(a.valid_from, a.valid_until) },
    {
      header: t('submission.structures'),
      cell: (a) => (a.structures.length > 0 ? a.structures.join(', ') : '—'),
    },
    {
      header: t('creative.media'),
      cell: (a) => (
        <>
          {a.width !== null && a.height !== null
            ? t('media.pixels', { width: number(a.width), height: number(a.height) })
            : '—'}
          {a.duration_ms !== null
            ? ` · ${t('media.seconds', { seconds: number(a.duration_ms / 1000) })}`
            : ''}
        </>
      ),
    },
    {
      header: t('creative.envelope'),
      cell: (a) => (
        <>
          {a.envelope_url ? (
            <a href={a.envelope_url} target="_blank" rel="noreferrer">
              {t('creative.envelopeLink')}
            </a>
          ) : (
            '—'
          )}
          {decide && a.approval_number && a.status !== 'revoked' ? (
            <>
              {' · '}
              <Link href={`/moderation?revoke=${encodeURIComponent(a.approval_number)}`}>
                {t('moderation.revoke')}
              </Link>
            </>
          ) : null}
        </>
      ),
    },
  ];
}
