-- Tenants, their users, and the control plane's own settings.
-- Portable between SQLite and PostgreSQL: ids are TEXT, times are BIGINT
-- milliseconds since the Unix epoch, flags are TEXT states.

CREATE TABLE settings (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE tenants (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    -- 'active' or 'suspended'
    status TEXT NOT NULL,
    created_at BIGINT NOT NULL
);

CREATE TABLE users (
    id TEXT PRIMARY KEY,
    -- NULL for platform admins, who belong to no tenant
    tenant_id TEXT REFERENCES tenants (id),
    email TEXT NOT NULL UNIQUE,
    password_hash TEXT NOT NULL,
    -- 'owner', 'member' or 'admin'
    role TEXT NOT NULL,
    -- Sessions issued before this instant are no longer accepted (logout).
    sessions_after BIGINT NOT NULL,
    created_at BIGINT NOT NULL
);

CREATE INDEX users_by_tenant ON users (tenant_id);
