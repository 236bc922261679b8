-- Tenant API keys: only a salted hash of each secret is kept.

CREATE TABLE api_keys (
    -- The key's public prefix: its id in the API.
    prefix TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL REFERENCES tenants (id),
    name TEXT NOT NULL,
    -- 16 bytes, hex; and the SHA-256 of the salt's bytes then the secret's, hex.
    salt TEXT NOT NULL,
    hash TEXT NOT NULL,
    -- [{database, role}], JSON
    grants TEXT NOT NULL,
    created_by TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    -- Seconds since the Unix epoch, as data nodes take it.
    expires_at BIGINT,
    -- Milliseconds since the Unix epoch, as data nodes report it.
    last_used_at BIGINT,
    revoked_at BIGINT
);

CREATE INDEX api_keys_by_tenant ON api_keys (tenant_id);
