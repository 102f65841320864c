import type { ComponentChildren } from 'preact';
import { useEffect, useRef } from 'preact/hooks';
import { type Language, LANGUAGES, type MessageKey, useI18n } from '../i18n/index.js';
import { BASE, navigate, useRoute } from '../lib/router.js';
import { can, useSession } from '../lib/session.js';

/** A link inside the console (client-side navigation, a real href for new tabs and assistive technology). */
export function Link(props: {
  href: string;
  class?: string;
  children: ComponentChildren;
  current?: boolean;
}) {
  return (
    <a
      href={`${BASE}${props.href}`}
      class={props.class}
      aria-current={props.current ? 'page' : undefined}
      onClick={(event) => {
        if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
        event.preventDefault();
        navigate(props.href);
      }}
    >
      {props.children}
    </a>
  );
}

export function LanguageSwitch() {
  const { t, language, setLanguage } = useI18n();
  return (
    <div class="language-switch">
      <label for="language">{t('app.language')}</label>
      <select
        id="language"
        value={language}
        onChange={(e) => setLanguage((e.target as HTMLSelectElement).value as Language)}
      >
        {LANGUAGES.map((l) => (
          <option key={l} value={l} lang={l}>
            {t(`language.${l}` as MessageKey)}
          </option>
        ))}
      </select>
    </div>
  );
}

export function Layout(props: { onSignOut: () => void; children: ComponentChildren }) {
  const { t } = useI18n();
  const session = useSession();
  const { path } = useRoute();
  const mainRef = useRef<HTMLElement>(null);
  const items: { href: string; key: MessageKey; show: boolean }[] = [
    { href: '/submissions', key: 'nav.submissions', show: can.submit(session) },
    { href: '/moderation', key: 'nav.moderation', show: can.readQueue(session) },
    { href: '/register', key: 'register.nav', show: can.readQueue(session) },
    { href: '/check', key: 'nav.check', show: can.check(session) },
    { href: '/fleet', key: 'nav.fleet', show: can.fleet(session) },
    { href: '/plays', key: 'nav.plays', show: can.plays(session) || can.submit(session) },
    { href: '/reports', key: 'reports.nav', show: can.plays(session) || can.submit(session) },
    { href: '/transparency', key: 'nav.transparency', show: true },
    { href: '/organisations', key: 'nav.organisations', show: can.administer(session) },
    { href: '/structures', key: 'structures.nav', show: can.administer(session) },
  ];
  // Move focus to the page on navigation, so screen readers start at the new content.
  useEffect(() => {
    mainRef.current?.focus({ preventScroll: true });
  }, [path]);
  return (
    <div class="shell">
      <a class="skip-link" href="#main">
        {t('app.skipToContent')}
      </a>
      <header class="topbar">
        <div class="brand">
          <span class="brand-mark" aria-hidden="true" />
          <span class="brand-name">{t('app.name')}</span>
        </div>
        <div class="who">
          <span class="who-org">{session.organisation.name}</span>
          <span class="who-user">
            {session.user.email} · {t(`kind.${session.organisation.kind}` as MessageKey)} ·{' '}
            {t(`role.${session.user.role}` as MessageKey)}
          </span>
        </div>
        <LanguageSwitch />
        <button type="button" class="button button-quiet" onClick={props.onSignOut}>
          {t('app.signOut')}
        </button>
      </header>
      <nav class="sidenav" aria-label={t('nav.label')}>
        <ul>
          {items
            .filter((i) => i.show)
            .map((i) => (
              <li key={i.href}>
                <Link href={i.href} current={path === i.href || path.startsWith(`${i.href}/`)}>
                  {t(i.key)}
                </Link>
              </li>
            ))}
        </ul>
      </nav>
      <main id="main" class="content" tabIndex={-1} ref={mainRef}>
        {props.children}
      </main>
    </div>
  );
}
