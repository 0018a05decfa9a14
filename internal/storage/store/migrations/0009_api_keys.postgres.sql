-- API keys besides the daemon's own. Only a hash of a key is kept.
CREATE TABLE api_keys (
    name       TEXT PRIMARY KEY,
    hash       TEXT   NOT NULL UNIQUE,
    tools_mode TEXT   NOT NULL,
    created_at BIGINT NOT NULL
);
