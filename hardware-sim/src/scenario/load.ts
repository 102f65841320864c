import { readFileSync } from 'node:fs';
import { isDateTime } from '@ooh/protocol';
import { Value } from '@sinclair/typebox/value';
import { Scenario } from './schema.js';

export class ScenarioError extends Error {
  constructor(
    readonly file: string,
    readonly problems: string[],
  ) {
    super(`scenario ${file} is invalid:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ScenarioError';
  }
}

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** "1d12h" → ms. */
export function parseDuration(text: string): number {
  const parts = [...text.matchAll(/(\d+)(ms|s|m|h|d)/g)];
  if (parts.length === 0 || parts.map((p) => p[0]).join('') !== text)
    throw new Error(`not a duration: "${text}"`);
  return parts.reduce((sum, part) => sum + Number(part[1]) * UNIT_MS[part[2]!]!, 0);
}

/** Player numbers (1-based) a selector names, among `count` players. */
export function selectPlayers(selector: 'all' | number | string | string[], count: number): number[] {
  const all = Array.from({ length: count }, (_, i) => i + 1);
  if (selector === 'all') return all;
  // A count above the fleet, or a range backwards, would otherwise name fewer players (or none) in silence.
  if (typeof selector === 'number') {
    if (selector > count) throw new Error(`player #${selector} does not exist (1-${count})`);
    return all.slice(0, selector);
  }
  const numbers = (Array.isArray(selector) ? selector : [selector]).flatMap((item) => {
    const range = /^#(\d+)(?:-#(\d+))?$/.exec(item);
    if (!range) throw new Error(`not a player selector: "${item}"`);
    const from = Number(range[1]);
    const to = range[2] ? Number(range[2]) : from;
    if (to < from) throw new Error(`not a player selector: "${item}" (range backwards)`);
    return Array.from({ length: to - from + 1 }, (_, i) => from + i);
  });
  for (const n of numbers)
    if (n < 1 || n > count) throw new Error(`player #${n} does not exist (1-${count})`);
  return [...new Set(numbers)];
}

/** Reads and checks a scenario file (JSON) against the schema, and the things a schema cannot say. */
export function loadScenario(file: string): Scenario {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new ScenarioError(file, [`not readable JSON: ${(error as Error).message}`]);
  }
  return parseScenario(raw, file);
}

export function parseScenario(raw: unknown, file = '(scenario)'): Scenario {
  if (!Value.Check(Scenario, raw)) {
    const problems = [...Value.Errors(Scenario, raw)]
      .slice(0, 20)
      .map((e) => `${e.path || '/'}: ${e.message}`);
    throw new ScenarioError(file, problems);
  }
  const scenario = raw;
  const problems: string[] = [];
  // A wall time without an offset would be read in the zone of the machine running the simulator (DESIGN.md
  // section 8: Almaty days never depend on it), so the start is "now" or an instant.
  const start = scenario.time.start;
  if (start !== undefined && start !== 'now' && !isDateTime(start)) {
    problems.push(
      `/time/start: "now" or an RFC 3339 instant with Z or an offset (e.g. +05:00), not "${start}"`,
    );
  }
  const names = new Set(scenario.creatives.map((c) => c.name));
  const duration = parseDuration(scenario.time.duration);
  for (const [i, step] of (scenario.steps ?? []).entries()) {
    if (parseDuration(step.at) > duration) problems.push(`/steps/${i}/at: after the scenario's end`);
    if ('creative' in step && !names.has(step.creative))
      problems.push(`/steps/${i}/creative: no creative "${step.creative}"`);
    if ('players' in step) {
      try {
        selectPlayers(step.players, scenario.fleet.players);
      } catch (error) {
        problems.push(`/steps/${i}/players: ${(error as Error).message}`);
      }
    }
    if (step.action === 'power_cut' && scenario.fleet.placement !== 'child-per-player') {
      problems.push(`/steps/${i}: a power cut needs fleet.placement "child-per-player"`);
    }
    if (step.action === 'network' && (scenario.fleet.network ?? 'direct') === 'direct') {
      problems.push(`/steps/${i}: network faults need fleet.network "tunnel" or "terminate"`);
    }
  }
  if (problems.length > 0) throw new ScenarioError(file, problems);
  return scenario;
}
