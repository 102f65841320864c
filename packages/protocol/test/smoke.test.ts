import { expect, test } from 'vitest';
import { placeholder } from '@ooh/protocol';
test('workspace resolves', () => {
  expect(placeholder).toBe(1);
});
