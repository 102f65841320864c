import { createReadStream } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { PlatformContext } from '../context.js';
import type { Feature } from '../context.js';
import { ProblemError } from '../http/problem.js';
import { NoBody } from '../http/responses.js';

/** The Vite build of apps/platform/console (`npx vite build --config apps/platform/console/vite.config.ts`). */
export const DEFAULT_CONSOLE_DIST = fileURLToPath(new URL('../../console/dist/', import.meta.url));
export const CONSOLE_DIST_ENV = 'CONSOLE_DIST_DIR';
export const BUILD_COMMAND = 'npx vite build --config apps/platform/console/vite.config.ts';

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.webp': 'image/webp',
  '.woff2': 'font/woff2',
  '.txt': 'text/plain; charset=utf-8',
};

/** Vite names built assets `<name>-<hash>.<ext>` under assets/: their content never changes under that name. */
const HASHED_ASSET = /^assets\/[A-Za-z0-9_.-]+-[A-Za-z0-9_-]{8,}\.[a-z0-9]+$/;
/** The placeholder in console/index.html that receives the public verify URL. */
const VERIFY_URL_META = /<meta name="ooh-verify-url" content="[^"]*"\s*\/?>/;

const escapeAttribute = (value: string) =>
  value.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

function originOf(url: string): string | null {
  try {
    return new URL(url).origin;
  } catch {
    return null;
  }
}

/**
 * Headers of the console page. The app talks to the api host (same origin) and fetches seals, ledger blocks and the
 * authority root from the verify host to check them in the browser, so connect-src names that origin too.
 */
function pageHeaders(ctx: PlatformContext): Record<string, string> {
  const verify = originOf(ctx.config.publicUrls.verify);
  return {
    'content-security-policy': [
      "default-src 'self'",
      `connect-src 'self'${verify ? ` ${verify}` : ''}`,
      "img-src 'self' blob: data:",
      "media-src 'self' blob:",
      "style-src 'self'",
      "script-src 'self'",
      "object-src 'none'",
      "base-uri 'none'",
      "form-action 'self'",
      "frame-ancestors 'none'",
    ].join('; '),
    'referrer-policy': 'no-referrer',
    'x-frame-options': 'DENY',
    'cache-control': 'no-cache',
  };
}

async function isFile(file: string): Promise<boolean> {
  try {
    return (await stat(file)).isFile();
  } catch {
    return false;
  }
}

/** The path below /console/, refused when it could leave the build folder. */
function relativePath(raw: string): string {
  let decoded: string;
  try {
    decoded = decodeURIComponent(raw);
  } catch {
    throw new ProblemError('not_found', 'no such console file');
  }
  if (
    decoded.includes('\0') ||
    decoded.includes('\\') ||
    decoded.split('/').some((s) => s === '..' || s === '.')
  ) {
    throw new ProblemError('not_found', 'no such console file');
  }
  return decoded.replace(/^\/+/, '');
}

export interface ConsoleWebOptions {
  /** Folder of the built console; default CONSOLE_DIST_DIR or apps/platform/console/dist. */
  distDir?: string;
}

/**
 * Serves the console web application (issue "The console") on the api host under /console/: built files with their
 * content types, immutable caching of hashed assets, index.html for every other path below /console/ (client-side
 * routing). Without a build, /console/ answers a problem document saying how to build it.
 *
 * It also lets browsers read the verify host's public answers (access-control-allow-origin: * on GET): the console
 * checks seals and ledger proofs in the browser from public data only.
 */
export function createConsoleWebFeature(options: ConsoleWebOptions = {}): Feature {
  return {
    name: 'console-web',
    apiPublic(app, ctx) {
      const distDir = path.resolve(
        options.distDir ?? (ctx.config.settings[CONSOLE_DIST_ENV] || DEFAULT_CONSOLE_DIST),
      );

      const sendIndex = async (reply: FastifyReply) => {
        let html: string;
        try {
          html = await readFile(path.join(distDir, 'index.html'), 'utf8');
        } catch {
          throw new ProblemError(
            'service_unavailable',
            `the console is not built: run \`npm run build\` (or \`${BUILD_COMMAND}\`); looked in ${distDir}`,
          );
        }
        const meta = `<meta name="ooh-verify-url" content="${escapeAttribute(ctx.config.publicUrls.verify)}">`;
        return reply
          .headers({ ...pageHeaders(ctx), 'x-content-type-options': 'nosniff' })
          .type(CONTENT_TYPES['.html']!)
          .send(html.replace(VERIFY_URL_META, meta));
      };

      app.get('/console', { schema: { response: { 308: NoBody } } }, async (_request, reply) =>
        reply.redirect('/console/', 308),
      );

      app.get('/console/*', async (request: FastifyRequest<{ Params: { '*': string } }>, reply) => {
        const rel = relativePath(request.params['*'] ?? '');
        if (rel === '' || rel === 'index.html') return sendIndex(reply);
        const file = path.join(distDir, rel);
        if (!file.startsWith(distDir + path.sep) || !(await isFile(file))) {
          // A missing built file is 404; any other path is a page of the app.
          if (rel.startsWith('assets/') || /\.[a-z0-9]{1,5}$/i.test(rel)) {
            throw new ProblemError('not_found', `no console file ${rel}`);
          }
          return sendIndex(reply);
        }
        const type = CONTENT_TYPES[path.extname(file).toLowerCase()] ?? 'application/octet-stream';
        reply.header('x-content-type-options', 'nosniff');
        reply.header(
          'cache-control',
          HASHED_ASSET.test(rel) ? 'public, max-age=31536000, immutable' : 'no-cache',
        );
        return reply.type(type).send(createReadStream(file));
      });
    },

    verify(app) {
      // Public, credential-free answers may be read from any origin (the console checks seals in the browser).
      app.addHook('onSend', async (request, reply) => {
        if (request.method === 'GET' || request.method === 'HEAD') {
          reply.header('access-control-allow-origin', '*');
        }
      });
    },
  };
}

export const consoleWebFeature: Feature = createConsoleWebFeature();
