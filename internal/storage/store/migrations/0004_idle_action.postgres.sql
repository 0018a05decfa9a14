-- What the idle timer does to a sandbox: suspend, stop or delete it.
ALTER TABLE sandboxes ADD COLUMN idle_action TEXT NOT NULL DEFAULT 'delete';
