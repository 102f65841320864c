import type { Database } from 'better-sqlite3';

/** Small named values kept in the agent's database across restarts (JSON-encoded). */
export class AgentState {
  constructor(private readonly db: Database) {}

  get<T>(key: string): T | undefined {
    const row = this.db
      .prepare<[string], { value: string }>('SELECT value FROM agent_state WHERE key = ?')
      .get(key);
    return row ? (JSON.parse(row.value) as T) : undefined;
  }

  set(key: string, value: unknown): void {
    this.db
      .prepare(
        'INSERT INTO agent_state (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value',
      )
      .run(key, JSON.stringify(value));
  }

  delete(key: string): void {
    this.db.prepare('DELETE FROM agent_state WHERE key = ?').run(key);
  }
}
