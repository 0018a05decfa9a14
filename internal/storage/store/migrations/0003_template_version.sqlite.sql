-- The version of its template a sandbox was made from: a template's older
-- versions stay on disk while a sandbox uses them. Sandboxes made before
-- templates had versions used the host template, which keeps its versions.
ALTER TABLE sandboxes ADD COLUMN template_version TEXT NOT NULL DEFAULT '';
