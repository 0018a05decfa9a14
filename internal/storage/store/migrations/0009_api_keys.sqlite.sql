-- API keys besides the daemon's own (api.key), each with the least isolated
-- sandbox mode its tool calls may use. Only a hash of a key is kept.
CREATE TABLE api_keys (
    name       TEXT PRIMARY KEY,
    hash       TEXT NOT NULL UNIQUE,
    tools_mode TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
