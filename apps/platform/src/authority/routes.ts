import type { Feature } from '../context.js';
import { TextBody } from '../http/responses.js';
import { loadAuthority } from './load.js';

/**
 * The authority's public root certificate, the trust anchor of envelopes, revocation lists and seals
 * (DESIGN.md section 4: `openssl cms -verify ... -CAfile authority-root.pem`). Public, verify host.
 */
export const authorityFeature: Feature = {
  name: 'authority',
  verify(app, ctx) {
    app.get(
      '/v1/authority-root.pem',
      { schema: { response: { 200: TextBody('application/x-pem-file') } } },
      async (_request, reply) => {
        const authority = await loadAuthority(ctx);
        return reply
          .type('application/x-pem-file')
          .header('cache-control', 'public, max-age=3600')
          .send(authority.rootPem);
      },
    );
  },
  // Created on first start rather than on first use, so a broken configuration stops the start.
  async start(ctx) {
    await loadAuthority(ctx);
    return async () => {};
  },
};
