-- API keys that can be found, expire and be revoked (issue "Trust under attack", item 6: "API keys can be neither
-- listed nor found by id ... Add listing (id, name, organisation, scopes, created, last used), an optional expiry,
-- revocation in the console"). A key past expires_at answers 401 invalid_api_key like a revoked one. last_used_at
-- is written at most once a minute per key and platform process, never on the hot path of every call.
ALTER TABLE api_keys
  ADD COLUMN expires_at timestamptz,
  ADD COLUMN last_used_at timestamptz,
  ADD CHECK (expires_at IS NULL OR expires_at > created_at);
