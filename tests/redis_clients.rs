//! Redis clients as applications use them, unchanged: redis-py (RESP2 and
//! RESP3), node-redis (RESP2 and RESP3) and ioredis — connect, a
//! transaction, a pipeline, `scan_iter`/`hscan_iter` (and their Node
//! forms), and the commands clients trip over when they are missing.
//! scripts/test installs redis-py with pip and the Node clients with npm
//! (tests/clients/package-lock.json).

mod common;

use std::process::Command;

use common::resp::{CONNECT, Setup, python, setup};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_py_scans_transactions_and_pipelines_in_resp2_and_resp3() {
    let s = setup(&[]).await;
    for protocol in [2, 3] {
        let script = format!(
            "{CONNECT}\
             r = redis.Redis(host=sys.argv[1], port=int(sys.argv[2]), username='cache', \
                 password=sys.argv[3], protocol={protocol}, decode_responses=True)\n\
             r.flushdb()\n\
             p = r.pipeline(transaction=False)\n\
             for i in range(700):\n    p.set(f'scan:{{i}}', i)\n\
             p.execute()\n\
             keys = set(r.scan_iter(match='scan:*', count=64))\n\
             r.hset('h', mapping={{f'f{{i}}': f'v{{i}}' for i in range(200)}})\n\
             fields = dict(r.hscan_iter('h', match='f1*'))\n\
             with r.pipeline() as t:\n    t.set('a', 1).incr('a').get('a')\n    tx = t.execute()\n\
             r.setex('ex', 100, 'v')\n\
             print(len(keys), len(fields), fields['f17'], tx, r.ttl('ex'),\n\
                   r.setnx('nx', 1), r.setnx('nx', 2), r.getdel('nx'), r.exists('nx'),\n\
                   r.unlink('ex', 'nope'), r.incrbyfloat('fl', 10.5), r.incrbyfloat('fl', 0.1),\n\
                   r.config_get('maxmemory-policy'), r.type('h'), r.dbsize())\n"
        );
        assert_eq!(
            python(&s, &script),
            "700 111 v17 [True, 2, '2'] 100 True False 1 0 1 10.5 10.6 \
             {'maxmemory-policy': 'noeviction'} hash 703\n",
            "RESP{protocol}"
        );
    }
    // What tools read, parsed by redis-py: COMMAND (the table), COMMAND
    // DOCS (through execute_command: redis-py has no method for it),
    // CLIENT LIST and CLIENT INFO.
    let script = format!(
        "{CONNECT}\
         table = r.command()\n\
         docs = r.execute_command('COMMAND DOCS', 'get', 'scan')\n\
         clients = r.client_list()\n\
         print(table['mset']['step_count'], table['get']['flags'], len(docs), len(clients), \
               clients[0]['user'], r.client_info()['id'] == r.client_id())\n"
    );
    assert_eq!(python(&s, &script), "2 ['readonly'] 2 1 cache True\n");
}

/// Runs a Node.js client script of tests/clients; answers the JSON it printed.
fn node(s: &Setup, script: &str, args: &[&str]) -> Value {
    let (host, port) = s.shoal.resp_addr.rsplit_once(':').unwrap();
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/clients");
    let out = Command::new("node")
        .current_dir(dir)
        .arg(script)
        .args([host, port, &s.key])
        .args(args)
        .output()
        .expect("node (scripts/test installs Node.js and runs npm ci in tests/clients)");
    assert!(
        out.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_redis_works_unchanged_in_resp2_and_resp3() {
    let s = setup(&[]).await;
    for resp in ["2", "3"] {
        let seen = node(&s, "node_redis.mjs", &[resp]);
        assert_eq!(
            seen["transaction"],
            json!(["OK", 2, "2"]),
            "RESP{resp}: {seen}"
        );
        assert_eq!(seen["pipeline"], json!(["0", "499", "null"]), "{seen}");
        assert_eq!(seen["scanned"], 500, "{seen}");
        assert_eq!(seen["hscanned"], 111, "{seen}");
        assert_eq!(seen["f17"], "v17", "{seen}");
        assert_eq!(seen["ttl"], 100, "{seen}");
        assert_eq!(seen["setnx"], json!([1, 0]), "{seen}");
        assert_eq!(seen["getdel"], json!(["1", 0]), "{seen}");
        assert_eq!(seen["unlink"], 1, "{seen}");
        assert_eq!(seen["incrbyfloat2"], "10.6", "{seen}");
        assert_eq!(
            seen["config"],
            json!({"maxmemory-policy": "noeviction"}),
            "{seen}"
        );
        assert_eq!(seen["flushdb"], "OK", "{seen}");
        assert_eq!(seen["dbsize"], 0, "{seen}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ioredis_works_unchanged() {
    let s = setup(&[]).await;
    let seen = node(&s, "ioredis.mjs", &[]);
    assert_eq!(
        seen["transaction"],
        json!([[null, "OK"], [null, 2], [null, "2"]]),
        "{seen}"
    );
    assert_eq!(seen["pipeline"], 500, "{seen}");
    assert_eq!(seen["count0"], "72", "{seen}");
    assert_eq!(seen["scanned"], 7, "{seen}");
    assert_eq!(seen["hscanned"], 50, "{seen}");
    assert_eq!(seen["renamed"], json!(["OK", "2"]), "{seen}");
    assert_eq!(seen["copied"], json!([1, "2"]), "{seen}");
    assert_eq!(seen["client"], 1, "{seen}");
}
