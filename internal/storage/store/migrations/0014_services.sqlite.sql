-- Services (issue 18): a background process with a port is a service.
-- public: its preview answers without a key or a link; slot: the pane it
-- fills, where a new service replaces the old one ('': none).
ALTER TABLE processes ADD COLUMN public INTEGER NOT NULL DEFAULT 0;
ALTER TABLE processes ADD COLUMN slot TEXT NOT NULL DEFAULT '';
