//! The data API: how applications reach their data with a tenant API key.
//!
//! - `rest`: HTTP/JSON in the shapes of RonDB's REST server (port 4406).
//! - `resp`: the Redis protocol (port 6380).
//! - `mysql`: SQL over the MySQL protocol (port 3306).
//! - `serve`: accepting connections within limits, and stopping cleanly.
//! - `error`: errors as the HTTP APIs answer them.
//!
//! Both front ends turn what they are sent into one [`Batch`] per request
//! and hand it to the transaction coordinator, which checks the key's grant
//! and the database's limits before any worker sees it.
//!
//! [`Batch`]: crate::tc::batch::Batch

pub(crate) mod error;
pub(crate) mod json;
pub(crate) mod mysql;
pub(crate) mod resp;
pub(crate) mod rest;
pub(crate) mod serve;

use std::sync::Arc;

use crate::node::Engine;
use crate::node::keys::{ApiKey, AuthError};
use crate::tc::Database;
use crate::tc::{Grant, Role};

/// Why a key may not use a database.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum AccessError {
    #[error(transparent)]
    Unauthenticated(#[from] AuthError),
    #[error("the API key is not granted database '{0}'")]
    NotGranted(String),
    #[error("database '{0}' does not exist")]
    NoSuchDatabase(String),
}

/// The grant `key` has on database `name`, and the database. A database
/// of another tenant reads as not granted, whatever the key says.
pub(crate) fn access(
    engine: &Engine,
    key: &ApiKey,
    name: &str,
) -> Result<(Arc<Database>, Grant), AccessError> {
    if !key.use_now() {
        return Err(AuthError::Expired.into());
    }
    let role = key.role(name).ok_or_else(|| not_granted(name))?;
    let db = engine
        .database(name)
        .map_err(|_| AccessError::NoSuchDatabase(name.to_owned()))?;
    let grant = granted(key, &db, role)?;
    Ok((db, grant))
}

/// The grant `key` has on database `db`, found already: `access` without
/// the look by name.
pub(crate) fn grant_on(key: &ApiKey, db: &Database) -> Result<Grant, AccessError> {
    if !key.use_now() {
        return Err(AuthError::Expired.into());
    }
    let name = db.name.as_str();
    let role = key.role(name).ok_or_else(|| not_granted(name))?;
    granted(key, db, role)
}

fn not_granted(name: &str) -> AccessError {
    AccessError::NotGranted(name.chars().take(64).collect())
}

/// The grant of `role` on `db` to `key`, if `db` is the key's tenant's.
fn granted(key: &ApiKey, db: &Database, role: Role) -> Result<Grant, AccessError> {
    let name = db.name.as_str();
    if db.tenant.as_ref().map(|t| &t.id) != Some(key.tenant()) {
        return Err(not_granted(name));
    }
    let span = tracing::Span::current();
    span.record("tenant", key.tenant().as_str());
    span.record("database", name);
    Ok(Grant {
        database: db.id,
        role,
    })
}
