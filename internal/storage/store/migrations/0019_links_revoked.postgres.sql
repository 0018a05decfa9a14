-- Revoking a service's preview links: links made for it until then
-- (unix nanoseconds) open nothing. NULL: none revoked.
ALTER TABLE processes ADD COLUMN links_revoked_at BIGINT;
