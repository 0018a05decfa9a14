-- The least isolated network mode a key's sandboxes may ask for. Keys made
-- before it could make sandboxes of any mode: full.
ALTER TABLE api_keys ADD COLUMN network_mode TEXT NOT NULL DEFAULT 'full';
