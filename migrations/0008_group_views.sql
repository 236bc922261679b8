-- The view of each node group: its live nodes, numbered. The control plane
-- is the arbitrator: it alone moves a view on, one number at a time, when a
-- node of the group asks (a node found dead, or one caught up).

CREATE TABLE group_views (
    node_group BIGINT PRIMARY KEY,
    number BIGINT NOT NULL,
    -- JSON: the live node ids, and the [from, to] pairs of moved primaries.
    members TEXT NOT NULL,
    moved TEXT NOT NULL,
    changed_at BIGINT NOT NULL
);
