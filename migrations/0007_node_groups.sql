-- Node groups: the data nodes that each hold a replica of every fragment of
-- the group's databases. A node is put in a group once enough nodes have
-- registered to fill one (`--replicas`); a database lives on one group.

ALTER TABLE datanodes ADD COLUMN node_group BIGINT;
-- host:port of the node's node-to-node transport.
ALTER TABLE datanodes ADD COLUMN peer_addr TEXT NOT NULL DEFAULT '';
ALTER TABLE databases ADD COLUMN node_group BIGINT;

-- Nodes that held databases before node groups held them alone: each is a
-- group of one, numbered by its node id; `databases.node_id` stays the
-- database's primary.
UPDATE datanodes SET node_group = node_id WHERE node_id IN (SELECT node_id FROM databases);
UPDATE databases SET node_group = node_id;
