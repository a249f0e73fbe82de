//! `dra-ledger node` as a child process of the binary's tests, started against a simulated
//! cluster with a file inventory.

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::Duration;

use super::{spawn, Lines};

/// Where a test's agent keeps its sockets, specs and state.
pub struct AgentDirs<'a> {
    /// The simulated cluster's kubeconfig.
    pub kubeconfig: &'a Path,
    /// The kubelet's registry directory.
    pub registry: PathBuf,
    /// The kubelet's plugins directory.
    pub plugins: PathBuf,
    /// Where CDI specs go.
    pub cdi: PathBuf,
    /// The prepare journal's directory.
    pub state: PathBuf,
    /// The file inventory.
    pub inventory: &'a Path,
}

impl<'a> AgentDirs<'a> {
    /// The directories of an agent registering with the simulated kubelet whose directory is
    /// `kubelet` (its `plugins_registry` and `plugins`), with CDI specs and state under `dir`.
    pub fn with_kubelet(
        kubeconfig: &'a Path,
        kubelet: &Path,
        dir: &Path,
        inventory: &'a Path,
    ) -> Self {
        Self {
            kubeconfig,
            registry: kubelet.join("plugins_registry"),
            plugins: kubelet.join("plugins"),
            cdi: dir.join("cdi"),
            state: dir.join("state"),
            inventory,
        }
    }
}

/// Starts `dra-ledger node` for node-0 with JSON logs, a file inventory and `extra` flags;
/// returns it, its log lines and its admin address once it logged that it started.
pub fn start_agent(dirs: &AgentDirs<'_>, extra: &[&str]) -> (Child, Lines, String) {
    let path = |p: &Path| p.to_str().unwrap().to_owned();
    let devices = format!("file:{}", dirs.inventory.display());
    let (registry, plugins, cdi, state) = (
        path(&dirs.registry),
        path(&dirs.plugins),
        path(&dirs.cdi),
        path(&dirs.state),
    );
    let mut args = vec![
        "node",
        "--node-name",
        "node-0",
        "--kubeconfig",
        dirs.kubeconfig.to_str().unwrap(),
        "--kubelet-registry-dir",
        &registry,
        "--kubelet-plugins-dir",
        &plugins,
        "--cdi-dir",
        &cdi,
        "--state-dir",
        &state,
        "--devices",
        &devices,
        "--listen",
        "127.0.0.1:0",
        "--log-format",
        "json",
    ];
    args.extend_from_slice(extra);
    let mut agent = spawn(&args);
    let mut logs = Lines::stderr(&mut agent);
    let addr = logs.wait_for(Duration::from_secs(60), |line| {
        let entry: serde_json::Value = serde_json::from_str(line).ok()?;
        (entry["fields"]["message"] == "Node agent started")
            .then(|| entry["fields"]["listen"].as_str().map(str::to_owned))?
    });
    (agent, logs, addr)
}
