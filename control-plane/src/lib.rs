//! The control plane: tenants, users, databases, tables, API keys and quotas, pushed to the data nodes.
