import { useState } from 'preact/hooks';
import { del, get, post } from '../api/client.js';
import type { OrganisationKind } from '@ooh/protocol';
import type { ApiKey, ConsoleUser, Organisation } from '../api/types.js';
import { DataTable } from '../components/table.js';
import { Badge, ErrorNotice, Field, Loading, Notice, useAsync, useFieldErrors } from '../components/ui.js';
import { type MessageKey, useI18n } from '../i18n/index.js';

const KINDS: OrganisationKind[] = ['operator', 'agency', 'advertiser', 'authority'];

/** Organisations and their console users (authority administrators; apps/platform/console/README.md). */
export function OrganisationsPage() {
  const { t } = useI18n();
  const list = useAsync(
    () => get<{ items: Organisation[] }>('/api/v1/console/organisations').then((r) => r.items),
    [],
  );
  const [selected, setSelected] = useState<string | null>(null);
  const [name, setName] = useState('');
  const [kind, setKind] = useState<OrganisationKind>('operator');
  const [error, setError] = useState<unknown>(null);
  const fieldError = useFieldErrors(error);
  return (
    <section>
      <h1>{t('organisations.title')}</h1>
      <p class="lead">{t('organisations.lead')}</p>
      {list.loading && !list.data ? <Loading /> : null}
      <ErrorNotice
        error={list.error ?? error}
        fields={{ '/name': t('organisations.name'), '/kind': t('organisations.kind') }}
      />
      {list.data ? (
        <DataTable
          caption={t('organisations.title')}
          rows={list.data}
          rowKey={(o) => o.id}
          rowClass={(o) => (selected === o.id ? 'row-selected' : undefined)}
          columns={[
            { header: t('organisations.name'), cell: (o) => o.name },
            { header: t('organisations.kind'), cell: (o) => t(`kind.${o.kind}` as MessageKey) },
            {
              header: t('common.actions'),
              cell: (o) => (
                <button
                  type="button"
                  class="button button-small"
                  aria-pressed={selected === o.id}
                  onClick={() => setSelected(o.id)}
                >
                  {t('organisations.users')}
                </button>
              ),
            },
          ]}
        />
      ) : null}
      {selected ? (
        <Users organisation={list.data?.find((o) => o.id === selected) ?? null} id={selected} />
      ) : null}
      {selected ? (
        <ApiKeys organisation={list.data?.find((o) => o.id === selected) ?? null} id={selected} />
      ) : null}
      <form
        class="panel"
        onSubmit={async (e) => {
          e.preventDefault();
          setError(null);
          try {
            const created = await post<Organisation>('/api/v1/console/organisations', { name, kind });
            setName('');
            list.reload();
            setSelected(created.id);
          } catch (err) {
            setError(err);
          }
        }}
      >
        <h2>{t('organisations.create')}</h2>
        <div class="form-grid">
          <Field id="org-name" label={t('organisations.name')} error={fieldError('/name')}>
            <input
              id="org-name"
              required
              maxLength={300}
              value={name}
              onInput={(e) => setName((e.target as HTMLInputElement).value)}
            />
          </Field>
          <Field id="org-kind" label={t('organisations.kind')} error={fieldError('/kind')}>
            <select
              id="org-kind"
              value={kind}
              onChange={(e) => setKind((e.target as HTMLSelectElement).value as OrganisationKind)}
            >
              {KINDS.map((k) => (
                <option key={k} value={k}>
                  {t(`kind.${k}` as MessageKey)}
                </option>
              ))}
            </select>
          </Field>
        </div>
        <button type="submit" class="button button-primary">
          {t('organisations.createButton')}
        </button>
      </form>
    </section>
  );
}

function Users(props: { id: string; organisation: Organisation | null }) {
  const { t, dateTime } = useI18n();
  const users = useAsync(
    () =>
      get<{ items: ConsoleUser[] }>(`/api/v1/console/organisations/${props.id}/users`).then((r) => r.items),
    [props.id],
  );
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [role, setRole] = useState<'admin' | 'member'>('member');
  const [error, setError] = useState<unknown>(null);
  const [message, setMessage] = useState<string | null>(null);
  const fieldError = useFieldErrors(error);
  return (
    <div class="panel">
      <h2>{t('organisations.usersOf', { name: props.organisation?.name ?? '' })}</h2>
      <ErrorNotice
        error={users.error ?? error}
        fields={{
          '/email': t('login.email'),
          '/password': t('organisations.password'),
          '/role': t('organisations.role'),
        }}
      />
      {message ? <Notice kind="success">{message}</Notice> : null}
      {users.data && users.data.length === 0 ? <p>{t('organisations.noUsers')}</p> : null}
      {users.data && users.data.length > 0 ? (
        <ul class="plain">
          {users.data.map((u) => (
            <li key={u.id}>
              {u.email} · {t(`role.${u.role}` as MessageKey)} · {dateTime(u.created_at)}{' '}
              {u.disabled_at ? (
                <Badge tone="bad">{t('organisations.disabled')}</Badge>
              ) : (
                <button
                  type="button"
                  class="button button-small button-danger"
                  onClick={async () => {
                    if (!window.confirm(t('organisations.disableConfirm', { email: u.email }))) return;
                    try {
                      await post(`/api/v1/console/users/${u.id}/disable`);
                      users.reload();
                    } catch (err) {
                      setError(err);
                    }
                  }}
                >
                  {t('organisations.disable')}
                </button>
              )}
            </li>
          ))}
        </ul>
      ) : null}
      <form
        onSubmit={async (e) => {
          e.preventDefault();
          setError(null);
          setMessage(null);
          try {
            const created = await post<ConsoleUser>(`/api/v1/console/organisations/${props.id}/users`, {
              email,
              password,
              role,
            });
            setMessage(t('organisations.userCreated', { email: created.email }));
            setEmail('');
            setPassword('');
            users.reload();
          } catch (err) {
            setError(err);
          }
        }}
      >
        <h3>{t('organisations.addUser')}</h3>
        <div class="form-grid">
          <Field id="user-email" label={t('login.email')} error={fieldError('/email')}>
            <input
              id="user-email"
              type="email"
              required
              autocomplete="off"
              value={email}
              onInput={(e) => setEmail((e.target as HTMLInputElement).value)}
            />
          </Field>
          <Field
            id="user-password"
            label={t('organisations.password')}
            hint={t('organisations.passwordHint')}
            error={fieldError('/password')}
          >
            <input
              id="user-password"
              type="password"
              required
              minLength={12}
              autocomplete="new-password"
              aria-describedby="user-password-hint"
              value={password}
              onInput={(e) => setPassword((e.target as HTMLInputElement).value)}
            />
          </Field>
          <Field id="user-role" label={t('organisations.role')} error={fieldError('/role')}>
            <select
              id="user-role"
              value={role}
              onChange={(e) => setRole((e.target as HTMLSelectElement).value as 'admin' | 'member')}
            >
              <option value="member">{t('role.member')}</option>
              <option value="admin">{t('role.admin')}</option>
            </select>
          </Field>
        </div>
        <button type="submit" class="button button-primary">
          {t('organisations.addUserButton')}
        </button>
      </form>
    </div>
  );
}

const SCOPES = [
  'write:submissions',
  'read:submissions',
  'read:creatives',
  'read:ads',
  'write:plays',
  'console:fleet',
  'console:read',
  'console:admin',
] as const;

const STATE_TONE = { active: 'good', expired: 'warn', revoked: 'bad' } as const;

/** The API keys of an organisation: list, issue (the key shown once), revoke (issue "Trust under attack", item 6). */
function ApiKeys(props: { id: string; organisation: Organisation | null }) {
  const { t, dateTime } = useI18n();
  const keys = useAsync(
    () =>
      get<{ items: ApiKey[] }>(`/api/v1/console/api-keys?organisation_id=${props.id}`).then((r) => r.items),
    [props.id],
  );
  const [name, setName] = useState('');
  const [scopes, setScopes] = useState<string[]>([]);
  const [expires, setExpires] = useState('');
  const [issued, setIssued] = useState<{ id: string; key: string } | null>(null);
  const [error, setError] = useState<unknown>(null);
  const fieldError = useFieldErrors(error);
  // The field takes the browser's local time; the list shows every time in Almaty's, so the field says which
  // Almaty time it means (they differ wherever the browser's zone is not Almaty's).
  const typedExpiry = expires ? new Date(expires) : null;
  const expiresAt = typedExpiry && !Number.isNaN(typedExpiry.getTime()) ? typedExpiry : null;
  return (
    <div class="panel">
      <h2>{t('apiKeys.of', { name: props.organisation?.name ?? '' })}</h2>
      <p class="lead">{t('apiKeys.lead')}</p>
      <ErrorNotice
        error={keys.error ?? error}
        fields={{
          '/name': t('apiKeys.name'),
          '/expires_at': t('apiKeys.expiresOptional'),
          '/scopes': t('apiKeys.scopes'),
        }}
      />
      {issued ? (
        <Notice kind="warning">
          {t('apiKeys.issued')} <code class="hash-full">{issued.key}</code>
        </Notice>
      ) : null}
      {keys.data && keys.data.length === 0 ? <p>{t('apiKeys.none')}</p> : null}
      {keys.data && keys.data.length > 0 ? (
        <DataTable
          caption={t('apiKeys.of', { name: props.organisation?.name ?? '' })}
          rows={keys.data}
          rowKey={(k) => k.id}
          columns={[
            {
              header: t('apiKeys.name'),
              cell: (k) => (
                <>
                  {k.name}
                  <small class="muted block">
                    <code>{k.id}</code>
                  </small>
                </>
              ),
            },
            { header: t('apiKeys.scopes'), cell: (k) => k.scopes.join(', ') },
            { header: t('apiKeys.created'), cell: (k) => dateTime(k.created_at) },
            {
              header: t('apiKeys.lastUsed'),
              cell: (k) => (k.last_used_at ? dateTime(k.last_used_at) : t('apiKeys.never')),
            },
            { header: t('apiKeys.expires'), cell: (k) => (k.expires_at ? dateTime(k.expires_at) : '—') },
            {
              header: t('apiKeys.state'),
              cell: (k) => (
                <Badge tone={STATE_TONE[k.state]}>{t(`apiKeys.state.${k.state}` as MessageKey)}</Badge>
              ),
            },
            {
              header: t('common.actions'),
              cell: (k) =>
                k.state === 'revoked' ? null : (
                  <button
                    type="button"
                    class="button button-small button-danger"
                    onClick={async () => {
                      if (!window.confirm(t('apiKeys.revokeConfirm', { name: k.name }))) return;
                      setError(null);
                      try {
                        await del(`/api/v1/console/api-keys/${k.id}`);
                        keys.reload();
                      } catch (err) {
                        setError(err);
                      }
                    }}
                  >
                    {t('apiKeys.revoke')}
                  </button>
                ),
            },
          ]}
        />
      ) : null}
      <form
        onSubmit={async (e) => {
          e.preventDefault();
          setError(null);
          setIssued(null);
          try {
            const created = await post<{ id: string; key: string }>(
              `/api/v1/console/organisations/${props.id}/api-keys`,
              { name, scopes, ...(expires ? { expires_at: new Date(expires).toISOString() } : {}) },
            );
            setIssued(created);
            setName('');
            setScopes([]);
            setExpires('');
            keys.reload();
          } catch (err) {
            setError(err);
          }
        }}
      >
        <h3>{t('apiKeys.issue')}</h3>
        <div class="form-grid">
          <Field id="key-name" label={t('apiKeys.name')} error={fieldError('/name')}>
            <input
              id="key-name"
              required
              maxLength={200}
              value={name}
              onInput={(e) => setName((e.target as HTMLInputElement).value)}
            />
          </Field>
          <Field
            id="key-expires"
            label={t('apiKeys.expiresOptional')}
            error={fieldError('/expires_at')}
            {...(expiresAt ? { hint: t('apiKeys.expiresInAlmaty', { time: dateTime(expiresAt) }) } : {})}
          >
            <input
              id="key-expires"
              type="datetime-local"
              aria-describedby={expiresAt ? 'key-expires-hint' : undefined}
              value={expires}
              onInput={(e) => setExpires((e.target as HTMLInputElement).value)}
            />
          </Field>
        </div>
        <fieldset class="picker">
          <legend>{t('apiKeys.scopes')}</legend>
          {SCOPES.map((scope) => (
            <label key={scope} class="choice">
              <input
                type="checkbox"
                checked={scopes.includes(scope)}
                onChange={(e) =>
                  setScopes((current) =>
                    (e.target as HTMLInputElement).checked
                      ? [...current, scope]
                      : current.filter((s) => s !== scope),
                  )
                }
              />
              <code>{scope}</code>
            </label>
          ))}
        </fieldset>
        <button type="submit" class="button button-primary" disabled={scopes.length === 0}>
          {t('apiKeys.issueButton')}
        </button>
      </form>
    </div>
  );
}
