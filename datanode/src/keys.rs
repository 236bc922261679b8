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
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use shoal_wire::schema::{DatabaseName, TenantId};

use crate::tc::Role;

/// Characters in a key's prefix.
pub const PREFIX_LEN: usize = 16;
/// Fewest characters a key's secret may have.
pub const MIN_SECRET_LEN: usize = 32;
/// Most characters a key's secret may have.
pub const MAX_SECRET_LEN: usize = 128;
/// Most databases one key may be granted.
pub const MAX_GRANTS: usize = 1000;
/// Most keys one node holds.
pub const MAX_KEYS: usize = 1_000_000;

/// One database a key may use, and how.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyGrant {
    pub database: DatabaseName,
    pub role: Role,
}

/// A key as pushed to the node and kept in its catalog file: never the
/// secret, only its salted hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyDef {
    pub prefix: String,
    pub tenant: TenantId,
    /// 16 bytes, hex.
    pub salt: String,
    /// SHA-256 of the salt's bytes followed by the secret's, hex.
    pub hash: String,
    pub grants: Vec<KeyGrant>,
    /// Seconds since the Unix epoch after which the key no longer works.
    #[serde(default)]
    pub expires_at: Option<u64>,
}

/// Why a key definition was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyDefError {
    #[error("a key prefix is {PREFIX_LEN} characters of A-Z, a-z, 0-9")]
    Prefix,
    #[error("'{0}' must be {1} hex digits")]
    Hex(&'static str, usize),
    #[error("a key has at most {MAX_GRANTS} grants")]
    TooManyGrants,
    #[error("database '{0}' is granted twice")]
    DuplicateGrant(String),
    #[error("this node already holds {MAX_KEYS} keys")]
    TooManyKeys,
}

impl KeyDef {
    /// Checks a pushed definition's shape.
    pub fn check(&self) -> Result<(), KeyDefError> {
        if !is_prefix(&self.prefix) {
            return Err(KeyDefError::Prefix);
        }
        if decode_hex::<16>(&self.salt).is_none() {
            return Err(KeyDefError::Hex("salt", 32));
        }
        if decode_hex::<32>(&self.hash).is_none() {
            return Err(KeyDefError::Hex("hash", 64));
        }
        if self.grants.len() > MAX_GRANTS {
            return Err(KeyDefError::TooManyGrants);
        }
        let mut seen = std::collections::HashSet::new();
        for grant in &self.grants {
            if !seen.insert(&grant.database) {
                return Err(KeyDefError::DuplicateGrant(grant.database.to_string()));
            }
        }
        Ok(())
    }
}

fn is_prefix(prefix: &str) -> bool {
    prefix.len() == PREFIX_LEN && prefix.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// A new key: the text to hand its owner once, and the definition to keep.
pub fn generate(
    tenant: TenantId,
    grants: Vec<KeyGrant>,
    expires_at: Option<u64>,
) -> std::io::Result<(String, KeyDef)> {
    let prefix = random_text(PREFIX_LEN)?;
    let secret = random_text(MIN_SECRET_LEN + 8)?;
    let mut salt = [0u8; 16];
    getrandom::fill(&mut salt).map_err(|e| std::io::Error::other(e.to_string()))?;
    let def = KeyDef {
        prefix: prefix.clone(),
        tenant,
        salt: hex(&salt),
        hash: hex(&digest(&salt, secret.as_bytes())),
        grants,
        expires_at,
    };
    Ok((format!("{prefix}.{secret}"), def))
}

/// `len` random characters of A-Z, a-z, 0-9.
fn random_text(len: usize) -> std::io::Result<String> {
    const ALPHABET: &[u8; 62] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut out = String::with_capacity(len);
    let mut bytes = [0u8; 64];
    while out.len() < len {
        getrandom::fill(&mut bytes).map_err(|e| std::io::Error::other(e.to_string()))?;
        // 248 = 4 × 62: taking only bytes below it keeps every character equally likely.
        for &b in bytes.iter().filter(|&&b| b < 248) {
            if out.len() < len {
                out.push(ALPHABET[usize::from(b % 62)] as char);
            }
        }
    }
    Ok(out)
}

fn digest(salt: &[u8], secret: &[u8]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(salt);
    hasher.update(secret);
    hasher.finalize().into()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn decode_hex<const N: usize>(text: &str) -> Option<[u8; N]> {
    let text = text.as_bytes();
    if text.len() != 2 * N {
        return None;
    }
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let mut out = [0u8; N];
    for (i, pair) in text.chunks_exact(2).enumerate() {
        out[i] = digit(pair[0])? << 4 | digit(pair[1])?;
    }
    Some(out)
}

/// A key the node holds.
pub struct ApiKey {
    def: KeyDef,
    salt: [u8; 16],
    hash: [u8; 32],
    /// By database name.
    grants: HashMap<String, Role>,
    /// Set when the key is removed or replaced.
    dead: AtomicBool,
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
            grants: def
                .grants
                .iter()
                .map(|g| (g.database.to_string(), g.role))
                .collect(),
            dead: AtomicBool::new(false),
            def,
        })
    }

    pub fn def(&self) -> &KeyDef {
        &self.def
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

    fn secret_matches(&self, secret: &[u8]) -> bool {
        let presented = digest(&self.salt, secret);
        let diff = presented
            .iter()
            .zip(&self.hash)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b));
        diff == 0
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
        if !key.is_live() {
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
