-- Venue taxonomy and screen identifiers of a structure (issue 20 item 3).
--
-- venue_type_id: the OpenOOH Venue Taxonomy 1.2 enumeration id (data/openooh-venue-taxonomy-1.2.json), checked by the
-- platform against the shipped taxonomy (not a foreign key: the taxonomy is data read at startup, and a later
-- version only adds ids). Set once; a correction is allowed only while no submission or approval names the
-- structure (src/structures/identifiers.ts).
-- openooh_screen_id, geopath_spot_id: identifiers other systems give the screen. One screen is one active structure:
-- unique among structures not retired, so a structure retired and registered again keeps its screen's ids.
-- Existing rows get NULL in every new column: nothing is guessed from their format.
ALTER TABLE structures
  ADD COLUMN venue_type_id integer CHECK (venue_type_id BETWEEN 1 AND 99999),
  ADD COLUMN openooh_screen_id text CHECK (char_length(openooh_screen_id) BETWEEN 1 AND 128),
  ADD COLUMN geopath_spot_id text CHECK (geopath_spot_id ~ '^[0-9]{1,18}$');

CREATE UNIQUE INDEX structures_openooh_screen_id ON structures (openooh_screen_id)
  WHERE openooh_screen_id IS NOT NULL AND retired_at IS NULL;
CREATE UNIQUE INDEX structures_geopath_spot_id ON structures (geopath_spot_id)
  WHERE geopath_spot_id IS NOT NULL AND retired_at IS NULL;

-- The same rule in the database, for every writer: a venue type once set changes only while nothing names the
-- structure.
CREATE FUNCTION structures_venue_type_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF OLD.venue_type_id IS NOT NULL AND NEW.venue_type_id IS DISTINCT FROM OLD.venue_type_id AND (
       EXISTS (SELECT 1 FROM submission_structures WHERE structure_id = OLD.id)
    OR EXISTS (SELECT 1 FROM approval_structures WHERE structure_id = OLD.id)) THEN
    RAISE EXCEPTION 'venue_type_id of structure % is immutable: the structure is named by a submission or approval', OLD.id
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END $$;

CREATE TRIGGER structures_venue_type_immutable BEFORE UPDATE OF venue_type_id ON structures
  FOR EACH ROW EXECUTE FUNCTION structures_venue_type_immutable();
