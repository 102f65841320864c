import { alertSettings } from './alerts/settings.js';
import { approvalSettings } from './approvals/settings.js';
import { authoritySource } from './authority/pki.js';
import { targetPolicy } from './city-events/targets.js';
import { ConfigError, type PlatformConfig } from './config.js';
import { DeviceSettingsError, loadDeviceIdentitySettings } from './devices/settings.js';
import { ledgerSettings } from './ledger/settings.js';
import { tsaSettings } from './ledger/timestamp.js';
import { sessionSettings } from './sessions/settings.js';

/**
 * Reads every feature's settings from the configuration once, before anything starts, so that each bad value
 * is named at start (all of them together, as loadConfig does for its own) rather than when a feature first
 * needs it. Throws ConfigError.
 */
export function checkFeatureSettings(config: PlatformConfig): void {
  const problems = featureSettingProblems(config);
  if (problems.length > 0) throw new ConfigError(problems);
}

/** Every bad value of every feature's settings (loadConfig's alsoCheck), none thrown. */
export function featureSettingProblems(config: PlatformConfig): string[] {
  const problems: string[] = [];
  const check = (read: () => unknown) => {
    try {
      read();
    } catch (error) {
      if (error instanceof DeviceSettingsError) problems.push(...error.problems);
      else if (error instanceof ConfigError) problems.push(...error.problems);
      else problems.push(error instanceof Error ? error.message : String(error));
    }
  };
  check(() => approvalSettings(config.settings));
  check(() => sessionSettings(config.settings));
  check(() => targetPolicy(config.settings));
  check(() => alertSettings(config.settings));
  check(() => authoritySource(config.dataDir, config.settings));
  check(() => tsaSettings(config));
  check(() => ledgerSettings(config));
  check(() =>
    loadDeviceIdentitySettings(
      { dataDir: config.dataDir, publicDevicesUrl: config.publicUrls.devices },
      config.settings,
    ),
  );
  return problems;
}
