//! `dra-ledger ledger {inspect,verify,backup,migrate}` run as the built binary, on a fresh ledger
//! and on missing, corrupt and newer files.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::cli_support::{path_str, populated_ledger, text, DRIVER};

fn dra_ledger(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dra-ledger"))
        .args(args)
        .output()
        .expect("the binary runs")
}

/// [`populated_ledger`] at `ledger.redb` in `dir`.
fn populated_in(dir: &Path) -> PathBuf {
    let path = dir.join("ledger.redb");
    populated_ledger(&path);
    path
}

#[test]
fn verify_of_a_consistent_ledger_exits_zero_with_counts() {
    let dir = tempfile::tempdir().unwrap();
    let path = populated_in(dir.path());
    let before = std::fs::read(&path).unwrap();
    let output = dra_ledger(&["ledger", "verify", "--ledger", path_str(&path)]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    assert!(
        stdout.contains("is consistent: 8 devices, 2 allocations"),
        "{stdout}"
    );
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "verify wrote to the file"
    );
}

#[test]
fn inspect_shows_schema_driver_nodes_and_pending_intents() {
    let dir = tempfile::tempdir().unwrap();
    let path = populated_in(dir.path());
    let output = dra_ledger(&["ledger", "inspect", "--ledger", path_str(&path)]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    let schema = format!("schema version: {}", dra_migrations::CURRENT_SCHEMA_VERSION);
    for expected in [
        schema.as_str(),
        "driver: gpu.dra-ledger.io",
        "claims allocated: 2",
        "admin-access claims: 0",
        "nodes: 2",
        "pending intents: 1",
        "claim team/claim-uid-b (uid uid-b) on node-1",
    ] {
        assert!(
            stdout.contains(expected),
            "{expected:?} missing from\n{stdout}"
        );
    }
    let node_1 = stdout
        .lines()
        .find(|line| line.trim_start().starts_with("node-1"))
        .unwrap();
    let columns: Vec<&str> = node_1.split_whitespace().collect();
    assert_eq!(columns, ["node-1", "4", "2", "2", "0", "0", "0"]);
}

#[test]
fn inspect_json_is_one_parseable_document() {
    let dir = tempfile::tempdir().unwrap();
    let path = populated_in(dir.path());
    let output = dra_ledger(&["ledger", "inspect", "--json", "--ledger", path_str(&path)]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["driverName"], DRIVER);
    assert_eq!(
        json["schemaVersion"],
        dra_migrations::CURRENT_SCHEMA_VERSION
    );
    assert_eq!(json["nodes"].as_array().unwrap().len(), 2);
    assert_eq!(json["pendingIntents"][0]["claim"]["uid"], "uid-b");
}

#[test]
fn backup_writes_a_copy_that_verifies_and_never_overwrites() {
    let dir = tempfile::tempdir().unwrap();
    let path = populated_in(dir.path());
    let copy = dir.path().join("copy.redb");
    let output = dra_ledger(&[
        "ledger",
        "backup",
        "--ledger",
        path_str(&path),
        "--to",
        path_str(&copy),
    ]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let verified = dra_ledger(&["ledger", "verify", "--ledger", path_str(&copy)]);
    assert!(verified.status.success(), "{}", text(&verified.stdout));
    assert!(text(&verified.stdout).contains("2 allocations"));

    let again = dra_ledger(&[
        "ledger",
        "backup",
        "--ledger",
        path_str(&path),
        "--to",
        path_str(&copy),
    ]);
    assert_eq!(again.status.code(), Some(1));
    assert!(
        text(&again.stderr).contains("already exists"),
        "{}",
        text(&again.stderr)
    );
}

#[test]
fn migrate_of_a_current_ledger_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = populated_in(dir.path());
    let before = std::fs::read(&path).unwrap();
    let output = dra_ledger(&["ledger", "migrate", "--ledger", path_str(&path)]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let current = format!(
        "already has schema version {}; nothing to do",
        dra_migrations::CURRENT_SCHEMA_VERSION
    );
    assert!(text(&output.stdout).contains(&current));
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

#[test]
fn every_tool_refuses_a_corrupt_file_clearly_and_leaves_it_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.redb");
    let garbage: Vec<u8> = (0..8192u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(&path, &garbage).unwrap();
    let copy = dir.path().join("copy.redb");
    let tools: [&[&str]; 5] = [
        &["ledger", "verify", "--ledger", path_str(&path)],
        &["ledger", "inspect", "--ledger", path_str(&path)],
        &["ledger", "migrate", "--ledger", path_str(&path)],
        &[
            "ledger",
            "backup",
            "--ledger",
            path_str(&path),
            "--to",
            path_str(&copy),
        ],
        &["ledger", "inspect", "--json", "--ledger", path_str(&path)],
    ];
    for args in tools {
        let output = dra_ledger(args);
        assert_eq!(output.status.code(), Some(1), "{args:?}");
        let stderr = text(&output.stderr);
        assert!(
            stderr.starts_with("error: ") && stderr.contains("is corrupt or not a redb database"),
            "{args:?}: {stderr}"
        );
        assert_eq!(
            std::fs::read(&path).unwrap(),
            garbage,
            "{args:?} changed the file"
        );
    }
    assert!(!copy.exists());
}

#[test]
fn a_missing_file_is_an_error_and_is_not_created() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("absent.redb");
    for tool in ["verify", "inspect", "migrate"] {
        let output = dra_ledger(&["ledger", tool, "--ledger", path_str(&path)]);
        assert_eq!(output.status.code(), Some(1), "{tool}");
        assert!(text(&output.stderr).contains("does not exist"), "{tool}");
    }
    let output = dra_ledger(&[
        "ledger",
        "backup",
        "--ledger",
        path_str(&path),
        "--to",
        path_str(&dir.path().join("copy.redb")),
    ]);
    assert_eq!(output.status.code(), Some(1));
    assert!(!path.exists());
}

#[test]
fn a_newer_schema_is_refused_and_left_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let path = populated_in(dir.path());
    {
        let db = redb::Database::open(&path).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut meta = txn.open_table(dra_migrations::META).unwrap();
            let newer = dra_migrations::CURRENT_SCHEMA_VERSION + 1;
            meta.insert("schema_version", newer.to_be_bytes().as_slice())
                .unwrap();
        }
        txn.commit().unwrap();
    }
    let before = std::fs::read(&path).unwrap();
    for tool in ["verify", "inspect", "migrate"] {
        let output = dra_ledger(&["ledger", tool, "--ledger", path_str(&path)]);
        assert_eq!(output.status.code(), Some(1), "{tool}");
        let stderr = text(&output.stderr);
        let newer = format!(
            "schema version {}",
            dra_migrations::CURRENT_SCHEMA_VERSION + 1
        );
        assert!(stderr.contains(&newer), "{tool}: {stderr}");
        assert_eq!(
            std::fs::read(&path).unwrap(),
            before,
            "{tool} changed the file"
        );
    }
}

#[test]
fn verify_lists_a_broken_invariant_and_exits_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = populated_in(dir.path());
    {
        // Drop the journal's index entry of the pending allocation, as a buggy writer might.
        use dra_allocator::ledger::tables::{ClaimUid, PENDING_INTENTS};
        let db = redb::Database::open(&path).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut pending = txn.open_table(PENDING_INTENTS).unwrap();
            assert!(pending.remove(ClaimUid::new("uid-b")).unwrap().is_some());
        }
        txn.commit().unwrap();
    }
    let before = std::fs::read(&path).unwrap();
    let output = dra_ledger(&["ledger", "verify", "--ledger", path_str(&path)]);
    assert_eq!(output.status.code(), Some(1));
    let stdout = text(&output.stdout);
    assert!(stdout.contains("problem(s)"), "{stdout}");
    assert!(
        stdout.contains("  - pending allocation uid-b has no pending intent"),
        "{stdout}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), before);
}
