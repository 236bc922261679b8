//! The data node's layers, held to the picture in docs/architecture.md: a
//! module imports only from layers below its own. Reads every source file
//! of the crate and fails on a `crate::…` path that reaches up (or into a
//! module this test does not know — a new layer must be placed here).

use std::path::{Path, PathBuf};

/// The layers from the bottom up; a module may use those before it.
const LAYERS: &[&str] = &[
    "types",
    "storage",
    "sql",
    "log",
    "ldm",
    "tc",
    "node",
    "cluster",
    "api",
    "internal_api",
    "server",
];

/// What the crate root defines for every layer's tests.
const ROOT_ITEMS: &[&str] = &["test_runtime"];

fn rank(layer: &str) -> Option<usize> {
    LAYERS.iter().position(|l| *l == layer)
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a source directory") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every `crate::name` in `text`, with its line number.
fn crate_paths(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or_default();
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            let after = &rest[at + "crate::".len()..];
            let name: String = after
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            assert!(
                !name.is_empty(),
                "line {}: a grouped `crate::{{…}}` import; name each layer's path on its own",
                n + 1
            );
            found.push((n + 1, name));
            rest = after;
        }
    }
    found
}

#[test]
fn no_module_imports_from_a_layer_above_its_own() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    files.sort();
    let mut wrong = Vec::new();
    for file in &files {
        let relative = file.strip_prefix(&src).expect("under src");
        let top = relative
            .components()
            .next()
            .and_then(|c| c.as_os_str().to_str())
            .expect("a file name")
            .trim_end_matches(".rs")
            .to_owned();
        if top == "lib" {
            continue; // the crate root names every layer: that is its job
        }
        let Some(own) = rank(&top) else {
            wrong.push(format!(
                "{}: module `{top}` is in no layer (add it to LAYERS and to docs/architecture.md)",
                relative.display()
            ));
            continue;
        };
        let text = std::fs::read_to_string(file).expect("a readable source file");
        for (line, used) in crate_paths(&text) {
            if ROOT_ITEMS.contains(&used.as_str()) {
                continue;
            }
            match rank(&used) {
                Some(theirs) if theirs <= own => {}
                Some(_) => wrong.push(format!(
                    "{}:{line}: `{top}` uses `crate::{used}`, a layer above it",
                    relative.display()
                )),
                None => wrong.push(format!(
                    "{}:{line}: `crate::{used}` is in no layer",
                    relative.display()
                )),
            }
        }
    }
    assert!(
        files.len() > 50,
        "read {} files: not the crate's sources?",
        files.len()
    );
    assert!(
        wrong.is_empty(),
        "imports against the layers:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_check_sees_an_upward_import() {
    let found = crate_paths(
        "use crate::tc::Tc; // crate::node in a comment\nlet x = crate::api::json::f();",
    );
    assert_eq!(found, vec![(1, "tc".to_owned()), (2, "api".to_owned())]);
    assert!(rank("tc") > rank("storage"));
}
