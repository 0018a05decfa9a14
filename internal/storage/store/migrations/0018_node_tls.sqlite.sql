-- Cluster traffic over TLS (issue 36): the SHA-256 of the certificate a
-- node serves its listeners with, hex ('' for a node of an older
-- version, which gets no calls). Replicas and other nodes accept only
-- that certificate from it: the store is the cluster's root of trust.
ALTER TABLE nodes ADD COLUMN tls_fingerprint TEXT NOT NULL DEFAULT '';
