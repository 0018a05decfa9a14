-- Observability (issue 39): the sandboxes' lifecycle events, the webhooks
-- they are posted to, and each delivery's attempts. Events and deliveries
-- are pruned by age; a webhook's secret is kept sealed.
CREATE TABLE events (
	id        INTEGER PRIMARY KEY AUTOINCREMENT,
	at        INTEGER NOT NULL,
	workspace TEXT    NOT NULL DEFAULT '',
	sandbox   TEXT    NOT NULL DEFAULT '',
	type      TEXT    NOT NULL,
	reason    TEXT    NOT NULL DEFAULT '',
	message   TEXT    NOT NULL DEFAULT '',
	data      TEXT    NOT NULL DEFAULT '{}'
);
CREATE INDEX events_workspace ON events (workspace, id);
CREATE INDEX events_at ON events (at);
CREATE TABLE webhooks (
	id            TEXT PRIMARY KEY,
	workspace     TEXT    NOT NULL,
	url           TEXT    NOT NULL,
	types         TEXT    NOT NULL DEFAULT '[]',
	sealed_secret BLOB    NOT NULL,
	created_at    INTEGER NOT NULL
);
CREATE INDEX webhooks_workspace ON webhooks (workspace);
CREATE TABLE deliveries (
	id          INTEGER PRIMARY KEY AUTOINCREMENT,
	webhook     TEXT    NOT NULL,
	event       INTEGER NOT NULL,
	attempt     INTEGER NOT NULL,
	at          INTEGER NOT NULL,
	status      INTEGER NOT NULL,
	error       TEXT    NOT NULL DEFAULT '',
	duration_ns INTEGER NOT NULL
);
CREATE INDEX deliveries_webhook ON deliveries (webhook, id);
