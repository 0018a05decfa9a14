-- Each sandbox's network policy (a JSON object {mode, allow, deny}).
ALTER TABLE sandboxes ADD COLUMN network TEXT NOT NULL DEFAULT '{"mode":"none"}';
