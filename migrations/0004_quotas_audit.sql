-- Quotas of tenants and databases, and the audit log of every change an
-- operator or a tenant makes.

-- The quota object as the API takes it (JSON); NULL: no limits.
ALTER TABLE tenants ADD COLUMN quota TEXT;
ALTER TABLE databases ADD COLUMN quota TEXT;

-- The boot of the node whose quotas were last pushed in full ('' : to do).
ALTER TABLE datanodes ADD COLUMN quotas_synced_boot TEXT NOT NULL DEFAULT '';

CREATE TABLE audit_log (
    id TEXT PRIMARY KEY,
    at BIGINT NOT NULL,
    -- Who: a user's id and email ('' for the control plane itself).
    actor_id TEXT NOT NULL,
    actor_email TEXT NOT NULL,
    -- The tenant the change concerns, if any.
    tenant_id TEXT,
    -- What, e.g. 'tenant.quota.set', and on what, e.g. 'database shop'.
    action TEXT NOT NULL,
    target TEXT NOT NULL,
    -- JSON of the state before and after; NULL where there was none.
    before_state TEXT,
    after_state TEXT
);

CREATE INDEX audit_log_by_time ON audit_log (at);
CREATE INDEX audit_log_by_tenant ON audit_log (tenant_id, at);
