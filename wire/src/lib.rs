//! Types two sides agree on — the control plane and the data node over the
//! internal API, the control plane and the console over its own; the control
//! plane links this, never the storage engine.
//!
//! - [`schema`]: identifiers, column types and table definitions, with the rules
//!   that make a definition valid.
//! - [`ndbinfo`]: the names and columns of the ndbinfo tables, and the JSON shape
//!   their rows travel in.
//! - [`secret`]: the cluster secret both sides present.
//! - [`apikey`]: tenant API keys: their form, their hash, their grants.
//! - [`api`]: the control plane's REST API as the console and CLI read it.
//! - [`prometheus`]: the Prometheus text format both sides serve.
//! - [`internal`]: the internal API's routes and the bodies they carry.
//! - [`mysql`]: the MySQL protocol's length-encoded integers.

pub mod api;
pub mod apikey;
pub mod internal;
pub mod mysql;
pub mod ndbinfo;
pub mod prometheus;
pub mod schema;
pub mod secret;
