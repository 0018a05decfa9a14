-- The version of its template a sandbox was made from.
ALTER TABLE sandboxes ADD COLUMN template_version TEXT NOT NULL DEFAULT '';
