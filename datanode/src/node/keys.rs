//! Tenant API keys, as the data node holds them.
//!
//! A key reads `<prefix>.<secret>`: a 16-character public prefix that names
//! it, and a secret the node never keeps. Per prefix the node holds a salted
//! SHA-256 of the secret, the tenant, the databases granted with a role, and
//! an expiry — pushed by the control plane (or set over the internal API).
//! Checking a key is a map lookup and one hash: it never leaves the node.
//!
//! Secrets are at least 32 random characters, so a fast salted hash is
//! enough: there is no password to guess. The comparison takes the same time
//! wherever the hashes differ.
//!
//! A key that is replaced or removed is marked dead at once; a connection
//! that authenticated with it looks at that mark before every command.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use shoal_wire::schema::TenantId;
use subtle::ConstantTimeEq;

use crate::tc::Role;

pub(crate) use shoal_wire::apikey::{
    KeyDef, KeyDefError, MAX_KEYS, MAX_SECRET_LEN, MIN_SECRET_LEN, PREFIX_LEN, generate,
};
use shoal_wire::apikey::{decode_hex, digest, sql_answer_matches};

/// A key the node holds.
pub struct ApiKey {
    def: KeyDef,
    salt: [u8; 16],
    hash: [u8; 32],
    /// What an SQL client's `mysql_native_password` answer is checked by,
    /// if the key may be used over SQL.
    sql_hash: Option<[u8; 20]>,
    /// By database name. Fx-hashed: looked up at every statement, and
    /// its names are the key owner's own.
    grants: rustc_hash::FxHashMap<String, Role>,
    /// Set when the key is removed or replaced.
    dead: AtomicBool,
    /// When the key was last used, in seconds since the Unix epoch (0:
    /// never): reported to the control plane.
    last_used: AtomicU64,
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiKey")
            .field("prefix", &self.def.prefix)
            .field("tenant", &self.def.tenant)
            .finish_non_exhaustive()
    }
}

impl ApiKey {
    fn new(def: KeyDef) -> Result<ApiKey, KeyDefError> {
        def.check()?;
        Ok(ApiKey {
            salt: decode_hex(&def.salt).expect("checked"),
            hash: decode_hex(&def.hash).expect("checked"),
            sql_hash: def
                .sql_hash
                .as_deref()
                .map(|h| decode_hex(h).expect("checked")),
            grants: def
                .grants
                .iter()
                .map(|g| (g.database.to_string(), g.role))
                .collect(),
            dead: AtomicBool::new(false),
            last_used: AtomicU64::new(0),
            def,
        })
    }

    pub fn def(&self) -> &KeyDef {
        &self.def
    }

    /// The salted hash of the key's secret: which key this is, for a node
    /// the key's session is carried to (`ApiKeys::carried_sql`).
    pub(crate) fn hash(&self) -> &[u8; 32] {
        &self.hash
    }

    pub fn prefix(&self) -> &str {
        &self.def.prefix
    }

    pub fn tenant(&self) -> &TenantId {
        &self.def.tenant
    }

    /// The role the key has on `database`, if it is granted it.
    pub fn role(&self, database: &str) -> Option<Role> {
        self.grants.get(database).copied()
    }

    /// Whether the key still works: not removed, replaced or expired.
    pub fn is_live(&self) -> bool {
        !self.dead.load(Ordering::Relaxed)
            && self.def.expires_at.is_none_or(|at| unix_seconds() < at)
    }

    /// Whether the key may be used now, noting that it is.
    pub fn use_now(&self) -> bool {
        let now = unix_seconds();
        if self.dead.load(Ordering::Relaxed) || self.def.expires_at.is_some_and(|at| now >= at) {
            return false;
        }
        // Written once a second at most: the cache line stays shared.
        if self.last_used.load(Ordering::Relaxed) != now {
            self.last_used.store(now, Ordering::Relaxed);
        }
        true
    }

    /// When the key was last used (seconds since the Unix epoch), if ever.
    pub fn last_used(&self) -> Option<u64> {
        Some(self.last_used.load(Ordering::Relaxed)).filter(|&at| at > 0)
    }

    fn secret_matches(&self, secret: &[u8]) -> bool {
        let presented = digest(&self.salt, secret);
        bool::from(presented[..].ct_eq(&self.hash[..]))
    }
}

fn unix_seconds() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Why a presented key was not accepted. Deliberately vague to the caller:
/// an unknown prefix and a wrong secret read the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("an API key is required")]
    Missing,
    #[error("the API key is not valid")]
    Invalid,
    #[error("the API key has expired or was revoked")]
    Expired,
}

/// Every key the node holds, by prefix.
#[derive(Debug, Default)]
pub struct ApiKeys {
    keys: std::sync::RwLock<HashMap<String, Arc<ApiKey>>>,
}

impl ApiKeys {
    /// Checks a presented `<prefix>.<secret>`.
    pub fn verify(&self, presented: &[u8]) -> Result<Arc<ApiKey>, AuthError> {
        if presented.is_empty() {
            return Err(AuthError::Missing);
        }
        let Some(dot) = presented.iter().position(|&b| b == b'.') else {
            return Err(AuthError::Invalid);
        };
        let (prefix, secret) = (&presented[..dot], &presented[dot + 1..]);
        if prefix.len() != PREFIX_LEN || !(MIN_SECRET_LEN..=MAX_SECRET_LEN).contains(&secret.len())
        {
            return Err(AuthError::Invalid);
        }
        let prefix = std::str::from_utf8(prefix).map_err(|_| AuthError::Invalid)?;
        let key = self.get(prefix).ok_or(AuthError::Invalid)?;
        if !key.secret_matches(secret) {
            return Err(AuthError::Invalid);
        }
        if !key.use_now() {
            return Err(AuthError::Expired);
        }
        Ok(key)
    }

    /// Checks an SQL client's login: the key's prefix as its user name,
    /// and its `mysql_native_password` `answer` to `scramble`. A key made
    /// before SQL access (no `sql_hash`) is refused, as a wrong secret is.
    pub fn verify_sql(
        &self,
        user: &[u8],
        scramble: &[u8],
        answer: &[u8],
    ) -> Result<Arc<ApiKey>, AuthError> {
        if answer.is_empty() {
            return Err(AuthError::Missing);
        }
        let prefix = std::str::from_utf8(user).map_err(|_| AuthError::Invalid)?;
        let key = self.get(prefix).ok_or(AuthError::Invalid)?;
        let stored = key.sql_hash.as_ref().ok_or(AuthError::Invalid)?;
        if !sql_answer_matches(stored, scramble, answer) {
            return Err(AuthError::Invalid);
        }
        if !key.use_now() {
            return Err(AuthError::Expired);
        }
        Ok(key)
    }

    /// The key an SQL session logged in with on another node of the group
    /// and carried here: the key with prefix `user`, if it is still the
    /// one whose secret the client proved it knows there (its salted hash
    /// is `hash`) and may be used now.
    pub(crate) fn carried_sql(
        &self,
        user: &str,
        hash: &[u8; 32],
    ) -> Result<Arc<ApiKey>, AuthError> {
        let key = self.get(user).ok_or(AuthError::Invalid)?;
        if key.hash != *hash || key.sql_hash.is_none() {
            return Err(AuthError::Invalid);
        }
        if !key.use_now() {
            return Err(AuthError::Expired);
        }
        Ok(key)
    }

    pub fn get(&self, prefix: &str) -> Option<Arc<ApiKey>> {
        self.read().get(prefix).cloned()
    }

    /// Adds or replaces a key; a key it replaces stops working at once.
    pub fn put(&self, def: KeyDef) -> Result<(), KeyDefError> {
        let key = Arc::new(ApiKey::new(def)?);
        let mut keys = self.write();
        if keys.len() >= MAX_KEYS && !keys.contains_key(key.prefix()) {
            return Err(KeyDefError::TooManyKeys);
        }
        if let Some(old) = keys.insert(key.prefix().to_owned(), key) {
            old.dead.store(true, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Removes a key; it stops working at once. Whether it was there.
    pub fn remove(&self, prefix: &str) -> bool {
        match self.write().remove(prefix) {
            Some(old) => {
                old.dead.store(true, Ordering::Relaxed);
                true
            }
            None => false,
        }
    }

    /// Every key's definition, by prefix.
    /// The keys used since `since` (seconds since the Unix epoch), most
    /// recent first, at most `most` of them: prefix and when.
    pub fn used_since(&self, since: u64, most: usize) -> Vec<(String, u64)> {
        let mut used: Vec<(String, u64)> = self
            .read()
            .values()
            .filter_map(|k| {
                k.last_used()
                    .filter(|&at| at >= since)
                    .map(|at| (k.def.prefix.clone(), at))
            })
            .collect();
        used.sort_unstable_by_key(|&(_, at)| std::cmp::Reverse(at));
        used.truncate(most);
        used
    }

    pub fn defs(&self) -> Vec<KeyDef> {
        let mut defs: Vec<KeyDef> = self.read().values().map(|k| k.def.clone()).collect();
        defs.sort_by(|a, b| a.prefix.cmp(&b.prefix));
        defs
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, Arc<ApiKey>>> {
        self.keys.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<String, Arc<ApiKey>>> {
        self.keys.write().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_wire::apikey::KeyGrant;
    use shoal_wire::schema::DatabaseName;

    fn tenant() -> TenantId {
        TenantId::parse("t1").unwrap()
    }

    fn grant(db: &str, role: Role) -> KeyGrant {
        KeyGrant {
            database: DatabaseName::parse(db).unwrap(),
            role,
        }
    }

    #[test]
    fn a_generated_key_verifies_and_nothing_else_does() {
        let keys = ApiKeys::default();
        let (text, def) = generate(tenant(), vec![grant("shop", Role::Read)], None).unwrap();
        assert_eq!(text.find('.'), Some(PREFIX_LEN));
        assert!(
            !serde_json::to_string(&def)
                .unwrap()
                .contains(&text[PREFIX_LEN + 1..])
        );
        keys.put(def).unwrap();
        let key = keys.verify(text.as_bytes()).unwrap();
        assert_eq!(key.role("shop"), Some(Role::Read));
        assert_eq!(key.role("other"), None);

        let mut wrong = text.clone().into_bytes();
        let last = wrong.len() - 1;
        wrong[last] ^= 1;
        assert_eq!(keys.verify(&wrong).unwrap_err(), AuthError::Invalid);
        assert_eq!(keys.verify(b"").unwrap_err(), AuthError::Missing);
        for bad in [&b"nodot"[..], b".", b"abc.def", &[0xff; 60]] {
            assert_eq!(keys.verify(bad).unwrap_err(), AuthError::Invalid);
        }
    }

    #[test]
    fn an_sql_login_verifies_with_the_secret_only() {
        let keys = ApiKeys::default();
        let (text, def) = generate(tenant(), vec![grant("shop", Role::Read)], None).unwrap();
        let (prefix, secret) = text.split_once('.').unwrap();
        keys.put(def.clone()).unwrap();
        let scramble = *b"abcdefghij0123456789";
        let answer = shoal_wire::apikey::sql_answer(secret.as_bytes(), &scramble);
        let key = keys
            .verify_sql(prefix.as_bytes(), &scramble, &answer)
            .unwrap();
        assert_eq!(key.role("shop"), Some(Role::Read));
        let wrong = shoal_wire::apikey::sql_answer(b"not it", &scramble);
        for (user, answer) in [
            (prefix.as_bytes(), &wrong[..]),
            (b"AAAAAAAAAAAAAAAA", &answer[..]),
            (&[0xff; 16], &answer[..]),
        ] {
            assert_eq!(
                keys.verify_sql(user, &scramble, answer).unwrap_err(),
                AuthError::Invalid
            );
        }
        assert_eq!(
            keys.verify_sql(prefix.as_bytes(), &scramble, b"")
                .unwrap_err(),
            AuthError::Missing
        );
        // A key made before SQL access cannot log in over SQL.
        keys.put(KeyDef {
            sql_hash: None,
            ..def
        })
        .unwrap();
        assert_eq!(
            keys.verify_sql(prefix.as_bytes(), &scramble, &answer)
                .unwrap_err(),
            AuthError::Invalid
        );
    }

    #[test]
    fn a_carried_session_keeps_only_the_key_it_logged_in_with() {
        let keys = ApiKeys::default();
        let (text, def) = generate(tenant(), vec![grant("shop", Role::Read)], None).unwrap();
        let prefix = text.split_once('.').unwrap().0;
        keys.put(def.clone()).unwrap();
        let hash = *keys.get(prefix).unwrap().hash();
        assert_eq!(keys.carried_sql(prefix, &hash).unwrap().prefix(), prefix);
        let mut other = hash;
        other[0] ^= 1;
        assert_eq!(
            keys.carried_sql(prefix, &other).unwrap_err(),
            AuthError::Invalid
        );
        assert_eq!(
            keys.carried_sql("AAAAAAAAAAAAAAAA", &hash).unwrap_err(),
            AuthError::Invalid
        );
        // Replaced by a key of the same prefix and another secret: refused.
        let (_, new) = generate(tenant(), vec![grant("shop", Role::Read)], None).unwrap();
        keys.put(KeyDef {
            prefix: def.prefix.clone(),
            ..new
        })
        .unwrap();
        assert_eq!(
            keys.carried_sql(prefix, &hash).unwrap_err(),
            AuthError::Invalid
        );
        // Expired: refused as such.
        keys.put(KeyDef {
            expires_at: Some(1),
            ..def
        })
        .unwrap();
        assert_eq!(
            keys.carried_sql(prefix, &hash).unwrap_err(),
            AuthError::Expired
        );
    }

    #[test]
    fn removal_and_replacement_kill_a_held_key() {
        let keys = ApiKeys::default();
        let (text, def) = generate(tenant(), vec![grant("shop", Role::ReadWrite)], None).unwrap();
        keys.put(def.clone()).unwrap();
        let held = keys.verify(text.as_bytes()).unwrap();
        keys.put(KeyDef {
            grants: vec![],
            ..def.clone()
        })
        .unwrap();
        assert!(!held.is_live());
        let again = keys.verify(text.as_bytes()).unwrap();
        assert_eq!(again.role("shop"), None);
        assert!(keys.remove(&def.prefix));
        assert!(!again.is_live());
        assert_eq!(
            keys.verify(text.as_bytes()).unwrap_err(),
            AuthError::Invalid
        );
    }

    #[test]
    fn an_expired_key_is_refused() {
        let keys = ApiKeys::default();
        let (text, def) = generate(tenant(), vec![], Some(1)).unwrap();
        keys.put(def).unwrap();
        assert_eq!(
            keys.verify(text.as_bytes()).unwrap_err(),
            AuthError::Expired
        );
    }

    #[test]
    fn malformed_definitions_are_refused() {
        let (_, def) = generate(tenant(), vec![], None).unwrap();
        let cases = [
            KeyDef {
                prefix: "short".into(),
                ..def.clone()
            },
            KeyDef {
                prefix: "abcdefghijklmno!".into(),
                ..def.clone()
            },
            KeyDef {
                salt: "zz".repeat(16),
                ..def.clone()
            },
            KeyDef {
                hash: "00".into(),
                ..def.clone()
            },
            KeyDef {
                grants: vec![grant("a", Role::Read), grant("a", Role::ReadWrite)],
                ..def.clone()
            },
        ];
        let keys = ApiKeys::default();
        for case in cases {
            assert!(keys.put(case).is_err());
        }
        assert!(keys.defs().is_empty());
    }
}
