import { Type } from '@sinclair/typebox';
import type { Feature } from '../context.js';
import { validationFailed } from '../http/problem.js';
import { AUTHORITY_ADMIN } from '../shared/auth-grants.js';

const ClockView = Type.Object({ now: Type.String(), frozen: Type.Boolean() });

const ClockBody = Type.Object(
  { now: Type.String({ format: 'date-time' }), frozen: Type.Optional(Type.Boolean()) },
  { additionalProperties: false },
);

export const clockFeature: Feature = {
  name: 'test-clock',
  // The route exists only when the platform was started with --test-clock.
  api(app, ctx) {
    const clock = ctx.testClock;
    if (!clock) return;
    app.put<{ Body: { now: string; frozen?: boolean } }>(
      '/api/v1/console/clock',
      { config: { auth: AUTHORITY_ADMIN }, schema: { body: ClockBody, response: { 200: ClockView } } },
      async (request) => {
        const instant = new Date(request.body.now);
        if (Number.isNaN(instant.getTime())) {
          throw validationFailed([{ path: '/now', code: 'format', message: 'not an RFC 3339 date-time' }]);
        }
        clock.set(instant, request.body.frozen === undefined ? {} : { frozen: request.body.frozen });
        request.log.warn({ now: instant.toISOString(), frozen: clock.isFrozen }, 'test clock set');
        return { now: clock.now().toISOString(), frozen: clock.isFrozen };
      },
    );
    app.get(
      '/api/v1/console/clock',
      { config: { auth: AUTHORITY_ADMIN }, schema: { response: { 200: ClockView } } },
      async () => ({
        now: clock.now().toISOString(),
        frozen: clock.isFrozen,
      }),
    );
  },
};
