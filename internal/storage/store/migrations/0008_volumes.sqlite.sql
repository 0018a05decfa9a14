-- Named persistent volumes, and the volumes each sandbox mounts (a JSON
-- array of {name, path, access}).
CREATE TABLE volumes (
    name       TEXT PRIMARY KEY,
    created_at INTEGER NOT NULL
);
ALTER TABLE sandboxes ADD COLUMN volumes TEXT NOT NULL DEFAULT '[]';
