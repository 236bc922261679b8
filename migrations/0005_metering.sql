-- Metered usage: samples of every database (and the memory of every
-- table), raw and rolled up per minute and per hour; and the last counters
-- read from each node, so that growth is measured across restarts of the
-- control plane too.

CREATE TABLE usage_samples (
    -- 'raw', 'minute' or 'hour'
    resolution TEXT NOT NULL,
    -- A raw sample's time, or its bucket's start (ms since the epoch).
    at BIGINT NOT NULL,
    tenant_id TEXT NOT NULL,
    database_name TEXT NOT NULL,
    -- '' for the database as a whole; a table's rows carry memory only.
    table_name TEXT NOT NULL,
    memory_bytes BIGINT NOT NULL,
    memory_max_bytes BIGINT NOT NULL,
    memory_byte_seconds BIGINT NOT NULL,
    read_units BIGINT NOT NULL,
    write_units BIGINT NOT NULL,
    throttled_reads BIGINT NOT NULL,
    throttled_writes BIGINT NOT NULL,
    quota_rejections BIGINT NOT NULL,
    samples BIGINT NOT NULL,
    PRIMARY KEY (resolution, database_name, table_name, at)
);

CREATE INDEX usage_samples_by_tenant ON usage_samples (resolution, tenant_id, at);
CREATE INDEX usage_samples_by_time ON usage_samples (resolution, at);

CREATE TABLE usage_counters (
    node_id BIGINT NOT NULL,
    database_name TEXT NOT NULL,
    boot_id TEXT NOT NULL,
    at BIGINT NOT NULL,
    read_units BIGINT NOT NULL,
    write_units BIGINT NOT NULL,
    throttled_reads BIGINT NOT NULL,
    throttled_writes BIGINT NOT NULL,
    quota_rejections BIGINT NOT NULL,
    PRIMARY KEY (node_id, database_name)
);
