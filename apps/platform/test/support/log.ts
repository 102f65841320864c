import { Writable } from 'node:stream';
import pino, { type Logger } from 'pino';

/** A pino logger at info whose JSON lines are kept, parsed, in `lines`. */
export function capturedLog(): { log: Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const out = new Writable({
    write(chunk, _encoding, done) {
      for (const line of String(chunk).trim().split('\n'))
        lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { log: pino({ level: 'info' }, out), lines };
}
