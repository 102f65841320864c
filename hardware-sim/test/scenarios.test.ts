import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, test } from 'vitest';
import {
  loadScenario,
  parseDuration,
  parseScenario,
  ScenarioError,
  selectPlayers,
} from '../src/scenario/load.js';
import { Scenario } from '../src/scenario/schema.js';

const DIR = fileURLToPath(new URL('../scenarios/', import.meta.url));
const files = readdirSync(DIR).filter((f) => f.endsWith('.json') && f !== 'scenario.schema.json');

describe('shipped scenarios', () => {
  test.each(files)('%s is valid', (file) => {
    const scenario = loadScenario(`${DIR}${file}`);
    expect(`${scenario.name}.json`).toBe(file);
  });

  test('scenario.schema.json is the schema the loader checks (regenerate: hardware-sim schema)', () => {
    expect(JSON.parse(readFileSync(`${DIR}scenario.schema.json`, 'utf8'))).toEqual(
      JSON.parse(JSON.stringify(Scenario)),
    );
  });
});

describe('scenario rules', () => {
  const base = {
    name: 'x',
    time: { duration: '2h' },
    fleet: { players: 4 },
    creatives: [{ name: 'a' }],
  };

  test('durations and player selectors', () => {
    expect(parseDuration('1d12h')).toBe(36 * 3_600_000);
    expect(parseDuration('90s')).toBe(90_000);
    expect(parseDuration('250ms')).toBe(250);
    expect(() => parseDuration('2 hours')).toThrow();
    expect(selectPlayers('all', 3)).toEqual([1, 2, 3]);
    expect(selectPlayers(2, 5)).toEqual([1, 2]);
    expect(selectPlayers('#2-#4', 5)).toEqual([2, 3, 4]);
    expect(selectPlayers(['#5', '#1', '#5'], 5)).toEqual([5, 1]);
    expect(() => selectPlayers('#6', 5)).toThrow(/does not exist/);
  });

  test('a selector that names nobody is refused, not silently empty or cut short', () => {
    expect(() => selectPlayers('#4-#2', 5)).toThrow(/not a player selector/);
    expect(() => selectPlayers(6, 5)).toThrow(/does not exist/);
    expect(selectPlayers(5, 5)).toEqual([1, 2, 3, 4, 5]);
  });

  test('a clock step set_to a date-time is checked by the loader alone (formats registered)', () => {
    const clock = (set_to: string) => ({
      ...base,
      steps: [{ at: '1h', action: 'clock', players: '#1', set_to }],
    });
    expect(parseScenario(clock('1970-01-01T00:00:00Z')).steps).toHaveLength(1);
    expect(() => parseScenario(clock('yesterday'))).toThrow(ScenarioError);
  });

  test('what the schema refuses: unknown fields, bad durations, unknown actions', () => {
    expect(() => parseScenario({ ...base, extra: true })).toThrow(ScenarioError);
    expect(() => parseScenario({ ...base, time: { duration: 'two hours' } })).toThrow(ScenarioError);
    expect(() => parseScenario({ ...base, steps: [{ at: '1h', action: 'explode' }] })).toThrow(ScenarioError);
  });

  test('what only the loader can tell: steps after the end, unknown creatives, faults the fleet cannot have', () => {
    const problems = (steps: unknown[], fleet: Record<string, unknown> = {}) => {
      try {
        parseScenario({ ...base, fleet: { ...base.fleet, ...fleet }, steps });
        return [];
      } catch (error) {
        return (error as ScenarioError).problems;
      }
    };
    expect(problems([{ at: '3h', action: 'revoke', creative: 'a' }])).toEqual([
      "/steps/0/at: after the scenario's end",
    ]);
    expect(problems([{ at: '1h', action: 'revoke', creative: 'b' }])).toEqual([
      '/steps/0/creative: no creative "b"',
    ]);
    expect(problems([{ at: '1h', action: 'power_cut', players: 'all' }])[0]).toContain('child-per-player');
    expect(
      problems([{ at: '1h', action: 'power_cut', players: 'all' }], { placement: 'child-per-player' }),
    ).toEqual([]);
    expect(problems([{ at: '1h', action: 'network', down: true }])[0]).toContain('network faults need');
    expect(problems([{ at: '1h', action: 'screen', players: '#9', power: 'off' }])[0]).toContain(
      '#9 does not exist',
    );
  });
});
