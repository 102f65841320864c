-- CMS installations, their keys (rotation with 24 hours of grace) and player mappings (spec: CMS batch rules 1 and 7).

CREATE TABLE cms_installations (
  id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  organisation_id  uuid NOT NULL REFERENCES organisations (id),
  name             text NOT NULL,
  kind             text NOT NULL,
  created_at       timestamptz NOT NULL
);
CREATE INDEX cms_installations_organisation ON cms_installations (organisation_id);

CREATE TABLE cms_keys (
  id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  installation_id  uuid NOT NULL REFERENCES cms_installations (id),
  public_key_spki  text NOT NULL,
  registered_at    timestamptz NOT NULL,
  -- Set when a newer key is registered; this key stays accepted until then + 24 hours.
  superseded_at    timestamptz
);
CREATE INDEX cms_keys_installation ON cms_keys (installation_id, registered_at DESC);

CREATE TABLE cms_players (
  installation_id  uuid NOT NULL REFERENCES cms_installations (id),
  external_id      text NOT NULL,
  structure_id     uuid NOT NULL REFERENCES structures (id),
  mapped_at        timestamptz NOT NULL,
  removed_at       timestamptz,
  PRIMARY KEY (installation_id, external_id)
);
