import { useMemo, useState } from 'preact/hooks';
import { loadStructures } from '../api/catalogue.js';
import { get, post } from '../api/client.js';
import type { SubmissionDetail } from '../api/types.js';
import { Link } from '../components/layout.js';
import { DataTable } from '../components/table.js';
import {
  ErrorNotice,
  Field,
  Loading,
  Notice,
  StateBadge,
  useAsync,
  useFieldErrors,
} from '../components/ui.js';
import { useI18n } from '../i18n/index.js';
import { navigate, useRoute } from '../lib/router.js';
import { can, useSession } from '../lib/session.js';
import { toggled } from '../lib/sets.js';
import { Deadline, MediaPreview, SubmissionFacts, useSubmissionColumns } from './submissions.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The review queue, fast-track deadlines first (earliest first), then the oldest submissions. */
export function queueOrder(a: SubmissionDetail, b: SubmissionDetail): number {
  const da = a.review_due_at ? new Date(a.review_due_at).getTime() : Number.POSITIVE_INFINITY;
  const db = b.review_due_at ? new Date(b.review_due_at).getTime() : Number.POSITIVE_INFINITY;
  if (da !== db) return da - db;
  return (a.created_at ?? a.number).localeCompare(b.created_at ?? b.number);
}

export function ModerationPage() {
  const { t } = useI18n();
  const submissionColumns = useSubmissionColumns();
  const session = useSession();
  const { query } = useRoute();
  const queue = useAsync(
    () => get<{ items: SubmissionDetail[] }>('/api/v1/submissions?state=in_review').then((r) => r.items),
    [],
  );
  const [openId, setOpenId] = useState('');
  const [openError, setOpenError] = useState<string | null>(null);
  const items = queue.data ? queue.data.filter((s) => s.state === 'in_review').sort(queueOrder) : [];

  return (
    <section>
      <h1>{t('moderation.title')}</h1>
      <p class="lead">{t('moderation.lead')}</p>
      {queue.loading && !queue.data ? <Loading /> : null}
      <ErrorNotice error={queue.error} />
      {queue.data && items.length === 0 ? <p>{t('moderation.empty')}</p> : null}
      {items.length > 0 ? (
        <DataTable
          caption={t('moderation.queue')}
          rows={items}
          rowKey={(s) => s.id}
          columns={[
            {
              header: t('moderation.reviewDue'),
              cell: (s) => (s.review_due_at ? <Deadline submission={s} /> : t('moderation.noDeadline')),
            },
            ...submissionColumns('/moderation'),
          ]}
        />
      ) : null}

      <form
        class="inline-form panel"
        onSubmit={(e) => {
          e.preventDefault();
          if (!UUID.test(openId.trim())) {
            setOpenError(t('moderation.openInvalid'));
            return;
          }
          navigate(`/moderation/${openId.trim().toLowerCase()}`);
        }}
      >
        <Field id="open-submission" label={t('moderation.openLabel')} error={openError}>
          <input
            id="open-submission"
            value={openId}
            onInput={(e) => setOpenId((e.target as HTMLInputElement).value)}
          />
        </Field>
        <button type="submit" class="button">
          {t('moderation.open')}
        </button>
      </form>

      {can.decide(session) ? <RevokeForm initial={query.get('revoke') ?? ''} /> : null}
    </section>
  );
}

function RevokeForm(props: { initial: string }) {
  const { t, dateTime } = useI18n();
  const [number, setNumber] = useState(props.initial);
  const [reason, setReason] = useState('');
  const [error, setError] = useState<unknown>(null);
  const [done, setDone] = useState<{ approval_number: string; revoked_at: string } | null>(null);
  const fieldError = useFieldErrors(error);
  return (
    <form
      class="panel"
      onSubmit={async (e) => {
        e.preventDefault();
        setError(null);
        setDone(null);
        if (!window.confirm(t('moderation.revokeConfirm', { number: number.trim() }))) return;
        try {
          setDone(
            await post(`/api/v1/console/approvals/${encodeURIComponent(number.trim())}/revoke`, { reason }),
          );
        } catch (err) {
          setError(err);
        }
      }}
    >
      <h2>{t('moderation.revokeTitle')}</h2>
      <ErrorNotice error={error} fields={{ '/reason': t('moderation.reason') }} />
      {done ? (
        <Notice kind="success">
          {t('moderation.revoked', { number: done.approval_number, at: dateTime(done.revoked_at) })}
        </Notice>
      ) : null}
      <div class="form-grid">
        <Field id="revoke-number" label={t('creative.approval')}>
          <input
            id="revoke-number"
            required
            value={number}
            onInput={(e) => setNumber((e.target as HTMLInputElement).value)}
          />
        </Field>
        <Field id="revoke-reason" label={t('moderation.reason')} error={fieldError('/reason')}>
          <textarea
            id="revoke-reason"
            required
            rows={2}
            maxLength={2000}
            value={reason}
            onInput={(e) => setReason((e.target as HTMLTextAreaElement).value)}
          />
        </Field>
      </div>
      <button type="submit" class="button button-danger">
        {t('moderation.revoke')}
      </button>
    </form>
  );
}

export function ModerationDetailPage(props: { id: string }) {
  const { t } = useI18n();
  const session = useSession();
  const submission = useAsync(() => get<SubmissionDetail>(`/api/v1/submissions/${props.id}`), [props.id]);
  const structures = useAsync(() => loadStructures(true), []);
  const structureMap = useMemo(
    () => (structures.data ? new Map(structures.data.map((s) => [s.id, s])) : null),
    [structures.data],
  );
  const [validFrom, setValidFrom] = useState<string | null>(null);
  const [validUntil, setValidUntil] = useState<string | null>(null);
  const [excluded, setExcluded] = useState<Set<string>>(new Set());
  const [reason, setReason] = useState('');
  const [error, setError] = useState<unknown>(null);
  const [outcome, setOutcome] = useState<
    { kind: 'approved'; number: string; envelope: string } | { kind: 'rejected' } | null
  >(null);
  const fieldError = useFieldErrors(error);

  if (submission.loading && !submission.data) return <Loading />;
  if (!submission.data) return <ErrorNotice error={submission.error} />;
  const s = submission.data;
  const from = validFrom ?? s.period_from ?? '';
  const until = validUntil ?? s.period_to ?? '';
  const ids = s.structure_ids ?? [];
  const decide = can.decide(session) && s.state === 'in_review';

  const approve = async (event: Event) => {
    event.preventDefault();
    setError(null);
    const body: Record<string, unknown> = {};
    if (from && from !== s.period_from) body['valid_from'] = from;
    if (until && until !== s.period_to) body['valid_until'] = until;
    if (excluded.size > 0) body['structure_ids'] = ids.filter((id) => !excluded.has(id));
    try {
      const issued = await post<{ approval_number: string; envelope_url: string }>(
        `/api/v1/console/submissions/${s.id}/approve`,
        body,
      );
      setOutcome({ kind: 'approved', number: issued.approval_number, envelope: issued.envelope_url });
      submission.reload();
    } catch (e) {
      setError(e);
    }
  };

  const reject = async (event: Event) => {
    event.preventDefault();
    setError(null);
    try {
      await post(`/api/v1/console/submissions/${s.id}/reject`, { reason });
      setOutcome({ kind: 'rejected' });
      submission.reload();
    } catch (e) {
      setError(e);
    }
  };

  return (
    <section>
      <div class="page-head">
        <h1>{t('moderationDetail.title', { number: s.number })}</h1>
        <Link class="button button-quiet" href="/moderation">
          {t('moderationDetail.back')}
        </Link>
      </div>
      <ErrorNotice
        error={error}
        fields={{
          '/valid_from': t('moderationDetail.validFrom'),
          '/valid_until': t('moderationDetail.validUntil'),
          '/structure_ids': t('moderationDetail.structures'),
          '/reason': t('moderation.reason'),
        }}
      />
      {outcome?.kind === 'approved' ? (
        <Notice kind="success">
          {t('moderationDetail.approved', { number: outcome.number })}{' '}
          <a href={outcome.envelope} target="_blank" rel="noreferrer">
            {t('creative.envelopeLink')}
          </a>
        </Notice>
      ) : null}
      {outcome?.kind === 'rejected' ? <Notice kind="success">{t('moderationDetail.rejected')}</Notice> : null}
      <div class="two-columns">
        <SubmissionFacts submission={s} structures={structureMap} />
        <MediaPreview submission={s} />
      </div>

      {decide ? (
        <div class="decisions">
          <form class="panel" onSubmit={approve}>
            <h2>{t('moderationDetail.approveTitle')}</h2>
            <p class="hint">{t('moderationDetail.approveHint')}</p>
            <div class="form-grid">
              <Field
                id="valid-from"
                label={t('moderationDetail.validFrom')}
                error={fieldError('/valid_from')}
              >
                <input
                  id="valid-from"
                  type="date"
                  required
                  min={s.period_from ?? undefined}
                  max={s.period_to ?? undefined}
                  value={from}
                  onInput={(e) => setValidFrom((e.target as HTMLInputElement).value)}
                />
              </Field>
              <Field
                id="valid-until"
                label={t('moderationDetail.validUntil')}
                error={fieldError('/valid_until')}
              >
                <input
                  id="valid-until"
                  type="date"
                  required
                  min={from || undefined}
                  max={s.period_to ?? undefined}
                  value={until}
                  onInput={(e) => setValidUntil((e.target as HTMLInputElement).value)}
                />
              </Field>
            </div>
            <fieldset class="picker">
              <legend>{t('moderationDetail.structures')}</legend>
              {ids.map((id) => (
                <label class="choice" key={id}>
                  <input
                    type="checkbox"
                    checked={!excluded.has(id)}
                    onChange={() => setExcluded(toggled(excluded, id))}
                  />
                  <span>{structureMap?.get(id)?.code ?? id}</span>
                </label>
              ))}
            </fieldset>
            <button
              type="submit"
              class="button button-primary"
              disabled={ids.length > 0 && excluded.size === ids.length}
            >
              {t('moderationDetail.approve')}
            </button>
          </form>

          <form class="panel" onSubmit={reject}>
            <h2>{t('moderationDetail.rejectTitle')}</h2>
            <Field id="reject-reason" label={t('moderation.reason')} error={fieldError('/reason')}>
              <textarea
                id="reject-reason"
                required
                rows={3}
                maxLength={2000}
                value={reason}
                onInput={(e) => setReason((e.target as HTMLTextAreaElement).value)}
              />
            </Field>
            <button type="submit" class="button button-danger">
              {t('moderationDetail.reject')}
            </button>
          </form>
        </div>
      ) : (
        <p class="muted">
          {t('moderationDetail.notInReview')} <StateBadge state={s.state} prefix="state" />
        </p>
      )}
    </section>
  );
}
