//! Quota and rate-limit policy: pure, no I/O.
//!
//! - [`quota`]: the quota object users and operators set, and its rules.
//! - [`units`]: request units — what a read or a write costs.
//! - [`limiter`]: per-database rate limiters on `governor`, keyed by
//!   database, with limits changed at run time.
//! - [`error`]: the errors a refused request gets, with their stable codes.

pub mod error;
pub mod limiter;
pub mod quota;
pub mod units;

pub use error::QuotaError;
pub use limiter::{Limiter, LimiterClock, LimiterPool, Throttled};
pub use quota::{Quota, QuotaConfigError};
