import { StartError } from '../start-errors.js';

/**
 * Why a backup or a restore stopped: one plain line for an operator, with a stable code for tests and scripts.
 * Exit status 2 for what the operator named wrongly (a target that exists, a data folder in use), 1 otherwise.
 */
export class BackupError extends StartError {
  constructor(
    readonly code:
      | 'target_exists'
      | 'partial_left'
      | 'target_inside_data'
      | 'no_data'
      | 'not_supported'
      | 'wal_missing'
      | 'not_a_backup'
      | 'incomplete_backup'
      | 'backup_corrupt'
      | 'backup_newer'
      | 'data_dir_not_empty'
      | 'restore_under_way'
      | 'database_mismatch'
      | 'database_unreachable'
      | 'advance_failed',
    message: string,
    options?: { exitCode?: 1 | 2; cause?: unknown },
  ) {
    super(message, options?.exitCode ?? 1, options?.cause === undefined ? {} : { cause: options.cause });
    this.name = 'BackupError';
  }
}
