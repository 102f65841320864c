/** Stable codes of every error the agent core raises (STYLE.md: errors are values with stable codes). */
export type AgentErrorCode =
  | 'config_invalid'
  | 'config_missing'
  | 'database_newer'
  /** A read-only open (`agent status`) of a play log the agent has not upgraded yet, or of no play log at all. */
  | 'database_older'
  | 'database_missing'
  | 'database_invalid'
  | 'identity_missing'
  | 'identity_invalid'
  | 'key_exists'
  /** `agent install`: a file missing or not the console's; the command line is wrong (exit 2). */
  | 'install_invalid'
  /** `agent install`: a check failed (another key, expired, wrong chain, other device id); nothing written (exit 1). */
  | 'install_refused'
  | 'unsupported_board'
  | 'record_invalid'
  | 'batch_invalid'
  | 'answer_invalid'
  | 'revocation_list_invalid'
  | 'renewal_failed'
  | 'not_running';

export class AgentError extends Error {
  readonly code: AgentErrorCode;

  constructor(code: AgentErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'AgentError';
    this.code = code;
  }
}
