//! Ledger files the process cannot use: a truncated file, a file of a newer schema and a
//! read-only directory, for `dra-ledger run`, `demo` and the `ledger` tools. Each refusal is a clear error naming the file
//! and exit 1, and the file stays byte-for-byte as it was.
//!
//! Tests run as root here, where file modes do not stop writes: the child then runs as `nobody`
//! through `setpriv`, and the test first checks that this child really cannot write to the
//! directory. Without that mechanism the read-only tests are skipped with a message, except under
//! `CI=true`, where that is a failure.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::cli_support::{path_str, populated_ledger, text};

const NOBODY: &str = "65534";

/// A kubeconfig pointing at a port nothing listens on: `run` must fail on the ledger first.
fn unreachable_kubeconfig(dir: &Path) -> PathBuf {
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:9\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user: {}\n",
    )
    .unwrap();
    path
}

/// The commands that open a ledger file, for `ledger` at `path`.
fn commands_on(path: &Path, kubeconfig: &Path, copy: &Path) -> Vec<Vec<String>> {
    let p = path_str(path);
    let mut commands: Vec<Vec<&str>> = vec![
        vec!["ledger", "verify", "--ledger", p],
        vec!["ledger", "inspect", "--ledger", p],
        vec!["ledger", "inspect", "--json", "--ledger", p],
        vec!["ledger", "migrate", "--ledger", p],
        vec!["ledger", "backup", "--ledger", p, "--to", path_str(copy)],
    ];
    commands.push(vec![
        "run",
        "--kubeconfig",
        path_str(kubeconfig),
        "--ledger",
        p,
        "--listen",
        "127.0.0.1:0",
    ]);
    commands.push(vec![
        "demo",
        "--nodes",
        "1",
        "--pods",
        "1",
        "--listen",
        "127.0.0.1:0",
        "--ledger",
        p,
    ]);
    commands
        .into_iter()
        .map(|c| c.into_iter().map(str::to_owned).collect())
        .collect()
}

/// Fails unless `output` is exit 1 with a last stderr line `error: ...` naming `path` and
/// containing `reason`.
fn assert_refused(output: &Output, args: &[String], path: &Path, reason: &str) {
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("error: ") && last.contains(path_str(path)) && last.contains(reason),
        "{args:?}: expected an error naming {} with {reason:?}, got:\n{stderr}",
        path.display()
    );
}

#[test]
fn a_truncated_ledger_is_refused_by_every_command_naming_it_and_left_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let full = dir.path().join("full.redb");
    populated_ledger(&full);
    let bytes = std::fs::read(&full).unwrap();
    let kubeconfig = unreachable_kubeconfig(dir.path());
    let path = dir.path().join("truncated.redb");
    let copy = dir.path().join("copy.redb");
    for keep in [100, 4096, bytes.len() / 2, bytes.len() - 1] {
        let truncated = &bytes[..keep];
        std::fs::write(&path, truncated).unwrap();
        for args in commands_on(&path, &kubeconfig, &copy) {
            let output = crate::cli_support::binary().args(&args).output().unwrap();
            assert_refused(&output, &args, &path, "is corrupt or not a redb database");
            assert_eq!(
                std::fs::read(&path).unwrap(),
                truncated,
                "{args:?} changed the file cut at {keep} bytes"
            );
            assert!(!copy.exists(), "{args:?} wrote a backup");
        }
    }
}

#[test]
fn a_ledger_of_a_newer_schema_is_refused_by_run_and_demo_naming_it_and_left_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("newer.redb");
    populated_ledger(&path);
    let newer = dra_migrations::CURRENT_SCHEMA_VERSION + 1;
    {
        let db = redb::Database::open(&path).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut meta = txn.open_table(dra_migrations::META).unwrap();
            meta.insert("schema_version", newer.to_be_bytes().as_slice())
                .unwrap();
        }
        txn.commit().unwrap();
    }
    let bytes = std::fs::read(&path).unwrap();
    let kubeconfig = unreachable_kubeconfig(dir.path());
    let copy = dir.path().join("copy.redb");
    // The ledger tools' refusal of a newer file is in cli_ledger.rs; here the long-running ones.
    for args in commands_on(&path, &kubeconfig, &copy) {
        if args[0] != "run" && args[0] != "demo" {
            continue;
        }
        let output = crate::cli_support::binary().args(&args).output().unwrap();
        assert_refused(&output, &args, &path, &format!("schema version {newer}"));
        assert_eq!(
            std::fs::read(&path).unwrap(),
            bytes,
            "{args:?} changed the file"
        );
    }
}

/// Whether this process runs as root (the owner of a file it creates).
fn running_as_root(dir: &Path) -> bool {
    let probe = dir.join(".owner-probe");
    std::fs::write(&probe, b"").unwrap();
    let root = std::fs::metadata(&probe).unwrap().uid() == 0;
    std::fs::remove_file(&probe).unwrap();
    root
}

/// Runs programs as a user that cannot write to a read-only directory: this user when not root,
/// `nobody` through `setpriv` when root.
struct Unprivileged {
    as_nobody: bool,
    /// The binary, or a copy of it where `nobody` cannot reach the build directory.
    binary: PathBuf,
}

impl Unprivileged {
    /// The mechanism, checked against `read_only` (a directory of mode 0555): `None`, after a
    /// message, when there is none and CI is not set.
    fn find(read_only: &Path) -> Option<Unprivileged> {
        let parent = read_only.parent().unwrap();
        let mut unprivileged = Unprivileged {
            as_nobody: running_as_root(parent),
            binary: PathBuf::from(env!("CARGO_BIN_EXE_dra-ledger")),
        };
        let runs = |u: &Unprivileged| {
            u.command(&u.binary)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        };
        if !runs(&unprivileged) {
            let copy = parent.join("dra-ledger");
            std::fs::copy(&unprivileged.binary, &copy).unwrap();
            unprivileged.binary = copy;
        }
        let probe = read_only.join("probe");
        let written = unprivileged
            .command(Path::new("touch"))
            .arg(&probe)
            .output();
        let works = matches!(&written, Ok(output) if !output.status.success())
            && !probe.exists()
            && runs(&unprivileged);
        if works {
            return Some(unprivileged);
        }
        let why = format!(
            "no way to run a child that cannot write to a read-only directory (setpriv as nobody: {written:?})"
        );
        testkit::tools::skip_or_fail(&why);
        None
    }

    fn command(&self, program: &Path) -> Command {
        if self.as_nobody {
            let mut command = Command::new("setpriv");
            command
                .arg(format!("--reuid={NOBODY}"))
                .arg(format!("--regid={NOBODY}"))
                .arg("--clear-groups")
                .arg(program);
            command
        } else {
            Command::new(program)
        }
    }

    fn dra_ledger(&self, args: &[String]) -> Output {
        self.command(&self.binary)
            .args(args)
            .env("TMPDIR", std::env::temp_dir())
            .output()
            .unwrap()
    }
}

/// A directory tree the unprivileged child can read: `<tmp>/ro/ledger.redb` (a populated ledger,
/// mode 0444, in a directory of mode 0555) and a kubeconfig beside `ro/`.
struct ReadOnlyTree {
    dir: tempfile::TempDir,
    ledger: PathBuf,
    bytes: Vec<u8>,
}

impl ReadOnlyTree {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let ro = dir.path().join("ro");
        std::fs::create_dir(&ro).unwrap();
        let ledger = ro.join("ledger.redb");
        populated_ledger(&ledger);
        let bytes = std::fs::read(&ledger).unwrap();
        std::fs::set_permissions(&ledger, std::fs::Permissions::from_mode(0o444)).unwrap();
        std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
        ReadOnlyTree { dir, ledger, bytes }
    }

    fn ro(&self) -> PathBuf {
        self.dir.path().join("ro")
    }

    fn entries(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.ro())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    fn assert_unchanged(&self, what: &[String]) {
        assert_eq!(
            std::fs::read(&self.ledger).unwrap(),
            self.bytes,
            "{what:?} changed the ledger"
        );
        assert_eq!(self.entries(), ["ledger.redb"], "{what:?} wrote a file");
    }
}

#[test]
fn run_and_demo_in_a_read_only_directory_fail_naming_the_ledger_and_write_nothing() {
    let tree = ReadOnlyTree::new();
    let Some(unprivileged) = Unprivileged::find(&tree.ro()) else {
        return;
    };
    let kubeconfig = unreachable_kubeconfig(tree.dir.path());
    let copy = tree.dir.path().join("unused-copy.redb");
    let fresh = tree.ro().join("new.redb");
    let mut commands: Vec<(Vec<String>, PathBuf)> = commands_on(&tree.ledger, &kubeconfig, &copy)
        .into_iter()
        .filter(|args| args[0] == "run" || args[0] == "demo")
        .map(|args| (args, tree.ledger.clone()))
        .collect();
    // A ledger that does not exist yet cannot be created there either.
    for args in commands_on(&fresh, &kubeconfig, &copy) {
        if args[0] == "run" || args[0] == "demo" {
            commands.push((args, fresh.clone()));
        }
    }
    assert_eq!(commands.len(), 4);
    for (args, path) in commands {
        let output = unprivileged.dra_ledger(&args);
        assert_refused(&output, &args, &path, "Permission denied");
        assert!(
            text(&output.stderr).contains("cannot open the ledger"),
            "{args:?}"
        );
        tree.assert_unchanged(&args);
    }
}

#[test]
fn ledger_tools_in_a_read_only_directory_read_it_and_backup_refuses_clearly() {
    let tree = ReadOnlyTree::new();
    let Some(unprivileged) = Unprivileged::find(&tree.ro()) else {
        return;
    };
    let kubeconfig = unreachable_kubeconfig(tree.dir.path());
    // The copy would go to a writable place: the refusal is about opening the ledger itself.
    let writable = tree.dir.path().join("out");
    std::fs::create_dir(&writable).unwrap();
    std::fs::set_permissions(&writable, std::fs::Permissions::from_mode(0o777)).unwrap();
    let copy = writable.join("copy.redb");
    for args in commands_on(&tree.ledger, &kubeconfig, &copy) {
        let output = unprivileged.dra_ledger(&args);
        match (args[0].as_str(), args[1].as_str()) {
            // Inspect and verify read a private copy; a current file needs no migration.
            ("ledger", "verify" | "inspect" | "migrate") => {
                assert!(
                    output.status.success(),
                    "{args:?}: {}",
                    text(&output.stderr)
                );
            }
            ("ledger", "backup") => {
                assert_refused(&output, &args, &tree.ledger, "Permission denied");
                assert!(!copy.exists(), "{args:?} left a partial copy");
            }
            _ => continue,
        }
        tree.assert_unchanged(&args);
    }
    let verified = unprivileged.dra_ledger(&[
        "ledger".into(),
        "verify".into(),
        "--ledger".into(),
        path_str(&tree.ledger).into(),
    ]);
    assert!(
        text(&verified.stdout).contains("is consistent: 8 devices, 2 allocations"),
        "{}",
        text(&verified.stdout)
    );
}
