import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { PlatformConfig } from '../config.js';
import { type DeviceCa, loadDeviceCa } from './ca.js';
import { type DeviceIdentitySettings, loadDeviceIdentitySettings } from './settings.js';

/** A proxied client certificate's chain verified lately (authenticate.ts). */
export interface VerifiedChain {
  serial: string;
  /** The window in which every certificate of the chain is valid: the verification holds inside it. */
  from: number;
  until: number;
}

/**
 * What one platform keeps of its device identity between requests: its settings and its device CA, loaded once on
 * first need, and what authenticate.ts remembers of the certificates it has checked. It lives on the platform's
 * context (ctx.caches.devices), so two platforms in one process, each with its own CA, never see each other's
 * entries; the platform's close() empties it.
 */
export class DeviceCaches {
  /** Chains passed by a TLS-terminating proxy and verified, by the SHA-256 of the leaf's DER (authenticate.ts). */
  readonly verifiedChains = new Map<string, VerifiedChain>();
  /** Serials of client certificates seen lately, by the SHA-256 of their DER (authenticate.ts). */
  readonly serials = new Map<string, string>();
  #settings: DeviceIdentitySettings | null = null;
  #ca: Promise<DeviceCa> | null = null;

  constructor(private readonly platform: { config: PlatformConfig; clock: Clock; log: Logger }) {}

  /** The settings of this platform: fixed by useSettings (tests), else read once from its configuration. */
  settings(): DeviceIdentitySettings {
    this.#settings ??= loadDeviceIdentitySettings(
      { dataDir: this.platform.config.dataDir, publicDevicesUrl: this.platform.config.publicUrls.devices },
      this.platform.config.settings,
    );
    return this.#settings;
  }

  /** Fixes the settings before the platform's servers are built (tests use this instead of the environment). */
  useSettings(settings: DeviceIdentitySettings): void {
    this.#settings = settings;
  }

  /** The device CA of this platform, loaded (or created) once, on first need. */
  ca(): Promise<DeviceCa> {
    if (!this.#ca) {
      const loading = loadDeviceCa(this.settings(), this.platform.clock.now(), this.platform.log);
      this.#ca = loading;
      // A failed load is retried on the next need rather than remembered.
      loading.catch(() => {
        if (this.#ca === loading) this.#ca = null;
      });
    }
    return this.#ca;
  }

  /** Whether anything is held (close() leaves nothing: tests check it). */
  get empty(): boolean {
    return (
      this.#settings === null &&
      this.#ca === null &&
      this.verifiedChains.size === 0 &&
      this.serials.size === 0
    );
  }

  clear(): void {
    this.#settings = null;
    this.#ca = null;
    this.verifiedChains.clear();
    this.serials.clear();
  }
}
