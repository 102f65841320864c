import { get } from '../api/client.js';
import type { RegisterItem, RegisterPage as RegisterAnswer } from '@ooh/protocol';
import { useState } from 'preact/hooks';
import type { Organisation } from '../api/types.js';
import { Link } from '../components/layout.js';
import { DataTable } from '../components/table.js';
import { ErrorNotice, Field, Loading, StateBadge, useAsync } from '../components/ui.js';
import { type MessageKey, useI18n } from '../i18n/index.js';

const PAGE = 25;

interface Filters {
  q: string;
  state: '' | 'approved' | 'rejected' | 'revoked';
  organisation: string;
}

/**
 * The authority's register of decided submissions (issue 25 item 3): search by number, approval number,
 * advertiser, BIN or organisation, filter by outcome and organisation, paged on the server
 * (GET /api/v1/console/submissions/decided), each with its history.
 */
export function RegisterPage() {
  const { t, number } = useI18n();
  const [draft, setDraft] = useState<Filters>({ q: '', state: '', organisation: '' });
  const [applied, setApplied] = useState<Filters & { offset: number }>({ ...draft, offset: 0 });
  const organisations = useAsync(
    () =>
      get<{ items: Organisation[] }>('/api/v1/console/organisations').then((r) =>
        r.items.filter((o) => o.kind !== 'authority'),
      ),
    [],
  );
  const page = useAsync(() => {
    const q = new URLSearchParams({ limit: String(PAGE), offset: String(applied.offset) });
    if (applied.q.trim()) q.set('q', applied.q.trim());
    if (applied.state) q.set('state', applied.state);
    if (applied.organisation) q.set('organisation_id', applied.organisation);
    return get<RegisterAnswer>(`/api/v1/console/submissions/decided?${q}`);
  }, [applied]);
  const data = page.data;
  const to = (offset: number) => setApplied({ ...applied, offset });

  return (
    <section>
      <h1>{t('register.title')}</h1>
      <p class="lead">{t('register.lead')}</p>
      <form
        class="filters"
        onSubmit={(e) => {
          e.preventDefault();
          setApplied({ ...draft, offset: 0 });
        }}
      >
        <Field id="register-q" label={t('register.search')} hint={t('register.searchHint')}>
          <input
            id="register-q"
            type="search"
            maxLength={200}
            aria-describedby="register-q-hint"
            value={draft.q}
            onInput={(e) => setDraft({ ...draft, q: (e.target as HTMLInputElement).value })}
          />
        </Field>
        <Field id="register-state" label={t('register.state')}>
          <select
            id="register-state"
            value={draft.state}
            onChange={(e) =>
              setDraft({ ...draft, state: (e.target as HTMLSelectElement).value as Filters['state'] })
            }
          >
            <option value="">{t('register.allStates')}</option>
            <option value="approved">{t('state.approved')}</option>
            <option value="rejected">{t('state.rejected')}</option>
            <option value="revoked">{t('state.revoked')}</option>
          </select>
        </Field>
        {organisations.data ? (
          <Field id="register-organisation" label={t('register.organisation')}>
            <select
              id="register-organisation"
              value={draft.organisation}
              onChange={(e) => setDraft({ ...draft, organisation: (e.target as HTMLSelectElement).value })}
            >
              <option value="">{t('register.allOrganisations')}</option>
              {organisations.data.map((o) => (
                <option key={o.id} value={o.id}>
                  {o.name}
                </option>
              ))}
            </select>
          </Field>
        ) : null}
        <button type="submit" class="button button-primary">
          {t('register.show')}
        </button>
      </form>

      {page.loading && !data ? <Loading /> : null}
      <ErrorNotice error={page.error} />
      {data && data.items.length === 0 ? <p data-testid="register-empty">{t('register.empty')}</p> : null}
      {data && data.items.length > 0 ? (
        <>
          <p data-testid="register-count" aria-live="polite">
            {t('register.showing', {
              from: number(data.offset + 1),
              to: number(data.offset + data.items.length),
              total: number(data.total),
            })}
          </p>
          <DataTable
            caption={t('register.title')}
            rows={data.items}
            rowKey={(i) => i.submission_id}
            columns={[
              {
                header: t('submission.number'),
                rowHeader: true,
                class: 'nowrap',
                cell: (i) => <Link href={`/moderation/${i.submission_id}`}>{i.number}</Link>,
              },
              { header: t('submission.advertiser'), cell: (i) => i.advertiser_name },
              {
                header: t('register.organisation'),
                cell: (i) => (
                  <>
                    {i.organisation.name}
                    <small class="muted block">{t(`kind.${i.organisation.kind}` as MessageKey)}</small>
                  </>
                ),
              },
              { header: t('register.state'), cell: (i) => <StateBadge state={i.state} prefix="state" /> },
              { header: t('creative.approval'), class: 'nowrap', cell: (i) => i.approval?.number ?? '—' },
              { header: t('register.history'), cell: (i) => <History item={i} /> },
            ]}
          />
          <nav class="pager" aria-label={t('register.pages')}>
            <button
              type="button"
              class="button"
              disabled={data.offset === 0}
              onClick={() => to(Math.max(0, data.offset - PAGE))}
            >
              {t('register.previous')}
            </button>
            <button
              type="button"
              class="button"
              disabled={data.offset + data.items.length >= data.total}
              onClick={() => to(data.offset + PAGE)}
            >
              {t('register.next')}
            </button>
          </nav>
        </>
      ) : null}
    </section>
  );
}

/** A submission's state transitions, oldest first, with who and when. */
function History(props: { item: RegisterItem }) {
  const { t, dateTime } = useI18n();
  const who = (by: RegisterItem['history'][number]['by']) => {
    if (!by) return t('register.byAuthority');
    if (by.kind === 'console_session') return t('register.bySession');
    if (by.kind === 'api_key') return t('register.byKey', { name: by.name });
    return by.name;
  };
  return (
    <details class="history">
      <summary>{dateTime(props.item.decided_at)}</summary>
      <ol class="plain">
        {props.item.history.map((h, n) => (
          <li key={n}>
            <strong>{t(`register.event.${h.event}` as MessageKey)}</strong>{' '}
            <time dateTime={h.at}>{dateTime(h.at)}</time>
            {h.approval_number ? ` · ${h.approval_number}` : ''}
            <small class="muted block">{who(h.by)}</small>
            {h.reason ? <small class="block">{t('register.reason', { reason: h.reason })}</small> : null}
          </li>
        ))}
      </ol>
    </details>
  );
}
