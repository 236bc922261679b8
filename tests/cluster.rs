//! The control plane and a data node as separate processes: the node
//! registers, databases and tables are placed and created on it, tenants
//! see only their own, and a node that comes back empty is rebuilt by the
//! reconcile. Each test runs on SQLite and on PostgreSQL.

mod common;

use common::Shoal;
use common::control::{Auth, Backend, Control, Session, code, data_call, eventually, orders};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

const SECRET: &str = common::control::CLUSTER_SECRET;
fn control(backend: Backend) -> Control {
    Control::start_with(backend, &["--cluster-secret", SECRET])
}

fn data_node(cp: &Control, dir: &std::path::Path) -> Shoal {
    cp.data_node(dir, &[])
}

/// `method path` with `body`, as `who`: the status and the answer.
async fn call_as(
    cp: &Control,
    who: &Session,
    method: Method,
    path: &str,
    body: Option<&Value>,
) -> (StatusCode, Value) {
    let (status, _, answer) = cp.call(method, path, body, Auth::Bearer(&who.token)).await;
    (status, answer)
}

async fn create_database(cp: &Control, session: &Session, name: &str) -> (StatusCode, Value) {
    let body = json!({"name": name});
    call_as(cp, session, Method::POST, "/databases", Some(&body)).await
}

/// The node's databases, as its internal API lists them: name → tables.
async fn on_node(node: &Shoal) -> Vec<(String, Option<String>, Vec<String>)> {
    let (status, body) = node.send(Method::GET, "/internal/v1/databases", None).await;
    assert_eq!(status, StatusCode::OK);
    body.as_array()
        .unwrap()
        .iter()
        .map(|db| {
            (
                db["name"].as_str().unwrap().to_owned(),
                db["tenant"].as_str().map(str::to_owned),
                db["tables"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|t| t["name"].as_str().unwrap().to_owned())
                    .collect(),
            )
        })
        .collect()
}

on_both_stores!(
    databases_and_tables_are_placed_and_created_on_the_data_node,
    tenants_never_reach_each_others_databases,
    a_data_node_back_on_an_empty_disk_is_rebuilt_by_the_reconcile,
    api_keys_are_pushed_used_reported_and_revoked,
    quotas_are_set_by_admins_audited_pushed_and_enforced,
    a_suspended_tenant_is_locked_out_until_resumed,
    hostile_input_on_every_route_is_a_clear_4xx_and_changes_nothing,
    ndbinfo_sql_answers_over_ones_own_databases_only,
    usage_is_metered_rolled_up_exported_and_kept_bounded,
    metrics_are_prometheus_text_with_per_database_series,
    indexes_are_added_and_dropped_while_the_table_serves,
    rows_are_browsed_and_changed_through_the_coordinator,
    a_tenant_reads_its_own_activity_and_no_one_elses,
);

/// Parses Prometheus text with a third-party parser; answers the samples.
fn prometheus(text: &str) -> Vec<prometheus_parse::Sample> {
    let lines = text.lines().map(|l| Ok(l.to_owned()));
    prometheus_parse::Scrape::parse(lines)
        .expect("Prometheus text")
        .samples
}

/// The value of the sample named `name` whose labels include `labels`.
fn sample(
    samples: &[prometheus_parse::Sample],
    name: &str,
    labels: &[(&str, &str)],
) -> Option<f64> {
    samples
        .iter()
        .find(|s| s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .and_then(|s| match s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => Some(v),
            _ => None,
        })
}

async fn sql(cp: &Control, who: &Session, sql: &str) -> (StatusCode, Value) {
    let (status, _, answer) = cp
        .call(
            Method::POST,
            "/ndbinfo/query",
            Some(&json!({"sql": sql})),
            Auth::Bearer(&who.token),
        )
        .await;
    (status, answer)
}

/// The first column of every row.
fn firsts(answer: &Value) -> Vec<Value> {
    answer["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r[0].clone())
        .collect()
}

const ADMIN: &str = "ops@example.com";
const ADMIN_PASSWORD: &str = "an operator's password";

/// A control plane with a platform admin, new tenants on `plan`; and the
/// admin's session.
async fn control_with_admin(backend: Backend, plan: &str) -> (Control, Session) {
    control_with_admin_and(backend, plan, &[]).await
}

/// `control_with_admin`, with `extra` arguments.
async fn control_with_admin_and(
    backend: Backend,
    plan: &str,
    extra: &[&str],
) -> (Control, Session) {
    let args = [
        &[
            "--cluster-secret",
            SECRET,
            "--admin-email",
            ADMIN,
            "--plan-quota",
            plan,
        ],
        extra,
    ]
    .concat();
    let cp = Control::start_env(backend, &args, &[("SHOAL_ADMIN_PASSWORD", ADMIN_PASSWORD)]);
    let (status, headers, body) = cp.login(ADMIN, ADMIN_PASSWORD).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["user"]["role"], "admin");
    (cp, common::control::session(&headers, body))
}

/// A REST data API call on `node` with `key`: status and body.
/// A database `shop` with table `orders` for `who`, on a node that is up.
async fn shop_with_orders(cp: &Control, who: &Session) {
    eventually("the node registers", || async {
        let (status, _) = create_database(cp, who, "shop").await;
        (status == StatusCode::CREATED).then_some(())
    })
    .await;
    let (status, _, _) = cp
        .call(
            Method::POST,
            "/databases/shop/tables",
            Some(&orders()),
            Auth::Bearer(&who.token),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
}

async fn create_key(cp: &Control, who: &Session, body: Value) -> (StatusCode, Value) {
    call_as(cp, who, Method::POST, "/api-keys", Some(&body)).await
}

async fn databases_and_tables_are_placed_and_created_on_the_data_node(backend: Backend) {
    let cp = control(backend);
    let ada = cp.signup("ada@example.com", "analytical").await;
    let bearer = Auth::Bearer(&ada.token);
    // Before any data node has registered there is nowhere to put it.
    let (status, body) = create_database(&cp, &ada, "shop").await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::SERVICE_UNAVAILABLE, "NO_DATA_NODE")
    );

    let dir = tempfile::tempdir().unwrap();
    let node = data_node(&cp, dir.path());
    let created = eventually("the node registers", || async {
        let (status, body) = create_database(&cp, &ada, "shop").await;
        (status != StatusCode::SERVICE_UNAVAILABLE).then_some((status, body))
    })
    .await;
    let (status, db) = created;
    assert_eq!(status, StatusCode::CREATED, "{db}");
    assert_eq!(db["name"], "shop");
    assert_eq!(db["rest_url"].as_str(), Some(node.rest_url.as_str()));
    assert_eq!(db["resp_addr"].as_str(), Some(node.resp_addr.as_str()));
    let tenant = ada.user["tenant"]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        on_node(&node).await,
        vec![("shop".into(), Some(tenant.clone()), vec![])]
    );

    // Tables: validated, then created on the node.
    let (status, _, table) = cp
        .call(
            Method::POST,
            "/databases/shop/tables",
            Some(&orders()),
            bearer,
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{table}");
    assert_eq!(table, orders());
    assert_eq!(on_node(&node).await[0].2, vec!["orders"]);
    let (status, _, body) = cp
        .call(
            Method::POST,
            "/databases/shop/tables",
            Some(&orders()),
            bearer,
        )
        .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::CONFLICT, "TABLE_EXISTS")
    );
    let (status, _, body) = cp
        .call(Method::GET, "/databases/shop/tables", None, bearer)
        .await;
    assert_eq!(
        (status, &body["tables"]),
        (StatusCode::OK, &json!([orders()]))
    );
    let (status, _, body) = cp.call(Method::GET, "/databases", None, bearer).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["databases"][0]["name"], "shop");
    let (status, _, memory) = cp
        .call(Method::GET, "/databases/shop/memory", None, bearer)
        .await;
    assert_eq!(status, StatusCode::OK, "{memory}");
    assert_eq!(memory["columns"][0], "database_name");
    assert_eq!(memory["rows"][0][1], "orders", "{memory}");
    assert_eq!(body["databases"][0]["tables"], json!(["orders"]));

    // Rows written on the node land in the table the control plane made.
    let (status, body) = node
        .send(
            Method::POST,
            "/internal/v1/databases/shop/transaction",
            Some(json!({"operations": [{"op": "write", "table": "orders", "row": {"id": 1, "note": "first"}}]})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");

    // Bad tables: refused with what is wrong, nothing created.
    let mut bad_type = orders();
    bad_type["columns"][1]["type"] = json!("VARCHAR(999999)");
    let mut nullable_key = orders();
    nullable_key["columns"][0]["nullable"] = json!(true);
    let mut injected = orders();
    injected["name"] = json!("orders; DROP TABLE tenants");
    let mut no_key = orders();
    no_key["primary_key"] = json!([]);
    let mut unknown_key = orders();
    unknown_key["primary_key"] = json!(["nope"]);
    let mut extra = orders();
    extra["engine"] = json!("myisam");
    for (table, says) in [
        (bad_type, "VARCHAR"),
        (nullable_key, "nullable"),
        (injected, "name"),
        (no_key, "primary key"),
        (unknown_key, "nope"),
        (extra, "engine"),
        (json!({"name": "x"}), "columns"),
        (json!("orders"), ""),
    ] {
        let (status, _, body) = cp
            .call(Method::POST, "/databases/shop/tables", Some(&table), bearer)
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{table} → {body}");
        assert_eq!(code(&body), "INVALID_REQUEST");
        assert!(
            body["error"]["message"].as_str().unwrap().contains(says),
            "{body} names {says}"
        );
    }
    for name in ["", "9lives", "ndbinfo", "a-b", "x'; --", &"d".repeat(64)] {
        let (status, body) = create_database(&cp, &ada, name).await;
        assert_eq!(
            (status, code(&body)),
            (StatusCode::BAD_REQUEST, "INVALID_REQUEST"),
            "{name:?}"
        );
    }
    assert_eq!(on_node(&node).await.len(), 1, "nothing else was made");

    // Drops reach the node.
    let (status, _, _) = cp
        .call(
            Method::DELETE,
            "/databases/shop/tables/orders",
            None,
            bearer,
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(on_node(&node).await[0].2, Vec::<String>::new());
    let (status, _, body) = cp
        .call(
            Method::DELETE,
            "/databases/shop/tables/orders",
            None,
            bearer,
        )
        .await;
    assert_eq!((status, code(&body)), (StatusCode::NOT_FOUND, "NOT_FOUND"));
    let (status, _, _) = cp
        .call(Method::DELETE, "/databases/shop", None, bearer)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert!(on_node(&node).await.is_empty());
    let (status, _, body) = cp.call(Method::GET, "/databases/shop", None, bearer).await;
    assert_eq!((status, code(&body)), (StatusCode::NOT_FOUND, "NOT_FOUND"));
    // The name is free again.
    let (status, _) = create_database(&cp, &ada, "shop").await;
    assert_eq!(status, StatusCode::CREATED);
}

async fn tenants_never_reach_each_others_databases(backend: Backend) {
    let cp = control(backend);
    let dir = tempfile::tempdir().unwrap();
    let node = data_node(&cp, dir.path());
    let ada = cp.signup("ada@example.com", "analytical").await;
    let bob = cp.signup("bob@example.com", "builders").await;
    eventually("the node registers", || async {
        let (status, _) = create_database(&cp, &ada, "shop").await;
        (status == StatusCode::CREATED).then_some(())
    })
    .await;
    let ada_auth = Auth::Bearer(&ada.token);
    let (status, _, _) = cp
        .call(
            Method::POST,
            "/databases/shop/tables",
            Some(&orders()),
            ada_auth,
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let before = on_node(&node).await;

    // Bob tries every route on Ada's database: each is "no such thing".
    let bob_auth = Auth::Bearer(&bob.token);
    let tries: [(Method, &str, Option<Value>); 6] = [
        (Method::GET, "/databases/shop", None),
        (Method::GET, "/databases/shop/memory", None),
        (Method::DELETE, "/databases/shop", None),
        (Method::GET, "/databases/shop/tables", None),
        (
            Method::POST,
            "/databases/shop/tables",
            Some(
                json!({"name": "mine", "columns": [{"name": "k", "type": "INT"}], "primary_key": ["k"]}),
            ),
        ),
        (Method::DELETE, "/databases/shop/tables/orders", None),
    ];
    for (method, path, body) in tries {
        let (status, _, answer) = cp.call(method.clone(), path, body.as_ref(), bob_auth).await;
        assert_eq!(
            (status, code(&answer)),
            (StatusCode::NOT_FOUND, "NOT_FOUND"),
            "{method} {path}"
        );
    }
    let (status, _, list) = cp.call(Method::GET, "/databases", None, bob_auth).await;
    assert_eq!((status, &list["databases"]), (StatusCode::OK, &json!([])));
    // Names are the platform's: Bob cannot take Ada's.
    // Nor pass for it with other letters' case.
    for name in ["shop", "SHOP", "Shop"] {
        let (status, body) = create_database(&cp, &bob, name).await;
        assert_eq!(
            (status, code(&body)),
            (StatusCode::CONFLICT, "DATABASE_EXISTS"),
            "{name}: {body}"
        );
    }
    let (_, _, list) = cp.call(Method::GET, "/databases", None, bob_auth).await;
    assert_eq!(list["databases"], json!([]), "nothing was made");
    // Without a session, nothing at all.
    for path in ["/databases", "/databases/shop", "/databases/shop/tables"] {
        let (status, _, _) = cp.call(Method::GET, path, None, Auth::None).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{path}");
    }
    // A tenant user is not an operator.
    let (status, _, body) = cp
        .call(Method::GET, "/admin/datanodes", None, bob_auth)
        .await;
    assert_eq!((status, code(&body)), (StatusCode::FORBIDDEN, "FORBIDDEN"));
    // And the cluster's own routes want the cluster secret, not a session.
    let url = format!("{}/internal/v1/datanodes/heartbeat", cp.shoal.control_url);
    let status = cp
        .http
        .post(&url)
        .bearer_auth(&bob.token)
        .json(&json!({}))
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    assert_eq!(on_node(&node).await, before, "nothing changed on the node");
    let (status, _, body) = cp
        .call(Method::GET, "/databases/shop/tables", None, ada_auth)
        .await;
    assert_eq!(
        (status, &body["tables"]),
        (StatusCode::OK, &json!([orders()]))
    );
}

async fn a_data_node_back_on_an_empty_disk_is_rebuilt_by_the_reconcile(backend: Backend) {
    let cp = control(backend);
    let ada = cp.signup("ada@example.com", "analytical").await;
    let first_disk = tempfile::tempdir().unwrap();
    let node = data_node(&cp, first_disk.path());
    eventually("the node registers", || async {
        let (status, _) = create_database(&cp, &ada, "shop").await;
        (status == StatusCode::CREATED).then_some(())
    })
    .await;
    let (status, _, _) = cp
        .call(
            Method::POST,
            "/databases/shop/tables",
            Some(&orders()),
            Auth::Bearer(&ada.token),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, made) = create_key(
        &cp,
        &ada,
        json!({"name": "app", "grants": [{"database": "shop", "role": "read_write"}]}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let key = made["key"].as_str().unwrap().to_owned();
    node.kill();

    // The same node id comes back on a new, empty disk (and new ports).
    let second_disk = tempfile::tempdir().unwrap();
    let node = data_node(&cp, second_disk.path());
    let tenant = ada.user["tenant"]["id"].as_str().unwrap().to_owned();
    let want = vec![("shop".to_owned(), Some(tenant), vec!["orders".to_owned()])];
    eventually("the reconcile rebuilds the node", || async {
        (on_node(&node).await == want).then_some(())
    })
    .await;
    // Its keys come back too: the application goes on with the same key.
    let row = json!({"row": {"id": 1, "note": "after the rebuild"}});
    eventually("the key is back on the node", || async {
        let (status, _) = data_call(&node, &key, "shop/orders/pk-write", row.clone()).await;
        (status == StatusCode::OK).then_some(())
    })
    .await;
    // And the control plane sends clients to where it is now.
    let (status, _, db) = cp
        .call(
            Method::GET,
            "/databases/shop",
            None,
            Auth::Bearer(&ada.token),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(db["rest_url"].as_str(), Some(node.rest_url.as_str()));
}

/// A control plane, a data node, tenants Ada and Bob, and Ada's database
/// `shop` with table `orders`.
struct Shop {
    cp: Control,
    node: Shoal,
    ada: Session,
    bob: Session,
    _dir: tempfile::TempDir,
}

async fn shop(backend: Backend) -> Shop {
    let cp = control(backend);
    let dir = tempfile::tempdir().unwrap();
    let node = data_node(&cp, dir.path());
    let ada = cp.signup("ada@example.com", "analytical").await;
    let bob = cp.signup("bob@example.com", "builders").await;
    shop_with_orders(&cp, &ada).await;
    Shop {
        cp,
        node,
        ada,
        bob,
        _dir: dir,
    }
}

async fn api_keys_are_pushed_used_reported_and_revoked(backend: Backend) {
    let Shop {
        cp,
        node,
        ada,
        bob,
        _dir,
    } = shop(backend).await;
    let ada_auth = Auth::Bearer(&ada.token);

    let (status, made) = create_key(
        &cp,
        &ada,
        json!({"name": "checkout service", "grants": [{"database": "shop", "role": "read_write"}]}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let key = made["key"].as_str().unwrap().to_owned();
    let id = made["id"].as_str().unwrap().to_owned();
    assert!(
        key.starts_with(&format!("{id}.")),
        "the id is the key's public prefix"
    );
    assert_eq!(
        made["grants"],
        json!([{"database": "shop", "role": "read_write"}])
    );

    // The node takes it at once, for this tenant's database.
    let row = json!({"row": {"id": 7, "note": "via the key"}});
    let (status, body) = data_call(&node, &key, "shop/orders/pk-insert", row).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let read = json!({"filters": [{"column": "id", "value": 7}]});
    let (status, body) = data_call(&node, &key, "shop/orders/pk-read", read.clone()).await;
    assert_eq!(
        (status, &body["data"]["note"]),
        (StatusCode::OK, &json!("via the key")),
        "{body}"
    );

    // A read key reads and cannot write.
    let (status, reader) = create_key(
        &cp,
        &ada,
        json!({"name": "dashboards", "grants": [{"database": "shop", "role": "read"}]}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let reader = reader["key"].as_str().unwrap().to_owned();
    let (status, _) = data_call(&node, &reader, "shop/orders/pk-read", read.clone()).await;
    assert_eq!(status, StatusCode::OK);
    let write = json!({"row": {"id": 8, "note": "no"}});
    let (status, _) = data_call(&node, &reader, "shop/orders/pk-insert", write).await;
    assert_eq!(status, StatusCode::FORBIDDEN);

    // The list shows no secret and no hash, and when each key was last used.
    let listed = eventually("the node reports the key used", || async {
        let (_, _, list) = cp.call(Method::GET, "/api-keys", None, ada_auth).await;
        let keys = list["keys"].as_array().unwrap().clone();
        keys.iter()
            .all(|k| k["last_used_at"].is_i64())
            .then_some(list)
    })
    .await;
    let text = listed.to_string();
    assert!(
        !text.contains(key.split('.').nth(1).unwrap()),
        "no secret in the list"
    );
    assert!(!text.contains("hash") && !text.contains("salt"), "{text}");
    assert_eq!(listed["keys"][0]["name"], "checkout service");

    // Refusals: each clear, none makes a key.
    for (body, status, says) in [
        (
            json!({"name": "x", "grants": []}),
            StatusCode::BAD_REQUEST,
            "grants",
        ),
        (
            json!({"name": "", "grants": [{"database": "shop", "role": "read"}]}),
            StatusCode::BAD_REQUEST,
            "name",
        ),
        (
            json!({"name": "x".repeat(65), "grants": [{"database": "shop", "role": "read"}]}),
            StatusCode::BAD_REQUEST,
            "name",
        ),
        (
            json!({"name": "x", "grants": [{"database": "shop", "role": "admin"}]}),
            StatusCode::BAD_REQUEST,
            "role",
        ),
        (
            json!({"name": "x", "grants": [{"database": "shop", "role": "read"}, {"database": "shop", "role": "read"}]}),
            StatusCode::BAD_REQUEST,
            "twice",
        ),
        (
            json!({"name": "x", "grants": [{"database": "shop", "role": "read"}], "expires_at": 1}),
            StatusCode::BAD_REQUEST,
            "expires_at",
        ),
        (
            json!({"name": "x", "grants": [{"database": "x'; DROP TABLE api_keys; --", "role": "read"}]}),
            StatusCode::BAD_REQUEST,
            "grants",
        ),
        (
            json!({"name": "x", "grants": [{"database": "nosuch", "role": "read"}]}),
            StatusCode::NOT_FOUND,
            "nosuch",
        ),
        (
            json!({"name": "x", "grants": [{"database": "shop", "role": "read"}], "secret": "mine"}),
            StatusCode::BAD_REQUEST,
            "secret",
        ),
    ] {
        let (got, answer) = create_key(&cp, &ada, body.clone()).await;
        assert_eq!(got, status, "{body} → {answer}");
        assert!(
            answer["error"]["message"].as_str().unwrap().contains(says),
            "{answer} names {says}"
        );
    }
    // Bob cannot grant himself Ada's database, see her keys, or revoke them.
    let (status, answer) = create_key(
        &cp,
        &bob,
        json!({"name": "theft", "grants": [{"database": "shop", "role": "read"}]}),
    )
    .await;
    assert_eq!(
        (status, code(&answer)),
        (StatusCode::NOT_FOUND, "NOT_FOUND")
    );
    let (_, _, list) = cp
        .call(Method::GET, "/api-keys", None, Auth::Bearer(&bob.token))
        .await;
    assert_eq!(list["keys"], json!([]));
    let (status, _, _) = cp
        .call(
            Method::DELETE,
            &format!("/api-keys/{id}"),
            None,
            Auth::Bearer(&bob.token),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, _, list) = cp.call(Method::GET, "/api-keys", None, ada_auth).await;
    assert_eq!(
        list["keys"].as_array().unwrap().len(),
        2,
        "nothing made, nothing revoked"
    );
    let (status, _) = data_call(&node, &key, "shop/orders/pk-read", read.clone()).await;
    assert_eq!(status, StatusCode::OK);

    // Revoked: the node refuses it on the next request.
    let (status, _, _) = cp
        .call(Method::DELETE, &format!("/api-keys/{id}"), None, ada_auth)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, body) = data_call(&node, &key, "shop/orders/pk-read", read).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::UNAUTHORIZED, "UNAUTHENTICATED")
    );
    let (_, _, list) = cp.call(Method::GET, "/api-keys", None, ada_auth).await;
    let revoked = list["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["id"] == json!(id))
        .unwrap()
        .clone();
    assert!(revoked["revoked_at"].is_i64(), "{revoked}");
    // Revoking again changes nothing.
    let (status, _, _) = cp
        .call(Method::DELETE, &format!("/api-keys/{id}"), None, ada_auth)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    // The node holds exactly the one live key.
    let (status, held) = node.send(Method::GET, "/internal/v1/api-keys", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(held["keys"].as_array().unwrap().len(), 1, "{held}");
}

async fn quotas_are_set_by_admins_audited_pushed_and_enforced(backend: Backend) {
    let plan = r#"{"max_databases": 2, "max_api_keys": 1, "write_units_per_sec": 1000}"#;
    let (cp, admin) = control_with_admin(backend, plan).await;
    let admin_auth = Auth::Bearer(&admin.token);
    let disk = tempfile::tempdir().unwrap();
    let node = data_node(&cp, disk.path());
    let ada = cp.signup("ada@example.com", "analytical").await;
    let tenant = ada.user["tenant"]["id"].as_str().unwrap().to_owned();
    let ada_auth = Auth::Bearer(&ada.token);
    shop_with_orders(&cp, &ada).await;
    let (status, made) = create_key(
        &cp,
        &ada,
        json!({"name": "app", "grants": [{"database": "shop", "role": "read_write"}]}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let key = made["key"].as_str().unwrap().to_owned();
    let (status, _) = data_call(
        &node,
        &key,
        "shop/orders/pk-insert",
        json!({"row": {"id": 1, "note": "x"}}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);

    // The plan: the tenant starts with it, and its counts are enforced.
    let (status, _, quotas) = cp.call(Method::GET, "/quotas", None, ada_auth).await;
    assert_eq!(status, StatusCode::OK, "{quotas}");
    assert_eq!(quotas["tenant"]["quota"]["max_databases"], 2);
    assert_eq!(quotas["tenant"]["quota"]["in_memory_bytes"], Value::Null);
    assert_eq!(quotas["tenant"]["usage"]["databases"], 1);
    assert_eq!(quotas["tenant"]["usage"]["tables"], 1);
    assert_eq!(quotas["tenant"]["usage"]["api_keys"], 1);
    // Its one key of one: warned; one database of two: not yet.
    assert_eq!(quotas["tenant"]["warnings"], json!(["api_keys_100"]));
    let used = quotas["databases"][0]["usage"]["in_memory_bytes"]
        .as_u64()
        .unwrap();
    assert!(used > 0, "{quotas}");
    assert_eq!(
        quotas["tenant"]["usage"]["in_memory_bytes"].as_u64(),
        Some(used)
    );
    let (status, _) = create_key(
        &cp,
        &ada,
        json!({"name": "second", "grants": [{"database": "shop", "role": "read"}]}),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT);
    let (status, _) = create_database(&cp, &ada, "lab").await;
    assert_eq!(status, StatusCode::CREATED);
    let (_, _, quotas) = cp.call(Method::GET, "/quotas", None, ada_auth).await;
    assert_eq!(
        quotas["tenant"]["warnings"],
        json!(["databases_100", "api_keys_100"])
    );
    let (status, body) = create_database(&cp, &ada, "third").await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::CONFLICT, "QUOTA_EXCEEDED")
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("limit is 2"),
        "{body}"
    );

    // Only platform admins set quotas, list tenants, read the audit log.
    let path = format!("/admin/tenants/{tenant}/quota");
    for (method, path, body) in [
        (
            Method::PUT,
            path.as_str(),
            Some(json!({"in_memory_bytes": null})),
        ),
        (Method::GET, "/admin/tenants", None),
        (Method::GET, "/admin/audit", None),
        (Method::GET, "/admin/datanodes", None),
    ] {
        let (status, _, answer) = cp.call(method.clone(), path, body.as_ref(), ada_auth).await;
        assert_eq!(
            (status, code(&answer)),
            (StatusCode::FORBIDDEN, "FORBIDDEN"),
            "{method} {path}"
        );
    }
    // Bad quotas are refused and change nothing.
    let db_path = format!("/admin/tenants/{tenant}/databases/shop/quota");
    for bad in [
        json!({"write_units_per_sec": 0}),
        json!({"burst_seconds": 100000}),
        json!({"in_memory_bytes": -1}),
        json!({"in_memory_bytes": "lots"}),
        json!({"memory": 1}),
        json!([]),
    ] {
        let (status, _, answer) = cp.call(Method::PUT, &db_path, Some(&bad), admin_auth).await;
        assert_eq!(
            (status, code(&answer)),
            (StatusCode::BAD_REQUEST, "INVALID_REQUEST"),
            "{bad}"
        );
    }
    let (status, _, _) = cp
        .call(
            Method::PUT,
            "/admin/tenants/t_nosuch/quota",
            Some(&json!({})),
            admin_auth,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _, _) = cp
        .call(
            Method::PUT,
            &format!("/admin/tenants/{tenant}/databases/nosuch/quota"),
            Some(&json!({})),
            admin_auth,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // An operator lowers the database's memory quota below what it holds:
    // the next write through the key fails with the quota error at once.
    let (status, _, answer) = cp
        .call(
            Method::PUT,
            &db_path,
            Some(&json!({"in_memory_bytes": 1})),
            admin_auth,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let (status, body) = data_call(
        &node,
        &key,
        "shop/orders/pk-insert",
        json!({"row": {"id": 2, "note": "y"}}),
    )
    .await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::INSUFFICIENT_STORAGE, "MEMORY_QUOTA"),
        "{body}"
    );
    let (_, _, quotas) = cp.call(Method::GET, "/quotas", None, ada_auth).await;
    let shop = quotas["databases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == "shop")
        .unwrap()
        .clone();
    assert_eq!(shop["warnings"], json!(["memory_100"]), "{shop}");
    // A tenant quota reaches the node too.
    let (status, _, _) = cp
        .call(
            Method::PUT,
            &path,
            Some(&json!({"read_units_per_sec": 777, "max_databases": 5})),
            admin_auth,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, on_node) = node
        .send(
            Method::GET,
            &format!("/internal/v1/tenants/{tenant}/quota"),
            None,
        )
        .await;
    assert_eq!(
        (status, &on_node["quota"]["read_units_per_sec"]),
        (StatusCode::OK, &json!(777)),
        "{on_node}"
    );

    // Every change is in the audit log: who, what, before, after.
    let (status, _, audit) = cp
        .call(
            Method::GET,
            &format!("/admin/audit?tenant={tenant}"),
            None,
            admin_auth,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let entries = audit["entries"].as_array().unwrap();
    let actions: Vec<&str> = entries
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    for action in [
        "tenant.create",
        "database.create",
        "table.create",
        "api_key.create",
        "database.quota.set",
        "tenant.quota.set",
    ] {
        assert!(actions.contains(&action), "{action} in {actions:?}");
    }
    let set = entries
        .iter()
        .find(|e| e["action"] == "database.quota.set")
        .unwrap();
    assert_eq!(set["actor"]["email"], ADMIN);
    assert_eq!(set["before"]["in_memory_bytes"], Value::Null);
    assert_eq!(set["after"]["in_memory_bytes"], 1);
    assert!(
        !audit.to_string().contains(key.split('.').nth(1).unwrap()),
        "no secret in the audit log"
    );

    // The tenants list shows usage against quota.
    let (_, _, tenants) = cp
        .call(Method::GET, "/admin/tenants", None, admin_auth)
        .await;
    let row = tenants["tenants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == json!(tenant))
        .unwrap()
        .clone();
    assert_eq!(row["usage"]["databases"], 2);
    assert_eq!(row["quota"]["read_units_per_sec"], 777);

    // A node back on an empty disk gets the quotas again.
    node.kill();
    let disk = tempfile::tempdir().unwrap();
    let node = data_node(&cp, disk.path());
    eventually("the reconcile restores the quota", || async {
        let (status, body) = node
            .send(Method::GET, "/internal/v1/databases/shop/quota", None)
            .await;
        (status == StatusCode::OK && body["quota"]["in_memory_bytes"] == json!(1)).then_some(())
    })
    .await;
}

async fn a_suspended_tenant_is_locked_out_until_resumed(backend: Backend) {
    let (cp, admin) = control_with_admin(backend, "{}").await;
    let admin_auth = Auth::Bearer(&admin.token);
    let disk = tempfile::tempdir().unwrap();
    let node = data_node(&cp, disk.path());
    let ada = cp.signup("ada@example.com", "analytical").await;
    let tenant = ada.user["tenant"]["id"].as_str().unwrap().to_owned();
    shop_with_orders(&cp, &ada).await;
    let (_, made) = create_key(
        &cp,
        &ada,
        json!({"name": "app", "grants": [{"database": "shop", "role": "read_write"}]}),
    )
    .await;
    let key = made["key"].as_str().unwrap().to_owned();
    // A write: it succeeds whatever the table holds.
    let write = json!({"row": {"id": 1, "note": "x"}});

    let (status, _, _) = cp
        .call(
            Method::POST,
            &format!("/admin/tenants/{tenant}/suspend"),
            None,
            admin_auth,
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = data_call(&node, &key, "shop/orders/pk-write", write.clone()).await;
    assert_eq!(
        status,
        StatusCode::UNAUTHORIZED,
        "its keys stop working at once"
    );
    let (status, _, body) = cp
        .call(Method::GET, "/me", None, Auth::Bearer(&ada.token))
        .await;
    assert_eq!((status, code(&body)), (StatusCode::FORBIDDEN, "FORBIDDEN"));
    let (status, _, _) = cp.login("ada@example.com", "a long password").await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (_, _, tenants) = cp
        .call(Method::GET, "/admin/tenants", None, admin_auth)
        .await;
    assert_eq!(tenants["tenants"][0]["status"], "suspended");

    let (status, _, _) = cp
        .call(
            Method::POST,
            &format!("/admin/tenants/{tenant}/resume"),
            None,
            admin_auth,
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _, _) = cp
        .call(Method::GET, "/me", None, Auth::Bearer(&ada.token))
        .await;
    assert_eq!(status, StatusCode::OK);
    eventually("the key is pushed back", || async {
        let (status, _) = data_call(&node, &key, "shop/orders/pk-write", write.clone()).await;
        (status == StatusCode::OK).then_some(())
    })
    .await;
    let (status, _, _) = cp
        .call(
            Method::POST,
            "/admin/tenants/t_nosuch/suspend",
            None,
            admin_auth,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

async fn hostile_input_on_every_route_is_a_clear_4xx_and_changes_nothing(backend: Backend) {
    let (cp, admin) = control_with_admin(backend, "{}").await;
    let disk = tempfile::tempdir().unwrap();
    let node = data_node(&cp, disk.path());
    let ada = cp.signup("ada@example.com", "analytical").await;
    shop_with_orders(&cp, &ada).await;
    let (_, key) = create_key(
        &cp,
        &ada,
        json!({"name": "app", "grants": [{"database": "shop", "role": "read"}]}),
    )
    .await;
    assert!(key["key"].is_string());
    let snapshot = || async {
        let (_, _, dbs) = cp
            .call(Method::GET, "/databases", None, Auth::Bearer(&ada.token))
            .await;
        let (_, _, keys) = cp
            .call(Method::GET, "/api-keys", None, Auth::Bearer(&ada.token))
            .await;
        let (_, _, tenants) = cp
            .call(
                Method::GET,
                "/admin/tenants",
                None,
                Auth::Bearer(&admin.token),
            )
            .await;
        (
            dbs,
            keys["keys"].clone(),
            tenants["tenants"][0]["quota"].clone(),
            on_node(&node).await,
        )
    };
    let before = snapshot().await;

    let (_, _, doc) = cp
        .call(Method::GET, "/openapi.json", None, Auth::None)
        .await;
    let long = "n".repeat(5000);
    let params = [
        "x'; DROP TABLE tenants; --",
        "%00",
        "..%2F..%2Fetc%2Fpasswd",
        "%F0%9F%92%A3",
        long.as_str(),
    ];
    let huge = format!("{{\"name\": \"{}\"}}", "a".repeat(100 << 10));
    let bodies: [&str; 6] = [
        "{\"name\": ",
        "[]",
        "{\"name\": 5, \"grants\": \"all\"}",
        "null",
        "\u{0}",
        huge.as_str(),
    ];
    let http = reqwest::Client::new();
    let mut calls = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        if path.starts_with("/auth/") {
            continue; // signup and login: covered on their own; logout ends the session
        }
        for method in item.as_object().unwrap().keys() {
            let method = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            // Bodies go to the calls that read one.
            let sends_body = item[method.as_str().to_lowercase()]["requestBody"].is_object();
            if !path.contains('{') && !sends_body {
                continue; // nothing hostile to send: a list, healthz
            }
            let token = if path.starts_with("/admin/") {
                &admin.token
            } else {
                &ada.token
            };
            for param in params {
                let concrete = path
                    .replace("{db}", param)
                    .replace("{table}", param)
                    .replace("{id}", param);
                for body in if sends_body {
                    &bodies[..]
                } else {
                    &bodies[..1]
                } {
                    let mut request = http
                        .request(
                            method.clone(),
                            format!("{}/api/v1{concrete}", cp.shoal.control_url),
                        )
                        .bearer_auth(token);
                    if sends_body {
                        request = request
                            .header("content-type", "application/json")
                            .body(body.to_string());
                    }
                    let response = request.send().await.unwrap();
                    let status = response.status();
                    let text = response.text().await.unwrap();
                    calls += 1;
                    assert!(
                        status.is_client_error(),
                        "{method} {concrete} {body:.40}: {status} {text:.200}"
                    );
                    let answer: Value = serde_json::from_str(&text)
                        .unwrap_or_else(|_| panic!("{method} {concrete}: not JSON: {text:.200}"));
                    assert!(
                        answer["error"]["code"].is_string()
                            && answer["error"]["message"].is_string(),
                        "{answer}"
                    );
                }
            }
        }
    }
    assert!(calls > 100, "{calls} calls");
    for query in [
        "limit=abc",
        "before=yesterday",
        "limit=-5",
        "limit=0",
        "limit=1001",
        "tenant=x&tenant=y",
        "bogus=1",
    ] {
        let (status, _, answer) = cp
            .call(
                Method::GET,
                &format!("/admin/audit?{query}"),
                None,
                Auth::Bearer(&admin.token),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {answer}");
    }
    assert_eq!(snapshot().await, before, "nothing changed");
    assert!(!cp.shoal.stderr().contains("panicked"));
}

async fn ndbinfo_sql_answers_over_ones_own_databases_only(backend: Backend) {
    let (cp, admin) = control_with_admin(backend, "{}").await;
    let disk = tempfile::tempdir().unwrap();
    let node = data_node(&cp, disk.path());
    let ada = cp.signup("ada@example.com", "analytical").await;
    let bob = cp.signup("bob@example.com", "builders").await;
    shop_with_orders(&cp, &ada).await;
    let (status, _) = create_database(&cp, &bob, "lab").await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, _, _) = cp
        .call(
            Method::POST,
            "/databases/lab/tables",
            Some(&orders()),
            Auth::Bearer(&bob.token),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    for db in ["shop", "lab"] {
        let rows: Vec<Value> = (0..50).map(|i| json!({"op": "write", "table": "orders", "row": {"id": i, "note": "n".repeat(150)}})).collect();
        let (status, body) = node
            .send(
                Method::POST,
                &format!("/internal/v1/databases/{db}/transaction"),
                Some(json!({"operations": rows})),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }

    // As a RonDB user would ask, and the same figures the node has.
    let (status, answer) = sql(
        &cp,
        &ada,
        "SELECT * FROM ndbinfo.table_memory_usage WHERE database_name = 'shop'",
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(
        answer["columns"],
        json!([
            "database_name",
            "table_name",
            "in_memory_bytes",
            "free_in_memory_bytes",
            "disk_memory_bytes",
            "free_disk_memory_bytes"
        ])
    );
    let (_, on_node) = node
        .send(Method::GET, "/internal/v1/ndbinfo/table_memory_usage", None)
        .await;
    let shop_on_node: Vec<Value> = on_node["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r[0] == "shop")
        .cloned()
        .collect();
    assert_eq!(answer["rows"], json!(shop_on_node));

    // Only her own databases, however she asks.
    for query in [
        "SELECT * FROM ndbinfo.table_memory_usage",
        "SELECT * FROM ndbinfo.table_memory_usage WHERE database_name = 'lab' OR 1=1",
        "SELECT database_name FROM ndbinfo.database_memory_usage UNION SELECT database_name FROM ndbinfo.database_quota_usage",
        "SELECT database_name FROM ndbinfo.\"ndb$table_map\"",
        "SELECT database_name FROM ndbinfo.database_quota_usage WHERE database_name LIKE '%'",
    ] {
        let (status, answer) = sql(&cp, &ada, query).await;
        assert_eq!(status, StatusCode::OK, "{query}: {answer}");
        let seen = firsts(&answer);
        assert!(
            !seen.is_empty() && seen.iter().all(|d| d == "shop"),
            "{query}: {seen:?}"
        );
    }
    let (_, answer) = sql(
        &cp,
        &ada,
        "SELECT COUNT(*) FROM ndbinfo.\"ndb$table_memory_usage\"",
    )
    .await;
    let fragments = firsts(&answer)[0].as_i64().unwrap();
    assert!(fragments > 0);
    let (_, answer) = sql(&cp, &ada, "SELECT COUNT(*) FROM ndbinfo.memoryusage").await;
    assert_eq!(
        firsts(&answer),
        vec![json!(0)],
        "node-wide figures are for operators"
    );

    // An operator sees every tenant's, and the node's.
    let (status, answer) = sql(
        &cp,
        &admin,
        "SELECT database_name FROM ndbinfo.database_memory_usage ORDER BY 1",
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(firsts(&answer), vec![json!("lab"), json!("shop")]);
    let (_, answer) = sql(
        &cp,
        &admin,
        "SELECT memory_type, used <= total FROM ndbinfo.memoryusage",
    )
    .await;
    assert!(!firsts(&answer).is_empty());

    // Anything but one SELECT is refused; errors say what SQLite says.
    for (query, code_) in [
        ("DROP TABLE ndbinfo.memoryusage", "INVALID_SQL"),
        ("ATTACH DATABASE '/tmp/x.db' AS x", "INVALID_SQL"),
        ("PRAGMA query_only = 0", "INVALID_SQL"),
        ("SELECT 1; SELECT 2", "INVALID_SQL"),
        (
            "WITH x AS (SELECT 1) DELETE FROM ndbinfo.memoryusage",
            "INVALID_SQL",
        ),
        ("SELECT * FROM ndbinfo.no_such_table", "INVALID_SQL"),
        ("SELEKT 1", "INVALID_SQL"),
        (
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT max(x) FROM c",
            "QUERY_TIMEOUT",
        ),
        (
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 20000) SELECT x FROM c",
            "TOO_MANY_ROWS",
        ),
    ] {
        let (status, answer) = sql(&cp, &ada, query).await;
        assert_eq!(
            (status, code(&answer)),
            (StatusCode::BAD_REQUEST, code_),
            "{query}: {answer}"
        );
    }
    let (_, answer) = sql(&cp, &ada, "SELECT * FROM ndbinfo.no_such_table").await;
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no such table"),
        "{answer}"
    );
    let (status, _) = sql(&cp, &ada, "SELECT COUNT(*) FROM ndbinfo.table_memory_usage").await;
    assert_eq!(
        status,
        StatusCode::OK,
        "the engine is fresh each query: nothing was dropped"
    );

    // `shoal sql` prints it as a table.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_shoal"))
        .args([
            "sql",
            "--control-plane",
            &cp.shoal.control_url,
            "--email",
            "ada@example.com",
        ])
        .arg("SELECT database_name, table_name FROM ndbinfo.table_memory_usage")
        .env("SHOAL_PASSWORD", "a long password")
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        printed.contains("| database_name | table_name |"),
        "{printed}"
    );
    assert!(
        printed.contains("| shop          | orders     |"),
        "{printed}"
    );
    assert!(printed.contains("1 row in set"), "{printed}");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_shoal"))
        .args([
            "sql",
            "--control-plane",
            &cp.shoal.control_url,
            "--email",
            "ada@example.com",
            "DROP TABLE x",
        ])
        .env("SHOAL_PASSWORD", "a long password")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("INVALID_SQL"));
}

/// `GET /usage?{query}` as `token`.
async fn usage(cp: &Control, query: &str, token: &str) -> (StatusCode, Value) {
    let (status, _, body) = cp
        .call(
            Method::GET,
            &format!("/usage?{query}"),
            None,
            Auth::Bearer(token),
        )
        .await;
    (status, body)
}

/// The write and read units a series (`query`, per minute) counts, once
/// it counts at least `expected`.
async fn units_counted(cp: &Control, query: &str, token: &str, expected: (u64, u64)) -> (u64, u64) {
    let query = format!("{query}&resolution=minute");
    eventually("the units are counted", || async {
        let (_, body) = usage(cp, &query, token).await;
        let sum = |f: &str| {
            (body["points"].as_array().unwrap().iter())
                .map(|p| p[f].as_u64().unwrap())
                .sum::<u64>()
        };
        let counted = (sum("write_units"), sum("read_units"));
        (counted.0 >= expected.0 && counted.1 >= expected.1).then_some(counted)
    })
    .await
}

async fn usage_is_metered_rolled_up_exported_and_kept_bounded(backend: Backend) {
    let (cp, admin) = control_with_admin_and(
        backend,
        "{}",
        &["--metering-interval", "1s", "--keep-raw", "4s"],
    )
    .await;
    let disk = tempfile::tempdir().unwrap();
    let node = data_node(&cp, disk.path());
    let ada = cp.signup("ada@example.com", "analytical").await;
    let bob = cp.signup("bob@example.com", "builders").await;
    shop_with_orders(&cp, &ada).await;
    let (_, made) = create_key(
        &cp,
        &ada,
        json!({"name": "app", "grants": [{"database": "shop", "role": "read_write"}]}),
    )
    .await;
    let key = made["key"].as_str().unwrap().to_owned();
    let ada_auth = Auth::Bearer(&ada.token);
    for id in 0..40 {
        let (status, _) = data_call(
            &node,
            &key,
            "shop/orders/pk-insert",
            json!({"row": {"id": id, "note": "x".repeat(180)}}),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
    }
    for id in 0..25 {
        data_call(
            &node,
            &key,
            "shop/orders/pk-read",
            json!({"filters": [{"column": "id", "value": id}]}),
        )
        .await;
    }

    // The database's memory appears in the series and matches ndbinfo.
    let (_, on_node) = node
        .send(
            Method::GET,
            "/internal/v1/ndbinfo/database_memory_usage",
            None,
        )
        .await;
    let memory = on_node["rows"][0][1].as_u64().unwrap();
    assert!(memory > 0);
    let ada_token = ada.token.as_str();
    let points = eventually("a sample of the database", || async {
        let (status, body) = usage(&cp, "database=shop&resolution=raw", ada_token).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let points = body["points"].as_array().unwrap().clone();
        points
            .iter()
            .any(|p| p["memory_bytes"].as_u64() == Some(memory))
            .then_some(points)
    })
    .await;
    assert!(points.iter().all(|p| p["at"].is_i64()));
    // The units the key spent are counted: 40 writes and 25 reads, once each.
    let counted = units_counted(&cp, "database=shop", ada_token, (40, 25)).await;
    assert_eq!(counted, (40, 25), "each unit counted once");
    // Per table, and the tenant as a whole.
    let (status, table) = usage(&cp, "database=shop&table=orders&resolution=raw", &ada.token).await;
    assert_eq!(status, StatusCode::OK);
    let (_, per_table) = node
        .send(Method::GET, "/internal/v1/ndbinfo/table_memory_usage", None)
        .await;
    let orders_memory = per_table["rows"][0][2].as_u64().unwrap();
    let latest = table["points"]
        .as_array()
        .unwrap()
        .last()
        .expect("a sample of the table")
        .clone();
    assert_eq!(
        latest["memory_bytes"].as_u64(),
        Some(orders_memory),
        "the table's memory as ndbinfo has it"
    );
    // Its units: the one table's are all the database's, counted once.
    let query = "database=shop&table=orders";
    let table_counted = units_counted(&cp, query, ada_token, (40, 25)).await;
    assert_eq!(table_counted, (40, 25), "each unit counted once, per table");
    // The data node's own series, for operators: its DataMemory in use, and
    // what it admitted for every database on it.
    let (_, _, listed) = cp
        .call(
            Method::GET,
            "/admin/datanodes",
            None,
            Auth::Bearer(&admin.token),
        )
        .await;
    let node_id = listed["datanodes"][0]["node_id"].as_u64().unwrap();
    let on_node = format!("node={node_id}");
    let node_counted = units_counted(&cp, &on_node, &admin.token, (40, 25)).await;
    assert_eq!(node_counted, (40, 25), "each unit counted once, per node");
    let (_, pool) = node
        .send(Method::GET, "/internal/v1/ndbinfo/memoryusage", None)
        .await;
    let used = pool["rows"][0][2].as_u64().unwrap();
    let (status, series) = usage(&cp, &format!("{on_node}&resolution=raw"), &admin.token).await;
    assert_eq!(status, StatusCode::OK, "{series}");
    assert_eq!(
        (&series["node_id"], &series["tenant_id"]),
        (&json!(node_id), &Value::Null)
    );
    let latest = series["points"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        latest["memory_bytes"].as_u64(),
        Some(used),
        "DataMemory in use, as memoryusage has it"
    );
    // Only operators; a node's series alone; only a node that exists.
    let (status, _) = usage(&cp, &on_node, ada_token).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    for query in [
        format!("{on_node}&database=shop"),
        format!("{on_node}&tenant=t_x"),
        "node=-1".to_owned(),
        "node=abc".to_owned(),
    ] {
        let (status, body) = usage(&cp, &query, &admin.token).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {body}");
    }
    let (status, _) = usage(&cp, "node=4000000", &admin.token).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, total) = usage(&cp, "resolution=minute", &ada.token).await;
    assert_eq!(
        (status, &total["tenant_id"]),
        (StatusCode::OK, &ada.user["tenant"]["id"])
    );
    assert!(!total["points"].as_array().unwrap().is_empty());

    // A node restart starts its counters again: nothing is counted twice or lost.
    node.kill();
    let node = data_node(&cp, disk.path());
    for id in 0..10 {
        let (status, _) = data_call(
            &node,
            &key,
            "shop/orders/pk-read",
            json!({"filters": [{"column": "id", "value": id}]}),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
    }
    eventually("the reads after the restart are counted", || async {
        let (_, body) = usage(&cp, "database=shop&resolution=minute", ada_token).await;
        let reads: u64 = body["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["read_units"].as_u64().unwrap())
            .sum();
        assert!(reads <= 35, "no reads counted twice: {reads}");
        (reads == 35).then_some(())
    })
    .await;

    // Another tenant's database is not there for Bob; bad parameters are 400.
    let (status, _) = usage(&cp, "database=shop", &bob.token).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, theirs) = usage(&cp, "resolution=minute", &bob.token).await;
    assert_eq!(theirs["points"], json!([]));
    for query in [
        "resolution=second",
        "from=10&to=5",
        "from=0&resolution=raw",
        "table=orders",
        "tenant=t_x",
        "bogus=1",
        "from=abc",
    ] {
        let (status, body) = usage(&cp, query, &ada.token).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {body}");
    }

    // The billing export: per tenant and day, as JSON and CSV. It sums the
    // hour buckets, which a round of metering rolls up just after the
    // minute ones: wait for the round that made the minutes right.
    let bill = eventually("the hour buckets have the reads", || async {
        let (status, _, bill) = cp.call(Method::GET, "/usage/billing", None, ada_auth).await;
        assert_eq!(status, StatusCode::OK, "{bill}");
        let reads = bill["lines"][0]["read_units"].as_u64().unwrap_or(0);
        assert!(reads <= 35, "no reads counted twice: {reads}");
        (reads == 35).then_some(bill)
    })
    .await;
    let line = &bill["lines"][0];
    assert_eq!(line["tenant_name"], "analytical");
    assert_eq!(line["write_units"], 40);
    assert_eq!(line["read_units"], 35);
    assert!(line["memory_gib_hours"].as_f64().unwrap() > 0.0);
    let csv = reqwest::Client::new()
        .get(format!(
            "{}/api/v1/usage/billing?format=csv",
            cp.shoal.control_url
        ))
        .bearer_auth(&admin.token)
        .send()
        .await
        .unwrap();
    assert_eq!(csv.headers()["content-type"], "text/csv; charset=utf-8");
    let csv = csv.text().await.unwrap();
    assert!(
        csv.starts_with(
            "tenant_id,tenant_name,day,memory_gib_hours,read_units,write_units,throttled_requests\n"
        ),
        "{csv}"
    );
    assert!(csv.contains(",analytical,"), "{csv}");
    let (_, _, bobs) = cp
        .call(
            Method::GET,
            "/usage/billing",
            None,
            Auth::Bearer(&bob.token),
        )
        .await;
    assert_eq!(bobs["lines"], json!([]), "Bob's bill has only Bob");

    // Raw samples older than --keep-raw go; the rollups stay.
    let first = points
        .iter()
        .filter_map(|p| p["at"].as_i64())
        .min()
        .unwrap();
    eventually("the first raw samples are dropped", || async {
        let (_, body) = usage(&cp, "database=shop&resolution=raw", ada_token).await;
        let oldest = body["points"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|p| p["at"].as_i64())
            .min()?;
        (oldest > first).then_some(())
    })
    .await;
    let (_, body) = usage(&cp, "database=shop&resolution=minute", ada_token).await;
    let writes: u64 = body["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["write_units"].as_u64().unwrap())
        .sum();
    assert_eq!(
        writes, 40,
        "the minutes still hold what the dropped samples said"
    );

    // A database throttled in the last interval is flagged in /quotas.
    let tenant = ada.user["tenant"]["id"].as_str().unwrap().to_owned();
    let path = format!("/admin/tenants/{tenant}/databases/shop/quota");
    let (status, _, _) = cp
        .call(
            Method::PUT,
            &path,
            Some(&json!({"write_units_per_sec": 1})),
            Auth::Bearer(&admin.token),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    eventually("the throttle is flagged", || async {
        let row = json!({"row": {"id": 1000, "note": "again"}});
        data_call(&node, &key, "shop/orders/pk-write", row.clone()).await;
        let (status, _) = data_call(&node, &key, "shop/orders/pk-write", row).await;
        assert!(status == StatusCode::OK || status == StatusCode::TOO_MANY_REQUESTS);
        let (_, _, quotas) = cp
            .call(Method::GET, "/quotas", None, Auth::Bearer(ada_token))
            .await;
        let flagged = quotas["databases"][0]["warnings"]
            .as_array()?
            .contains(&json!("throttled"));
        (flagged
            && quotas["tenant"]["warnings"]
                .as_array()?
                .contains(&json!("throttled")))
        .then_some(())
    })
    .await;
}

async fn metrics_are_prometheus_text_with_per_database_series(backend: Backend) {
    let (cp, admin) = control_with_admin_and(backend, "{}", &["--metering-interval", "1s"]).await;
    let disk = tempfile::tempdir().unwrap();
    let node = data_node(&cp, disk.path());
    let ada = cp.signup("ada@example.com", "analytical").await;
    shop_with_orders(&cp, &ada).await;
    let (_, made) = create_key(
        &cp,
        &ada,
        json!({"name": "app", "grants": [{"database": "shop", "role": "read_write"}]}),
    )
    .await;
    let key = made["key"].as_str().unwrap().to_owned();
    for id in 0..12 {
        let (status, _) = data_call(
            &node,
            &key,
            "shop/orders/pk-insert",
            json!({"row": {"id": id, "note": "m"}}),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
    }
    let tenant = ada.user["tenant"]["id"].as_str().unwrap().to_owned();

    // The data node's, with the cluster secret.
    let http = reqwest::Client::new();
    let scrape = |url: String, token: Option<String>| {
        let http = http.clone();
        async move {
            let mut request = http.get(url);
            if let Some(token) = token {
                request = request.bearer_auth(token);
            }
            let r = request.send().await.unwrap();
            (
                r.status(),
                r.headers().get("content-type").cloned(),
                r.text().await.unwrap(),
            )
        }
    };
    let node_url = format!("{}/metrics", node.internal_url);
    let (status, _, _) = scrape(node_url.clone(), None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, kind, text) = scrape(node_url, Some(SECRET.into())).await;
    assert_eq!(status, StatusCode::OK);
    assert!(kind.unwrap().to_str().unwrap().starts_with("text/plain"));
    let samples = prometheus(&text);
    let db = [("database", "shop"), ("tenant", tenant.as_str())];
    let with = |extra: (&'static str, &'static str)| {
        let mut l = db.to_vec();
        l.push(extra);
        l
    };
    assert_eq!(
        sample(
            &samples,
            "shoal_database_requests_total",
            &with(("outcome", "ok"))
        ),
        Some(12.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &samples,
            "shoal_database_units_total",
            &with(("kind", "write"))
        ),
        Some(12.0)
    );
    assert!(sample(&samples, "shoal_database_memory_bytes", &db).unwrap() > 0.0);
    let histogram = samples
        .iter()
        .find(|s| {
            s.metric == "shoal_database_request_duration_seconds"
                && s.labels.get("database") == Some("shop")
        })
        .expect("a latency histogram");
    match &histogram.value {
        prometheus_parse::Value::Histogram(buckets) => {
            assert_eq!(
                buckets.last().unwrap().count,
                12.0,
                "every request is in the +Inf bucket"
            );
            assert!(
                buckets.windows(2).all(|w| w[0].count <= w[1].count),
                "cumulative"
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(sample(&samples, "shoal_datamemory_bytes", &[("kind", "total")]).unwrap() > 0.0);

    // The control plane's: an admin's session or the cluster secret.
    let cp_url = format!("{}/api/v1/metrics", cp.shoal.control_url);
    let (status, _, _) = scrape(cp_url.clone(), None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _, _) = scrape(cp_url.clone(), Some(ada.token.clone())).await;
    assert_eq!(
        status,
        StatusCode::FORBIDDEN,
        "tenants see no other tenant's figures"
    );
    let (status, _, _) = scrape(cp_url.clone(), Some(SECRET.into())).await;
    assert_eq!(status, StatusCode::OK);
    let text = eventually("the database is metered", || {
        let (scrape, url, token) = (&scrape, cp_url.clone(), admin.token.clone());
        async move {
            let (status, _, text) = scrape(url, Some(token)).await;
            assert_eq!(status, StatusCode::OK);
            text.contains("shoal_metered_database_memory_bytes{")
                .then_some(text)
        }
    })
    .await;
    let samples = prometheus(&text);
    assert!(
        sample(&samples, "shoal_metered_database_memory_bytes", &db).unwrap() > 0.0,
        "{text}"
    );
    assert_eq!(sample(&samples, "shoal_databases", &[]), Some(1.0));
    assert_eq!(
        sample(&samples, "shoal_datanodes", &[("status", "up")]),
        Some(1.0)
    );
    assert!(
        samples
            .iter()
            .any(|s| s.metric == "shoal_http_requests_total"
                && s.labels
                    .get("route")
                    .is_some_and(|r| r == "/api/v1/databases/:db/tables")
                && s.labels.get("status") == Some("201")),
        "{text}"
    );
}

/// The bytes of DataMemory table `table` of `shop` holds, as the control
/// plane reports them.
async fn table_bytes(cp: &Control, who: &Session, table: &str) -> u64 {
    let (status, _, memory) = cp
        .call(
            Method::GET,
            "/databases/shop/memory",
            None,
            Auth::Bearer(&who.token),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{memory}");
    let columns = memory["columns"].as_array().unwrap();
    let at = |name: &str| columns.iter().position(|c| c == name).unwrap();
    let (name, bytes) = (at("table_name"), at("in_memory_bytes"));
    (memory["rows"].as_array().unwrap().iter())
        .filter(|r| r[name] == table)
        .map(|r| r[bytes].as_u64().unwrap())
        .sum()
}

async fn indexes_are_added_and_dropped_while_the_table_serves(backend: Backend) {
    let Shop {
        cp,
        node,
        ada,
        bob,
        _dir,
    } = shop(backend).await;
    let bearer = Auth::Bearer(&ada.token);
    let (_, made) = create_key(
        &cp,
        &ada,
        json!({"name": "app", "grants": [{"database": "shop", "role": "read_write"}]}),
    )
    .await;
    let key = made["key"].as_str().unwrap().to_owned();
    let operations: Vec<Value> = (0..3000)
        .map(|id| {
            json!({"method": "POST", "relative-url": "shop/orders/pk-insert",
                   "body": {"row": {"id": id, "note": format!("note {:04}", (id * 7) % 3000)}}})
        })
        .collect();
    for chunk in operations.chunks(1000) {
        let (status, body) = data_call(&node, &key, "batch", json!({"operations": chunk})).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    let before = table_bytes(&cp, &ada, "orders").await;

    // Added while writes go on (every one answered 200), answered with the
    // table's definition, then scanned in order.
    let writing = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let writer = {
        let (node, key, writing) = (node.rest_url.clone(), key.clone(), writing.clone());
        tokio::spawn(async move {
            let mut statuses = Vec::new();
            for n in 0..2000 {
                if !writing.load(std::sync::atomic::Ordering::Relaxed) && n > 20 {
                    break;
                }
                // Rows that are there, with notes of the same length: the
                // table's memory stays as it was.
                let body = json!({"row": {"id": n % 50, "note": format!("late {n:04}")}});
                let r = reqwest::Client::new()
                    .post(format!("{node}/0.1.0/shop/orders/pk-write"))
                    .header("X-API-KEY", &key)
                    .json(&body)
                    .send()
                    .await
                    .unwrap();
                statuses.push(r.status());
            }
            statuses
        })
    };
    let index = json!({"name": "by_note", "columns": ["note"]});
    let path = "/databases/shop/tables/orders/indexes";
    let (status, _, table) = cp.call(Method::POST, path, Some(&index), bearer).await;
    assert_eq!(status, StatusCode::CREATED, "{table}");
    writing.store(false, std::sync::atomic::Ordering::Relaxed);
    let statuses = writer.await.unwrap();
    assert!(
        statuses.iter().all(|s| *s == StatusCode::OK),
        "{statuses:?}"
    );
    assert_eq!(table["indexes"], json!([index]));
    let (_, _, listed) = cp
        .call(Method::GET, "/databases/shop/tables", None, bearer)
        .await;
    assert_eq!(listed["tables"][0]["indexes"], json!([index]));
    let (status, page) = data_call(
        &node,
        &key,
        "shop/orders/scan",
        json!({"index": "by_note", "lower": {"values": ["note 0100"]}, "limit": 3}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let notes: Vec<&str> = (page["data"].as_array().unwrap().iter())
        .map(|r| r["note"].as_str().unwrap())
        .collect();
    assert_eq!(notes, ["note 0100", "note 0101", "note 0102"]);
    let with_index = table_bytes(&cp, &ada, "orders").await;
    assert!(
        with_index > before,
        "the index's pages are the table's: {before} -> {with_index}"
    );

    // Refused, with what is wrong, and nothing changed.
    for (body, status, code_wanted) in [
        (index.clone(), StatusCode::CONFLICT, "INDEX_EXISTS"),
        (
            json!({"name": "BY_NOTE", "columns": ["id"]}),
            StatusCode::CONFLICT,
            "INDEX_EXISTS",
        ),
        (
            json!({"name": "x", "columns": ["nope"]}),
            StatusCode::BAD_REQUEST,
            "INVALID_REQUEST",
        ),
        (
            json!({"name": "PRIMARY", "columns": ["note"]}),
            StatusCode::BAD_REQUEST,
            "INVALID_REQUEST",
        ),
        (
            json!({"name": "<b>x</b>", "columns": ["note"]}),
            StatusCode::BAD_REQUEST,
            "INVALID_REQUEST",
        ),
        (
            json!({"name": "x", "columns": ["note"], "extra": 1}),
            StatusCode::BAD_REQUEST,
            "INVALID_REQUEST",
        ),
    ] {
        let (got, _, answer) = cp.call(Method::POST, path, Some(&body), bearer).await;
        assert_eq!(
            (got, code(&answer)),
            (status, code_wanted),
            "{body}: {answer}"
        );
    }
    let (status, _, _) = cp
        .call(
            Method::POST,
            "/databases/shop/tables/nope/indexes",
            Some(&index),
            bearer,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // An index made on the node itself is left alone: the same name through
    // the control plane is a clear conflict, and changes nothing.
    let (status, body) = node
        .send(
            Method::POST,
            "/internal/v1/databases/shop/tables/orders/indexes",
            Some(json!({"name": "by_id_on_node", "columns": ["id"]})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let same = json!({"name": "by_id_on_node", "columns": ["note"]});
    let (status, _, answer) = cp.call(Method::POST, path, Some(&same), bearer).await;
    assert_eq!(
        (status, code(&answer)),
        (StatusCode::CONFLICT, "INDEX_EXISTS"),
        "{answer}"
    );
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("data node"),
        "{answer}"
    );
    let (status, _) = node
        .send(
            Method::DELETE,
            "/internal/v1/databases/shop/tables/orders/indexes/by_id_on_node",
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    // Another tenant cannot see the table, let alone index it.
    let (status, _, _) = cp
        .call(
            Method::POST,
            path,
            Some(&json!({"name": "i", "columns": ["note"]})),
            Auth::Bearer(&bob.token),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _, _) = cp
        .call(
            Method::DELETE,
            &format!("{path}/by_note"),
            None,
            Auth::Bearer(&bob.token),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, _, listed) = cp
        .call(Method::GET, "/databases/shop/tables", None, bearer)
        .await;
    assert_eq!(listed["tables"][0]["indexes"], json!([index]));

    // Dropped: scans no longer find it, and its pages go back.
    let (status, _, _) = cp
        .call(Method::DELETE, &format!("{path}/by_note"), None, bearer)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, answer) =
        data_call(&node, &key, "shop/orders/scan", json!({"index": "by_note"})).await;
    assert_eq!(
        (status, code(&answer)),
        (StatusCode::NOT_FOUND, "NO_SUCH_INDEX"),
        "{answer}"
    );
    assert_eq!(table_bytes(&cp, &ada, "orders").await, before);
    let (status, _, _) = cp
        .call(Method::DELETE, &format!("{path}/by_note"), None, bearer)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, _, listed) = cp
        .call(Method::GET, "/databases/shop/tables", None, bearer)
        .await;
    assert_eq!(listed["tables"][0].get("indexes"), None);

    // A unique index over values rows share is refused, naming them, and
    // is not there.
    for id in [1, 2] {
        let row = json!({"row": {"id": id, "note": "shared"}});
        let (status, body) = data_call(&node, &key, "shop/orders/pk-write", row).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    let unique = json!({"name": "by_note", "columns": ["note"], "unique": true});
    let (status, _, answer) = cp.call(Method::POST, path, Some(&unique), bearer).await;
    assert_eq!(
        (status, code(&answer)),
        (StatusCode::CONFLICT, "DUPLICATE_KEY"),
        "{answer}"
    );
    assert!(
        answer.to_string().contains("share the values 'shared'"),
        "{answer}"
    );
    let (_, _, listed) = cp
        .call(Method::GET, "/databases/shop/tables", None, bearer)
        .await;
    assert_eq!(listed["tables"][0].get("indexes"), None);
}

/// A row request of the control plane's API on table `orders` of `shop`.
async fn row(cp: &Control, who: &Session, body: Value) -> (StatusCode, Value) {
    let path = "/databases/shop/tables/orders/rows";
    call_as(cp, who, Method::POST, path, Some(&body)).await
}

/// A page of `orders` of `shop` (`query` after the `?`).
async fn rows_page(cp: &Control, who: &Session, query: &str) -> (StatusCode, Value) {
    let path = format!("/databases/shop/tables/orders/rows?{query}");
    call_as(cp, who, Method::GET, &path, None).await
}

/// The console's data browser API: a table's rows a page at a time in
/// primary-key order, one row read, inserted, changed and deleted — on the
/// data node, through its coordinator — and nothing for another tenant, a
/// platform admin, or a bad request.
async fn rows_are_browsed_and_changed_through_the_coordinator(backend: Backend) {
    let (cp, admin) = control_with_admin(backend, "{}").await;
    let disk = tempfile::tempdir().unwrap();
    let node = data_node(&cp, disk.path());
    let ada = cp.signup("ada@example.com", "analytical").await;
    let bob = cp.signup("bob@example.com", "builders").await;
    shop_with_orders(&cp, &ada).await;
    // Inserted in a shuffled order; pages come in key order.
    for id in (1..=60).rev().step_by(2).chain((1..=60).step_by(2)) {
        let note = if id == 7 {
            "<script>alert(1)</script>".to_owned()
        } else {
            format!("order {id}")
        };
        let (status, body) = row(
            &cp,
            &ada,
            json!({"op": "insert", "row": {"id": id, "note": note}}),
        )
        .await;
        assert_eq!(
            (status, &body["outcome"]),
            (StatusCode::OK, &json!("inserted")),
            "{body}"
        );
    }
    let (status, first) = rows_page(&cp, &ada, "limit=50").await;
    assert_eq!(status, StatusCode::OK, "{first}");
    assert_eq!(first["table"]["name"], "orders");
    let ids: Vec<i64> = (first["rows"].as_array().unwrap().iter())
        .map(|r| r["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, (1..=50).collect::<Vec<_>>());
    assert_eq!(
        first["rows"][6]["note"], "<script>alert(1)</script>",
        "stored as given"
    );
    let after = first["next"].as_str().expect("a cursor");
    let (status, second) = rows_page(&cp, &ada, &format!("limit=50&after={after}")).await;
    assert_eq!(status, StatusCode::OK, "{second}");
    assert_eq!(second["rows"].as_array().unwrap().len(), 10);
    assert_eq!(second["rows"][0]["id"], 51);
    assert_eq!(second["next"], Value::Null);

    // One row by its key; changed; deleted.
    let (status, found) = row(&cp, &ada, json!({"op": "read", "key": {"id": 42}})).await;
    assert_eq!(
        (status, &found["row"]["note"]),
        (StatusCode::OK, &json!("order 42"))
    );
    let (status, _) = row(
        &cp,
        &ada,
        json!({"op": "update", "row": {"id": 42, "note": null}}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (_, found) = row(&cp, &ada, json!({"op": "read", "key": {"id": 42}})).await;
    assert_eq!(found["row"]["note"], Value::Null);
    let (status, _) = row(&cp, &ada, json!({"op": "delete", "key": {"id": 42}})).await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = row(&cp, &ada, json!({"op": "read", "key": {"id": 42}})).await;
    assert_eq!((status, code(&body)), (StatusCode::NOT_FOUND, "NOT_FOUND"));
    let (status, body) = row(&cp, &ada, json!({"op": "delete", "key": {"id": 42}})).await;
    assert_eq!(
        (status, code(&body)),
        (StatusCode::NOT_FOUND, "NOT_FOUND"),
        "{body}"
    );

    // Bad requests: a clear error, nothing written.
    let refused: Vec<(Value, StatusCode, &str)> = vec![
        (
            json!({"op": "insert", "row": {"id": "abc", "note": "x"}}),
            StatusCode::BAD_REQUEST,
            "INVALID_VALUE",
        ),
        (
            json!({"op": "insert", "row": {"id": 1, "note": "again"}}),
            StatusCode::CONFLICT,
            "DUPLICATE_KEY",
        ),
        (
            json!({"op": "insert", "row": {"id": 900, "note": "x".repeat(201)}}),
            StatusCode::BAD_REQUEST,
            "INVALID_VALUE",
        ),
        (
            json!({"op": "insert", "row": {"id": 901, "nope": 1}}),
            StatusCode::BAD_REQUEST,
            "INVALID_VALUE",
        ),
        (
            json!({"op": "insert", "row": {"note": "no key"}}),
            StatusCode::BAD_REQUEST,
            "INVALID_VALUE",
        ),
        (
            json!({"op": "update", "row": {"id": 902, "note": "absent"}}),
            StatusCode::NOT_FOUND,
            "NOT_FOUND",
        ),
        (
            json!({"op": "insert", "key": {"id": 903}}),
            StatusCode::BAD_REQUEST,
            "INVALID_REQUEST",
        ),
        (
            json!({"op": "delete", "key": {"id": 1}, "row": {"id": 1}}),
            StatusCode::BAD_REQUEST,
            "INVALID_REQUEST",
        ),
        (
            json!({"op": "read", "key": [1]}),
            StatusCode::BAD_REQUEST,
            "INVALID_REQUEST",
        ),
        (
            json!({"op": "drop", "key": {"id": 1}}),
            StatusCode::BAD_REQUEST,
            "INVALID_REQUEST",
        ),
    ];
    for (body, status, expected) in refused {
        let (got, answer) = row(&cp, &ada, body.clone()).await;
        assert_eq!((got, code(&answer)), (status, expected), "{body}: {answer}");
    }
    for (query, expected) in [
        ("limit=0", "INVALID_REQUEST"),
        ("limit=501", "INVALID_REQUEST"),
        ("limit=x", "INVALID_REQUEST"),
        ("after=garbage", "BAD_REQUEST"),
        ("colour=red", "INVALID_REQUEST"),
    ] {
        let (status, body) = rows_page(&cp, &ada, query).await;
        assert_eq!(
            (status, code(&body)),
            (StatusCode::BAD_REQUEST, expected),
            "{query}: {body}"
        );
    }
    let (_, all) = rows_page(&cp, &ada, "limit=500").await;
    assert_eq!(
        all["rows"].as_array().unwrap().len(),
        59,
        "nothing written by the refusals"
    );
    let (status, body) = rows_page(&cp, &ada, "").await;
    assert_eq!(
        (status, body["rows"].as_array().map(Vec::len)),
        (StatusCode::OK, Some(50))
    );

    // Another tenant, a platform admin, a missing table: nothing.
    let (status, _) = row(&cp, &bob, json!({"op": "read", "key": {"id": 1}})).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = rows_page(&cp, &bob, "").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, body) = row(&cp, &admin, json!({"op": "read", "key": {"id": 1}})).await;
    assert_eq!((status, code(&body)), (StatusCode::FORBIDDEN, "FORBIDDEN"));
    let (status, _, _) = cp
        .call(
            Method::GET,
            "/databases/shop/tables/nope/rows",
            None,
            Auth::Bearer(&ada.token),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _, _) = cp
        .call(
            Method::GET,
            "/databases/shop/tables/orders/rows",
            None,
            Auth::None,
        )
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    drop(node);
}

/// `GET /audit`: a tenant's own changes, newest first; an operator's
/// change to it shown as the operators'; nothing of another tenant's.
async fn a_tenant_reads_its_own_activity_and_no_one_elses(backend: Backend) {
    let (cp, admin) = control_with_admin(backend, "{}").await;
    let disk = tempfile::tempdir().unwrap();
    let _node = data_node(&cp, disk.path());
    let ada = cp.signup("ada@example.com", "analytical").await;
    let bob = cp.signup("bob@example.com", "builders").await;
    shop_with_orders(&cp, &ada).await;
    let (status, _) = create_key(
        &cp,
        &ada,
        json!({"name": "<b>app</b>", "grants": [{"database": "shop", "role": "read"}]}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let tenant = ada.user["tenant"]["id"].as_str().unwrap().to_owned();
    let (status, _, _) = cp
        .call(
            Method::PUT,
            &format!("/admin/tenants/{tenant}/quota"),
            Some(&json!({"in_memory_bytes": 1073741824})),
            Auth::Bearer(&admin.token),
        )
        .await;
    assert_eq!(status, StatusCode::OK);

    // An operator reads a tenant's quotas, its databases' with them.
    let path = format!("/admin/tenants/{tenant}/quotas");
    let (status, _, quotas) = cp
        .call(Method::GET, &path, None, Auth::Bearer(&admin.token))
        .await;
    assert_eq!(status, StatusCode::OK, "{quotas}");
    assert_eq!(quotas["tenant"]["quota"]["in_memory_bytes"], 1073741824);
    assert_eq!(quotas["databases"][0]["name"], "shop");
    let (status, _, _) = cp
        .call(Method::GET, &path, None, Auth::Bearer(&ada.token))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _, _) = cp
        .call(
            Method::GET,
            "/admin/tenants/t_nosuch/quotas",
            None,
            Auth::Bearer(&admin.token),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    let (status, _, log) = cp
        .call(Method::GET, "/audit", None, Auth::Bearer(&ada.token))
        .await;
    assert_eq!(status, StatusCode::OK, "{log}");
    let entries = log["entries"].as_array().unwrap();
    let seen: Vec<(&str, &str)> = (entries.iter())
        .map(|e| {
            (
                e["actor"]["email"].as_str().unwrap(),
                e["action"].as_str().unwrap(),
            )
        })
        .collect();
    // Newest first: the operator's quota, then Ada's key, table, database.
    assert_eq!(seen[0].0, "the platform's operators", "{log}");
    assert_eq!(entries[0]["actor"]["id"], "operator");
    assert!(
        !log.to_string().contains("ops@")
            && !log.to_string().contains(&admin.user["id"].to_string()),
        "{log}"
    );
    let ada_did: Vec<&str> = (seen.iter())
        .filter(|(who, _)| *who == "ada@example.com")
        .map(|(_, a)| *a)
        .collect();
    assert!(ada_did.len() >= 3, "{log}");
    let ats: Vec<i64> = entries.iter().map(|e| e["at"].as_i64().unwrap()).collect();
    assert!(
        ats.windows(2).all(|w| w[0] >= w[1]),
        "newest first: {ats:?}"
    );

    // Bob sees only his own (his tenant made); a bad limit is refused; an
    // admin is sent to the whole log.
    let (status, _, log) = cp
        .call(Method::GET, "/audit", None, Auth::Bearer(&bob.token))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(log["entries"].as_array().map(Vec::len), Some(1), "{log}");
    assert_eq!(log["entries"][0]["action"], "tenant.create");
    let text = log.to_string();
    assert!(!text.contains("ada@") && !text.contains("shop"), "{log}");
    for query in ["?limit=0", "?limit=1001", "?limit=x", "?tenant=t_other"] {
        let (status, _, body) = cp
            .call(
                Method::GET,
                &format!("/audit{query}"),
                None,
                Auth::Bearer(&ada.token),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {body}");
    }
    let (status, _, _) = cp
        .call(Method::GET, "/audit", None, Auth::Bearer(&admin.token))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _, _) = cp.call(Method::GET, "/audit", None, Auth::None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}
