-- Workspaces (tenants). Every key but the daemon's own acts in one, and
-- what it makes belongs to it. What existed before belongs to "default",
-- which is what every key saw then. A workspace's quota is a JSON object
-- (store.Quota); its sandbox time per UTC day counts towards the quota of
-- sandbox-hours.
CREATE TABLE workspaces (
    name       TEXT PRIMARY KEY,
    quota      TEXT    NOT NULL DEFAULT '{}',
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE TABLE workspace_usage (
    workspace TEXT    NOT NULL,
    day       TEXT    NOT NULL, -- UTC date, 2006-01-02
    seconds   REAL    NOT NULL DEFAULT 0,
    PRIMARY KEY (workspace, day)
);
ALTER TABLE api_keys ADD COLUMN workspace TEXT NOT NULL DEFAULT 'default';
ALTER TABLE sandboxes ADD COLUMN workspace TEXT NOT NULL DEFAULT 'default';
-- The product's user a sandbox was made for: whose personal secrets it
-- gets. And the secrets' names it is narrowed to (a JSON array), or NULL
-- for all of its workspace's.
ALTER TABLE sandboxes ADD COLUMN owner_user TEXT NOT NULL DEFAULT '';
ALTER TABLE sandboxes ADD COLUMN secrets TEXT;
-- The product's user a background process runs for: whose personal
-- secrets it gets at each start.
ALTER TABLE processes ADD COLUMN for_user TEXT NOT NULL DEFAULT '';
-- Whether a background process's stdin stays open for input (POST
-- …/processes/{name}/stdin), at each start.
ALTER TABLE processes ADD COLUMN stdin INTEGER NOT NULL DEFAULT 0;
-- A key names one sandbox in its workspace: two workspaces may use the
-- same key.
DROP INDEX sandboxes_key;
CREATE UNIQUE INDEX sandboxes_key ON sandboxes (workspace, key) WHERE key IS NOT NULL;
-- The audit log: who (key, workspace, user) did what to which object and
-- how it ended; append-only, never a secret's value or a file's content.
CREATE TABLE audit (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    at        INTEGER NOT NULL,
    key_name  TEXT    NOT NULL DEFAULT '',
    workspace TEXT    NOT NULL DEFAULT '',
    user      TEXT    NOT NULL DEFAULT '',
    action    TEXT    NOT NULL,
    object    TEXT    NOT NULL DEFAULT '',
    status    INTEGER NOT NULL,
    code      TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX audit_workspace ON audit (workspace, id);
CREATE TRIGGER audit_append_only_update BEFORE UPDATE ON audit
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
CREATE TRIGGER audit_append_only_delete BEFORE DELETE ON audit
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
INSERT INTO workspaces (name, created_at, updated_at)
    SELECT 'default', CAST(strftime('%s', 'now') AS INTEGER) * 1000000000, CAST(strftime('%s', 'now') AS INTEGER) * 1000000000;
