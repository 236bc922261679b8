//! The control plane: tenants, users, databases, tables, API keys and
//! quotas, pushed to the data nodes.
//!
//! - [`store`]: sqlx over SQLite (default) or PostgreSQL, migrations;
//! - [`auth`]: passwords, session tokens and cookies, CSRF, login limits;
//! - [`accounts`], [`members`]: sign-up, login, logout, `/me`; a tenant's users;
//! - [`databases`]: databases and tables, placed on data nodes;
//! - [`keys`]: tenant API keys, pushed to the data nodes;
//! - [`nodes`]: the data-node registry, pushes and the reconcile loop;
//! - [`quotas`]: tenant and database quotas, pushed; usage;
//! - [`ndbinfo_sql`]: SELECTs over the ndbinfo tables of one's own databases;
//! - [`usage`]: metering — samples, rollups, series and the billing export;
//! - [`admin`], [`audit`]: what platform admins do, and the record of it;
//! - [`server`]: the HTTP server and its routes.

pub mod accounts;
pub mod admin;
pub mod audit;
pub mod auth;
pub mod databases;
pub mod error;
pub mod keys;
pub mod members;
pub mod metrics;
pub mod ndbinfo_sql;
pub mod nodes;
pub mod quotas;
pub mod rows;
pub mod server;
pub mod sql_schema;
pub mod store;
pub mod usage;
pub mod validate;
pub mod views;

pub use server::{Config, ControlPlane};
