export { CSRF_HEADER, SESSION_COOKIE } from './cookies.js';
export { hashPassword, verifyPassword } from './password.js';
export { createSessionsFeature, PASSWORD_MIN_CHARS, sessionsFeature } from './routes.js';
export { CONSOLE_ROLES, type ConsoleRole, sessionScopes } from './scopes.js';
export { consoleSessionResolver } from './session.js';
export {
  DEFAULT_SESSION_SETTINGS,
  SESSION_SETTINGS_ENV,
  type SessionSettings,
  sessionSettings,
} from './settings.js';
