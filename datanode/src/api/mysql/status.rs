//! Status counters: what `SHOW [GLOBAL | SESSION] STATUS`,
//! `information_schema.GLOBAL_STATUS` / `SESSION_STATUS` and the
//! `mysqladmin status | extended-status` commands read, with MySQL's names.
//!
//! SESSION is the connection's own counts. GLOBAL is the tenant's share of
//! the node: every SQL connection logged in with a key of the caller's
//! tenant on this node since the node started — another tenant's
//! connections and statements are neither counted nor shown, as the rest
//! of the node's catalog is scoped. `Uptime` is the node's. A session
//! carried to its database's primary counts on neither node while it is
//! carried.
//!
//! A connection's counters are written by that connection only, so
//! counting is a plain load and store; the tenant's totals take them in
//! when the connection ends (`Processes`), and a GLOBAL read adds the live
//! connections' to them.

use std::sync::atomic::{AtomicU64, Ordering};

use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::Token;

use super::error::MyError;
use super::query::{Reply, keyword};
use super::session::Session;
use crate::types::value::Value;

/// What a connection counts: a statement of a kind (`Com_*`), the
/// statements sent (`Questions`), bytes in and out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub(crate) enum Counter {
    BytesReceived,
    BytesSent,
    ComAlterTable,
    ComBegin,
    ComChangeDb,
    ComCommit,
    ComCreateIndex,
    ComCreateTable,
    ComDelete,
    ComDropIndex,
    ComDropTable,
    ComInsert,
    ComKill,
    ComLockTables,
    ComReplace,
    ComRollback,
    ComSelect,
    ComSetOption,
    ComStmtClose,
    ComStmtExecute,
    ComStmtPrepare,
    ComStmtReset,
    ComTruncate,
    ComUnlockTables,
    ComUpdate,
    Questions,
}

/// How many counters a connection keeps.
pub(crate) const COUNTERS: usize = Counter::Questions as usize + 1;

impl Counter {
    const ALL: [Counter; COUNTERS] = [
        Counter::BytesReceived,
        Counter::BytesSent,
        Counter::ComAlterTable,
        Counter::ComBegin,
        Counter::ComChangeDb,
        Counter::ComCommit,
        Counter::ComCreateIndex,
        Counter::ComCreateTable,
        Counter::ComDelete,
        Counter::ComDropIndex,
        Counter::ComDropTable,
        Counter::ComInsert,
        Counter::ComKill,
        Counter::ComLockTables,
        Counter::ComReplace,
        Counter::ComRollback,
        Counter::ComSelect,
        Counter::ComSetOption,
        Counter::ComStmtClose,
        Counter::ComStmtExecute,
        Counter::ComStmtPrepare,
        Counter::ComStmtReset,
        Counter::ComTruncate,
        Counter::ComUnlockTables,
        Counter::ComUpdate,
        Counter::Questions,
    ];

    /// MySQL's name for it.
    fn name(self) -> &'static str {
        match self {
            Counter::BytesReceived => "Bytes_received",
            Counter::BytesSent => "Bytes_sent",
            Counter::ComAlterTable => "Com_alter_table",
            Counter::ComBegin => "Com_begin",
            Counter::ComChangeDb => "Com_change_db",
            Counter::ComCommit => "Com_commit",
            Counter::ComCreateIndex => "Com_create_index",
            Counter::ComCreateTable => "Com_create_table",
            Counter::ComDelete => "Com_delete",
            Counter::ComDropIndex => "Com_drop_index",
            Counter::ComDropTable => "Com_drop_table",
            Counter::ComInsert => "Com_insert",
            Counter::ComKill => "Com_kill",
            Counter::ComLockTables => "Com_lock_tables",
            Counter::ComReplace => "Com_replace",
            Counter::ComRollback => "Com_rollback",
            Counter::ComSelect => "Com_select",
            Counter::ComSetOption => "Com_set_option",
            Counter::ComStmtClose => "Com_stmt_close",
            Counter::ComStmtExecute => "Com_stmt_execute",
            Counter::ComStmtPrepare => "Com_stmt_prepare",
            Counter::ComStmtReset => "Com_stmt_reset",
            Counter::ComTruncate => "Com_truncate",
            Counter::ComUnlockTables => "Com_unlock_tables",
            Counter::ComUpdate => "Com_update",
            Counter::Questions => "Questions",
        }
    }

    /// The `Com_*` counter of the statement `tokens` begin, if it has one
    /// (SHOW, EXPLAIN and the like count in `Questions` only).
    pub(crate) fn of_statement(tokens: &[Token]) -> Option<Counter> {
        let second = keyword(tokens.get(1));
        Some(match keyword(tokens.first()) {
            Some(Keyword::SELECT | Keyword::WITH) => Counter::ComSelect,
            None if tokens.first() == Some(&Token::LParen) => Counter::ComSelect,
            Some(Keyword::INSERT) => Counter::ComInsert,
            Some(Keyword::REPLACE) => Counter::ComReplace,
            Some(Keyword::UPDATE) => Counter::ComUpdate,
            Some(Keyword::DELETE) => Counter::ComDelete,
            Some(Keyword::BEGIN | Keyword::START) => Counter::ComBegin,
            Some(Keyword::COMMIT) => Counter::ComCommit,
            Some(Keyword::ROLLBACK) => Counter::ComRollback,
            Some(Keyword::SET) => Counter::ComSetOption,
            Some(Keyword::USE) => Counter::ComChangeDb,
            Some(Keyword::KILL) => Counter::ComKill,
            Some(Keyword::LOCK) => Counter::ComLockTables,
            Some(Keyword::UNLOCK) => Counter::ComUnlockTables,
            Some(Keyword::TRUNCATE) => Counter::ComTruncate,
            Some(Keyword::ALTER) if second == Some(Keyword::TABLE) => Counter::ComAlterTable,
            Some(Keyword::CREATE) if second == Some(Keyword::TABLE) => Counter::ComCreateTable,
            Some(Keyword::CREATE)
                if second == Some(Keyword::INDEX)
                    || (second == Some(Keyword::UNIQUE)
                        && keyword(tokens.get(2)) == Some(Keyword::INDEX)) =>
            {
                Counter::ComCreateIndex
            }
            Some(Keyword::DROP) if second == Some(Keyword::TABLE) => Counter::ComDropTable,
            Some(Keyword::DROP) if second == Some(Keyword::INDEX) => Counter::ComDropIndex,
            _ => return None,
        })
    }
}

/// One connection's counts.
#[derive(Debug, Default)]
pub(crate) struct Counters([AtomicU64; COUNTERS]);

impl Counters {
    /// Adds `n` to `counter`. Only the connection itself counts, so a load
    /// and a store are enough; others read.
    pub(crate) fn add(&self, counter: Counter, n: u64) {
        let c = &self.0[counter as usize];
        c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
    }

    pub(crate) fn bump(&self, counter: Counter) {
        self.add(counter, 1);
    }

    /// Adds these counts to `into`.
    pub(crate) fn add_to(&self, into: &mut [u64; COUNTERS]) {
        for (sum, c) in into.iter_mut().zip(&self.0) {
            *sum = sum.wrapping_add(c.load(Ordering::Relaxed));
        }
    }
}

/// A tenant's connections on this node, as GLOBAL status counts them.
#[derive(Debug, Default, Clone)]
pub(crate) struct Totals {
    /// The counts of its connections that have ended.
    pub(crate) ended: [u64; COUNTERS],
    /// Logins.
    pub(crate) connections: u64,
    /// Connections that ended without the client's COM_QUIT: dropped,
    /// timed out, killed.
    pub(crate) aborted: u64,
    /// Connections open now.
    pub(crate) live: u64,
    /// The most open at once.
    pub(crate) most_live: u64,
}

/// What a status statement shows, at one moment.
#[derive(Debug, Clone)]
pub(crate) struct Status {
    /// The counters: the tenant's (GLOBAL) or the connection's (SESSION).
    pub(crate) counts: [u64; COUNTERS],
    pub(crate) tenant: Totals,
    /// The tenant's connections running a statement now.
    pub(crate) running: u64,
    pub(crate) uptime_secs: u64,
}

impl Status {
    /// Every status variable and its value, in name order, as MySQL lists
    /// them.
    pub(crate) fn variables(&self) -> Vec<(&'static str, u64)> {
        let count = |c: Counter| self.counts[c as usize];
        let mut all: Vec<(&'static str, u64)> =
            Counter::ALL.iter().map(|&c| (c.name(), count(c))).collect();
        all.extend([
            ("Aborted_clients", self.tenant.aborted),
            ("Connections", self.tenant.connections),
            ("Max_used_connections", self.tenant.most_live),
            // No stored programs: every statement is a client's.
            ("Queries", count(Counter::Questions)),
            ("Threads_connected", self.tenant.live),
            ("Threads_running", self.running),
            ("Uptime", self.uptime_secs),
        ]);
        all.sort_by_key(|(name, _)| name.to_ascii_lowercase());
        all
    }

    /// COM_STATISTICS's line (`mysqladmin status`), as MySQL writes it,
    /// with what Shoal counts.
    pub(crate) fn line(&self) -> String {
        let questions = self.counts[Counter::Questions as usize];
        let per_second = questions as f64 / self.uptime_secs.max(1) as f64;
        format!(
            "Uptime: {}  Threads: {}  Questions: {}  Queries per second avg: {:.3}",
            self.uptime_secs, self.tenant.live, questions, per_second
        )
    }
}

impl Session {
    /// Status as this connection sees it: its tenant's on this node
    /// (`global`), or its own.
    pub(super) fn status_counts(&self, global: bool) -> Status {
        self.shared.processes.status(&self.process, global)
    }

    /// `SHOW [GLOBAL | SESSION] STATUS [LIKE 'pattern']`.
    pub(super) fn show_status(&self, global: bool, rest: &[Token]) -> Result<Reply, MyError> {
        let named = (self.status_counts(global).variables().into_iter())
            .map(|(n, v)| (n.to_owned(), Value::Text(v.to_string())));
        super::show::named_rows(named, rest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::mysql::query::tokenize;

    #[test]
    fn every_counter_is_listed_once_in_its_place() {
        for (i, c) in Counter::ALL.iter().enumerate() {
            assert_eq!(*c as usize, i, "{c:?}");
        }
        let status = Status {
            counts: [0; COUNTERS],
            tenant: Totals::default(),
            running: 0,
            uptime_secs: 0,
        };
        let names: Vec<&str> = status.variables().iter().map(|(n, _)| *n).collect();
        let mut sorted = names.clone();
        sorted.sort_by_key(|n| n.to_ascii_lowercase());
        sorted.dedup();
        assert_eq!(names, sorted);
    }

    #[test]
    fn statements_count_by_their_kind() {
        let kind = |sql: &str| Counter::of_statement(&tokenize(sql).unwrap());
        assert_eq!(kind("select 1"), Some(Counter::ComSelect));
        assert_eq!(kind("(SELECT 1)"), Some(Counter::ComSelect));
        assert_eq!(
            kind("WITH x AS (SELECT 1) SELECT 1"),
            Some(Counter::ComSelect)
        );
        assert_eq!(kind("INSERT INTO t VALUES (1)"), Some(Counter::ComInsert));
        assert_eq!(kind("replace t VALUES (1)"), Some(Counter::ComReplace));
        assert_eq!(kind("START TRANSACTION"), Some(Counter::ComBegin));
        assert_eq!(
            kind("CREATE UNIQUE INDEX i ON t (a)"),
            Some(Counter::ComCreateIndex)
        );
        assert_eq!(
            kind("CREATE TABLE t (a INT PRIMARY KEY)"),
            Some(Counter::ComCreateTable)
        );
        assert_eq!(kind("DROP INDEX i ON t"), Some(Counter::ComDropIndex));
        assert_eq!(kind("SHOW TABLES"), None);
        assert_eq!(kind("`select` 1"), None);
    }

    #[test]
    fn a_connection_counts_and_its_counts_add_up() {
        let c = Counters::default();
        c.bump(Counter::Questions);
        c.add(Counter::BytesSent, 40);
        c.add(Counter::BytesSent, 2);
        let mut sum = [0; COUNTERS];
        sum[Counter::Questions as usize] = 5;
        c.add_to(&mut sum);
        assert_eq!(sum[Counter::Questions as usize], 6);
        assert_eq!(sum[Counter::BytesSent as usize], 42);
    }
}
