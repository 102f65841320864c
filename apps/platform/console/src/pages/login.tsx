import { useState } from 'preact/hooks';
import { ApiError, post } from '../api/client.js';
import type { SessionInfo } from '../api/types.js';
import { LanguageSwitch, Link } from '../components/layout.js';
import { ErrorNotice, Field, Notice } from '../components/ui.js';
import { useI18n } from '../i18n/index.js';

export function LoginPage(props: {
  onSignedIn: (s: SessionInfo) => void;
  ended: 'session_expired' | 'unauthenticated' | null;
}) {
  const { t } = useI18n();
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);

  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      props.onSignedIn(await post<SessionInfo>('/api/v1/console/session', { email, password }));
    } catch (e) {
      setError(e);
      setPassword('');
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
        <h1>{t('login.title')}</h1>
        <p class="lead">{t('login.lead')}</p>
        {props.ended === 'session_expired' ? <Notice kind="warning">{t('login.expired')}</Notice> : null}
        {error instanceof ApiError && error.code === 'unauthenticated' ? (
          <Notice kind="error">{t('login.wrong')}</Notice>
        ) : (
          <ErrorNotice error={error} />
        )}
        <form onSubmit={submit} noValidate={false}>
          <Field id="login-email" label={t('login.email')}>
            <input
              id="login-email"
              type="email"
              autocomplete="username"
              required
              value={email}
              onInput={(e) => setEmail((e.target as HTMLInputElement).value)}
            />
          </Field>
          <Field id="login-password" label={t('login.password')}>
            <input
              id="login-password"
              type="password"
              autocomplete="current-password"
              required
              value={password}
              onInput={(e) => setPassword((e.target as HTMLInputElement).value)}
            />
          </Field>
          <button type="submit" class="button button-primary" disabled={busy}>
            {busy ? t('login.signingIn') : t('login.signIn')}
          </button>
        </form>
        <p class="login-first">
          {t('login.firstStart')} <Link href="/first-admin">{t('login.firstAdmin')}</Link>
        </p>
      </div>
    </main>
  );
}
