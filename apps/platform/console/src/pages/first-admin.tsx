import { useState } from 'preact/hooks';
import { ApiError, type FieldError, post, reach } from '../api/client.js';
import type { ConsoleUser, Organisation, SessionInfo } from '../api/types.js';
import { Link, LanguageSwitch } from '../components/layout.js';
import { ErrorNotice, Field, useFieldErrors } from '../components/ui.js';
import { useI18n } from '../i18n/index.js';
import { navigate } from '../lib/router.js';

/**
 * A call made with the admin key printed by `platform bootstrap` rather than a session. The key goes in the
 * Authorization header of these calls only; it is not stored anywhere. Problem documents become ApiError, as in the
 * session client.
 */
async function withKey<T>(key: string, method: 'GET' | 'POST', path: string, body?: unknown): Promise<T> {
  const response = await reach(() =>
    fetch(path, {
      method,
      credentials: 'omit',
      headers: {
        authorization: `Bearer ${key}`,
        accept: 'application/json, application/problem+json',
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    }),
  );
  const doc = (await response.json().catch(() => ({}))) as Record<string, unknown>;
  if (!response.ok) {
    throw new ApiError(
      response.status,
      typeof doc['code'] === 'string' ? doc['code'] : 'http_error',
      typeof doc['detail'] === 'string' ? doc['detail'] : `${response.status}`,
      Array.isArray(doc['errors']) ? (doc['errors'] as FieldError[]) : [],
    );
  }
  return doc as T;
}

/**
 * The authority's first console user, made in the browser with the admin key `platform bootstrap` (or `npm start`)
 * prints: the console needs no curl on day one (issue 17 item 3). The page only calls the console API as that key
 * would (GET /api/v1/console/organisations, POST /api/v1/console/organisations/{authority}/users), then signs in as
 * the new administrator, who creates everyone else on the Organisations page. It also works later, for another
 * administrator, with any key holding console:admin.
 */
export function FirstAdminPage(props: { onSignedIn: (s: SessionInfo) => void }) {
  const { t } = useI18n();
  const [key, setKey] = useState('');
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const fieldError = useFieldErrors(error);

  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const bearer = key.trim();
      const { items } = await withKey<{ items: Organisation[] }>(
        bearer,
        'GET',
        '/api/v1/console/organisations',
      );
      const authority = items.find((o) => o.kind === 'authority');
      if (!authority) throw new ApiError(403, 'forbidden', 'the key is not an authority administrator’s');
      await withKey<ConsoleUser>(bearer, 'POST', `/api/v1/console/organisations/${authority.id}/users`, {
        email,
        password,
        role: 'admin',
      });
      setKey('');
      props.onSignedIn(await post<SessionInfo>('/api/v1/console/session', { email, password }));
      navigate('/organisations', { replace: true });
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };

  return (
    <main id="main" class="login">
      <div class="login-card">
        <div class="login-head">
          <span class="brand-mark" aria-hidden="true" />
          <LanguageSwitch />
        </div>
        <h1>{t('dayone.firstAdminTitle')}</h1>
        <p class="lead">{t('dayone.firstAdminLead')}</p>
        <ErrorNotice
          error={error}
          fields={{ '/email': t('login.email'), '/password': t('dayone.password') }}
        />
        <form onSubmit={submit}>
          <Field id="first-admin-key" label={t('dayone.adminKey')} hint={t('dayone.adminKeyHint')}>
            <input
              id="first-admin-key"
              type="password"
              autocomplete="off"
              spellcheck={false}
              required
              aria-describedby="first-admin-key-hint"
              value={key}
              onInput={(e) => setKey((e.target as HTMLInputElement).value)}
            />
          </Field>
          <Field id="first-admin-email" label={t('login.email')} error={fieldError('/email')}>
            <input
              id="first-admin-email"
              type="email"
              autocomplete="username"
              required
              value={email}
              onInput={(e) => setEmail((e.target as HTMLInputElement).value)}
            />
          </Field>
          <Field
            id="first-admin-password"
            label={t('dayone.password')}
            hint={t('dayone.passwordHint')}
            error={fieldError('/password')}
          >
            <input
              id="first-admin-password"
              type="password"
              autocomplete="new-password"
              minLength={12}
              required
              aria-describedby="first-admin-password-hint"
              value={password}
              onInput={(e) => setPassword((e.target as HTMLInputElement).value)}
            />
          </Field>
          <button type="submit" class="button button-primary" disabled={busy}>
            {t('dayone.firstAdminButton')}
          </button>
        </form>
        <p>
          <Link href="/login">{t('dayone.backToSignIn')}</Link>
        </p>
      </div>
    </main>
  );
}
