import { type Clock, systemClock } from '../clock.js';
import { AgentError } from '../errors.js';
import type { ScreenPower } from '../log/records.js';

export type TamperState = 'open' | 'closed' | 'unknown';

/**
 * The one small interface through which the agent reaches the display hardware (DESIGN.md §9: "screen power,
 * tamper switch, clock"). `hardware-sim` implements it for tests and fleets; a real player implements it for
 * its board.
 */
export interface Hardware {
  /** The board's clock (RTC / system time). The agent corrects it by a bounded offset from the platform. */
  readonly clock: Clock;
  /**
   * A steady clock (ms, arbitrary origin) that does not move when the board clock is set; default
   * `performance.now()`. A simulator whose time is virtual must give its own.
   */
  monotonicMs?(): number;
  screenPower(): ScreenPower;
  tamper(): TamperState;
  onScreenPowerChange(listener: (power: ScreenPower) => void): () => void;
  onTamperChange(listener: (state: TamperState) => void): () => void;
  close?(): Promise<void>;
}

/**
 * The real-board implementation. No board is named yet, so it reads nothing: screen power and tamper are
 * `unknown` and never change, and the clock is the system clock. Naming a board that has no driver here is
 * an error rather than a silent stub.
 */
export function createBoardHardware(board?: string): Hardware {
  if (board !== undefined && board !== '' && board !== 'none') {
    throw new AgentError('unsupported_board', `no hardware driver for board "${board}"`);
  }
  return {
    clock: systemClock,
    screenPower: () => 'unknown',
    tamper: () => 'unknown',
    onScreenPowerChange: () => () => {},
    onTamperChange: () => () => {},
  };
}
