//! `shoal demo` as a user runs it: it says how to reach it, writes
//! `demo.json`, and its ndbinfo tables account for the demo table exactly.

mod common;

use common::Shoal;
use serde_json::{Value, json};

async fn rows(shoal: &Shoal, table: &str) -> Vec<Vec<Value>> {
    serde_json::from_value(shoal.ndbinfo(table).await["rows"].clone()).unwrap()
}

/// Starts `shoal demo` on `dir` and waits until it is ready; answers it and
/// the demo.json it wrote.
fn start_demo(dir: &std::path::Path) -> (Shoal, Value) {
    let mut shoal = Shoal::start_in(
        &["demo", "--data-memory", "64M", "--control-port", "0"],
        dir,
    );
    shoal.wait_for("written to");
    let demo = serde_json::from_slice(&std::fs::read(dir.join("demo.json")).unwrap()).unwrap();
    (shoal, demo)
}

fn num(v: &Value) -> u64 {
    v.as_u64().unwrap()
}

#[tokio::test]
async fn the_demo_accounts_for_its_table_in_every_ndbinfo_view() {
    let mut shoal = Shoal::start(&["demo", "--data-memory", "64M", "--control-port", "0"]);
    let written = shoal.wait_for("written to");
    assert!(written.contains("demo.json"));
    let curl = shoal
        .stdout
        .iter()
        .find(|l| l.contains("curl") && l.contains("ndbinfo"))
        .expect("a curl line to paste");
    assert!(
        curl.contains(&shoal.internal_url) && curl.contains("cluster-secret"),
        "{curl}"
    );

    let demo: Value =
        serde_json::from_slice(&std::fs::read(shoal.data_dir.join("demo.json")).unwrap()).unwrap();
    assert_eq!(demo["internal_url"], shoal.internal_url.as_str());
    assert_eq!(demo["database"], "demo");
    assert_eq!(demo["rows"], 1000);
    assert!(std::path::Path::new(demo["cluster_secret_file"].as_str().unwrap()).exists());

    let per_table = rows(&shoal, "table_memory_usage").await;
    assert_eq!(per_table.len(), 1);
    let users = &per_table[0];
    assert_eq!(
        (users[0].as_str(), users[1].as_str()),
        (Some("demo"), Some("users"))
    );
    let (in_memory, free) = (num(&users[2]), num(&users[3]));
    assert!(
        in_memory > 0 && in_memory % 32768 == 0,
        "whole pages: {in_memory}"
    );
    assert!(free < in_memory);
    // 1000 rows of at least ~70 bytes each are live.
    assert!(in_memory - free > 70_000, "{users:?}");
    assert_eq!((num(&users[4]), num(&users[5])), (0, 0), "no disk columns");

    let fragments = rows(&shoal, "ndb$table_memory_usage").await;
    let sum = |col: usize| fragments.iter().map(|r| num(&r[col])).sum::<u64>();
    assert_eq!(
        (sum(3), sum(4)),
        (in_memory, free),
        "the view sums the fragments"
    );
    let per_db = rows(&shoal, "database_memory_usage").await;
    assert_eq!(per_db[0][1..3], [Value::from(in_memory), Value::from(free)]);
    let pool = rows(&shoal, "memoryusage").await;
    assert_eq!(
        num(&pool[0][2]),
        in_memory,
        "the pool lent exactly what the fragments hold"
    );
    assert_eq!(num(&pool[0][4]) * 32768, in_memory);
    assert_eq!(num(&pool[0][3]), 64 << 20);

    let quota = rows(&shoal, "database_quota_usage").await;
    assert_eq!(quota.len(), 1);
    let demo = &quota[0];
    assert_eq!(demo[0], "demo");
    assert_eq!(
        num(&demo[1]),
        in_memory,
        "the quota view counts the same pages"
    );
    assert_eq!(num(&demo[2]), 64 << 20);
    assert!(
        num(&demo[4]) >= 1000,
        "seeding 1000 rows took write units: {demo:?}"
    );
    assert_eq!((num(&demo[5]), num(&demo[6])), (10_000, 5_000));

    let (code, _) = shoal.terminate();
    assert_eq!(code, Some(0));
}

/// Reads user 7 over REST with the demo's key, as its printed curl line does.
async fn read_user_7(shoal: &Shoal, demo: &Value) -> Value {
    assert_eq!(demo["rest_url"], shoal.rest_url.as_str());
    assert_eq!(demo["resp_addr"], shoal.resp_addr.as_str());
    let key = demo["tenant"]["api_key"].as_str().expect("an API key");
    let r = common::client()
        .post(format!("{}/0.1.0/demo/users/pk-read", shoal.rest_url))
        .header("X-API-KEY", key)
        .body(r#"{"filters":[{"column":"id","value":7}]}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), reqwest::StatusCode::OK);
    r.json().await.unwrap()
}

#[tokio::test]
async fn the_demo_key_reads_the_demo_table_and_says_how() {
    let dir = tempfile::tempdir().unwrap();
    let (shoal, demo) = start_demo(dir.path());
    let key = demo["tenant"]["api_key"].as_str().unwrap().to_owned();
    for tool in ["curl -s -H 'X-API-KEY:", "redis-cli"] {
        let line = shoal.stdout.iter().find(|l| l.contains(tool)).expect(tool);
        assert!(line.contains(&key), "{line}");
    }
    let user = read_user_7(&shoal, &demo).await;
    assert_eq!(user["data"]["name"], "User 7");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join("demo.json"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "demo.json holds a key: its owner's only");
    }
    let (code, _) = shoal.terminate();
    assert_eq!(code, Some(0));

    // The next start has the same key, and it still works.
    let (shoal, again) = start_demo(dir.path());
    assert_eq!(again["tenant"]["api_key"], key.as_str());
    assert_eq!(read_user_7(&shoal, &again).await["data"]["name"], "User 7");
}

#[tokio::test]
async fn the_demo_comes_back_with_its_data_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (shoal, _) = start_demo(dir.path());
    let before = rows(&shoal, "table_memory_usage").await;
    let (code, _) = shoal.terminate();
    assert_eq!(code, Some(0));

    let mut shoal = Shoal::start_in(
        &["demo", "--data-memory", "64M", "--control-port", "0"],
        dir.path(),
    );
    let said = shoal.wait_for("demo: database");
    assert!(said.contains("recovered"), "{said}");
    shoal.wait_for("written to");
    assert_eq!(rows(&shoal, "table_memory_usage").await, before);
    let quota = rows(&shoal, "database_quota_usage").await;
    assert_eq!(num(&quota[0][2]), 64 << 20, "the quota came back too");
}

/// Logs in at the demo's control plane; answers the session token.
async fn login(api_url: &str, who: &Value) -> String {
    let r = reqwest::Client::new()
        .post(format!("{api_url}/auth/login"))
        .json(&serde_json::json!({"email": who["email"], "password": who["password"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), reqwest::StatusCode::OK);
    let body: Value = r.json().await.unwrap();
    body["token"].as_str().unwrap().to_owned()
}

async fn get(url: String, token: &str) -> Value {
    let r = reqwest::Client::new()
        .get(url)
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), reqwest::StatusCode::OK);
    r.json().await.unwrap()
}

#[tokio::test]
async fn the_demo_is_made_through_the_control_plane_and_its_logins_work() {
    let dir = tempfile::tempdir().unwrap();
    let (shoal, demo) = start_demo(dir.path());
    for field in ["console_url", "api_url", "rest_url", "resp_addr"] {
        assert!(demo[field].is_string(), "demo.json has {field}: {demo}");
    }
    let api_url = demo["api_url"].as_str().unwrap();
    assert!(
        shoal.stdout.iter().any(|l| l.contains(api_url)),
        "the API's address is printed"
    );

    // The tenant sees its database, on this node, with its table.
    let tenant = login(api_url, &demo["tenant"]).await;
    let dbs = get(format!("{api_url}/databases"), &tenant).await;
    assert_eq!(dbs["databases"][0]["name"], "demo");
    assert_eq!(dbs["databases"][0]["tables"], serde_json::json!(["users"]));
    assert_eq!(dbs["databases"][0]["rest_url"], demo["rest_url"]);
    let quotas = get(format!("{api_url}/quotas"), &tenant).await;
    assert!(
        quotas["databases"][0]["usage"]["in_memory_bytes"]
            .as_u64()
            .unwrap()
            > 0
    );
    let keys = get(format!("{api_url}/api-keys"), &tenant).await;
    let key = demo["tenant"]["api_key"].as_str().unwrap();
    assert_eq!(keys["keys"][0]["id"].as_str(), key.split('.').next());

    // The admin sees the demo tenant, the node, and the log of it all.
    let admin = login(api_url, &demo["admin"]).await;
    let tenants = get(format!("{api_url}/admin/tenants"), &admin).await;
    assert_eq!(tenants["tenants"][0]["name"], "demo");
    let nodes = get(format!("{api_url}/admin/datanodes"), &admin).await;
    assert_eq!(nodes["datanodes"][0]["status"], "up");
    let audit = get(format!("{api_url}/admin/audit"), &admin).await;
    let actions: Vec<&str> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    for action in [
        "tenant.create",
        "database.create",
        "table.create",
        "database.quota.set",
        "api_key.create",
    ] {
        assert!(actions.contains(&action), "{action} in {actions:?}");
    }

    // A second start reuses everything: the same logins and key.
    let (code, _) = shoal.terminate();
    assert_eq!(code, Some(0));
    let (_shoal, again) = start_demo(dir.path());
    assert_eq!(again["admin"], demo["admin"]);
    assert_eq!(again["tenant"]["password"], demo["tenant"]["password"]);
    assert_eq!(again["tenant"]["api_key"], demo["tenant"]["api_key"]);
    let api_url = again["api_url"].as_str().unwrap();
    let tenant = login(api_url, &again["tenant"]).await;
    let keys = get(format!("{api_url}/api-keys"), &tenant).await;
    assert_eq!(
        keys["keys"].as_array().unwrap().len(),
        1,
        "no second key was made"
    );
}

#[tokio::test]
async fn a_demo_whose_demo_json_is_gone_sets_its_logins_anew() {
    let dir = tempfile::tempdir().unwrap();
    let (shoal, first) = start_demo(dir.path());
    let (code, _) = shoal.terminate();
    assert_eq!(code, Some(0));
    std::fs::remove_file(dir.path().join("demo.json")).unwrap();

    let mut shoal = Shoal::start_in(
        &["demo", "--data-memory", "64M", "--control-port", "0"],
        dir.path(),
    );
    shoal.wait_for("written to");
    let said = shoal.stdout.iter().find(|l| l.contains("was gone"));
    assert!(
        said.is_some_and(|l| l.contains("set anew")),
        "{:?}",
        shoal.stdout
    );
    let again: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("demo.json")).unwrap()).unwrap();
    for who in ["admin", "tenant"] {
        assert_ne!(again[who]["password"], first[who]["password"], "{who}");
        login(again["api_url"].as_str().unwrap(), &again[who]).await;
    }
    // The data is the earlier run's, and the new key reads it.
    assert_eq!(read_user_7(&shoal, &again).await["data"]["name"], "User 7");
}

/// `shoal demo --data-nodes 2 --replicas 2`: two child data nodes in one
/// node group, both listed in demo.json and both serving the demo table; a
/// node killed with -9 is started again by the demo, caught up, and serves
/// what was written meanwhile.
#[tokio::test]
async fn a_demo_cluster_lists_its_nodes_and_restarts_one_that_dies() {
    let mut shoal = Shoal::start(&common::DEMO_CLUSTER);
    shoal.wait_for("written to");
    let demo: Value =
        serde_json::from_slice(&std::fs::read(shoal.data_dir.join("demo.json")).unwrap()).unwrap();
    let nodes = demo["data_nodes"].as_array().expect("data_nodes").clone();
    assert_eq!(nodes.len(), 2, "{nodes:?}");
    for (i, node) in nodes.iter().enumerate() {
        assert_eq!(node["node_id"], i as u64 + 1);
        assert_eq!(node["node_group"], 0);
        assert!(node["pid"].as_u64().is_some_and(|p| p > 0), "{node}");
        assert!(shoal.data_dir.join(format!("node-{}", i + 1)).is_dir());
    }
    assert_eq!(demo["rest_url"], nodes[0]["rest_url"]);
    let key = demo["tenant"]["api_key"].as_str().unwrap().to_owned();
    let http = common::client();
    let call = |url: String, body: String| {
        let (http, key) = (http.clone(), key.clone());
        async move {
            let r = http
                .post(url)
                .header("X-API-KEY", key)
                .body(body)
                .send()
                .await;
            match r {
                Ok(r) => (
                    r.status().as_u16(),
                    r.json::<Value>().await.unwrap_or_default(),
                ),
                Err(_) => (0, Value::Null),
            }
        }
    };
    let read = |node: &Value, id: i64| {
        call(
            format!(
                "{}/0.1.0/demo/users/pk-read",
                node["rest_url"].as_str().unwrap()
            ),
            format!(r#"{{"filters":[{{"column":"id","value":{id}}}]}}"#),
        )
    };
    // Each serves once it is in its group's view (a node starting joins
    // its group first: 503 until then).
    for node in &nodes {
        let user = common::control::eventually("each node serves the demo table", || {
            let read = &read;
            async move {
                let (status, user) = read(node, 7).await;
                (status == 200).then_some(user)
            }
        })
        .await;
        assert_eq!(user["data"]["name"], json!("User 7"));
    }

    // kill -9 node 2; a write through node 1 meanwhile.
    let pid = nodes[1]["pid"].as_u64().unwrap().to_string();
    let killed = std::process::Command::new("kill")
        .args(["-9", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    let row = r#"{"row":{"id":5000,"name":"Late","email":"late@example.com","country":"SE","signed_up":"2024-01-01","balance":"1.00","active":true,"bio":null}}"#;
    let write_url = format!(
        "{}/0.1.0/demo/users/pk-insert",
        nodes[0]["rest_url"].as_str().unwrap()
    );
    common::control::eventually("a write through node 1 after the kill", || {
        let (url, row) = (write_url.clone(), row.to_owned());
        let call = &call;
        async move { matches!(call(url, row).await.0, 200 | 409).then_some(()) }
    })
    .await;
    shoal.wait_for("angel: data node 2 exited");
    shoal.wait_for("node 2: data node 2 listening");
    // Back, caught up: it serves the row written while it was down.
    common::control::eventually("node 2 back, with the row written meanwhile", || {
        let read = &read;
        let node = &nodes[1];
        async move {
            let (status, user) = read(node, 5000).await;
            (status == 200 && user["data"]["name"] == "Late").then_some(())
        }
    })
    .await;
    // demo.json names the process that runs node 2 now.
    let now = common::control::eventually("demo.json names node 2's new process", || {
        let path = shoal.data_dir.join("demo.json");
        let old = pid.clone();
        async move {
            let demo: Value = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
            let now = demo["data_nodes"][1]["pid"].as_u64()?.to_string();
            (now != old).then_some(now)
        }
    })
    .await;
    let alive = std::process::Command::new("kill")
        .args(["-0", &now])
        .status()
        .unwrap();
    assert!(alive.success(), "process {now} runs");
    let (status, _) = shoal.terminate();
    assert_eq!(status, Some(0));
}

#[test]
fn a_demo_cluster_needs_whole_node_groups() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path().to_str().unwrap();
    for (nodes, replicas, says) in [
        ("3", "2", "must be a multiple of --replicas"),
        ("0", "1", "--data-nodes"),
        ("17", "1", "--data-nodes"),
        ("2", "4", "--replicas"),
    ] {
        let args = [
            "demo",
            "--data-dir",
            dir,
            "--control-port",
            "0",
            "--data-nodes",
            nodes,
            "--replicas",
            replicas,
        ];
        let (code, stderr) = common::run_to_exit(&args);
        assert_ne!(code, Some(0), "{args:?}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    assert!(
        !std::path::Path::new(dir).join("demo.json").exists(),
        "nothing was started"
    );
}
