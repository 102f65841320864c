import type { Feature } from '../context.js';
import { startTicker } from '../shared/ticker.js';
import { SWEEP_INTERVAL_MS, type SweepOptions, sweepMedia, sweepWorthLogging } from './sweep.js';

export interface MediaFeatureOptions {
  /** null: no sweep (tests that sweep by hand). */
  sweepIntervalMs?: number | null;
  tempMaxAgeMs?: number;
  unnamedMaxAgeMs?: number;
}

/**
 * The media folder's upkeep: the sweep of temporary files of dead uploads and of content files no row names
 * (sweep.ts), at start and then every SWEEP_INTERVAL_MS, on one instance at a time. The uploads and the removal
 * of a replaced draft's file are the approvals feature's (approvals/submission-flow.ts).
 */
export function createMediaFeature(options: MediaFeatureOptions = {}): Feature {
  return {
    name: 'media',
    start(ctx) {
      const interval = options.sweepIntervalMs === undefined ? SWEEP_INTERVAL_MS : options.sweepIntervalMs;
      if (interval === null) return async () => {};
      const ages: Omit<SweepOptions, 'now'> = {
        ...(options.tempMaxAgeMs === undefined ? {} : { tempMaxAgeMs: options.tempMaxAgeMs }),
        ...(options.unnamedMaxAgeMs === undefined ? {} : { unnamedMaxAgeMs: options.unnamedMaxAgeMs }),
      };
      return startTicker(ctx, 'media sweep', interval, async () => {
        // The wall clock, not ctx.clock: the ages are compared with modification times the system's clock wrote,
        // and a test clock moved ahead (--test-clock) would make a fresh upload's temporary file look old.
        const sweep = await sweepMedia(
          { db: ctx.db, dataDir: ctx.config.dataDir, log: ctx.log },
          { now: new Date(), ...ages },
        );
        if (sweep !== 'busy' && sweepWorthLogging(sweep)) {
          ctx.log.info(
            {
              temp_files: sweep.tempFiles,
              temp_bytes: sweep.tempBytes,
              unnamed_files: sweep.unnamedFiles,
              unnamed_bytes: sweep.unnamedBytes,
              failed: sweep.failed,
            },
            'media files swept',
          );
        }
      });
    },
  };
}

export const mediaFeature: Feature = createMediaFeature();
