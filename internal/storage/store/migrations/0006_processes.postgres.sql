-- Background processes started through the API: what to start again after a
-- resume. Their env may hold secrets, as a sandbox's does. "user" is
-- quoted: a reserved word in PostgreSQL.
CREATE TABLE processes (
    sandbox_id TEXT    NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE,
    name       TEXT    NOT NULL,
    argv       TEXT    NOT NULL, -- JSON array
    cwd        TEXT    NOT NULL DEFAULT '',
    "user"     TEXT    NOT NULL DEFAULT '',
    env        TEXT    NOT NULL DEFAULT '{}',
    port       INTEGER NOT NULL DEFAULT 0,
    running    BOOLEAN NOT NULL DEFAULT true, -- ran when last seen: a resume starts it again
    created_at BIGINT  NOT NULL,
    PRIMARY KEY (sandbox_id, name)
);
