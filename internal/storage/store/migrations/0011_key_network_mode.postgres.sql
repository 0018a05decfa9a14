-- The least isolated network mode a key's sandboxes may ask for.
ALTER TABLE api_keys ADD COLUMN network_mode TEXT NOT NULL DEFAULT 'full';
