import { access } from 'node:fs/promises';
import path from 'node:path';
import type { Clock } from '../clock.js';
import type { PlatformConfig } from '../config.js';
import {
  type Authority,
  authoritySource,
  createAuthorityFiles,
  GENERATED_FILES,
  readAuthority,
} from './pki.js';

async function exists(file: string): Promise<boolean> {
  try {
    await access(file);
    return true;
  } catch {
    return false;
  }
}

/**
 * The authority of one platform, read once from its files (and created on first start in the data folder when no
 * real files are configured: DESIGN.md section 2, "created on first start, mode 0600"). It lives on the platform's
 * context (ctx.caches.authority): two platforms in one process each read their own; the platform's close() drops
 * the keys.
 */
export class AuthorityCache {
  #loading: Promise<Authority> | null = null;

  constructor(private readonly platform: { config: PlatformConfig; clock: Clock }) {}

  load(): Promise<Authority> {
    if (!this.#loading) {
      // Throws AuthorityError at once for files named only in part, as before: nothing is remembered then.
      const source = authoritySource(this.platform.config.dataDir, this.platform.config.settings);
      const now = this.platform.clock.now();
      const loading = (async () => {
        if (source.kind === 'generated' && !(await exists(path.join(source.dir, GENERATED_FILES.rootCert)))) {
          await createAuthorityFiles(source.dir, now);
        }
        return readAuthority(source, now);
      })();
      this.#loading = loading;
      // A failed load is retried on the next need rather than remembered.
      loading.catch(() => {
        if (this.#loading === loading) this.#loading = null;
      });
    }
    return this.#loading;
  }

  /** Whether anything is held (close() leaves nothing: tests check it). */
  get empty(): boolean {
    return this.#loading === null;
  }

  clear(): void {
    this.#loading = null;
  }
}
