-- The size limit of each sandbox's writable layer. Sandboxes made before
-- disks had a limit get the default's value for display; theirs is
-- unbounded until they are recreated.
ALTER TABLE sandboxes ADD COLUMN disk_mb INTEGER NOT NULL DEFAULT 2048;
