-- When a sandbox's max lifetime ends (unix nanoseconds): it is deleted then.
-- Sandboxes from before get the default of 30 days from their creation.
ALTER TABLE sandboxes ADD COLUMN expires_at BIGINT NOT NULL DEFAULT 0;
UPDATE sandboxes SET expires_at = created_at + 30::bigint * 24 * 3600 * 1000000000;
