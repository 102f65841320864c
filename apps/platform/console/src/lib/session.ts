import { createContext } from 'preact';
import { useContext } from 'preact/hooks';
import type { SessionInfo } from '../api/types.js';

export const SessionContext = createContext<SessionInfo | null>(null);

export function useSession(): SessionInfo {
  const session = useContext(SessionContext);
  if (!session) throw new Error('useSession outside a signed-in page');
  return session;
}

const has = (s: SessionInfo, scope: string) => s.scopes.includes(scope);
const authority = (s: SessionInfo) => s.organisation.kind === 'authority';

/** What a session may do, from its scopes (apps/platform/console/README.md lists the scopes of each kind and role). */
export const can = {
  submit: (s: SessionInfo) => has(s, 'write:submissions') && !authority(s),
  readQueue: (s: SessionInfo) => authority(s) && (has(s, 'console:admin') || has(s, 'console:read')),
  decide: (s: SessionInfo) => authority(s) && has(s, 'console:admin'),
  check: (s: SessionInfo) => has(s, 'read:creatives'),
  fleet: (s: SessionInfo) =>
    (authority(s) && has(s, 'console:admin')) || (!authority(s) && has(s, 'console:fleet')),
  plays: (s: SessionInfo) => authority(s) && (has(s, 'console:admin') || has(s, 'console:read')),
  administer: (s: SessionInfo) => authority(s) && has(s, 'console:admin'),
};
