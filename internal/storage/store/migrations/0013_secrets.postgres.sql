-- Secrets of a workspace (user '') or of one user of it, their values sealed
-- under the vault's master key; the key is never stored here. And the
-- vault's key check. See 0013_secrets.sqlite.sql.
CREATE TABLE secrets (
    workspace   TEXT    NOT NULL,
    "user"      TEXT    NOT NULL DEFAULT '', -- '': the whole workspace's
    name        TEXT    NOT NULL,
    description TEXT    NOT NULL DEFAULT '',
    inject      TEXT    NOT NULL DEFAULT 'env', -- env or proxy
    hosts       TEXT    NOT NULL DEFAULT '[]', -- JSON array; proxy only
    query       BOOLEAN NOT NULL DEFAULT false, -- proxy only: swapped in query strings too
    placeholder TEXT    NOT NULL DEFAULT '', -- proxy only; kept across updates
    sealed      BYTEA   NOT NULL,
    created_at  BIGINT  NOT NULL,
    updated_at  BIGINT  NOT NULL,
    PRIMARY KEY (workspace, "user", name)
);
CREATE TABLE vault (
    id        INTEGER PRIMARY KEY CHECK (id = 1),
    key_check BYTEA   NOT NULL
);
