CREATE TABLE sandboxes (
    id             TEXT PRIMARY KEY,
    template       TEXT             NOT NULL,
    backend        TEXT             NOT NULL,
    state          TEXT             NOT NULL,
    state_reason   TEXT             NOT NULL DEFAULT '',
    handle         BYTEA,
    cpus           DOUBLE PRECISION NOT NULL,
    memory_mb      BIGINT           NOT NULL,
    pids           BIGINT           NOT NULL,
    idle_timeout_s BIGINT           NOT NULL,
    env            TEXT             NOT NULL DEFAULT '{}', -- JSON, as in SQLite
    metadata       TEXT             NOT NULL DEFAULT '{}',
    created_at     BIGINT           NOT NULL, -- unix nanoseconds
    updated_at     BIGINT           NOT NULL
);
