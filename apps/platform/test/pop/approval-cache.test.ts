import { expect, test } from 'vitest';
import { ApprovalCache } from '../../src/pop/approval-cache.js';
import type { ApprovalFacts } from '../../src/pop/judge.js';

function facts(number: string, structures: number): ApprovalFacts {
  return {
    number,
    mediaSha256: 'a'.repeat(64),
    validFrom: '2026-01-01',
    validUntil: '2026-12-31',
    revokedAt: null,
    structureIds: new Set(Array.from({ length: structures }, (_, i) => `s-${i}`)),
  };
}

test('an entry answers only at the version it was read at; an older read never replaces a newer one', () => {
  const cache = new ApprovalCache();
  cache.set('A-1', '10', facts('A-1', 1));
  expect(cache.get('A-1', '10')?.number).toBe('A-1');
  expect(cache.get('A-1', '11')).toBeUndefined();
  expect(cache.missing(['A-1', 'A-2'])).toEqual(['A-2']);
  // A lookup whose snapshot was older comes back late: the newer entry stays.
  cache.set('A-1', '9', { ...facts('A-1', 1), revokedAt: new Date(0) });
  expect(cache.get('A-1', '10')?.revokedAt).toBeNull();
  // Versions compare as numbers, not as text.
  cache.set('A-1', '100', { ...facts('A-1', 1), mediaSha256: 'b'.repeat(64) });
  expect(cache.get('A-1', '100')?.mediaSha256).toBe('b'.repeat(64));
  cache.remove('A-1');
  expect(cache.size).toBe(0);
});

test('bounded by entries and by structure ids, the least recently used going first', () => {
  const cache = new ApprovalCache({ maxApprovals: 3, maxStructureIds: 10 });
  cache.set('A-1', '1', facts('A-1', 2));
  cache.set('A-2', '2', facts('A-2', 2));
  cache.set('A-3', '3', facts('A-3', 2));
  cache.get('A-1', '1');
  cache.set('A-4', '4', facts('A-4', 2));
  expect(cache.missing(['A-1', 'A-2', 'A-3', 'A-4'])).toEqual(['A-2']);
  // 6 structure ids held; 6 more would make 12: A-3 goes (10 left, the bound).
  cache.set('A-5', '5', facts('A-5', 6));
  expect(cache.missing(['A-1', 'A-3', 'A-4', 'A-5'])).toEqual(['A-3']);
  // A-4 read again, wider: 12 ids, so A-1 goes.
  cache.set('A-4', '6', facts('A-4', 4));
  expect(cache.missing(['A-1', 'A-4', 'A-5'])).toEqual(['A-1']);
  expect(cache.size).toBe(2);
  cache.set('A-6', '7', facts('A-6', 1));
  expect(cache.missing(['A-4', 'A-5', 'A-6'])).toEqual(['A-5']);
});
