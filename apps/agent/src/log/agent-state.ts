import type { Database } from 'better-sqlite3';
import { prepared } from './statements.js';

/** Small named values kept in the agent's database across restarts (JSON-encoded). */
export class AgentState {
  constructor(private readonly db: Database) {}

  get<T>(key: string): T | undefined {
    const row = prepared<[string], { value: string }>(
      this.db,
      'SELECT value FROM agent_state WHERE key = ?',
    ).get(key);
    return row ? (JSON.parse(row.value) as T) : undefined;
  }

  set(key: string, value: unknown): void {
    prepared(
      this.db,
      'INSERT INTO agent_state (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value',
    ).run(key, JSON.stringify(value));
  }

  delete(key: string): void {
    prepared(this.db, 'DELETE FROM agent_state WHERE key = ?').run(key);
  }
}
