//! `dra-ledger ledger {inspect,verify,backup,migrate}`: offline tools for a ledger file.
//!
//! `inspect` and `verify` work on a private copy of the file, so they never write to it (not even
//! the migration of an older schema); `backup` opens the file itself, so it refuses while a
//! controller holds it, and writes a consistent copy; `migrate` runs the schema migrations
//! explicitly (after writing `<file>.bak-v<N>`). A missing, empty, corrupt, newer or foreign file
//! is a clear error and a non-zero exit.

use std::fmt::Write as _;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use dra_allocator::ledger::{Ledger, NodeSummary, PendingIntent};
use dra_migrations::{FileInfo, MigrateOutcome, CURRENT_SCHEMA_VERSION};

/// Flags of `dra-ledger ledger`.
#[derive(Debug, clap::Args)]
pub struct LedgerArgs {
    /// The tool to run.
    #[command(subcommand)]
    pub tool: LedgerTool,
}

/// The offline tools.
#[derive(Debug, clap::Subcommand)]
pub enum LedgerTool {
    /// Print the schema version, driver name, device counts per node and pending intents.
    Inspect {
        /// The ledger file (read through a private copy; never written).
        #[arg(long, value_name = "PATH")]
        ledger: PathBuf,
        /// Print one JSON document instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Check every invariant of the file; exits 1 and lists the violations when any is broken.
    Verify {
        /// The ledger file (read through a private copy; never written).
        #[arg(long, value_name = "PATH")]
        ledger: PathBuf,
    },
    /// Write a consistent copy of the file (refused while a controller has the file open).
    Backup {
        /// The ledger file.
        #[arg(long, value_name = "PATH")]
        ledger: PathBuf,
        /// Where to write the copy; must not exist yet.
        #[arg(long, value_name = "PATH")]
        to: PathBuf,
    },
    /// Bring an older file to the current schema version, after writing `<file>.bak-v<N>`.
    Migrate {
        /// The ledger file.
        #[arg(long, value_name = "PATH")]
        ledger: PathBuf,
    },
}

/// Runs one tool.
pub fn execute(args: &LedgerArgs) -> anyhow::Result<ExitCode> {
    match &args.tool {
        LedgerTool::Inspect { ledger, json } => {
            let report = inspect(ledger)?;
            if *json {
                println!("{}", serde_json::to_string_pretty(&report.to_json())?);
            } else {
                print!("{}", report.to_text());
            }
            Ok(ExitCode::SUCCESS)
        }
        LedgerTool::Verify { ledger } => verify(ledger),
        LedgerTool::Backup { ledger, to } => {
            backup(ledger, to)?;
            println!(
                "wrote a consistent copy of {} to {}",
                ledger.display(),
                to.display()
            );
            Ok(ExitCode::SUCCESS)
        }
        LedgerTool::Migrate { ledger } => {
            match dra_migrations::migrate(ledger)? {
                MigrateOutcome::Current => println!(
                    "{} already has schema version {CURRENT_SCHEMA_VERSION}; nothing to do",
                    ledger.display()
                ),
                MigrateOutcome::Migrated { from, to, backup } => println!(
                    "migrated {} from schema version {from} to {to}; the old file is kept at {}",
                    ledger.display(),
                    backup.display()
                ),
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// A ledger opened on a private copy of a file; the copy is removed on drop.
struct CopiedLedger {
    info: FileInfo,
    ledger: Ledger,
    _dir: tempfile::TempDir,
}

/// Checks the file (without writing to it), copies it and opens the copy.
fn open_copy(path: &Path) -> anyhow::Result<CopiedLedger> {
    let info = dra_migrations::inspect(path)?;
    if info.schema_version > CURRENT_SCHEMA_VERSION {
        bail!(
            "ledger file {} has schema version {}, newer than this build supports ({CURRENT_SCHEMA_VERSION}); use a newer dra-ledger",
            path.display(),
            info.schema_version
        );
    }
    let dir = tempfile::tempdir().context("cannot create a temporary directory")?;
    let copy = dir.path().join("ledger.redb");
    std::fs::copy(path, &copy).with_context(|| format!("cannot copy {}", path.display()))?;
    // The copy keeps the file's mode; a read-only file (a 0444 backup, a read-only volume) would
    // give a copy that cannot be opened for the recovery redb may need.
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("cannot make the copy of {} writable", path.display()))?;
    let ledger = Ledger::open(&copy, &info.driver_name)
        .with_context(|| format!("cannot open ledger file {}", path.display()))?;
    Ok(CopiedLedger {
        info,
        ledger,
        _dir: dir,
    })
}

/// What `inspect` shows.
#[derive(Debug)]
pub struct InspectReport {
    path: PathBuf,
    info: FileInfo,
    nodes: Vec<NodeSummary>,
    claims_allocated: u64,
    pending: Vec<PendingIntent>,
}

fn inspect(path: &Path) -> anyhow::Result<InspectReport> {
    let copied = open_copy(path)?;
    let utilisation = copied.ledger.utilisation()?;
    Ok(InspectReport {
        path: path.to_path_buf(),
        nodes: copied.ledger.nodes()?,
        claims_allocated: utilisation.claims_allocated,
        pending: copied.ledger.pending_intents()?,
        info: copied.info,
    })
}

impl InspectReport {
    /// The admin-access claims of every node (each claim is on one node).
    fn admin_access(&self) -> u64 {
        self.nodes.iter().map(|n| n.admin_access).sum()
    }

    fn to_text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "ledger: {}", self.path.display());
        let _ = writeln!(
            out,
            "schema version: {} (this build: {CURRENT_SCHEMA_VERSION})",
            self.info.schema_version
        );
        let _ = writeln!(out, "driver: {}", self.info.driver_name);
        let _ = writeln!(out, "claims allocated: {}", self.claims_allocated);
        let _ = writeln!(out, "admin-access claims: {}", self.admin_access());
        let _ = writeln!(out, "nodes: {}", self.nodes.len());
        if !self.nodes.is_empty() {
            let _ = writeln!(
                out,
                "  {:<24} {:>6} {:>6} {:>9} {:>6} {:>8} {:>7}",
                "NODE", "TOTAL", "FREE", "ALLOCATED", "SHARED", "CORDONED", "MISSING"
            );
        }
        for node in &self.nodes {
            let c = &node.counts;
            let _ = writeln!(
                out,
                "  {:<24} {:>6} {:>6} {:>9} {:>6} {:>8} {:>7}",
                node.node, c.total, c.free, c.allocated, c.shared, c.cordoned, c.missing
            );
        }
        let _ = writeln!(out, "pending intents: {}", self.pending.len());
        for intent in &self.pending {
            let _ = writeln!(
                out,
                "  #{} claim {}/{} (uid {}) on {}: {}",
                intent.intent,
                intent.claim.namespace,
                intent.claim.name,
                intent.claim.uid,
                intent.node,
                intent.devices.join(", ")
            );
        }
        out
    }

    fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "ledger": self.path,
            "schemaVersion": self.info.schema_version,
            "driverName": self.info.driver_name,
            "claimsAllocated": self.claims_allocated,
            "adminAccessClaims": self.admin_access(),
            "nodes": self.nodes,
            "pendingIntents": self.pending,
        })
    }
}

fn verify(path: &Path) -> anyhow::Result<ExitCode> {
    let copied = open_copy(path)?;
    let report = copied.ledger.verify()?;
    let counts = format!(
        "{} devices, {} allocations, {} journal entries, {} audit entries, {} admin-access claims",
        report.devices,
        report.allocations,
        report.intents,
        report.audit_entries,
        report.admin_access
    );
    if report.is_consistent() {
        println!("ledger {} is consistent: {counts}", path.display());
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "ledger {} has {} problem(s) ({counts}):",
        path.display(),
        report.problems.len()
    );
    for problem in &report.problems {
        println!("  - {problem}");
    }
    Ok(ExitCode::FAILURE)
}

fn backup(path: &Path, to: &Path) -> anyhow::Result<()> {
    let info = dra_migrations::inspect(path)?;
    if info.schema_version != CURRENT_SCHEMA_VERSION {
        bail!(
            "ledger file {} has schema version {}, this build writes {CURRENT_SCHEMA_VERSION}; run `dra-ledger ledger migrate` first (it keeps a copy of the old file)",
            path.display(),
            info.schema_version
        );
    }
    if to.exists() {
        bail!("backup destination {} already exists", to.display());
    }
    let ledger = Ledger::open(path, &info.driver_name)?;
    ledger.backup(to)?;
    Ok(())
}
