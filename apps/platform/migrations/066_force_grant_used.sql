-- A force-renewal grant allows one forced renewal (issue "Trust under attack", item 6: "One force-renewal grant
-- allows any number of forced renewals for 24 hours: a grant is used up by the renewal it allowed"). The renewal
-- that uses it records when and which certificate it issued; a used grant allows nothing more.
ALTER TABLE device_force_renewal_grants
  ADD COLUMN used_at timestamptz,
  ADD COLUMN used_for_serial text,
  ADD CHECK ((used_at IS NULL) = (used_for_serial IS NULL));
