//! `shoal admin` as an operator runs it, against a running control plane.

mod common;

use std::io::Write;
use std::process::{Command, Stdio};

use common::control::{Auth, Backend, Control};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

const ADMIN: &str = "ops@example.com";
const PASSWORD: &str = "an operator's password";

/// Runs `shoal admin --control-plane <cp> --email <email> <args>` with
/// `stdin`; answers its exit code, stdout and stderr.
fn admin(
    cp: &Control,
    email: &str,
    args: &[&str],
    envs: &[(&str, &str)],
    stdin: &str,
) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_shoal"))
        .args([
            "admin",
            "--control-plane",
            &cp.shoal.control_url,
            "--email",
            email,
        ])
        .args(args)
        .env_remove("SHOAL_ADMIN_PASSWORD")
        .env_remove("SHOAL_NEW_ADMIN_PASSWORD")
        .envs(envs.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

on_both_stores!(operators_list_tenants_set_quotas_and_make_admins);

async fn operators_list_tenants_set_quotas_and_make_admins(backend: Backend) {
    let cp = Control::start_env(
        backend,
        &["--admin-email", ADMIN],
        &[("SHOAL_ADMIN_PASSWORD", PASSWORD)],
    );
    let ada = cp.signup("ada@example.com", "analytical").await;
    let tenant = ada.user["tenant"]["id"].as_str().unwrap().to_owned();
    let with_password = [("SHOAL_ADMIN_PASSWORD", PASSWORD)];

    let (code, out, err) = admin(&cp, ADMIN, &["tenants"], &with_password, "");
    assert_eq!(code, 0, "{err}");
    assert!(out.lines().next().unwrap().starts_with("ID"), "{out}");
    assert!(
        out.contains(&tenant) && out.contains("analytical") && out.contains("active"),
        "{out}"
    );
    // The password may come on stdin instead.
    let (code, out, err) = admin(
        &cp,
        ADMIN,
        &["--json", "tenants"],
        &[],
        &format!("{PASSWORD}\n"),
    );
    assert_eq!(code, 0, "{err}");
    let listed: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(listed["tenants"][0]["id"], json!(tenant));

    let quota = r#"{"in_memory_bytes": 1048576, "write_units_per_sec": 50}"#;
    let (code, out, err) = admin(
        &cp,
        ADMIN,
        &["set-quota", &tenant, quota],
        &with_password,
        "",
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("quota set"), "{out}");
    let (_, _, quotas) = cp
        .call(Method::GET, "/quotas", None, Auth::Bearer(&ada.token))
        .await;
    assert_eq!(quotas["tenant"]["quota"]["in_memory_bytes"], 1048576);
    assert_eq!(quotas["tenant"]["quota"]["write_units_per_sec"], 50);

    // Refusals say why and exit non-zero.
    for (args, says) in [
        (vec!["set-quota", tenant.as_str(), "{not json"], "not JSON"),
        (
            vec![
                "set-quota",
                tenant.as_str(),
                r#"{"write_units_per_sec": 0}"#,
            ],
            "INVALID_REQUEST",
        ),
        (vec!["set-quota", "t_nosuch", "{}"], "NOT_FOUND"),
        (vec!["suspend", "t_nosuch"], "NOT_FOUND"),
    ] {
        let (code, _, err) = admin(&cp, ADMIN, &args, &with_password, "");
        assert_ne!(code, 0, "{args:?}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    let (code, _, err) = admin(
        &cp,
        ADMIN,
        &["tenants"],
        &[("SHOAL_ADMIN_PASSWORD", "wrong password")],
        "",
    );
    assert_ne!(code, 0);
    assert!(err.contains("UNAUTHENTICATED"), "{err}");
    assert!(
        !err.contains("wrong password"),
        "the password is not echoed"
    );
    let (code, _, err) = admin(
        &cp,
        "ada@example.com",
        &["tenants"],
        &[("SHOAL_ADMIN_PASSWORD", "a long password")],
        "",
    );
    assert_ne!(code, 0);
    assert!(
        err.contains("FORBIDDEN"),
        "a tenant's user is not an operator: {err}"
    );
    let (code, _, err) = admin(&cp, ADMIN, &["tenants"], &[], "");
    assert_ne!(code, 0);
    assert!(err.contains("password"), "{err}");

    // Another admin, who can then log in and operate.
    let (code, out, err) = admin(
        &cp,
        ADMIN,
        &["create-admin", "second@example.com"],
        &[
            ("SHOAL_ADMIN_PASSWORD", PASSWORD),
            ("SHOAL_NEW_ADMIN_PASSWORD", "the second password"),
        ],
        "",
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("second@example.com"), "{out}");
    let (status, _, body) = cp.login("second@example.com", "the second password").await;
    assert_eq!(
        (status, &body["user"]["role"]),
        (StatusCode::OK, &json!("admin"))
    );

    let (code, _, err) = admin(&cp, ADMIN, &["suspend", &tenant], &with_password, "");
    assert_eq!(code, 0, "{err}");
    let (status, _, _) = cp.login("ada@example.com", "a long password").await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (code, _, err) = admin(&cp, ADMIN, &["resume", &tenant], &with_password, "");
    assert_eq!(code, 0, "{err}");
    let (status, _, _) = cp.login("ada@example.com", "a long password").await;
    assert_eq!(status, StatusCode::OK);
}
