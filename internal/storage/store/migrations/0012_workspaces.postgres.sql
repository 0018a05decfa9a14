-- Workspaces (tenants), their quotas and sandbox time per UTC day; who
-- a sandbox and a process are for; keys unique per workspace; the audit
-- log. See 0012_workspaces.sqlite.sql.
CREATE TABLE workspaces (
    name       TEXT PRIMARY KEY,
    quota      TEXT   NOT NULL DEFAULT '{}',
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE TABLE workspace_usage (
    workspace TEXT             NOT NULL,
    day       TEXT             NOT NULL, -- UTC date, 2006-01-02
    seconds   DOUBLE PRECISION NOT NULL DEFAULT 0,
    PRIMARY KEY (workspace, day)
);
ALTER TABLE api_keys ADD COLUMN workspace TEXT NOT NULL DEFAULT 'default';
ALTER TABLE sandboxes ADD COLUMN workspace TEXT NOT NULL DEFAULT 'default';
ALTER TABLE sandboxes ADD COLUMN owner_user TEXT NOT NULL DEFAULT '';
ALTER TABLE sandboxes ADD COLUMN secrets TEXT;
ALTER TABLE processes ADD COLUMN for_user TEXT NOT NULL DEFAULT '';
ALTER TABLE processes ADD COLUMN stdin BOOLEAN NOT NULL DEFAULT false;
DROP INDEX sandboxes_key;
CREATE UNIQUE INDEX sandboxes_key ON sandboxes (workspace, key) WHERE key IS NOT NULL;
CREATE TABLE audit (
    id        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at        BIGINT  NOT NULL,
    key_name  TEXT    NOT NULL DEFAULT '',
    workspace TEXT    NOT NULL DEFAULT '',
    "user"    TEXT    NOT NULL DEFAULT '',
    action    TEXT    NOT NULL,
    object    TEXT    NOT NULL DEFAULT '',
    status    INTEGER NOT NULL,
    code      TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX audit_workspace ON audit (workspace, id);
-- Append-only: a statement trigger, so that TRUNCATE, and a change that
-- matches no row, are refused too.
CREATE FUNCTION audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the audit log is append-only';
END
$$;
CREATE TRIGGER audit_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON audit
    FOR EACH STATEMENT EXECUTE FUNCTION audit_append_only();
INSERT INTO workspaces (name, created_at, updated_at)
    SELECT 'default', floor(extract(epoch FROM now()))::bigint * 1000000000, floor(extract(epoch FROM now()))::bigint * 1000000000;
