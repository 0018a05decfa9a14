-- Scale-out (issue 23): the node daemon that holds a sandbox ('': the
-- one daemon of a single box), and the nodes' records, kept current by
-- their heartbeats. report is the node's capacity and what it has, as
-- JSON: it changes with every heartbeat, and only the nodes read it.
ALTER TABLE sandboxes ADD COLUMN node TEXT NOT NULL DEFAULT '';
CREATE INDEX sandboxes_node ON sandboxes (node);
CREATE TABLE nodes (
	id           TEXT PRIMARY KEY,
	url          TEXT NOT NULL,
	state        TEXT NOT NULL,
	reason       TEXT NOT NULL DEFAULT '',
	report       TEXT NOT NULL,
	started_at   BIGINT NOT NULL,
	heartbeat_at BIGINT NOT NULL
);
