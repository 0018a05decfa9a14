-- A sandbox's key: what get-or-create finds it by. At most one sandbox has
-- a key.
ALTER TABLE sandboxes ADD COLUMN key TEXT;
CREATE UNIQUE INDEX sandboxes_key ON sandboxes (key) WHERE key IS NOT NULL;
