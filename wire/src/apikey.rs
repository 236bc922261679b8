//! Tenant API keys as the control plane makes them and data nodes check
//! them: `<prefix>.<secret>`, a 16-character public prefix that names the
//! key and a secret of 40 random characters that only its owner keeps.
//! What is stored and pushed is a salted SHA-256 of the secret: the secret
//! is long and random, so a fast hash is enough — there is no password to
//! guess. Beside it, for SQL clients over the MySQL protocol, the form
//! `mysql_native_password` checks a password by: SHA-1 of the SHA-1 of the
//! secret (`sql_hash`), from which the secret cannot be had either.

use serde::{Deserialize, Serialize};
use sha1::Sha1;
use sha2::{Digest, Sha256};

use crate::schema::{DatabaseName, TenantId};

/// What a key may do with a database it is granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Read,
    ReadWrite,
}

impl Role {
    /// As the API writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Read => "read",
            Role::ReadWrite => "read_write",
        }
    }
}

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
    /// SHA-1 of the SHA-1 of the secret, hex (`sql_digest`): what a node
    /// checks a MySQL client's `mysql_native_password` answer by. Keys
    /// made before SQL access have none, and cannot be used over SQL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sql_hash: Option<String>,
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
        if (self.sql_hash.as_deref()).is_some_and(|h| decode_hex::<20>(h).is_none()) {
            return Err(KeyDefError::Hex("sql_hash", 40));
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

/// Whether `prefix` is a key prefix: its length and alphabet.
pub fn is_prefix(prefix: &str) -> bool {
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
        sql_hash: Some(hex(&sql_digest(secret.as_bytes()))),
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

pub fn digest(salt: &[u8], secret: &[u8]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(salt);
    hasher.update(secret);
    hasher.finalize().into()
}

/// SHA-1 of the SHA-1 of `secret`: the stored form of a
/// `mysql_native_password` password.
pub fn sql_digest(secret: &[u8]) -> [u8; 20] {
    Sha1::digest(Sha1::digest(secret)).into()
}

/// Whether `answer` is what a client that knows the secret of `stored`
/// (`sql_digest`) answers to `scramble` under `mysql_native_password`:
/// SHA-1(secret) XOR SHA-1(scramble, stored). The XOR with the second
/// gives SHA-1(secret) back, whose SHA-1 must be `stored`. Compared in
/// constant time.
pub fn sql_answer_matches(stored: &[u8; 20], scramble: &[u8], answer: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    if answer.len() != 20 {
        return false;
    }
    let mask: [u8; 20] = Sha1::new()
        .chain_update(scramble)
        .chain_update(stored)
        .finalize()
        .into();
    let mut first = [0u8; 20];
    for (i, b) in first.iter_mut().enumerate() {
        *b = answer[i] ^ mask[i];
    }
    let again: [u8; 20] = Sha1::digest(first).into();
    bool::from(again[..].ct_eq(&stored[..]))
}

/// What a client that knows `secret` answers to `scramble` under
/// `mysql_native_password`: for tests and tools.
pub fn sql_answer(secret: &[u8], scramble: &[u8]) -> [u8; 20] {
    let first: [u8; 20] = Sha1::digest(secret).into();
    let mask: [u8; 20] = Sha1::new()
        .chain_update(scramble)
        .chain_update(Sha1::digest(first))
        .finalize()
        .into();
    std::array::from_fn(|i| first[i] ^ mask[i])
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn decode_hex<const N: usize>(text: &str) -> Option<[u8; N]> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sql_digest_is_mysqls_stored_password() {
        // MySQL's PASSWORD('password'), as `mysql.user` held it.
        assert_eq!(
            hex(&sql_digest(b"password")),
            "2470c0c06dee42fd1618bb99005adca2ec9d1e19"
        );
    }

    #[test]
    fn only_an_answer_from_the_secret_matches() {
        let stored = sql_digest(b"the secret");
        let scramble = *b"0123456789abcdefghij";
        let answer = sql_answer(b"the secret", &scramble);
        assert!(sql_answer_matches(&stored, &scramble, &answer));
        assert!(!sql_answer_matches(
            &stored,
            b"another scramble....",
            &answer
        ));
        assert!(!sql_answer_matches(
            &stored,
            &scramble,
            &sql_answer(b"the secreT", &scramble)
        ));
        assert!(!sql_answer_matches(&stored, &scramble, &answer[..19]));
        assert!(!sql_answer_matches(&stored, &scramble, b""));
        // The stored form itself is no answer.
        assert!(!sql_answer_matches(&stored, &scramble, &stored));
    }
}
