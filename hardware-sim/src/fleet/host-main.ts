/**
 * The child process of a ChildHost: a LocalHost driven over IPC. Started by `fork` with the source condition and
 * tsx; never run by hand.
 */
import type { HostMessage, HostRequest } from './child-host.js';
import { LocalHost } from './host.js';

const send = (message: HostMessage) => {
  process.send?.(message);
};

const virtualStart = process.env['SIM_HOST_VIRTUAL_START'];
const fallback = process.env['SIM_HOST_FALLBACK_MS'];
const host = new LocalHost({
  name: process.env['SIM_HOST_NAME'] ?? `host-${process.pid}`,
  virtualStartMs: virtualStart ? Number(virtualStart) : null,
  ...(fallback ? { fallbackMs: Number(fallback) } : {}),
  onPlayed: (play) => send({ type: 'played', play }),
  onWarning: (message) => send({ type: 'warning', message }),
});

async function handle(request: HostRequest): Promise<unknown> {
  switch (request.op) {
    case 'add':
      return host.add(request.spec);
    case 'start':
      return host.start(request.player);
    case 'stop':
      return host.stop(request.player);
    case 'halt':
      return host.halt(request.player);
    case 'status':
      return host.status(request.player);
    case 'hardware':
      return host.hardware(request.player, request.change);
    case 'queues':
      return host.queues();
    case 'advance':
      return host.advanceTo(request.at);
    case 'close':
      await host.close();
      setImmediate(() => process.exit(0));
      return null;
  }
}

process.on('message', (request: HostRequest) => {
  handle(request).then(
    (value) => send({ type: 'reply', id: request.id, ok: true, value: value ?? null }),
    (error: unknown) =>
      send({ type: 'reply', id: request.id, ok: false, error: (error as Error).stack ?? String(error) }),
  );
});
// The parent going away is a power cut for us too.
process.on('disconnect', () => process.exit(0));
send({ type: 'ready' });
