export {
  createProgress,
  type Env,
  formatDuration,
  inCi,
  type PhaseOptions,
  type Progress,
  PROGRESS_ENV,
  PROGRESS_FLAGS,
  type ProgressMode,
  progressMode,
  type ProgressOptions,
  progressShown,
  type ProgressStream,
} from './progress.js';
export { enterTypedInDirectory } from './typed-in.js';
