import { describe, expect, it } from 'vitest';
import { type DiskReport, DiskWatch, diskStateFor, systemFreeSpace } from '../../src/storage/disk.js';
import { ManualClock } from '../helpers/temp.js';

const thresholds = { warnFreeBytes: 1000, hardFreeBytes: 400 };

describe('disk state', () => {
  it('goes low below the warning threshold and full below the hard one, and back only past a margin', () => {
    expect(diskStateFor(5000, 'ok', thresholds)).toBe('ok');
    expect(diskStateFor(999, 'ok', thresholds)).toBe('low');
    expect(diskStateFor(399, 'ok', thresholds)).toBe('full');
    expect(diskStateFor(399, 'low', thresholds)).toBe('full');
    // Back above a threshold, but not by a tenth of it yet: stays.
    expect(diskStateFor(420, 'full', thresholds)).toBe('full');
    expect(diskStateFor(440, 'full', thresholds)).toBe('low');
    expect(diskStateFor(1050, 'low', thresholds)).toBe('low');
    expect(diskStateFor(1100, 'low', thresholds)).toBe('ok');
    expect(diskStateFor(1100, 'full', thresholds)).toBe('ok');
  });

  it('watches the least free of its volumes; one that cannot be read leaves the state as it was', async () => {
    const free: Record<string, number | Error> = { '/data': 5000, '/media': 8000 };
    const watch = new DiskWatch({
      volumes: [
        { name: 'data', path: '/data' },
        { name: 'media', path: '/media' },
      ],
      freeSpace: async (path) => {
        const value = free[path]!;
        if (value instanceof Error) throw value;
        return { freeBytes: value, totalBytes: 10_000 };
      },
      ...thresholds,
      clock: new ManualClock(new Date('2026-11-21T09:00:00.000Z')),
    });
    const changes: DiskReport[] = [];
    watch.onChange((report) => changes.push(report));
    expect(watch.report()).toBeNull();
    expect(await watch.check()).toMatchObject({ state: 'ok', freeBytes: 5000 });
    free['/media'] = 300;
    expect(await watch.check()).toMatchObject({
      state: 'full',
      freeBytes: 300,
      volumes: [
        { name: 'data', freeBytes: 5000 },
        { name: 'media', freeBytes: 300 },
      ],
    });
    free['/media'] = new Error('EIO');
    free['/data'] = new Error('EIO');
    expect(await watch.check()).toMatchObject({ state: 'full', freeBytes: null });
    free['/media'] = 9000;
    free['/data'] = 9000;
    await watch.check();
    expect(changes.map((c) => c.state)).toEqual(['full', 'ok']);
  });

  it('counts as full while a write failed, whatever the space says, until one succeeds', async () => {
    const watch = new DiskWatch({
      volumes: [{ name: 'data', path: '/data' }],
      freeSpace: async () => ({ freeBytes: 5000, totalBytes: 10_000 }),
      ...thresholds,
      clock: new ManualClock(new Date('2026-11-21T09:00:00.000Z')),
    });
    await watch.check();
    const states: string[] = [];
    watch.onChange((report) => states.push(report.state));
    watch.noteWriteFailure('SQLITE_FULL: database or disk is full');
    expect(watch.state).toBe('full');
    await watch.check();
    expect(watch.report()).toMatchObject({
      state: 'full',
      writeFailure: 'SQLITE_FULL: database or disk is full',
    });
    watch.noteWriteSuccess();
    expect(watch.state).toBe('ok');
    expect(states).toEqual(['full', 'ok']);
  });

  it('reads a real volume with fs.statfs', async () => {
    const space = await systemFreeSpace(process.cwd());
    expect(space.totalBytes).toBeGreaterThan(0);
    expect(space.freeBytes).toBeGreaterThan(0);
    expect(space.freeBytes).toBeLessThanOrEqual(space.totalBytes);
  });
});
