import { useEffect, useMemo, useState } from 'preact/hooks';
import { platformToday } from './api.js';
import { CreativeSection } from './creative.js';
import {
  I18nContext,
  initialLanguage,
  type Language,
  LANGUAGES,
  makeI18n,
  rememberLanguage,
} from './i18n/index.js';
import { LedgerSection } from './ledger.js';
import { loadPin, type Pin, savePin } from './pin.js';
import { fetchServedRoot, RootSection, trustOf } from './root.js';
import { SealsSection } from './seals.js';
import { useAsync } from './ui.js';

/**
 * The public verification page of the verify host (issue 22, item 1): no sign-in; the authority's root with its
 * fingerprint and the reader's pin; the daily seals, each verified; the ledger head and any block, verified; and
 * whether a creative is approved, where and until when, by number or by its file (hashed here, never uploaded).
 */
export function App() {
  const [language, setLanguage] = useState<Language>(initialLanguage);
  const i18n = useMemo(
    () =>
      makeI18n(language, (next) => {
        rememberLanguage(next);
        setLanguage(next);
      }),
    [language],
  );
  const { t } = i18n;
  useEffect(() => {
    document.documentElement.lang = language;
    document.title = t('page.title');
  }, [language]);

  const [pin, setPin] = useState<Pin | null>(loadPin);
  const served = useAsync(fetchServedRoot, []);
  // One trust value per root and pin: the seal checks rerun only when one of them changes.
  const trust = useMemo(() => trustOf(served, pin), [served.data, served.error, pin]);
  const today = useMemo(platformToday, []);

  return (
    <I18nContext.Provider value={i18n}>
      <a class="skip-link" href="#main">
        {t('page.skip')}
      </a>
      <header class="top">
        <div class="top-inner">
          <p class="brand">{t('page.title')}</p>
          <fieldset class="languages">
            <legend class="visually-hidden">{t('language.label')}</legend>
            {LANGUAGES.map((l) => (
              <button
                key={l}
                type="button"
                lang={l}
                class="language"
                aria-pressed={l === language}
                onClick={() => i18n.setLanguage(l)}
              >
                {t(`language.${l}`)}
              </button>
            ))}
          </fieldset>
        </div>
        <nav aria-label={t('page.nav')} class="sections">
          <a href="#root">{t('nav.root')}</a>
          <a href="#seals">{t('nav.seals')}</a>
          <a href="#creative">{t('nav.creative')}</a>
          <a href="#ledger">{t('nav.ledger')}</a>
        </nav>
      </header>
      <main id="main" tabIndex={-1}>
        <h1>{t('page.title')}</h1>
        <p class="lead">{t('page.lead')}</p>
        <RootSection
          trust={trust}
          pin={pin}
          onPin={(next) => {
            savePin(next);
            setPin(next);
          }}
        />
        <SealsSection trust={trust} today={today} />
        <CreativeSection />
        <LedgerSection />
      </main>
      <footer class="bottom">
        <p>{t('footer.cli')}</p>
        <pre class="code" lang="en">
          {`curl -s ${location.origin}/v1/authority-root.pem > authority-root.pem
npm run verify -- seal DAY --from ${location.origin} --root authority-root.pem`}
        </pre>
        <p>
          {t('footer.routes')}: <a href="/v1/ledger/head">/v1/ledger/head</a> ·{' '}
          <a href="/v1/authority-root.pem">/v1/authority-root.pem</a> ·{' '}
          <a href="/v1/revocations.json">/v1/revocations.json</a> ·{' '}
          <a href="/v1/open/dictionary.json">/v1/open/dictionary.json</a>
        </p>
      </footer>
    </I18nContext.Provider>
  );
}
