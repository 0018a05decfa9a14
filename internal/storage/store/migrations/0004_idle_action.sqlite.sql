-- What the idle timer does to a sandbox: suspend it (keeping its files;
-- the next call resumes it) or delete it. Sandboxes made before this were
-- deleted when idle, and keep that.
ALTER TABLE sandboxes ADD COLUMN idle_action TEXT NOT NULL DEFAULT 'delete';
