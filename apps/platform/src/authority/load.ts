import type { PlatformCaches } from '../context.js';
import type { Authority } from './pki.js';

/**
 * The authority of this platform: read from its files once, created on first start in the data folder when no real
 * files are configured (DESIGN.md section 2: "created on first start, mode 0600"). Kept on the platform's context
 * (authority/cache.ts).
 */
export function loadAuthority(ctx: { caches: Pick<PlatformCaches, 'authority'> }): Promise<Authority> {
  return ctx.caches.authority.load();
}
