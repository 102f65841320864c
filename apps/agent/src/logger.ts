/** The few logging calls the agent makes (pino-compatible: object first, message second). */
export interface Logger {
  info(fields: Record<string, unknown>, message: string): void;
  warn(fields: Record<string, unknown>, message: string): void;
  error(fields: Record<string, unknown>, message: string): void;
}

export const silentLogger: Logger = {
  info() {},
  warn() {},
  error() {},
};

/** JSON lines on a stream (stderr by default), one object per call. */
export function jsonLogger(write: (line: string) => void = (line) => process.stderr.write(line)): Logger {
  const emit = (level: string) => (fields: Record<string, unknown>, message: string) => {
    const safe: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(fields)) {
      safe[key] =
        value instanceof Error ? { message: value.message, code: (value as { code?: unknown }).code } : value;
    }
    write(`${JSON.stringify({ level, time: new Date().toISOString(), msg: message, ...safe })}\n`);
  };
  return { info: emit('info'), warn: emit('warn'), error: emit('error') };
}

/** Collects log lines in memory (tests and `agent status`). */
export function memoryLogger(): Logger & {
  lines: { level: string; message: string; fields: Record<string, unknown> }[];
} {
  const lines: { level: string; message: string; fields: Record<string, unknown> }[] = [];
  const push = (level: string) => (fields: Record<string, unknown>, message: string) => {
    lines.push({ level, message, fields });
  };
  return { lines, info: push('info'), warn: push('warn'), error: push('error') };
}
