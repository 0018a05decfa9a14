CREATE TABLE sandboxes (
    id             TEXT PRIMARY KEY,
    template       TEXT    NOT NULL,
    backend        TEXT    NOT NULL,
    state          TEXT    NOT NULL,
    state_reason   TEXT    NOT NULL DEFAULT '',
    handle         BLOB,
    cpus           REAL    NOT NULL,
    memory_mb      INTEGER NOT NULL,
    pids           INTEGER NOT NULL,
    idle_timeout_s INTEGER NOT NULL,
    env            TEXT    NOT NULL DEFAULT '{}',
    metadata       TEXT    NOT NULL DEFAULT '{}',
    created_at     INTEGER NOT NULL, -- unix nanoseconds
    updated_at     INTEGER NOT NULL
);
