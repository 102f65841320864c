import { createReadStream } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { almatyDate } from '@ooh/protocol';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Feature } from '../context.js';
import { ProblemError, validationFailed } from '../http/problem.js';
import { NoBody, TextBody } from '../http/responses.js';
import { type PublicRateLimit, PublicRateLimiter } from '../http/public-rate-limit.js';
import { languageFromAcceptLanguage } from './language.js';
import { approvalsOfMedia, PublicApprovalsOfMedia } from './lookup.js';

/** The Vite build of apps/platform/console/src/public (apps/platform/console/build.ts, `npm run build`). */
export const DEFAULT_PUBLIC_PAGE_DIST = fileURLToPath(new URL('../../dist/public-web/', import.meta.url));
export const PUBLIC_PAGE_DIST_ENV = 'PUBLIC_PAGE_DIST_DIR';

/**
 * The lookup by file hash is a database read per call, for anyone: a tighter bucket than the seal and ledger reads
 * (src/seals/rate-limit.ts), still far above what a person choosing files needs.
 */
export const DEFAULT_PUBLIC_LOOKUP_RATE_LIMIT: PublicRateLimit = { burst: 30, perSecond: 1 };

const CONTENT_TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.woff2': 'font/woff2',
};

/** Vite names built assets `<name>-<hash>.<ext>` under assets/: their content never changes under that name. */
const HASHED_ASSET = /^[A-Za-z0-9_.-]+-[A-Za-z0-9_-]{8,}\.(?:js|css|svg|png|woff2)$/;
const SHA256_HEX = /^[0-9a-f]{64}$/;

/**
 * The page is a script of its own origin talking to its own origin: nothing inline, nothing from elsewhere, no
 * frame. The file a reader checks is read by the page itself (no upload), so no form posts anywhere.
 */
const PAGE_HEADERS: Record<string, string> = {
  'content-security-policy': [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "connect-src 'self'",
    "img-src 'self'",
    "manifest-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; '),
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'cache-control': 'no-cache',
  vary: 'Accept-Language',
};

const HTML_LANG = /<html lang="[a-z]{2}">/;
const TODAY_META = /<meta name="ooh-today" content="[^"]*"\s*\/?>/;

async function isFile(file: string): Promise<boolean> {
  try {
    return (await stat(file)).isFile();
  } catch {
    return false;
  }
}

export interface PublicPageOptions {
  /** Folder of the built page; default PUBLIC_PAGE_DIST_DIR or apps/platform/dist/public-web. */
  distDir?: string;
  /** Rate limit of GET /v1/approvals?media_sha256=, per client address and instance. */
  lookupRateLimit?: PublicRateLimit;
}

/**
 * The public verification page on the verify host (issue 22, item 1): served at `/` by the verify host itself, from
 * its own bundle, so it works with the api host (and the console) down or switched off. It reads only the verify
 * host's public routes and checks everything in the browser with @ooh/verify (packages/verify, on WebCrypto).
 * `/v1/` (no spec route) leads to it; the spec's routes under /v1 keep their answers.
 */
export function createPublicPageFeature(options: PublicPageOptions = {}): Feature {
  return {
    name: 'public-page',
    verify(app, ctx) {
      const distDir = path.resolve(
        options.distDir ?? (ctx.config.settings[PUBLIC_PAGE_DIST_ENV] || DEFAULT_PUBLIC_PAGE_DIST),
      );
      const assetsDir = path.join(distDir, 'assets');
      const limiter = new PublicRateLimiter(options.lookupRateLimit ?? DEFAULT_PUBLIC_LOOKUP_RATE_LIMIT);

      const sendPage = async (request: FastifyRequest, reply: FastifyReply) => {
        let html: string;
        try {
          html = await readFile(path.join(distDir, 'index.html'), 'utf8');
        } catch {
          throw new ProblemError(
            'service_unavailable',
            `the public page is not built: run \`npm run build\`; looked in ${distDir}`,
          );
        }
        // The reader's languages choose the first language (the page's switch, kept in the browser, comes first);
        // the platform's Almaty day tells the page which days can be sealed (DESIGN.md section 8).
        const language = languageFromAcceptLanguage(request.headers['accept-language']);
        const page = html
          .replace(HTML_LANG, `<html lang="${language}">`)
          .replace(TODAY_META, `<meta name="ooh-today" content="${almatyDate(ctx.clock.now())}">`);
        return reply
          .headers({ ...PAGE_HEADERS, 'content-language': language })
          .type('text/html; charset=utf-8')
          .send(page);
      };

      const redirect = { schema: { response: { 308: NoBody } } };
      app.get('/', { schema: { response: { 200: TextBody('text/html') } } }, sendPage);
      app.get('/index.html', redirect, async (_request, reply) => reply.redirect('/', 308));
      // No route of the spec is /v1 itself: a reader who types the host's documented prefix finds the page.
      app.get('/v1', redirect, async (_request, reply) => reply.redirect('/', 308));
      app.get('/v1/', redirect, async (_request, reply) => reply.redirect('/', 308));

      app.get(
        '/favicon.svg',
        { schema: { response: { 200: TextBody('image/svg+xml') } } },
        async (_request, reply) => {
          const file = path.join(distDir, 'favicon.svg');
          if (!(await isFile(file))) throw new ProblemError('not_found', 'no favicon');
          return reply
            .type('image/svg+xml')
            .header('x-content-type-options', 'nosniff')
            .header('cache-control', 'public, max-age=86400')
            .send(createReadStream(file));
        },
      );

      app.get<{ Params: { file: string } }>('/assets/:file', async (request, reply) => {
        const name = request.params.file;
        // Only a built asset's own name: no folder, no dot segment, nothing to decode into one.
        if (!HASHED_ASSET.test(name)) throw new ProblemError('not_found', 'no such asset');
        const file = path.join(assetsDir, name);
        if (!(await isFile(file))) throw new ProblemError('not_found', `no asset ${name}`);
        return reply
          .type(CONTENT_TYPES[path.extname(name)] ?? 'application/octet-stream')
          .header('x-content-type-options', 'nosniff')
          .header('cache-control', 'public, max-age=31536000, immutable')
          .send(createReadStream(file));
      });

      app.get<{ Querystring: Record<string, unknown> }>(
        '/v1/approvals',
        { schema: { response: { 200: PublicApprovalsOfMedia } } },
        async (request, reply) => {
          // Refused before any work: a client over its rate gets 429 with Retry-After.
          limiter.take(request.ip);
          const hash = request.query['media_sha256'];
          if (typeof hash !== 'string' || !SHA256_HEX.test(hash)) {
            throw validationFailed([
              {
                path: 'querystring:/media_sha256',
                code: hash === undefined ? 'required' : 'format',
                message: 'the SHA-256 of the file, 64 lowercase hexadecimal characters',
              },
            ]);
          }
          reply.header('cache-control', 'public, max-age=60');
          return { media_sha256: hash, items: await approvalsOfMedia(ctx.db, hash, ctx.clock.now()) };
        },
      );
    },
  };
}

export const publicPageFeature: Feature = createPublicPageFeature();
