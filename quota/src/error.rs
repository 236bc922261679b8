//! What a refused request is told: a stable code, RonDB's number where it has
//! one, the HTTP status and RESP prefix, and a message that names the
//! database, the limit and the usage. A refused request changed nothing.

/// Whether a rate limit was on reads or on writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateKind {
    Read,
    Write,
}

impl RateKind {
    fn name(self) -> &'static str {
        match self {
            RateKind::Read => "read",
            RateKind::Write => "write",
        }
    }
}

/// A request refused by a quota or a limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuotaError {
    #[error(
        "database '{database}' is at its memory quota: {usage} of {limit} bytes in use; reads and deletes still work"
    )]
    MemoryQuota {
        database: String,
        limit: u64,
        usage: u64,
    },
    #[error(
        "tenant '{tenant}' is at its memory quota: its databases use {usage} of {limit} bytes; database '{database}' cannot grow"
    )]
    TenantMemoryQuota {
        tenant: String,
        database: String,
        limit: u64,
        usage: u64,
    },
    #[error("database '{database}' is at its disk quota: {usage} of {limit} bytes in use")]
    DiskQuota {
        database: String,
        limit: u64,
        usage: u64,
    },
    #[error("database '{database}' is over its {} rate of {limit} units per second; retry in {retry_after_ms} ms", .kind.name())]
    Rate {
        database: String,
        kind: RateKind,
        limit: u32,
        retry_after_ms: u64,
    },
    #[error("a request to database '{database}' needs {units} {} units at once, more than its burst of {burst}: split it", .kind.name())]
    ExceedsBurst {
        database: String,
        kind: RateKind,
        units: u64,
        burst: u32,
    },
    #[error(
        "a request to database '{database}' has {ops} operations, more than its limit of {limit}"
    )]
    TransactionTooLarge {
        database: String,
        limit: u32,
        ops: usize,
    },
    #[error("database '{database}' already has {limit} requests in flight, its limit")]
    TooManyTransactions { database: String, limit: u32 },
}

impl QuotaError {
    /// The stable name of the error.
    pub fn code(&self) -> &'static str {
        match self {
            QuotaError::MemoryQuota { .. } | QuotaError::TenantMemoryQuota { .. } => "MEMORY_QUOTA",
            QuotaError::DiskQuota { .. } => "DISK_QUOTA",
            QuotaError::Rate {
                kind: RateKind::Write,
                ..
            } => "WRITE_RATE",
            QuotaError::Rate {
                kind: RateKind::Read,
                ..
            } => "READ_RATE",
            QuotaError::ExceedsBurst { .. } => "REQUEST_EXCEEDS_BURST",
            QuotaError::TransactionTooLarge { .. } => "TRANSACTION_TOO_LARGE",
            QuotaError::TooManyTransactions { .. } => "TOO_MANY_TRANSACTIONS",
        }
    }

    /// RonDB's error number, where RonDB has one.
    pub fn number(&self) -> Option<u32> {
        match self {
            QuotaError::MemoryQuota { .. } | QuotaError::TenantMemoryQuota { .. } => Some(239),
            QuotaError::DiskQuota { .. } => Some(929),
            QuotaError::Rate {
                kind: RateKind::Write,
                ..
            } => Some(243),
            QuotaError::Rate {
                kind: RateKind::Read,
                ..
            } => Some(2203),
            QuotaError::ExceedsBurst { .. } => None,
            QuotaError::TransactionTooLarge { .. } => Some(247),
            QuotaError::TooManyTransactions { .. } => Some(248),
        }
    }

    pub fn http_status(&self) -> u16 {
        match self {
            QuotaError::MemoryQuota { .. }
            | QuotaError::TenantMemoryQuota { .. }
            | QuotaError::DiskQuota { .. } => 507,
            QuotaError::Rate { .. } | QuotaError::TooManyTransactions { .. } => 429,
            QuotaError::ExceedsBurst { .. } | QuotaError::TransactionTooLarge { .. } => 413,
        }
    }

    /// The prefix of the error on the Redis protocol.
    pub fn resp_prefix(&self) -> &'static str {
        match self {
            QuotaError::MemoryQuota { .. }
            | QuotaError::TenantMemoryQuota { .. }
            | QuotaError::DiskQuota { .. } => "QUOTA",
            QuotaError::Rate { .. } | QuotaError::TooManyTransactions { .. } => "THROTTLED",
            QuotaError::ExceedsBurst { .. } | QuotaError::TransactionTooLarge { .. } => "ERR",
        }
    }

    /// When a retry can succeed, for throttling.
    pub fn retry_after_ms(&self) -> Option<u64> {
        match self {
            QuotaError::Rate { retry_after_ms, .. } => Some(*retry_after_ms),
            _ => None,
        }
    }

    /// Whether the same request can succeed later without changing it.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            QuotaError::Rate { .. } | QuotaError::TooManyTransactions { .. }
        )
    }

    /// The database the error is about.
    pub fn database(&self) -> &str {
        match self {
            QuotaError::MemoryQuota { database, .. }
            | QuotaError::TenantMemoryQuota { database, .. }
            | QuotaError::DiskQuota { database, .. }
            | QuotaError::Rate { database, .. }
            | QuotaError::ExceedsBurst { database, .. }
            | QuotaError::TransactionTooLarge { database, .. }
            | QuotaError::TooManyTransactions { database, .. } => database,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_follow_the_table_of_the_api() {
        let db = || "shop".to_owned();
        let cases = [
            (
                QuotaError::MemoryQuota {
                    database: db(),
                    limit: 100,
                    usage: 100,
                },
                "MEMORY_QUOTA",
                Some(239),
                507,
                "QUOTA",
            ),
            (
                QuotaError::DiskQuota {
                    database: db(),
                    limit: 1,
                    usage: 1,
                },
                "DISK_QUOTA",
                Some(929),
                507,
                "QUOTA",
            ),
            (
                QuotaError::Rate {
                    database: db(),
                    kind: RateKind::Write,
                    limit: 10,
                    retry_after_ms: 7,
                },
                "WRITE_RATE",
                Some(243),
                429,
                "THROTTLED",
            ),
            (
                QuotaError::Rate {
                    database: db(),
                    kind: RateKind::Read,
                    limit: 10,
                    retry_after_ms: 7,
                },
                "READ_RATE",
                Some(2203),
                429,
                "THROTTLED",
            ),
            (
                QuotaError::TransactionTooLarge {
                    database: db(),
                    limit: 5,
                    ops: 6,
                },
                "TRANSACTION_TOO_LARGE",
                Some(247),
                413,
                "ERR",
            ),
            (
                QuotaError::TooManyTransactions {
                    database: db(),
                    limit: 2,
                },
                "TOO_MANY_TRANSACTIONS",
                Some(248),
                429,
                "THROTTLED",
            ),
            (
                QuotaError::ExceedsBurst {
                    database: db(),
                    kind: RateKind::Write,
                    units: 50,
                    burst: 10,
                },
                "REQUEST_EXCEEDS_BURST",
                None,
                413,
                "ERR",
            ),
        ];
        for (e, code, number, status, prefix) in cases {
            assert_eq!(
                (e.code(), e.number(), e.http_status(), e.resp_prefix()),
                (code, number, status, prefix)
            );
            assert!(e.to_string().contains("'shop'"), "{e}");
            assert_eq!(e.database(), "shop");
        }
        let throttled = QuotaError::Rate {
            database: db(),
            kind: RateKind::Write,
            limit: 10,
            retry_after_ms: 7,
        };
        assert_eq!(throttled.retry_after_ms(), Some(7));
        assert!(throttled.is_retryable());
        assert_eq!(
            throttled.to_string(),
            "database 'shop' is over its write rate of 10 units per second; retry in 7 ms"
        );
        let burst = QuotaError::ExceedsBurst {
            database: db(),
            kind: RateKind::Write,
            units: 50,
            burst: 10,
        };
        assert!(
            !burst.is_retryable(),
            "waiting does not help a request larger than the burst"
        );
    }
}
