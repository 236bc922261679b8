//! The control plane's store: SQLite in the data directory by default,
//! PostgreSQL by URL; one set of migrations and queries serves both
//! (through sqlx's `Any` driver, so every query is written in the SQL both
//! understand, with `$1, $2, …` placeholders in order).

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::{AnyPool, Executor};

/// Which database serves the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// Why the store could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(
        "'{0}' is not a store URL: use sqlite://<file> or postgres://user:password@host/database"
    )]
    BadUrl(String),
    #[error("connecting to the store: {0}")]
    Connect(sqlx::Error),
    #[error("applying the store's migrations: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
}

/// The store.
#[derive(Debug, Clone)]
pub struct Store {
    pub(crate) pool: AnyPool,
    backend: Backend,
}

/// The default store: a SQLite file in the data directory.
pub fn default_url(data_dir: &Path) -> String {
    format!("sqlite://{}?mode=rwc", data_dir.join(SQLITE_FILE).display())
}

/// The SQLite store's file in a data directory, by default.
pub const SQLITE_FILE: &str = "control-plane.db";

impl Store {
    /// Connects to `url` and applies the migrations not yet applied.
    pub async fn open(url: &str) -> Result<Store, OpenError> {
        sqlx::any::install_default_drivers();
        let backend = if url.starts_with("sqlite:") {
            Backend::Sqlite
        } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
            Backend::Postgres
        } else {
            return Err(OpenError::BadUrl(redact(url)));
        };
        let options =
            AnyConnectOptions::from_str(url).map_err(|_| OpenError::BadUrl(redact(url)))?;
        let pool = AnyPoolOptions::new()
            // SQLite allows one writer at a time: a few connections, each
            // waiting for the write lock rather than failing at once.
            .max_connections(match backend {
                Backend::Sqlite => 4,
                Backend::Postgres => 16,
            })
            .acquire_timeout(Duration::from_secs(10))
            .after_connect(move |conn, _| {
                Box::pin(async move {
                    if backend == Backend::Sqlite {
                        conn.execute("PRAGMA foreign_keys = ON").await?;
                        conn.execute("PRAGMA busy_timeout = 5000").await?;
                        conn.execute("PRAGMA synchronous = NORMAL").await?;
                    }
                    Ok(())
                })
            })
            .connect_with(options)
            .await
            .map_err(OpenError::Connect)?;
        if backend == Backend::Sqlite {
            // Readers do not block the writer, nor it them; kept in the file.
            pool.execute("PRAGMA journal_mode = WAL")
                .await
                .map_err(OpenError::Connect)?;
        }
        sqlx::migrate!("../migrations").run(&pool).await?;
        Ok(Store { pool, backend })
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// A transaction that will write. On SQLite it takes the write lock at
    /// once (`BEGIN IMMEDIATE`): a deferred transaction that reads and then
    /// writes fails at once with SQLITE_BUSY when another connection wrote
    /// in between (the busy timeout does not wait for that case), which the
    /// heartbeats and the metering loop make likely.
    pub async fn begin_write(&self) -> Result<sqlx::Transaction<'static, sqlx::Any>, sqlx::Error> {
        match self.backend {
            Backend::Sqlite => self.pool.begin_with("BEGIN IMMEDIATE").await,
            Backend::Postgres => self.pool.begin().await,
        }
    }

    /// A setting, if it has been set.
    pub async fn setting(&self, name: &str) -> sqlx::Result<Option<String>> {
        sqlx::query_scalar("SELECT value FROM settings WHERE name = $1")
            .bind(name)
            .fetch_optional(&self.pool)
            .await
    }

    /// The setting `name`, set to `make()` first if it has no value: the
    /// first caller's value wins, even when two race.
    pub async fn setting_or_init(
        &self,
        name: &str,
        make: impl FnOnce() -> String,
    ) -> sqlx::Result<String> {
        if let Some(value) = self.setting(name).await? {
            return Ok(value);
        }
        sqlx::query(
            "INSERT INTO settings (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING",
        )
        .bind(name)
        .bind(make())
        .execute(&self.pool)
        .await?;
        Ok(self.setting(name).await?.expect("set just now"))
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// `url` without its password, for messages.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            let user = userinfo.split(':').next().unwrap_or("");
            format!("{}{user}:***{}", &url[..scheme + 3], &url[at..])
        }
        _ => url.to_owned(),
    }
}

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// A new id: `prefix` and 16 random hex digits.
/// A new tenant's id.
pub(crate) fn new_tenant_id() -> shoal_wire::schema::TenantId {
    shoal_wire::schema::TenantId::parse(&new_id("t")).expect("a new id is a tenant id")
}

pub(crate) fn new_id(prefix: &str) -> String {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).expect("the OS random source works");
    let mut id = String::with_capacity(prefix.len() + 17);
    id.push_str(prefix);
    id.push('_');
    for b in bytes {
        id.push_str(&format!("{b:02x}"));
    }
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_not_shown_in_messages() {
        assert_eq!(
            redact("postgres://shoal:hunter2@db.internal:5432/shoal"),
            "postgres://shoal:***@db.internal:5432/shoal"
        );
        assert_eq!(redact("sqlite:///x.db"), "sqlite:///x.db");
    }

    #[tokio::test]
    async fn a_sqlite_store_migrates_and_keeps_settings() {
        let dir = tempfile::tempdir().unwrap();
        let url = default_url(dir.path());
        let store = Store::open(&url).await.unwrap();
        let first = store
            .setting_or_init("secret", || "one".into())
            .await
            .unwrap();
        let again = store
            .setting_or_init("secret", || "two".into())
            .await
            .unwrap();
        assert_eq!((first.as_str(), again.as_str()), ("one", "one"));
        store.close().await;
        // Reopened: migrations already applied, the setting kept.
        let store = Store::open(&url).await.unwrap();
        assert_eq!(
            store.setting("secret").await.unwrap().as_deref(),
            Some("one")
        );
        assert!(matches!(
            Store::open("mysql://x").await,
            Err(OpenError::BadUrl(_))
        ));
    }
}
