export {
  BUILD_COMMAND,
  CONSOLE_DIST_ENV,
  type ConsoleWebOptions,
  consoleWebFeature,
  createConsoleWebFeature,
  DEFAULT_CONSOLE_DIST,
} from './routes.js';
