-- Console users and sessions (issue "The console"; spec Authentication: "API key in the Authorization header
-- (Bearer scheme), or a console session"). apps/platform/console/README.md describes the rules.

-- People who sign in to the console: email + password, one organisation each. Created by the authority.
CREATE TABLE console_users (
  id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  organisation_id  uuid NOT NULL REFERENCES organisations (id),
  -- Stored lower-case, so uniqueness ignores case.
  email            text NOT NULL UNIQUE CHECK (email = lower(email) AND length(email) BETWEEN 3 AND 254),
  -- 'scrypt$<N>$<r>$<p>$<salt, base64>$<hash, base64>': the parameters travel with each hash.
  password_hash    text NOT NULL CHECK (password_hash LIKE 'scrypt$%'),
  role             text NOT NULL CHECK (role IN ('admin', 'member')),
  created_at       timestamptz NOT NULL,
  disabled_at      timestamptz
);
CREATE INDEX console_users_organisation ON console_users (organisation_id, email);

-- A signed-in browser. id is the SHA-256 (hex) of the random token in the cookie: the token itself is never stored.
CREATE TABLE console_sessions (
  id            text PRIMARY KEY CHECK (id ~ '^[0-9a-f]{64}$'),
  user_id       uuid NOT NULL REFERENCES console_users (id) ON DELETE CASCADE,
  created_at    timestamptz NOT NULL,
  -- Idle timeout: a session unused for longer than the configured idle time answers 401 session_expired.
  last_seen_at  timestamptz NOT NULL,
  -- Absolute end, whatever the activity.
  expires_at    timestamptz NOT NULL,
  -- Unsafe methods with the session cookie must carry this in X-CSRF-Token.
  csrf_token    text NOT NULL,
  CHECK (expires_at > created_at)
);
CREATE INDEX console_sessions_user ON console_sessions (user_id);
CREATE INDEX console_sessions_expiry ON console_sessions (expires_at);

-- Failed sign-ins, for the login rate limit (per email and per client address), kept in PostgreSQL so that every
-- platform instance counts the same failures (DESIGN.md section 2). subject: 'email:<address>' or 'ip:<address>'.
CREATE TABLE console_login_failures (
  id         bigserial PRIMARY KEY,
  subject    text NOT NULL,
  failed_at  timestamptz NOT NULL
);
CREATE INDEX console_login_failures_subject ON console_login_failures (subject, failed_at);
