-- Each sandbox's network policy (a JSON object {mode, allow, deny}).
-- Sandboxes made before it had loopback only: mode none.
ALTER TABLE sandboxes ADD COLUMN network TEXT NOT NULL DEFAULT '{"mode":"none"}';
