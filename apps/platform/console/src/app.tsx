import type { JSX } from 'preact';
import { useEffect, useMemo, useState } from 'preact/hooks';
import { ApiError, del, get, onSessionEnded, setCsrfToken } from './api/client.js';
import type { SessionInfo } from './api/types.js';
import { ApiBanner } from './components/api-banner.js';
import { Layout } from './components/layout.js';
import { Loading } from './components/ui.js';
import { I18nContext, initialLanguage, type Language, makeI18n, rememberLanguage } from './i18n/index.js';
import { match, navigate, useRoute } from './lib/router.js';
import { can, SessionContext } from './lib/session.js';
import { CheckPage } from './pages/check.js';
import { FirstAdminPage } from './pages/first-admin.js';
import { FleetPage } from './pages/fleet.js';
import { FleetDevicePage } from './pages/fleet-device.js';
import { FleetHealthPage } from './pages/fleet-health.js';
import { LoginPage } from './pages/login.js';
import { ModerationDetailPage, ModerationPage } from './pages/moderation.js';
import { NotAllowedPage, NotFoundPage } from './pages/not-found.js';
import { OrganisationsPage } from './pages/organisations.js';
import { PlaysPage } from './pages/plays.js';
import { RegisterPage } from './pages/register.js';
import { CampaignReportPage, ReportsPage } from './pages/report.js';
import { StructuresPage } from './pages/structures.js';
import {
  EditSubmissionPage,
  NewSubmissionPage,
  SubmissionDetailPage,
  SubmissionsPage,
} from './pages/submissions.js';
import { TransparencyPage } from './pages/transparency.js';

/** The first page of a session, by what it may do. */
export function homeOf(session: SessionInfo): string {
  if (can.readQueue(session)) return '/moderation';
  if (can.submit(session)) return '/submissions';
  if (can.fleet(session)) return '/fleet';
  return '/check';
}

export function App() {
  const [language, setLanguageState] = useState<Language>(initialLanguage);
  const [session, setSession] = useState<SessionInfo | null | 'loading'>('loading');
  const [ended, setEnded] = useState<'session_expired' | 'unauthenticated' | null>(null);
  const route = useRoute();

  const i18n = useMemo(
    () =>
      makeI18n(language, (next) => {
        rememberLanguage(next);
        setLanguageState(next);
      }),
    [language],
  );

  useEffect(() => {
    document.documentElement.lang = language;
    document.title = i18n.t('app.title');
  }, [language, i18n]);

  useEffect(() => {
    onSessionEnded((code) => {
      setCsrfToken(null);
      setSession(null);
      setEnded(code);
    });
    get<SessionInfo>('/api/v1/console/session').then(
      (s) => {
        setCsrfToken(s.csrf_token);
        setSession(s);
      },
      (error: unknown) => {
        setSession(null);
        if (error instanceof ApiError && error.code === 'session_expired') setEnded('session_expired');
      },
    );
  }, []);

  const signedIn = (s: SessionInfo) => {
    setCsrfToken(s.csrf_token);
    setSession(s);
    setEnded(null);
    if (route.path === '/' || route.path === '/login') navigate(homeOf(s), { replace: true });
  };

  const signOut = async () => {
    try {
      await del('/api/v1/console/session');
    } finally {
      setCsrfToken(null);
      setSession(null);
      setEnded(null);
      navigate('/login', { replace: true });
    }
  };

  let content: JSX.Element;
  if (session === 'loading') {
    content = (
      <main id="main" class="centered">
        <Loading />
      </main>
    );
  } else if (session === null) {
    // The authority's first administrator, made with the key `platform bootstrap` prints (pages/first-admin.tsx).
    content =
      route.path === '/first-admin' ? (
        <FirstAdminPage onSignedIn={signedIn} />
      ) : (
        <LoginPage onSignedIn={signedIn} ended={ended} />
      );
  } else {
    content = (
      <SessionContext.Provider value={session}>
        <Layout onSignOut={signOut}>
          <Page path={route.path} session={session} />
        </Layout>
      </SessionContext.Provider>
    );
  }
  // A banner while the API cannot be reached; once it is back, the session is asked for again (an outage looked
  // like being signed out).
  const recheckSession = () =>
    get<SessionInfo>('/api/v1/console/session').then(
      (s) => {
        setCsrfToken(s.csrf_token);
        setSession(s);
      },
      () => {},
    );
  return (
    <I18nContext.Provider value={i18n}>
      <ApiBanner {...(session === null ? { onBack: () => void recheckSession() } : {})} />
      {content}
    </I18nContext.Provider>
  );
}

interface PageRoute {
  pattern: string;
  allowed: (s: SessionInfo) => boolean;
  render: (params: Record<string, string>) => JSX.Element;
}

const ROUTES: PageRoute[] = [
  { pattern: '/submissions', allowed: can.submit, render: () => <SubmissionsPage /> },
  { pattern: '/submissions/new', allowed: can.submit, render: () => <NewSubmissionPage /> },
  { pattern: '/submissions/:id', allowed: can.submit, render: (p) => <SubmissionDetailPage id={p['id']!} /> },
  {
    pattern: '/submissions/:id/edit',
    allowed: can.submit,
    render: (p) => <EditSubmissionPage id={p['id']!} />,
  },
  { pattern: '/moderation', allowed: can.readQueue, render: () => <ModerationPage /> },
  {
    pattern: '/moderation/:id',
    allowed: can.readQueue,
    render: (p) => <ModerationDetailPage id={p['id']!} />,
  },
  // The authority's register of decided submissions (pages/register.tsx).
  { pattern: '/register', allowed: can.readQueue, render: () => <RegisterPage /> },
  { pattern: '/check', allowed: can.check, render: () => <CheckPage /> },
  { pattern: '/fleet', allowed: can.fleet, render: () => <FleetPage /> },
  // Proof of play and campaign reports: the authority everything, the others what is theirs (src/reports).
  { pattern: '/plays', allowed: (s) => can.plays(s) || can.submit(s), render: () => <PlaysPage /> },
  { pattern: '/reports', allowed: (s) => can.plays(s) || can.submit(s), render: () => <ReportsPage /> },
  {
    pattern: '/reports/:id',
    allowed: (s) => can.plays(s) || can.submit(s),
    render: (p) => <CampaignReportPage id={p['id']!} />,
  },
  {
    pattern: '/fleet/health',
    allowed: (s) => can.fleet(s) || can.plays(s),
    render: () => <FleetHealthPage />,
  },
  // One device of the fleet (pages/fleet-device.tsx), after /fleet/health so that path stays the health page's.
  { pattern: '/fleet/:id', allowed: can.fleet, render: (p) => <FleetDevicePage id={p['id']!} /> },
  { pattern: '/transparency', allowed: () => true, render: () => <TransparencyPage /> },
  { pattern: '/organisations', allowed: can.administer, render: () => <OrganisationsPage /> },
  { pattern: '/structures', allowed: can.administer, render: () => <StructuresPage /> },
];

function Page(props: { path: string; session: SessionInfo }) {
  const { path, session } = props;
  useEffect(() => {
    if (path === '/' || path === '/login') navigate(homeOf(session), { replace: true });
  }, [path, session]);
  if (path === '/' || path === '/login') return null;
  let notAllowed = false;
  for (const route of ROUTES) {
    const params = match(route.pattern, path);
    if (params && route.allowed(session)) return route.render(params);
    if (params) notAllowed = true;
  }
  return notAllowed ? <NotAllowedPage /> : <NotFoundPage />;
}
