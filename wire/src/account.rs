//! Who a console user is, as the control plane's API answers it and the
//! console reads it, and the session cookies both read.

use serde::{Deserialize, Serialize};

/// The cookie that carries a session token (HttpOnly, SameSite=Strict).
pub const SESSION_COOKIE: &str = "shoal_session";
/// The cookie that carries the session's CSRF token, for double submit.
pub const CSRF_COOKIE: &str = "shoal_csrf";

/// The value of cookie `name` among `Cookie` header values, the first if it
/// is given more than once.
pub fn cookie<'a>(headers: impl IntoIterator<Item = &'a str>, name: &str) -> Option<String> {
    headers
        .into_iter()
        .flat_map(cookie::Cookie::split_parse)
        .filter_map(Result::ok)
        .find(|c| c.name() == name)
        .map(|c| c.value().to_owned())
}

/// A user's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Owns a tenant: everything in it.
    Owner,
    /// Works in a tenant: everything but its membership.
    Member,
    /// Runs the platform: every tenant, quotas, data nodes.
    Admin,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Owner => "owner",
            Role::Member => "member",
            Role::Admin => "admin",
        }
    }

    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "owner" => Some(Role::Owner),
            "member" => Some(Role::Member),
            "admin" => Some(Role::Admin),
            _ => None,
        }
    }
}

/// A user as the API answers one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct User {
    pub id: String,
    pub email: String,
    pub role: Role,
    /// None for a platform admin.
    pub tenant: Option<TenantRef>,
}

impl User {
    pub fn is_admin(&self) -> bool {
        self.role == Role::Admin
    }
}

/// A tenant a user belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TenantRef {
    pub id: String,
    pub name: String,
}

/// `GET /me`: who the caller is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Me {
    pub user: User,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_are_found_by_name_in_every_header() {
        let headers = ["a=1; shoal_csrf=x", "shoal_session=tok; b=2"];
        assert_eq!(cookie(headers, SESSION_COOKIE).as_deref(), Some("tok"));
        assert_eq!(cookie(headers, CSRF_COOKIE).as_deref(), Some("x"));
        assert_eq!(cookie(headers, "nope"), None);
        assert_eq!(
            cookie(["shoal_session="], SESSION_COOKIE).as_deref(),
            Some("")
        );
    }

    #[test]
    fn a_user_reads_as_the_api_writes_it() {
        let user: User = serde_json::from_value(serde_json::json!({"id": "u1",
            "email": "a@b.c", "role": "admin", "tenant": null}))
        .unwrap();
        assert!(user.is_admin() && user.tenant.is_none());
        assert_eq!(Role::parse(Role::Member.as_str()), Some(Role::Member));
    }
}
