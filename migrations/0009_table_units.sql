-- The last reading of each table's unit counters on each node (ndbinfo
-- table_usage), so that metering counts what a table used since then,
-- as usage_counters does for databases.

CREATE TABLE table_usage_counters (
    node_id BIGINT NOT NULL,
    database_name TEXT NOT NULL,
    table_name TEXT NOT NULL,
    -- The node's boot and its table id: a table made again is new.
    boot_id TEXT NOT NULL,
    read_units BIGINT NOT NULL,
    write_units BIGINT NOT NULL,
    PRIMARY KEY (node_id, database_name, table_name)
);
