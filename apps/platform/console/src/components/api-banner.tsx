import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { useI18n } from '../i18n/index.js';

/*
 * A banner when the platform's API cannot be reached (issue "What a newcomer tripped over", item 7: "today it
 * silently shows the sign-in page"). It asks the api host's /readyz, which needs no session: when the page opens,
 * when the tab comes back into view or the browser is back online, and once a minute while the tab is visible.
 * While the API is out of reach it asks every few seconds and says so; once it answers again the banner goes and
 * `onBack` runs (the app then asks for its session again, which the outage had made look signed out).
 */

/** What /readyz says: the platform and its database answer; the platform answers without its database; nothing. */
export type ApiReach = 'ready' | 'not_ready' | 'unreachable';

export async function probeApi(): Promise<ApiReach> {
  let response: Response;
  try {
    response = await fetch('/readyz', {
      headers: { accept: 'application/json, application/problem+json' },
      cache: 'no-store',
      credentials: 'omit',
    });
  } catch {
    return 'unreachable';
  }
  if (response.ok) return 'ready';
  // The platform's own 503 is a problem document (code service_unavailable); a proxy's 502/503/504 is not.
  const type = response.headers.get('content-type') ?? '';
  return response.status === 503 && type.includes('application/problem+json') ? 'not_ready' : 'unreachable';
}

const WHILE_DOWN_MS = [2_000, 5_000, 10_000, 20_000, 30_000];
const WHILE_UP_MS = 60_000;

export function ApiBanner(props: { onBack?: () => void }) {
  const { t } = useI18n();
  const [reach, setReach] = useState<ApiReach>('ready');
  const down = useRef(0);
  const timer = useRef<number | undefined>(undefined);
  const onBack = useRef(props.onBack);
  onBack.current = props.onBack;

  const check = useCallback(async () => {
    window.clearTimeout(timer.current);
    const now = await probeApi();
    setReach(now);
    if (now === 'ready') {
      if (down.current > 0) onBack.current?.();
      down.current = 0;
    } else {
      down.current += 1;
    }
    const wait =
      now === 'ready' ? WHILE_UP_MS : WHILE_DOWN_MS[Math.min(down.current - 1, WHILE_DOWN_MS.length - 1)]!;
    timer.current = window.setTimeout(() => {
      if (document.visibilityState === 'visible' || now !== 'ready') void check();
    }, wait);
  }, []);

  useEffect(() => {
    void check();
    const again = () => {
      if (document.visibilityState === 'visible') void check();
    };
    document.addEventListener('visibilitychange', again);
    window.addEventListener('online', again);
    return () => {
      window.clearTimeout(timer.current);
      document.removeEventListener('visibilitychange', again);
      window.removeEventListener('online', again);
    };
  }, [check]);

  if (reach === 'ready') return null;
  return (
    <div class="notice notice-error api-banner" role="alert" data-reach={reach}>
      <p>{t(reach === 'not_ready' ? 'apiBanner.notReady' : 'apiBanner.unreachable')}</p>
      <button type="button" class="button button-small" onClick={() => void check()}>
        {t('apiBanner.retry')}
      </button>
    </div>
  );
}
