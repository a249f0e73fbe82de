//! `docs/design.md` stays true to the tree: its crate graph is the workspace's normal
//! dependencies between its own crates as `cargo metadata` reports them, and every path it names
//! exists.

// Test code unwraps: a failed step should fail the test loudly.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn design_doc() -> String {
    std::fs::read_to_string(repo_root().join("docs/design.md")).unwrap()
}

/// Each workspace crate with the workspace crates it depends on (normal dependencies, optional
/// ones included), from `cargo metadata`.
fn workspace_graph() -> BTreeMap<String, BTreeSet<String>> {
    let output = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(repo_root())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let packages = metadata["packages"].as_array().unwrap();
    let names: BTreeSet<String> = packages
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_owned())
        .collect();
    packages
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["kind"].is_null())
                .map(|d| d["name"].as_str().unwrap().to_owned())
                .filter(|d| names.contains(d))
                .collect();
            (p["name"].as_str().unwrap().to_owned(), deps)
        })
        .collect()
}

/// The graph as the document writes it, between `<!-- crate-graph -->` and its closing marker:
/// `crate -> dep, dep` or `crate -> (none)`.
fn documented_graph(doc: &str) -> BTreeMap<String, BTreeSet<String>> {
    const OPEN: &str = "<!-- crate-graph -->";
    let start = doc.find(OPEN).expect("no crate-graph marker") + OPEN.len();
    let end = doc
        .find("<!-- /crate-graph -->")
        .expect("no closing crate-graph marker");
    doc[start..end]
        .lines()
        .filter_map(|line| line.split_once("->"))
        .map(|(name, deps)| {
            let deps = deps
                .split(',')
                .map(str::trim)
                .filter(|d| !d.is_empty() && *d != "(none)")
                .map(str::to_owned)
                .collect();
            (name.trim().to_owned(), deps)
        })
        .collect()
}

fn render(graph: &BTreeMap<String, BTreeSet<String>>) -> String {
    let mut text = String::new();
    for (name, deps) in graph {
        let deps: Vec<&str> = deps.iter().map(String::as_str).collect();
        let deps = if deps.is_empty() {
            "(none)".to_owned()
        } else {
            deps.join(", ")
        };
        writeln!(text, "{name} -> {deps}").unwrap();
    }
    text
}

#[test]
fn the_crate_graph_of_the_design_doc_is_the_workspaces() {
    let actual = workspace_graph();
    let documented = documented_graph(&design_doc());
    assert!(
        actual.len() > 5,
        "cargo metadata listed too few crates: {actual:?}"
    );
    assert_eq!(
        render(&documented),
        render(&actual),
        "docs/design.md's crate graph (left) differs from cargo metadata (right)"
    );
}

#[test]
fn every_path_the_design_doc_names_exists() {
    let doc = design_doc();
    let root = repo_root();
    let named: Vec<&str> = doc
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|text| {
            text.contains('/')
                && !text.contains(' ')
                && (text.ends_with('/')
                    || Path::new(text).extension().is_some_and(|ext| {
                        ext.eq_ignore_ascii_case("rs") || ext.eq_ignore_ascii_case("md")
                    }))
                && !text.starts_with("resource.k8s.io")
                && !text.starts_with("k8s.io")
        })
        .collect();
    assert!(
        named.len() >= 12,
        "expected the claim flows to name their files, found {named:?}"
    );
    let missing: Vec<&&str> = named
        .iter()
        .filter(|path| !root.join(path).exists())
        .collect();
    assert!(
        missing.is_empty(),
        "docs/design.md names missing paths: {missing:?}"
    );
}
