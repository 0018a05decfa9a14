-- The size limit of each sandbox's writable layer.
ALTER TABLE sandboxes ADD COLUMN disk_mb BIGINT NOT NULL DEFAULT 2048;
