//! The quota object of a tenant or a database. `null` (or a missing field)
//! means unlimited.

use serde::{Deserialize, Serialize};

/// Burst when `burst_seconds` is not set: one second's worth of the rate.
pub const DEFAULT_BURST_SECONDS: u32 = 1;
/// Longest burst a quota may allow.
pub const MAX_BURST_SECONDS: u32 = 3600;

/// Limits on one database, or on the sum of a tenant's databases.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Quota {
    /// DataMemory the database may hold, in bytes (whole 32 KiB pages).
    pub in_memory_bytes: Option<u64>,
    /// Disk the database may hold, in bytes (no disk columns yet).
    pub on_disk_bytes: Option<u64>,
    /// Read units admitted per second.
    pub read_units_per_sec: Option<u32>,
    /// Write units admitted per second.
    pub write_units_per_sec: Option<u32>,
    /// How many seconds of the rates may be spent at once after a quiet
    /// spell; 1 when not set.
    pub burst_seconds: Option<u32>,
    /// Most operations in one request.
    pub max_transaction_ops: Option<u32>,
    /// Most requests of the database in flight at once on a data node.
    pub max_parallel_transactions: Option<u32>,
    /// Most databases of a tenant (enforced by the control plane).
    pub max_databases: Option<u32>,
    /// Most tables of a tenant or database (enforced by the control plane).
    pub max_tables: Option<u32>,
    /// Most API keys of a tenant (enforced by the control plane).
    pub max_api_keys: Option<u32>,
}

/// Why a quota object was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuotaConfigError {
    #[error("{0} must be at least 1 (use null for no limit)")]
    Zero(&'static str),
    #[error("burst_seconds must be between 1 and {MAX_BURST_SECONDS}")]
    Burst,
}

impl Quota {
    /// No limits at all.
    pub const UNLIMITED: Quota = Quota {
        in_memory_bytes: None,
        on_disk_bytes: None,
        read_units_per_sec: None,
        write_units_per_sec: None,
        burst_seconds: None,
        max_transaction_ops: None,
        max_parallel_transactions: None,
        max_databases: None,
        max_tables: None,
        max_api_keys: None,
    };

    pub fn validate(&self) -> Result<(), QuotaConfigError> {
        let at_least_one = [
            ("read_units_per_sec", self.read_units_per_sec),
            ("write_units_per_sec", self.write_units_per_sec),
            ("max_transaction_ops", self.max_transaction_ops),
            ("max_parallel_transactions", self.max_parallel_transactions),
        ];
        if let Some((name, _)) = at_least_one.iter().find(|(_, v)| *v == Some(0)) {
            return Err(QuotaConfigError::Zero(name));
        }
        if self
            .burst_seconds
            .is_some_and(|b| !(1..=MAX_BURST_SECONDS).contains(&b))
        {
            return Err(QuotaConfigError::Burst);
        }
        Ok(())
    }

    /// The most units a rate of `per_sec` lets through at once.
    pub fn burst(&self, per_sec: u32) -> u32 {
        let seconds = self.burst_seconds.unwrap_or(DEFAULT_BURST_SECONDS);
        per_sec.saturating_mul(seconds)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_and_null_fields_are_unlimited() {
        let q: Quota =
            serde_json::from_str(r#"{"write_units_per_sec": 100, "in_memory_bytes": null}"#)
                .unwrap();
        assert_eq!(
            q,
            Quota {
                write_units_per_sec: Some(100),
                ..Quota::UNLIMITED
            }
        );
        assert_eq!(q.burst(100), 100);
        q.validate().unwrap();
        let full = serde_json::to_value(Quota::UNLIMITED).unwrap();
        assert_eq!(
            full.as_object().unwrap().len(),
            10,
            "every field is written, as null"
        );
    }

    #[test]
    fn bad_quotas_are_refused() {
        for (json, want) in [
            (
                r#"{"read_units_per_sec": 0}"#,
                QuotaConfigError::Zero("read_units_per_sec"),
            ),
            (
                r#"{"max_transaction_ops": 0}"#,
                QuotaConfigError::Zero("max_transaction_ops"),
            ),
            (r#"{"burst_seconds": 0}"#, QuotaConfigError::Burst),
            (r#"{"burst_seconds": 3601}"#, QuotaConfigError::Burst),
        ] {
            let q: Quota = serde_json::from_str(json).unwrap();
            assert_eq!(q.validate(), Err(want), "{json}");
        }
        for bad in [
            r#"{"rate": 1}"#,
            r#"{"read_units_per_sec": -1}"#,
            r#"{"read_units_per_sec": 5000000000}"#,
            r#"{"in_memory_bytes": "1G"}"#,
        ] {
            assert!(serde_json::from_str::<Quota>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn bursts_saturate() {
        let q = Quota {
            burst_seconds: Some(3600),
            ..Quota::UNLIMITED
        };
        assert_eq!(q.burst(10), 36_000);
        assert_eq!(q.burst(u32::MAX), u32::MAX);
    }
}
