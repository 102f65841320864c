import { describe, expect, test } from 'vitest';
import { certificateState } from '../../src/devices/state.js';

const t = (iso: string) => new Date(iso);
const now = t('2026-11-20T06:00:00Z');

describe('certificateState', () => {
  test('newest: current; replaced: previous-until while old_valid_until is ahead, superseded from it on', () => {
    expect(certificateState({ replaced_at: null, old_valid_until: null }, null, now)).toBe('current');
    const replaced = { replaced_at: t('2026-11-19T07:00:00Z'), old_valid_until: t('2026-11-20T07:00:00Z') };
    expect(certificateState(replaced, null, now)).toBe('previous-until');
    expect(certificateState(replaced, null, t('2026-11-20T06:59:59.999Z'))).toBe('previous-until');
    expect(certificateState(replaced, null, t('2026-11-20T07:00:00Z'))).toBe('superseded');
  });

  test('a revoked device revokes every certificate, whatever the clock says', () => {
    const revokedAt = t('2026-11-21T00:00:00Z');
    expect(certificateState({ replaced_at: null, old_valid_until: null }, revokedAt, now)).toBe('revoked');
    expect(certificateState({ replaced_at: now, old_valid_until: now }, revokedAt, now)).toBe('revoked');
  });
});
