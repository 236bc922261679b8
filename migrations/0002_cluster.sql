-- Data nodes, and the databases and tables placed on them.

CREATE TABLE datanodes (
    node_id BIGINT PRIMARY KEY,
    internal_url TEXT NOT NULL,
    rest_url TEXT NOT NULL,
    resp_addr TEXT NOT NULL,
    data_memory_bytes BIGINT NOT NULL,
    used_bytes BIGINT NOT NULL,
    -- New each time the node starts.
    boot_id TEXT NOT NULL,
    registered_at BIGINT NOT NULL,
    last_seen BIGINT NOT NULL
);

CREATE TABLE databases (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL REFERENCES tenants (id),
    -- Unique on the platform: applications name it in the data APIs.
    name TEXT NOT NULL UNIQUE,
    node_id BIGINT NOT NULL REFERENCES datanodes (node_id),
    -- 'ready', or 'dropping' until its data node has dropped it.
    status TEXT NOT NULL,
    created_at BIGINT NOT NULL
);

CREATE INDEX databases_by_tenant ON databases (tenant_id);

CREATE TABLE tables (
    id TEXT PRIMARY KEY,
    database_id TEXT NOT NULL REFERENCES databases (id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    -- The definition as the API takes it: {name, columns, primary_key}, JSON.
    definition TEXT NOT NULL,
    -- 'ready', or 'dropping' until its data node has dropped it.
    status TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    UNIQUE (database_id, name)
);
