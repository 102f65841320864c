import { expect } from 'vitest';
import { type Fleet, formatReconciliation, type Reconciliation } from '../../hardware-sim/src/index.js';

/** The platform behind the simulator's proxy: the devices host's mutual TLS is terminated by the proxy. */
export const BEHIND_PROXY_ENV = {
  DEVICES_TLS_TERMINATION: 'proxy',
  DEVICES_CLIENT_CERT_HEADER: 'x-client-cert',
  DEVICES_TRUSTED_PROXIES: '127.0.0.1',
};

/** Halts the screens, lets every queue drain, reconciles, prints the report and asserts zero loss and no double count. */
export async function drainAndReconcile(
  fleet: Fleet,
  options: { allowedRefusals?: number; drainMs?: number } = {},
): Promise<Reconciliation> {
  const drained = await fleet.drain(options.drainMs !== undefined ? { maxMs: options.drainMs } : {});
  const result = await fleet.reconcile(
    options.allowedRefusals !== undefined ? { allowedRefusals: options.allowedRefusals } : {},
  );
  console.log(formatReconciliation(result));
  expect(drained).toBe(true);
  expect(result.problems).toEqual([]);
  expect(result.totals.missing).toBe(0);
  expect(result.totals.double).toBe(0);
  expect(result.totals.queued).toBe(0);
  return result;
}

export function timer(): (label: string) => void {
  let last = performance.now();
  return (label) => {
    const now = performance.now();
    console.log(`${label}: ${((now - last) / 1000).toFixed(1)} s`);
    last = now;
  };
}
