//! The control plane's accounts API from outside: `shoal control-plane`
//! started as a process on a free port, with a fresh store per test, each
//! test run on SQLite and on PostgreSQL.

mod common;

use common::control::{Auth, Backend, Control, code, session};
use common::{PgDatabase, Shoal};
use reqwest::header::SET_COOKIE;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

on_both_stores!(
    signup_login_me_and_logout,
    bad_input_is_refused_clearly_and_creates_nothing,
    login_attempts_are_limited,
    sessions_and_accounts_survive_a_restart,
    the_openapi_document_describes_exactly_the_routes_served,
    owners_manage_members_and_members_work_but_cannot_manage,
    readers_read_everything_and_are_refused_every_change,
);

async fn signup_login_me_and_logout(backend: Backend) {
    let cp = Control::start(backend);
    let signed_up = cp.signup("Ada@Example.com", "analytical").await;
    assert_eq!(signed_up.user["email"], "ada@example.com");
    assert_eq!(signed_up.user["role"], "owner");
    assert_eq!(signed_up.user["tenant"]["name"], "analytical");
    let session_cookie = signed_up
        .cookies
        .iter()
        .find(|c| c.starts_with("shoal_session="))
        .expect("a session cookie");
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(session_cookie.contains(attribute), "{session_cookie}");
    }
    let csrf_cookie = signed_up
        .cookies
        .iter()
        .find(|c| c.starts_with("shoal_csrf="))
        .unwrap();
    assert!(
        !csrf_cookie.contains("HttpOnly"),
        "the console's scripts read it"
    );

    // Login with the wrong password and with an unknown email: the same answer.
    let (status, _, wrong) = cp.login("ada@example.com", "not the password").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _, unknown) = cp.login("nobody@example.com", "not the password").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(wrong, unknown);
    assert_eq!(code(&wrong), "UNAUTHENTICATED");

    let (status, headers, body) = cp.login("  ADA@example.com", "a long password").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let session = session(&headers, body);
    assert_eq!(session.user, signed_up.user);

    // The token works as a Bearer token and as the cookie.
    let (status, headers, me) = cp
        .call(Method::GET, "/me", None, Auth::Bearer(&session.token))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(me["user"], signed_up.user);
    assert_eq!(headers["cache-control"], "no-store");
    let (status, _, me) = cp
        .call(Method::GET, "/me", None, Auth::Cookie(&session.token, None))
        .await;
    assert_eq!((status, &me["user"]), (StatusCode::OK, &signed_up.user));
    let (status, _, body) = cp.call(Method::GET, "/me", None, Auth::None).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::UNAUTHORIZED, "UNAUTHENTICATED")
    );
    let (status, _, _) = cp
        .call(Method::GET, "/me", None, Auth::Bearer("not.a.token"))
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    // A write with only the cookie is refused: it needs the CSRF token too.
    let (status, _, body) = cp
        .call(
            Method::POST,
            "/auth/logout",
            None,
            Auth::Cookie(&session.token, None),
        )
        .await;
    assert_eq!((status, code(&body)), (StatusCode::FORBIDDEN, "FORBIDDEN"));
    let (status, _, _) = cp
        .call(
            Method::POST,
            "/auth/logout",
            None,
            Auth::Cookie(&session.token, Some(&signed_up.csrf)),
        )
        .await;
    assert_eq!(
        status,
        StatusCode::FORBIDDEN,
        "another session's CSRF token"
    );
    let (status, headers, _) = cp
        .call(
            Method::POST,
            "/auth/logout",
            None,
            Auth::Cookie(&session.token, Some(&session.csrf)),
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert!(
        headers
            .get_all(SET_COOKIE)
            .iter()
            .any(|c| c.to_str().unwrap().starts_with("shoal_session=;")),
        "the cookie is cleared"
    );
    // Logout ends every session of the user's, Bearer ones too.
    for token in [&session.token, &signed_up.token] {
        let (status, _, _) = cp.call(Method::GET, "/me", None, Auth::Bearer(token)).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
    }
    let (status, _, body) = cp.login("ada@example.com", "a long password").await;
    assert_eq!(status, StatusCode::OK);
    let (status, _, _) = cp
        .call(
            Method::GET,
            "/me",
            None,
            Auth::Bearer(body["token"].as_str().unwrap()),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "a new login works");

    // Neither the password nor a token reaches the log.
    let log = cp.shoal.stderr();
    assert!(!log.contains("a long password"));
    assert!(!log.contains(&session.token));
}

async fn bad_input_is_refused_clearly_and_creates_nothing(backend: Backend) {
    let cp = Control::start(backend);
    let url = format!("{}/api/v1/auth/signup", cp.shoal.control_url);
    let raw = |body: Vec<u8>, content_type: &'static str| {
        let req = cp
            .http
            .post(&url)
            .header("content-type", content_type)
            .body(body);
        async move {
            let response = req.send().await.unwrap();
            let status = response.status();
            (status, response.json::<Value>().await.unwrap())
        }
    };
    let (status, body) = raw(b"{\"email\": ".to_vec(), "application/json").await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::BAD_REQUEST, "INVALID_REQUEST")
    );
    let (status, body) = raw(b"email=a".to_vec(), "application/x-www-form-urlencoded").await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::UNSUPPORTED_MEDIA_TYPE, "UNSUPPORTED_MEDIA_TYPE")
    );
    let mut huge =
        br#"{"email": "a@b.io", "password": "a long password", "tenant_name": ""#.to_vec();
    huge.extend(std::iter::repeat_n(b'a', 100 << 10));
    huge.extend(br#""}"#);
    let (status, body) = raw(huge, "application/json").await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::PAYLOAD_TOO_LARGE, "PAYLOAD_TOO_LARGE")
    );
    let (status, body) = raw(vec![0xff, 0xfe, b'{'], "application/json").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");

    let good =
        json!({"email": "grace@example.com", "password": "a long password", "tenant_name": "navy"});
    let with = |field: &str, value: Value| {
        let mut body = good.clone();
        body[field] = value;
        body
    };
    let cases = [
        (with("email", json!("grace")), "email"),
        (with("email", json!("")), "email"),
        (
            with("email", json!(format!("{}@x.io", "g".repeat(300)))),
            "email",
        ),
        (with("password", json!("short")), "password"),
        (with("password", json!("p".repeat(10_000))), "password"),
        (with("tenant_name", json!("")), "tenant_name"),
        (with("tenant_name", json!("Navy")), "tenant_name"),
        (
            with("tenant_name", json!("navy'; DROP TABLE tenants; --")),
            "tenant_name",
        ),
        (with("tenant_name", json!("navy\u{0}")), "tenant_name"),
        (with("tenant_name", json!("n".repeat(41))), "tenant_name"),
        (with("tenant_name", json!(7)), "tenant_name"),
        (with("unexpected", json!(1)), "unexpected"),
        (json!({"email": "grace@example.com"}), "password"),
        (json!([]), ""),
    ];
    for (body, field) in &cases {
        let (status, answer) = cp.post("/auth/signup", body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body} → {answer}");
        assert_eq!(code(&answer), "INVALID_REQUEST");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains(field), "{message:?} names {field:?}");
    }
    // Nothing was made: the email is still free, and so is the name.
    let (status, _, _) = cp.login("grace@example.com", "a long password").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    cp.signup("grace@example.com", "navy").await;

    let (status, body) = cp
        .post("/auth/signup", &with("tenant_name", json!("army")))
        .await;
    assert_eq!((status, code(&body)), (StatusCode::CONFLICT, "EMAIL_TAKEN"));
    let (status, body) = cp
        .post("/auth/signup", &with("email", json!("other@example.com")))
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::CONFLICT, "TENANT_NAME_TAKEN")
    );

    let (status, _, body) = cp
        .call(Method::GET, "/no/such/route", None, Auth::None)
        .await;
    assert_eq!((status, code(&body)), (StatusCode::NOT_FOUND, "NOT_FOUND"));
    let (status, _, body) = cp.call(Method::GET, "/healthz", None, Auth::None).await;
    assert_eq!((status, &body["status"]), (StatusCode::OK, &json!("ok")));
}

async fn login_attempts_are_limited(backend: Backend) {
    let cp = Control::start(backend);
    cp.signup("eve@example.com", "guessed").await;
    let mut refused = None;
    for _ in 0..12 {
        let (status, headers, body) = cp.login("eve@example.com", "wrong guess").await;
        if status == StatusCode::TOO_MANY_REQUESTS {
            refused = Some((headers, body));
            break;
        }
        assert_eq!(status, StatusCode::UNAUTHORIZED);
    }
    let (headers, body) = refused.expect("guessing is cut off within 12 attempts");
    assert_eq!(code(&body), "TOO_MANY_ATTEMPTS");
    let retry: u64 = headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    // Even the right password waits now.
    let (status, _, _) = cp.login("eve@example.com", "a long password").await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
}

async fn sessions_and_accounts_survive_a_restart(backend: Backend) {
    let pg = match backend {
        Backend::Sqlite => None,
        Backend::Postgres => Some(PgDatabase::create()),
    };
    let dir = tempfile::tempdir().unwrap();
    let url = pg.as_ref().map(|db| db.url.as_str());
    let start = || Control {
        shoal: Shoal::control_plane_in(url, &[], &[], dir.path()),
        _pg: None,
        http: reqwest::Client::new(),
    };
    let cp = start();
    let session = cp.signup("lin@example.com", "restarts").await;
    let (code_, _) = cp.shoal.terminate();
    assert_eq!(code_, Some(0));
    if url.is_none() {
        assert!(dir.path().join("control-plane.db").exists());
    }
    let cp = start();
    let (status, _, me) = cp
        .call(Method::GET, "/me", None, Auth::Bearer(&session.token))
        .await;
    assert_eq!(
        (status, &me["user"]),
        (StatusCode::OK, &session.user),
        "the signing secret is kept"
    );
    let (status, _, _) = cp.login("lin@example.com", "a long password").await;
    assert_eq!(status, StatusCode::OK);
}

async fn the_openapi_document_describes_exactly_the_routes_served(backend: Backend) {
    let cp = Control::start(backend);
    let (status, _, doc) = cp
        .call(Method::GET, "/openapi.json", None, Auth::None)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        doc["openapi"].as_str().unwrap().starts_with("3."),
        "{}",
        doc["openapi"]
    );
    let paths = doc["paths"].as_object().unwrap();
    // The control-plane calls of API.md that exist so far, each documented.
    for (path, method) in [
        ("/auth/signup", "post"),
        ("/auth/login", "post"),
        ("/auth/logout", "post"),
        ("/me", "get"),
        ("/databases", "get"),
        ("/databases", "post"),
        ("/databases/{db}", "get"),
        ("/databases/{db}", "delete"),
        ("/databases/{db}/tables", "get"),
        ("/databases/{db}/tables", "post"),
        ("/databases/{db}/tables/{table}", "delete"),
        ("/databases/{db}/tables/{table}/indexes", "post"),
        ("/databases/{db}/tables/{table}/indexes/{index}", "delete"),
        ("/databases/{db}/memory", "get"),
        ("/api-keys", "get"),
        ("/api-keys", "post"),
        ("/api-keys/{id}", "delete"),
        ("/quotas", "get"),
        ("/admin/tenants", "get"),
        ("/admin/tenants/{id}/suspend", "post"),
        ("/admin/tenants/{id}/resume", "post"),
        ("/admin/tenants/{id}/quota", "put"),
        ("/admin/tenants/{id}/databases/{db}/quota", "put"),
        ("/admin/datanodes", "get"),
        ("/admin/audit", "get"),
        ("/healthz", "get"),
        ("/members", "get"),
        ("/members", "post"),
        ("/members/{id}", "delete"),
        ("/members/{id}", "patch"),
    ] {
        assert!(
            paths.get(path).and_then(|p| p.get(method)).is_some(),
            "{method} {path} is documented"
        );
    }
    // And everything documented is served: no call to it is an unknown route.
    for (path, item) in paths {
        for method in item.as_object().unwrap().keys() {
            let concrete = path
                .replace("{db}", "shop")
                .replace("{table}", "orders")
                .replace("{id}", "x");
            let method = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            let body = (method != Method::GET && method != Method::DELETE).then(|| json!({}));
            let (status, _, answer) = cp
                .call(method.clone(), &concrete, body.as_ref(), Auth::None)
                .await;
            assert_ne!(status, StatusCode::METHOD_NOT_ALLOWED, "{method} {path}");
            assert!(
                !(status == StatusCode::NOT_FOUND && answer["error"]["message"] == "no such route"),
                "{method} {path} is documented but not served"
            );
        }
    }
}

async fn owners_manage_members_and_members_work_but_cannot_manage(backend: Backend) {
    let cp = Control::start(backend);
    let ada = cp.signup("ada@example.com", "analytical").await;
    let carl = cp.signup("carl@example.com", "carpentry").await;
    let owner = Auth::Bearer(&ada.token);
    let (status, _, bo) = cp
        .call(
            Method::POST,
            "/members",
            Some(&json!({"email": "Bo@Example.com", "password": "bo's password"})),
            owner,
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{bo}");
    assert_eq!(
        (bo["email"].as_str(), bo["role"].as_str()),
        (Some("bo@example.com"), Some("member"))
    );
    let bo_id = bo["id"].as_str().unwrap().to_owned();

    // Bo logs in to Ada's tenant, works there, and cannot manage members.
    let (status, _, login) = cp.login("bo@example.com", "bo's password").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(login["user"]["tenant"], ada.user["tenant"]);
    let member = login["token"].as_str().unwrap().to_owned();
    let (status, _, list) = cp
        .call(Method::GET, "/members", None, Auth::Bearer(&member))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list["members"].as_array().unwrap().len(), 2);
    let (status, _, body) = cp
        .call(
            Method::POST,
            "/databases",
            Some(&json!({"name": "shop"})),
            Auth::Bearer(&member),
        )
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::SERVICE_UNAVAILABLE, "NO_DATA_NODE"),
        "allowed, but no node here"
    );
    let (status, _, body) = cp
        .call(
            Method::POST,
            "/members",
            Some(&json!({"email": "eve@example.com", "password": "eve's password"})),
            Auth::Bearer(&member),
        )
        .await;
    assert_eq!((status, code(&body)), (StatusCode::FORBIDDEN, "FORBIDDEN"));
    let ada_id = ada.user["id"].as_str().unwrap();
    let (status, _, _) = cp
        .call(
            Method::DELETE,
            &format!("/members/{ada_id}"),
            None,
            Auth::Bearer(&member),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);

    // Another tenant's owner sees none of it and removes nothing.
    let (_, _, theirs) = cp
        .call(Method::GET, "/members", None, Auth::Bearer(&carl.token))
        .await;
    assert_eq!(theirs["members"].as_array().unwrap().len(), 1);
    let (status, _, _) = cp
        .call(
            Method::DELETE,
            &format!("/members/{bo_id}"),
            None,
            Auth::Bearer(&carl.token),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // Bad members: refused, none made.
    for (body, status) in [
        (
            json!({"email": "nope", "password": "long enough"}),
            StatusCode::BAD_REQUEST,
        ),
        (
            json!({"email": "x@example.com", "password": "short"}),
            StatusCode::BAD_REQUEST,
        ),
        (
            json!({"email": "carl@example.com", "password": "long enough"}),
            StatusCode::CONFLICT,
        ),
        (
            json!({"email": "x@example.com", "password": "long enough", "role": "owner"}),
            StatusCode::BAD_REQUEST,
        ),
    ] {
        let (got, _, answer) = cp.call(Method::POST, "/members", Some(&body), owner).await;
        assert_eq!(got, status, "{body} → {answer}");
    }

    // The owner cannot remove themself; removing Bo ends his sessions.
    let (status, _, _) = cp
        .call(Method::DELETE, &format!("/members/{ada_id}"), None, owner)
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _, _) = cp
        .call(Method::DELETE, &format!("/members/{bo_id}"), None, owner)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _, _) = cp
        .call(Method::GET, "/me", None, Auth::Bearer(&member))
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _, _) = cp.login("bo@example.com", "bo's password").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

async fn readers_read_everything_and_are_refused_every_change(backend: Backend) {
    let cp = Control::start(backend);
    let ada = cp.signup("ada@example.com", "analytical").await;
    let carl = cp.signup("carl@example.com", "carpentry").await;
    let owner = Auth::Bearer(&ada.token);
    let new_reader =
        json!({"email": "rae@example.com", "password": "rae's password", "role": "reader"});
    let (status, _, rae) = cp
        .call(Method::POST, "/members", Some(&new_reader), owner)
        .await;
    assert_eq!(
        (status, rae["role"].as_str()),
        (StatusCode::CREATED, Some("reader")),
        "{rae}"
    );
    let rae_id = rae["id"].as_str().unwrap().to_owned();
    let (_, _, login) = cp.login("rae@example.com", "rae's password").await;
    let token = login["token"].as_str().unwrap().to_owned();
    let reader = Auth::Bearer(&token);
    assert_eq!(login["user"]["role"], "reader");

    // Everything of the tenant's reads.
    for path in [
        "/me",
        "/databases",
        "/members",
        "/quotas",
        "/api-keys",
        "/audit",
    ] {
        let (status, _, body) = cp.call(Method::GET, path, None, reader).await;
        assert_eq!(status, StatusCode::OK, "GET {path}: {body}");
    }
    let (status, _, body) = cp
        .call(
            Method::POST,
            "/ndbinfo/query",
            Some(&json!({"sql": "SELECT 1"})),
            reader,
        )
        .await;
    assert_ne!(
        status,
        StatusCode::FORBIDDEN,
        "an ndbinfo query only reads: {body}"
    );

    // Every route that changes something, as the OpenAPI document lists
    // them, refuses a reader before it looks at what was sent.
    let (_, _, doc) = cp
        .call(Method::GET, "/openapi.json", None, Auth::None)
        .await;
    let mut refused = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            let method = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            let rows = path == "/databases/{db}/tables/{table}/rows";
            if method == Method::GET
                || [
                    "/auth/logout",
                    "/ndbinfo/query",
                    "/auth/signup",
                    "/auth/login",
                ]
                .contains(&path.as_str())
            {
                continue;
            }
            let concrete = path
                .replace("{db}", "shop")
                .replace("{table}", "orders")
                .replace("{index}", "by_day")
                .replace("{id}", &rae_id);
            // The rows route reads or writes by its `op`: a write is refused.
            let bodies = if rows {
                vec![
                    Some(json!({"op": "insert", "row": {"id": 1}})),
                    Some(json!({"op": "update", "row": {"id": 1}})),
                    Some(json!({"op": "delete", "key": {"id": 1}})),
                ]
            } else {
                vec![
                    None,
                    Some(json!({})),
                    Some(json!({"role": "member", "name": "x"})),
                ]
            };
            for body in bodies {
                let (status, _, answer) = cp
                    .call(method.clone(), &concrete, body.as_ref(), reader)
                    .await;
                assert_eq!(
                    (status, code(&answer)),
                    (StatusCode::FORBIDDEN, "FORBIDDEN"),
                    "{method} {path} {body:?}: {answer}"
                );
            }
            refused += 1;
        }
    }
    let read = json!({"op": "read", "key": {"id": 1}});
    let (status, _, answer) = cp
        .call(
            Method::POST,
            "/databases/shop/tables/orders/rows",
            Some(&read),
            reader,
        )
        .await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "a read is let through: {answer}"
    );
    assert!(refused >= 15, "only {refused} routes change anything?");
    // The reader is still a reader, and nothing was made.
    let (_, _, members) = cp.call(Method::GET, "/members", None, owner).await;
    let roles: Vec<&str> = (members["members"].as_array().unwrap().iter())
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["owner", "reader"]);

    // The owner's role changes: only to member or reader, only of a member,
    // only in their own tenant.
    let role_of = |role: &str| json!({"role": role});
    let rae_path = format!("/members/{rae_id}");
    let ada_path = format!("/members/{}", ada.user["id"].as_str().unwrap());
    for (path, body, who, status) in [
        (&rae_path, role_of("owner"), owner, StatusCode::BAD_REQUEST),
        (&rae_path, role_of("admin"), owner, StatusCode::BAD_REQUEST),
        (&rae_path, role_of("Member"), owner, StatusCode::BAD_REQUEST),
        (
            &rae_path,
            json!({"role": "member", "extra": 1}),
            owner,
            StatusCode::BAD_REQUEST,
        ),
        (
            &rae_path,
            json!({"role": 1}),
            owner,
            StatusCode::BAD_REQUEST,
        ),
        (&ada_path, role_of("reader"), owner, StatusCode::FORBIDDEN),
        (
            &rae_path,
            role_of("member"),
            Auth::Bearer(&carl.token),
            StatusCode::NOT_FOUND,
        ),
    ] {
        let (got, _, answer) = cp.call(Method::PATCH, path, Some(&body), who).await;
        assert_eq!(got, status, "PATCH {path} {body}: {answer}");
    }
    let (_, _, me) = cp.call(Method::GET, "/me", None, reader).await;
    assert_eq!(me["user"]["role"], "reader", "nothing changed");

    // Made a member, the same session may change things from its next call.
    let (status, _, answer) = cp
        .call(Method::PATCH, &rae_path, Some(&role_of("member")), owner)
        .await;
    assert_eq!(
        (status, answer["role"].as_str()),
        (StatusCode::OK, Some("member"))
    );
    let (status, _, body) = cp
        .call(
            Method::POST,
            "/databases",
            Some(&json!({"name": "shop"})),
            reader,
        )
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::SERVICE_UNAVAILABLE, "NO_DATA_NODE"),
        "allowed now, but no node here"
    );
    let (_, _, audit) = cp.call(Method::GET, "/audit", None, owner).await;
    let change = (audit["entries"].as_array().unwrap().iter())
        .find(|e| e["action"] == "member.role")
        .expect("the role change is audited");
    assert_eq!(
        (&change["before"]["role"], &change["after"]["role"]),
        (&json!("reader"), &json!("member"))
    );
}
