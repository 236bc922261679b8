//! What names and credentials may look like: checked before anything is
//! stored, each refusal saying what is wrong.

use crate::auth::{MAX_PASSWORD, MIN_PASSWORD};
use crate::error::ApiError;

/// The signs an address's name may hold besides letters and digits (RFC
/// 5322's atext, and dots): no quotes, brackets, markup or spaces.
const LOCAL_SIGNS: &str = "!#$%&'*+-/=?^_`{|}~.";

/// An email address, trimmed and lower-cased.
pub fn email(raw: &str) -> Result<String, ApiError> {
    let email = raw.trim().to_lowercase();
    let bad = |why: &str| Err(ApiError::invalid(format!("email: {why}")));
    if email.is_empty() {
        return bad("is empty");
    }
    if email.len() > 254 {
        return bad("is longer than 254 characters");
    }
    if email.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return bad("has spaces or control characters");
    }
    match email.split_once('@') {
        Some((local, domain))
            if !local.is_empty()
                && local
                    .chars()
                    .all(|c| c.is_alphanumeric() || LOCAL_SIGNS.contains(c))
                && domain
                    .chars()
                    .all(|c| c.is_alphanumeric() || c == '-' || c == '.')
                && domain.contains('.')
                && !domain.starts_with('.')
                && !domain.ends_with('.') =>
        {
            Ok(email)
        }
        _ => bad("is not an address like name@example.com"),
    }
}

/// A new password.
pub fn password(password: &str) -> Result<(), ApiError> {
    let chars = password.chars().count();
    if chars < MIN_PASSWORD {
        return Err(ApiError::invalid(format!(
            "password: needs at least {MIN_PASSWORD} characters"
        )));
    }
    if password.len() > MAX_PASSWORD {
        return Err(ApiError::invalid(format!(
            "password: at most {MAX_PASSWORD} bytes"
        )));
    }
    Ok(())
}

/// A name users give: a tenant's, a database's, a table's. Lower-case
/// letters, digits, `-` and `_`; starts with a letter; 1 to `max` long.
pub fn name(what: &str, raw: &str, max: usize) -> Result<String, ApiError> {
    let bad = |why: String| Err(ApiError::invalid(format!("{what}: {why}")));
    if raw.is_empty() {
        return bad("is empty".into());
    }
    if raw.len() > max {
        return bad(format!("is longer than {max} characters"));
    }
    if !raw.starts_with(|c: char| c.is_ascii_lowercase()) {
        return bad(format!(
            "'{}' must start with a lower-case letter",
            printable(raw)
        ));
    }
    if let Some(c) = raw
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-' || *c == '_'))
    {
        return bad(format!(
            "'{}' has '{}': use lower-case letters, digits, '-' and '_'",
            printable(raw),
            c.escape_default()
        ));
    }
    Ok(raw.to_owned())
}

/// Whether `raw` — a name or id from a request's path or query — could name
/// anything at all: 1 to 255 bytes without control characters. What could
/// not is "not found" without asking the store (PostgreSQL refuses a NUL in
/// text outright).
pub fn could_name(raw: &str) -> bool {
    (1..=255).contains(&raw.len()) && !raw.chars().any(char::is_control)
}

/// `s` with control characters escaped, cut to 64 characters: safe to echo.
fn printable(s: &str) -> String {
    s.chars().take(64).flat_map(char::escape_default).collect()
}

/// The tenant a path names: not found if it cannot be one.
pub fn tenant(id: &str) -> Result<shoal_wire::schema::TenantId, ApiError> {
    shoal_wire::schema::TenantId::parse(id).map_err(|_| ApiError::not_found("tenant"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emails() {
        assert_eq!(email("  Ada@Example.COM ").unwrap(), "ada@example.com");
        for bad in [
            "",
            "ada",
            "@example.com",
            "ada@example",
            "a b@x.io",
            "a@b@c.io",
            "a@.io",
            "<b>x</b>@example.com",
            "a@exa<mple.com",
            "\"a\"@example.com",
            "a;b@example.com",
        ] {
            assert!(email(bad).is_err(), "{bad:?}");
        }
        assert!(email(&format!("{}@x.io", "a".repeat(250))).is_err());
        for good in ["o'brien+shoal@example.com", "zoë@bücher.de", "a.b-c@x-y.io"] {
            assert!(email(good).is_ok(), "{good:?}");
        }
    }

    #[test]
    fn passwords() {
        assert!(password("short").is_err());
        assert!(password("long enough").is_ok());
        assert!(password(&"x".repeat(MAX_PASSWORD + 1)).is_err());
    }

    #[test]
    fn names() {
        assert_eq!(name("tenant", "acme-co_2", 40).unwrap(), "acme-co_2");
        for bad in [
            "",
            "Acme",
            "2acme",
            "acme co",
            "a;drop table x",
            "a'--",
            "ä",
            "a\u{0}",
        ] {
            let e = name("tenant", bad, 40).unwrap_err();
            assert!(e.message.starts_with("tenant: "), "{}", e.message);
        }
        assert!(name("tenant", &"a".repeat(41), 40).is_err());
    }
}
