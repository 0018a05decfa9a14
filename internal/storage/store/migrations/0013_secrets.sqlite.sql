-- Secrets of a workspace (user '') or of one user of it, their values sealed
-- under the vault's master key (AES-256-GCM: nonce, then ciphertext); the
-- key is never stored here.
CREATE TABLE secrets (
    workspace   TEXT    NOT NULL,
    user        TEXT    NOT NULL DEFAULT '', -- '': the whole workspace's
    name        TEXT    NOT NULL,
    description TEXT    NOT NULL DEFAULT '',
    inject      TEXT    NOT NULL DEFAULT 'env', -- env or proxy
    hosts       TEXT    NOT NULL DEFAULT '[]', -- JSON array; proxy only
    query       INTEGER NOT NULL DEFAULT 0, -- proxy only: swapped in query strings too
    placeholder TEXT    NOT NULL DEFAULT '', -- proxy only; kept across updates
    sealed      BLOB    NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (workspace, user, name)
);

-- The vault's key check: a known constant sealed under the master key, so
-- that a wrong key is told at start even when there is no secret yet.
CREATE TABLE vault (
    id        INTEGER PRIMARY KEY CHECK (id = 1),
    key_check BLOB    NOT NULL
);
