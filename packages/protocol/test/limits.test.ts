import {
  LIMITS,
  PLAY_ID_PATTERN,
  POP_SCHEMA,
  RECORD_FLAGS,
  RECORD_KINDS,
  REFUSAL_REASONS,
  REJECT_CODES,
  SCREEN_POWER,
  SHA256_HEX_PATTERN,
  SLOTS,
  SRC_ID_PATTERN,
} from '@ooh/protocol';
import { expect, test } from 'vitest';

test('every number of the spec limits table', () => {
  expect(LIMITS).toEqual({
    advertiserNameMaxChars: 300,
    advertiserBinDigits: 12,
    operatorStructuresMax: 200,
    agencyStructuresMax: 2000,
    lookupHashesMax: 500,
    telemetryBodyMaxBytes: 1_000_000,
    telemetryEventsMax: 1000,
    agentBatchesPerMinute: 10,
    agentBurst: 3,
    agentMinIntervalSeconds: 10,
    agentTsToleranceSeconds: 300,
    cmsRecordsMax: 10_000,
    cmsWireMaxBytes: 4_000_000,
    cmsInflatedMaxBytes: 16_000_000,
    cmsInflateRatioMax: 20,
    cmsBatchesPerSecondPerInstallation: 2,
    cmsInstallationBurst: 10,
    cmsCallsPerSecondPerKey: 10,
    cmsKeyBurst: 30,
    cmsRecordsPerHourPerOrganisation: 2_000_000,
    playMinDurationMs: 1000,
    idMaxChars: 64,
    renewalMaxDaysLeft: 60,
    renewalOldCertGraceHours: 24,
    renewalForceGrantHours: 24,
    selfRenewDaysLeft: 30,
    cmsKeyRotationGraceHours: 24,
    certificateValidityYears: 1,
    openDataMinOperators: 3,
    openDataMinAdvertisers: 3,
    openDataMaxPartySharePct: 70,
    openDataLagMonths: 1,
    futureToleranceSeconds: 300,
    tooOldDays: 90,
    declaredBandPct: 30,
    recordObjectMaxDepth: 16,
    recordObjectMaxBytes: 16_384,
  });
  expect(Object.isFrozen(LIMITS)).toBe(true);
});

test('patterns of the spec', () => {
  const playId = new RegExp(PLAY_ID_PATTERN);
  expect(playId.test('Ab0_-')).toBe(true);
  expect(playId.test('a.b')).toBe(false);
  expect(playId.test('')).toBe(false);
  const srcId = new RegExp(SRC_ID_PATTERN);
  expect(srcId.test('a.b:c-d_e')).toBe(true);
  expect(srcId.test('x'.repeat(64))).toBe(true);
  expect(srcId.test('x'.repeat(65))).toBe(false);
  expect(srcId.test('a b')).toBe(false);
  const sha = new RegExp(SHA256_HEX_PATTERN);
  expect(sha.test('0'.repeat(64))).toBe(true);
  expect(sha.test('A'.repeat(64))).toBe(false);
  expect(sha.test('0'.repeat(65))).toBe(false);
});

test('vocabulary of DESIGN.md §5 and the record table', () => {
  expect(POP_SCHEMA).toBe('service.pop/1');
  expect(REFUSAL_REASONS).toEqual([
    'invalid_record',
    'kind_not_allowed',
    'player_unknown',
    'time_in_future',
    'too_old',
    'too_short',
    'end_before_start',
    'approval_missing',
    'play_id_counted',
  ]);
  expect(RECORD_FLAGS).toEqual([
    'structure_mismatch',
    'approval_unknown',
    'approval_not_valid_on_day',
    'approval_not_for_structure',
    'approval_revoked',
    'media_mismatch',
    'screen_off',
    'timing_missing',
    'timing_mismatch',
  ]);
  expect(RECORD_KINDS).toEqual(['play', 'reject', 'mode_change', 'tamper']);
  expect(REJECT_CODES).toEqual([
    'NO_SIGNATURE',
    'BAD_SIGNATURE',
    'HASH_MISMATCH',
    'EXPIRED_APPROVAL',
    'REVOKED',
  ]);
  expect(SLOTS).toEqual(['gov', 'emergency']);
  expect(SCREEN_POWER).toEqual(['on', 'off', 'unknown']);
});
