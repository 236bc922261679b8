//! Who is calling: passwords (argon2id), session tokens (JWT, HS256), the
//! session cookie and its CSRF token, and the limits on login attempts.

use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::{Duration, Instant};

use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use axum::extract::{FromRequestParts, MatchedPath};
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method, StatusCode, header};
use dashmap::DashMap;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use subtle::ConstantTimeEq;

use crate::error::ApiError;
use crate::server::App;
use crate::store::now_ms;
use shoal_wire::schema::TenantId;

pub use shoal_wire::api::CSRF_COOKIE;
pub use shoal_wire::api::SESSION_COOKIE;
pub const CSRF_HEADER: &str = "x-csrf-token";
/// How long a session lasts.
pub const SESSION_SECS: i64 = 12 * 3600;
/// Longest password accepted: hashing is deliberately costly per byte.
pub const MAX_PASSWORD: usize = 256;
pub const MIN_PASSWORD: usize = 8;

/// A user's role.
pub use shoal_wire::api::Role;

/// Hashes a password with argon2id and a fresh salt (PHC string).
pub fn hash_password(password: &str) -> String {
    let mut salt = [0u8; 16];
    getrandom::fill(&mut salt).expect("the OS random source works");
    let salt = SaltString::encode_b64(&salt).expect("16 bytes is a valid salt");
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .expect("argon2 hashes any password of accepted length")
        .to_string()
}

/// Whether `password` matches the PHC `hash`.
pub fn verify_password(password: &str, hash: &str) -> bool {
    PasswordHash::new(hash).is_ok_and(|hash| {
        Argon2::default()
            .verify_password(password.as_bytes(), &hash)
            .is_ok()
    })
}

/// Runs argon2 off the async threads: it takes tens of milliseconds of CPU.
pub async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f)
        .await
        .expect("password hashing does not panic")
}

/// What a session token says.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Claims {
    /// The user's id.
    pub sub: String,
    /// Issued at, and expires at: seconds since the Unix epoch.
    pub iat: i64,
    pub exp: i64,
    /// Issued at, in milliseconds: a logout ends the sessions issued before it.
    pub issued_ms: i64,
    /// The token a cookie-authenticated write must also carry in its
    /// `X-CSRF-Token` header.
    pub csrf: String,
}

/// Signs and checks session tokens with the control plane's secret.
#[derive(Clone)]
pub struct Tokens {
    encoding: EncodingKey,
    decoding: DecodingKey,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tokens { .. }")
    }
}

impl Tokens {
    pub fn new(secret: &[u8]) -> Tokens {
        Tokens {
            encoding: EncodingKey::from_secret(secret),
            decoding: DecodingKey::from_secret(secret),
        }
    }

    /// A new session for `user`: its token and its CSRF token.
    pub fn issue(&self, user: &str) -> (String, Claims) {
        let issued_ms = now_ms();
        let now = issued_ms / 1000;
        let claims = Claims {
            sub: user.to_owned(),
            iat: now,
            exp: now + SESSION_SECS,
            issued_ms,
            csrf: random_hex(16),
        };
        let token = jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &self.encoding)
            .expect("HS256 signs any claims");
        (token, claims)
    }

    /// The claims of a token this control plane signed and that has not
    /// expired.
    pub fn check(&self, token: &str) -> Option<Claims> {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.leeway = 0;
        validation.set_required_spec_claims(&["exp", "sub", "iat"]);
        jsonwebtoken::decode::<Claims>(token, &self.decoding, &validation)
            .ok()
            .map(|data| data.claims)
    }
}

/// `bytes` random bytes as hex.
pub fn random_hex(bytes: usize) -> String {
    let mut raw = vec![0u8; bytes];
    getrandom::fill(&mut raw).expect("the OS random source works");
    raw.iter().map(|b| format!("{b:02x}")).collect()
}

/// The `Set-Cookie` values that start a session.
pub fn session_cookies(token: &str, csrf: &str, secure: bool) -> [String; 2] {
    let secure = if secure { "; Secure" } else { "" };
    [
        format!(
            "{SESSION_COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict; Max-Age={SESSION_SECS}{secure}"
        ),
        format!("{CSRF_COOKIE}={csrf}; Path=/; SameSite=Strict; Max-Age={SESSION_SECS}{secure}"),
    ]
}

/// The `Set-Cookie` values that end one.
pub fn cleared_cookies(secure: bool) -> [String; 2] {
    let secure = if secure { "; Secure" } else { "" };
    [
        format!("{SESSION_COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0{secure}"),
        format!("{CSRF_COOKIE}=; Path=/; SameSite=Strict; Max-Age=0{secure}"),
    ]
}

/// An authenticated caller.
#[derive(Debug, Clone)]
pub struct Caller {
    pub user_id: String,
    pub email: String,
    pub role: Role,
    /// The caller's tenant; `None` for platform admins.
    pub tenant_id: Option<TenantId>,
    pub tenant_name: Option<String>,
}

impl Caller {
    pub fn is_admin(&self) -> bool {
        self.role == Role::Admin
    }

    /// Refuses all but platform admins.
    pub fn require_admin(&self) -> Result<(), ApiError> {
        if self.is_admin() {
            Ok(())
        } else {
            Err(ApiError::forbidden("only platform admins may do this"))
        }
    }

    /// Refuses a reader, who changes nothing.
    pub fn require_change(&self) -> Result<(), ApiError> {
        if self.role == Role::Reader {
            return Err(ApiError::forbidden(
                "a reader changes nothing: ask the tenant's owner for a member's role",
            ));
        }
        Ok(())
    }

    /// The caller's tenant: refused for platform admins, who have none.
    pub fn tenant(&self) -> Result<&TenantId, ApiError> {
        self.tenant_id.as_ref().ok_or_else(|| {
            ApiError::invalid("a platform admin belongs to no tenant: log in as a tenant's user")
        })
    }
}

/// The session token of a request and whether it came from the cookie.
fn presented_token(headers: &HeaderMap) -> Option<(String, bool)> {
    if let Some(value) = headers.get(header::AUTHORIZATION) {
        let token = value.to_str().ok()?.strip_prefix("Bearer ")?.trim();
        return Some((token.to_owned(), false));
    }
    cookie(headers, SESSION_COOKIE).map(|token| (token, true))
}

fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    let values = (headers.get_all(header::COOKIE).iter()).filter_map(|v| v.to_str().ok());
    shoal_wire::api::cookie(values, name)
}

/// Whether two strings are equal, in time that does not depend on where
/// they differ.
fn same(a: &str, b: &str) -> bool {
    bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

impl FromRequestParts<Arc<App>> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, app: &Arc<App>) -> Result<Caller, ApiError> {
        let caller = Caller::authenticate(app, &parts.headers, &parts.method).await?;
        if !reads_only(parts) {
            caller.require_change()?;
        }
        Ok(caller)
    }
}

/// Whether a request changes nothing: every `GET`, and the few other
/// routes that only read, only end the caller's own session, or read or
/// write by what is sent (the rows route: its handler refuses a reader a
/// write). Any route not named here is a change, and a reader is refused it.
fn reads_only(parts: &Parts) -> bool {
    const READS: [&str; 3] = [
        "/api/v1/auth/logout",
        "/api/v1/ndbinfo/query",
        "/api/v1/databases/{db}/tables/{table}/rows",
    ];
    let safe = matches!(parts.method, Method::GET | Method::HEAD | Method::OPTIONS);
    let route = parts
        .extensions
        .get::<MatchedPath>()
        .map(MatchedPath::as_str);
    safe || route.is_some_and(|route| READS.contains(&route))
}

impl Caller {
    /// Who presents these headers for a request of `method`: a session
    /// token that is valid, not ended by a logout, of a user whose tenant is
    /// not suspended — and, for a write made with the cookie, its CSRF token.
    pub async fn authenticate(
        app: &App,
        headers: &HeaderMap,
        method: &Method,
    ) -> Result<Caller, ApiError> {
        let (token, from_cookie) = presented_token(headers).ok_or_else(|| {
            ApiError::unauthenticated("log in first: no session cookie or Bearer token")
        })?;
        let claims = app
            .tokens
            .check(&token)
            .ok_or_else(|| ApiError::unauthenticated("the session is invalid or has expired"))?;
        // A browser sends the cookie on any request to this site; a write
        // must also carry what only this site's pages can read.
        let safe = matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS);
        if from_cookie && !safe {
            let sent = headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok());
            if !sent.is_some_and(|sent| same(sent, &claims.csrf)) {
                return Err(ApiError::forbidden(
                    "a write authenticated by the session cookie needs the X-CSRF-Token header",
                ));
            }
        }
        let Some(user) = UserRow::load(&app.store, "u.id", &claims.sub).await? else {
            return Err(ApiError::unauthenticated(
                "the session's user no longer exists",
            ));
        };
        if claims.issued_ms < user.sessions_after {
            return Err(ApiError::unauthenticated(
                "the session has ended: log in again",
            ));
        }
        if user.suspended() {
            return Err(ApiError::forbidden("the tenant is suspended"));
        }
        if let Some(tenant) = &user.tenant_id {
            tracing::Span::current().record("tenant", tenant.as_str());
        }
        Ok(Caller {
            user_id: claims.sub,
            role: user.role()?,
            email: user.email,
            tenant_id: (user.tenant_id.map(TenantId::try_from).transpose())
                .map_err(|_| ApiError::internal())?,
            tenant_name: user.tenant_name,
        })
    }
}

/// A user and their tenant, as the store has them.
#[derive(Debug, sqlx::FromRow)]
pub struct UserRow {
    pub id: String,
    pub email: String,
    pub password_hash: String,
    pub role: String,
    pub tenant_id: Option<String>,
    pub tenant_name: Option<String>,
    pub tenant_status: Option<String>,
    pub sessions_after: i64,
}

impl UserRow {
    /// The user whose `column` (`u.id` or `u.email`) is `value`.
    pub async fn load(
        store: &crate::store::Store,
        column: &'static str,
        value: &str,
    ) -> sqlx::Result<Option<UserRow>> {
        debug_assert!(matches!(column, "u.id" | "u.email"));
        sqlx::query_as(&format!(
            "SELECT u.id, u.email, u.password_hash, u.role, u.tenant_id, \
                    t.name AS tenant_name, t.status AS tenant_status, u.sessions_after \
             FROM users u LEFT JOIN tenants t ON t.id = u.tenant_id WHERE {column} = $1"
        ))
        .bind(value)
        .fetch_optional(&store.pool)
        .await
    }

    pub fn suspended(&self) -> bool {
        self.tenant_status.as_deref() == Some("suspended")
    }

    pub fn role(&self) -> Result<Role, ApiError> {
        Role::parse(&self.role).ok_or_else(|| {
            tracing::error!(user = %self.id, role = %self.role, "a user with an unknown role");
            ApiError::internal()
        })
    }
}

/// Lets through a platform admin's session or the cluster secret (what a
/// metrics scraper presents); refuses everyone else.
pub async fn admin_or_cluster(app: &App, headers: &HeaderMap) -> Result<(), ApiError> {
    let secret = presented_token(headers)
        .filter(|(_, from_cookie)| !from_cookie)
        .is_some_and(|(token, _)| app.config.cluster_secret.matches(token.as_bytes()));
    if secret {
        return Ok(());
    }
    Caller::authenticate(app, headers, &Method::GET)
        .await?
        .require_admin()
}

/// Limits on logins: every attempt per client address, and failed ones
/// per account — so a script that logs in often is not locked out, and a
/// guesser is.
#[derive(Debug)]
pub struct LoginLimits {
    failures_per_account: DefaultKeyedRateLimiter<String>,
    per_address: DefaultKeyedRateLimiter<IpAddr>,
    /// Accounts that failed too often, and until when they are refused.
    locked: DashMap<String, Instant>,
}

/// Failed logins an account may have a minute.
pub const FAILURES_PER_MINUTE: u32 = 10;
/// Login attempts an address may make a minute.
pub const ATTEMPTS_PER_MINUTE: u32 = 60;

impl Default for LoginLimits {
    fn default() -> LoginLimits {
        let per_minute = |n| Quota::per_minute(NonZeroU32::new(n).expect("non-zero"));
        LoginLimits {
            failures_per_account: RateLimiter::keyed(per_minute(FAILURES_PER_MINUTE)),
            per_address: RateLimiter::keyed(per_minute(ATTEMPTS_PER_MINUTE)),
            locked: DashMap::new(),
        }
    }
}

fn too_many(wait: Duration, whose: &str) -> ApiError {
    let secs = wait.as_secs() + 1;
    let mut e = ApiError::new(
        StatusCode::TOO_MANY_REQUESTS,
        "TOO_MANY_ATTEMPTS",
        format!("too many login attempts {whose}; try again in {secs} s"),
    );
    e.retry_after_secs = Some(secs);
    e
}

impl LoginLimits {
    /// Before checking a password: refused with when to retry if `address`
    /// has tried too often, or `email` has failed too often.
    pub fn attempt(&self, email: &str, address: IpAddr) -> Result<(), ApiError> {
        let clock = DefaultClock::default();
        self.per_address.check_key(&address).map_err(|not_until| {
            too_many(not_until.wait_time_from(clock.now()), "from this address")
        })?;
        let now = Instant::now();
        if let Some(until) = self.locked.get(email).map(|u| *u) {
            if now < until {
                return Err(too_many(until - now, "for this account"));
            }
            self.locked.remove(email);
        }
        if self.per_address.len() > 100_000 {
            self.per_address.retain_recent();
        }
        Ok(())
    }

    /// After a wrong password: counts the failure against the account, and
    /// locks it once it has failed too often.
    pub fn failed(&self, email: &str) {
        let clock = DefaultClock::default();
        if let Err(not_until) = self.failures_per_account.check_key(&email.to_owned()) {
            let wait = not_until.wait_time_from(clock.now());
            self.locked.insert(email.to_owned(), Instant::now() + wait);
        }
        if self.failures_per_account.len() > 100_000 {
            self.failures_per_account.retain_recent();
        }
        if self.locked.len() > 100_000 {
            let now = Instant::now();
            self.locked.retain(|_, until| *until > now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_hash_with_argon2id_and_verify() {
        let hash = hash_password("correct horse");
        assert!(hash.starts_with("$argon2id$"), "{hash}");
        assert!(verify_password("correct horse", &hash));
        assert!(!verify_password("correct horsf", &hash));
        assert!(!verify_password("correct horse", "not a hash"));
        assert_ne!(
            hash,
            hash_password("correct horse"),
            "a fresh salt each time"
        );
    }

    #[test]
    fn tokens_check_their_signature_and_expiry() {
        let tokens = Tokens::new(b"one secret");
        let (token, claims) = tokens.issue("u_1");
        assert_eq!(tokens.check(&token).unwrap().sub, "u_1");
        assert_eq!(claims.csrf.len(), 32);
        assert!(Tokens::new(b"another secret").check(&token).is_none());
        let mut tampered = token.clone();
        tampered.insert(tampered.len() - 5, 'x');
        assert!(tokens.check(&tampered).is_none());
        let expired = Claims {
            exp: now_ms() / 1000 - 1,
            ..claims
        };
        let expired = jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &expired,
            &EncodingKey::from_secret(b"one secret"),
        )
        .unwrap();
        assert!(tokens.check(&expired).is_none());
    }

    #[test]
    fn failures_lock_an_account_and_attempts_are_limited_per_address() {
        let limits = LoginLimits::default();
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        // Successful logins do not count against the account.
        for _ in 0..20 {
            limits.attempt("x@example.com", a).unwrap();
        }
        for _ in 0..=FAILURES_PER_MINUTE {
            limits.failed("x@example.com");
        }
        let e = limits.attempt("x@example.com", a).unwrap_err();
        assert_eq!(
            (e.status, e.code),
            (StatusCode::TOO_MANY_REQUESTS, "TOO_MANY_ATTEMPTS")
        );
        assert!(e.retry_after_secs.unwrap() >= 1);
        // Another account from the same address still has attempts left...
        limits.attempt("y@example.com", a).unwrap();
        // ...until the address has made too many.
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        for _ in 0..ATTEMPTS_PER_MINUTE {
            limits.attempt("z@example.com", b).unwrap();
        }
        assert!(limits.attempt("z@example.com", b).is_err());
    }
}
