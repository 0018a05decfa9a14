-- Scale-out (issue 23): each template's current version, which node made
-- it (and serves its archive to the others), and its info as JSON.
CREATE TABLE cluster_templates (
	name       TEXT PRIMARY KEY,
	version    TEXT NOT NULL,
	origin     TEXT NOT NULL,
	info       TEXT NOT NULL,
	updated_at BIGINT NOT NULL
);
