import { useEffect, useState } from 'preact/hooks';

/** Client-side routing under /console/ (the platform answers index.html for every page path). */
export const BASE = '/console';

const listeners = new Set<() => void>();

export function currentPath(): string {
  const path = window.location.pathname;
  const rest = path.startsWith(BASE) ? path.slice(BASE.length) : path;
  return rest === '' ? '/' : rest;
}

export function currentQuery(): URLSearchParams {
  return new URLSearchParams(window.location.search);
}

export function navigate(path: string, options: { replace?: boolean } = {}): void {
  const url = `${BASE}${path}`;
  if (options.replace) window.history.replaceState(null, '', url);
  else window.history.pushState(null, '', url);
  for (const listener of listeners) listener();
  window.scrollTo(0, 0);
}

window.addEventListener('popstate', () => {
  for (const listener of listeners) listener();
});

/** The path below /console, re-rendering on navigation. */
export function useRoute(): { path: string; query: URLSearchParams } {
  const [, setTick] = useState(0);
  useEffect(() => {
    const listener = () => setTick((n) => n + 1);
    listeners.add(listener);
    return () => {
      listeners.delete(listener);
    };
  }, []);
  return { path: currentPath(), query: currentQuery() };
}

/** Matches `/a/:id` patterns; returns the parameters or null. */
export function match(pattern: string, path: string): Record<string, string> | null {
  const p = pattern.split('/');
  const a = path.replace(/\/$/, '').split('/');
  if (p.length !== a.length) return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < p.length; i += 1) {
    const part = p[i]!;
    if (part.startsWith(':')) params[part.slice(1)] = decodeURIComponent(a[i]!);
    else if (part !== a[i]) return null;
  }
  return params;
}
