import type { PlayRequest, ScreenPower, TamperState } from '@ooh/agent';
import { describe, expect, test } from 'vitest';
import { type DisplayedPlay, SimDisplay } from '../src/hardware/sim-display.js';
import { SimHardware } from '../src/hardware/sim-hardware.js';
import { VirtualClock } from '../src/time/virtual-clock.js';

const T0 = Date.UTC(2026, 0, 15, 4, 0, 0);

describe('SimHardware', () => {
  test('the board clock reads virtual time plus a settable skew, and jumps', () => {
    const clock = new VirtualClock(T0);
    const hardware = new SimHardware(() => clock.now(), { skewMs: -600_000 });
    expect(hardware.clock.now().getTime()).toBe(T0 - 600_000);
    clock.advanceTo(T0 + 1000);
    expect(hardware.clock.now().getTime()).toBe(T0 + 1000 - 600_000);
    hardware.jump(600_000);
    expect(hardware.clock.now().getTime()).toBe(T0 + 1000);
    hardware.setBoardTime(new Date('1970-01-01T00:00:00Z'));
    expect(hardware.clock.now().toISOString()).toBe('1970-01-01T00:00:00.000Z');
    hardware.setSkew(0);
    expect(hardware.skewMs).toBe(0);
  });

  test('screen power and the tamper switch announce each change once', () => {
    const hardware = new SimHardware(() => T0);
    const power: ScreenPower[] = [];
    const tamper: TamperState[] = [];
    const offPower = hardware.onScreenPowerChange((p) => power.push(p));
    hardware.onTamperChange((t) => tamper.push(t));
    expect(hardware.screenPower()).toBe('on');
    expect(hardware.tamper()).toBe('closed');
    hardware.setScreenPower('off');
    hardware.setScreenPower('off');
    hardware.setTamper('open');
    offPower();
    hardware.setScreenPower('on');
    expect(power).toEqual(['off']);
    expect(tamper).toEqual(['open']);
    expect(hardware.screenPower()).toBe('on');
  });
});

describe('SimDisplay', () => {
  const request = (durationMs: number | null): PlayRequest => ({
    playId: `play-${durationMs}`,
    path: '/media/a.png',
    relativePath: 'a.png',
    kind: 'image',
    sha256: 'a'.repeat(64),
    durationMs,
  });

  function setUp() {
    const clock = new VirtualClock(T0);
    const hardware = new SimHardware(() => clock.now());
    const shown: DisplayedPlay[] = [];
    const display = new SimDisplay({
      player: 'P1',
      sleep: clock.sleepFor('P1'),
      clock: () => hardware.clock,
      screenPower: () => hardware.screenPower(),
      onPlayed: (play) => shown.push(play),
    });
    return { clock, hardware, shown, display };
  }

  test('a play lasts its duration on the virtual clock and is reported with the instants it was on screen', async () => {
    const { clock, hardware, shown, display } = setUp();
    const playing = display.play(request(15_000), new AbortController().signal);
    await new Promise((resolve) => setImmediate(resolve));
    hardware.setScreenPower('off');
    clock.advanceTo(T0 + 15_000);
    const report = await playing;
    expect(report).toEqual({
      outcome: 'played',
      start: new Date(T0),
      end: new Date(T0 + 15_000),
      interrupted: false,
    });
    expect(shown).toMatchObject([
      { player: 'P1', playId: 'play-15000', durationMs: 15_000, screen: 'unknown' },
    ]);
    expect(display.plays).toBe(1);
  });

  test('a sleep that ends a little early is waited out; a board clock set back is not', async () => {
    let board = T0;
    const shown: DisplayedPlay[] = [];
    const sleeps: number[] = [];
    const display = new SimDisplay({
      player: 'P1',
      // A timer that fires 1 ms early the first time, as Node's may.
      sleep: async (ms) => {
        sleeps.push(ms);
        board += sleeps.length === 1 ? ms - 1 : ms;
      },
      clock: () => ({ now: () => new Date(board) }),
      screenPower: () => 'on',
      onPlayed: (play) => shown.push(play),
    });
    expect(await display.play(request(1000), new AbortController().signal)).toMatchObject({
      start: new Date(T0),
      end: new Date(T0 + 1000),
    });
    expect(sleeps).toEqual([1000, 1]);
    expect(shown[0]!.durationMs).toBe(1000);

    // The board clock set back 10 minutes during the play: no ten-minute wait.
    sleeps.length = 0;
    const start = board;
    const jumpy = new SimDisplay({
      player: 'P2',
      sleep: async (ms) => {
        sleeps.push(ms);
        board += ms - 600_000;
      },
      clock: () => ({ now: () => new Date(board) }),
      screenPower: () => 'on',
      onPlayed: () => {},
    });
    const report = await jumpy.play(request(1000), new AbortController().signal);
    expect(sleeps).toEqual([1000]);
    expect(report).toMatchObject({
      outcome: 'played',
      start: new Date(start),
      end: new Date(start + 1000 - 600_000),
    });
  });

  test('an abort takes the file off the screen early; failNext and halt show nothing', async () => {
    const { clock, shown, display } = setUp();
    const controller = new AbortController();
    const playing = display.play(request(60_000), controller.signal);
    clock.advanceTo(T0 + 5000);
    controller.abort();
    expect(await playing).toMatchObject({ outcome: 'played', interrupted: true, end: new Date(T0 + 5000) });

    display.failNext();
    expect(await display.play(request(1000), new AbortController().signal)).toMatchObject({
      outcome: 'failed',
    });

    display.halt();
    const stop = new AbortController();
    const halted = display.play(request(1000), stop.signal);
    clock.advanceTo(T0 + 48 * 3_600_000);
    await new Promise((resolve) => setImmediate(resolve));
    stop.abort();
    expect(await halted).toMatchObject({ outcome: 'failed' });
    expect(shown).toHaveLength(1);
  });
});
