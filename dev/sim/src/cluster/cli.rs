//! Command-line surface of a simulated cluster, shared by `dra-sim` and `dra-ledger sim`:
//! the flags (`SimArgs`, with the fault injection) and the run loop (start, write the
//! kubeconfig, print the URL, serve until Ctrl-C or SIGTERM, log the faults injected, stop
//! cleanly).
//!
//! Only argument handling and process lifetime; the cluster itself comes from the parent module.

mod inventory_args;

pub use inventory_args::{InventoryArgs, NumaNodes, NumaNodesError};

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use dra_runtime::process::{parse_duration, watch_for_signal, SHUTDOWN_GRACE};

use super::{start_cluster, ClusterConfig, ClusterError, Result};
use crate::actors::ActorsConfig;
use crate::server::{Faults, ServerConfig};

/// Flags of a simulated cluster.
#[derive(Debug, Clone, clap::Args)]
pub struct SimArgs {
    /// Address the API server listens on; port 0 picks a free port (the URL is printed).
    #[arg(long, default_value = "127.0.0.1:0", value_name = "ADDR")]
    pub listen: SocketAddr,

    /// Number of nodes to create (named node-0, node-1, ...).
    #[arg(long, default_value_t = 4, value_name = "N")]
    pub nodes: usize,

    /// Devices per node, published as one resource slice per node (0: none).
    #[arg(long, default_value_t = 8, value_name = "N")]
    pub devices_per_node: usize,

    /// The driver name and the devices' models, memory and NUMA nodes.
    #[command(flatten)]
    pub inventory: InventoryArgs,

    /// Value of the `driverVersion` version attribute of every device.
    #[arg(long, default_value = "1.0.0", value_name = "SEMVER")]
    pub driver_version: String,

    /// Also create a resource class of this name for the driver.
    #[arg(long, value_name = "NAME")]
    pub resource_class: Option<String>,

    /// Give node NODE a simulated kubelet with root directory DIR (repeatable): it registers the
    /// DRA plugins whose registration sockets appear in `DIR/plugins_registry` and prepares a
    /// pod's claims through them before the pod runs; the node gets no simulated slice. On 1.30
    /// the kubelet publishes the resource slices the plugins report; on 1.34 the plugins write
    /// their `ResourceSlices` themselves, as a real driver does.
    #[arg(long = "kubelet-dir", value_parser = parse_kubelet_dir, value_name = "NODE=DIR")]
    pub kubelet_dirs: Vec<(String, PathBuf)>,

    /// Give every node a simulated kubelet with root directory `DIR/NODE` (created), as
    /// --kubelet-dir does for one node; a --kubelet-dir of a node takes precedence.
    #[arg(long, value_name = "DIR")]
    pub kubelet_root: Option<PathBuf>,

    /// Run no simulated kubelet: bound pods are never started and stay Pending, as on the fake
    /// nodes of the upstream scheduling benchmark harness (which measures scheduling only).
    #[arg(long, conflicts_with_all = ["kubelet_dirs", "kubelet_root"])]
    pub no_kubelet: bool,

    /// The Kubernetes release to play: 1.30 (`resource.k8s.io/v1alpha2`) or 1.34 to 1.37
    /// (`resource.k8s.io/v1`, with the feature gates and API versions each release has on by
    /// default).
    #[arg(long, default_value = "1.30", value_name = "1.30|1.34|1.35|1.36|1.37")]
    pub kubernetes_version: crate::KubernetesVersion,

    /// DRA feature gates to switch, as kube-apiserver takes them: `NAME=true|false`, comma
    /// separated (`DRAAdminAccess`, `DRAConsumableCapacity`, `DRADeviceBindingConditions`,
    /// `DRADeviceTaintRules`, `DRADeviceTaints`, `DRAExtendedResource`, `DRAPartitionableDevices`,
    /// `DRAPrioritizedList`, `DRAResourceClaimDeviceStatus`, `ResourceHealthStatus`,
    /// `ResourceHealthStatusMessage`). The server keeps the fields of a gate
    /// only while it is on; gates locked by the release cannot be switched.
    #[arg(
        long,
        default_value = "",
        value_name = "NAME=BOOL,...",
        hide_default_value = true
    )]
    pub feature_gates: crate::FeatureGateSettings,

    /// API versions to serve beyond the release's defaults, as kube-apiserver takes them:
    /// `GROUP/VERSION[=true|false]`, comma separated; e.g. `resource.k8s.io/v1beta2` for
    /// `DeviceTaintRule` on 1.36, or `resource.k8s.io/v1beta1`.
    #[arg(
        long,
        default_value = "",
        value_name = "GROUP/VERSION[=BOOL],...",
        hide_default_value = true
    )]
    pub runtime_config: crate::RuntimeConfig,

    /// Write a kubeconfig for kubectl and controllers to this path.
    #[arg(long, value_name = "PATH")]
    pub kubeconfig_out: Option<PathBuf>,

    /// Seed of the fault injection: the same seed and the same requests give the same faults.
    #[arg(
        long,
        default_value_t = 0,
        value_name = "N",
        help_heading = "Fault injection"
    )]
    pub fault_seed: u64,

    /// Share (0 to 1) of writes (POST, PUT, PATCH, DELETE) answered 409 Conflict without being applied.
    #[arg(
        long,
        default_value_t = 0.0,
        value_name = "RATE",
        help_heading = "Fault injection"
    )]
    pub fault_conflict_rate: f64,

    /// Share (0 to 1) of writes answered 500 Internal Server Error without being applied.
    #[arg(
        long,
        default_value_t = 0.0,
        value_name = "RATE",
        help_heading = "Fault injection"
    )]
    pub fault_error_rate: f64,

    /// Share (0 to 1) of gets and lists (not watches) answered 500 Internal Server Error.
    #[arg(
        long,
        default_value_t = 0.0,
        value_name = "RATE",
        help_heading = "Fault injection"
    )]
    pub fault_read_error_rate: f64,

    /// Share (0 to 1) of writes that are delayed by --fault-delay before they are applied.
    #[arg(
        long,
        default_value_t = 0.0,
        value_name = "RATE",
        help_heading = "Fault injection"
    )]
    pub fault_delay_rate: f64,

    /// Delay of slow writes: one duration (150ms) or a range (100ms-200ms) spread evenly.
    #[arg(long, default_value = "50ms", value_parser = parse_delay, value_name = "DURATION[-DURATION]", help_heading = "Fault injection")]
    pub fault_delay: (Duration, Duration),

    /// End every watch after a random time up to this duration (e.g. 5s), as a dropped
    /// connection would.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION", help_heading = "Fault injection")]
    pub fault_watch_max_lifetime: Option<Duration>,
}

/// Parses a delay `D` or a range `MIN-MAX` of durations, each in the grammar of every duration
/// flag ([`parse_duration`]).
fn parse_delay(text: &str) -> Result<(Duration, Duration)> {
    match text.split_once('-') {
        None => Ok(parse_duration(text).map(|d| (d, d))?),
        Some((min, max)) => {
            let (min, max) = (parse_duration(min)?, parse_duration(max)?);
            if max < min {
                return Err(ClusterError::DelayRange(text.to_owned()));
            }
            Ok((min, max))
        }
    }
}

/// Parses `NODE=DIR` of `--kubelet-dir`.
fn parse_kubelet_dir(text: &str) -> Result<(String, PathBuf)> {
    match text.split_once('=') {
        Some((node, dir)) if !node.is_empty() && !dir.is_empty() => {
            Ok((node.to_owned(), PathBuf::from(dir)))
        }
        _ => Err(ClusterError::KubeletDirFlag(text.to_owned())),
    }
}

impl SimArgs {
    /// The cluster configuration these flags describe.
    pub(crate) fn to_config(&self) -> Result<ClusterConfig> {
        let mut config = ClusterConfig {
            server: ServerConfig {
                addr: self.listen,
                faults: self.faults(),
                api: crate::ApiOverrides {
                    feature_gates: self.feature_gates.clone(),
                    runtime_config: self.runtime_config.clone(),
                },
                ..ServerConfig::default()
            },
            actors: ActorsConfig {
                kubelets: !self.no_kubelet,
                ..ActorsConfig::default()
            },
            nodes: self.nodes,
            devices_per_node: self.devices_per_node,
            driver_version: self.driver_version.clone(),
            resource_class: self.resource_class.clone(),
            kubernetes_version: self.kubernetes_version,
            ..ClusterConfig::default()
        };
        self.inventory.apply(&mut config);
        if let Some(root) = &self.kubelet_root {
            config.kubelet_dirs = (0..config.nodes)
                .map(|i| {
                    let node = super::inventory::node_name(&config, i);
                    let dir = root.join(&node);
                    (node, dir)
                })
                .collect();
        }
        config
            .kubelet_dirs
            .extend(self.kubelet_dirs.iter().cloned());
        config.validate()?;
        Ok(config)
    }

    /// The fault injection these flags describe (none by default).
    pub(crate) fn faults(&self) -> Faults {
        let (min, max) = self.fault_delay;
        let mut faults = Faults::seeded(self.fault_seed)
            .conflicts(self.fault_conflict_rate)
            .errors(self.fault_error_rate)
            .read_errors(self.fault_read_error_rate)
            .delays_between(self.fault_delay_rate, min, max);
        if let Some(max) = self.fault_watch_max_lifetime {
            faults = faults.watch_disconnects(max);
        }
        faults
    }
}

/// Runs a simulated cluster until Ctrl-C or SIGTERM: prints the API server URL on stdout and
/// writes the kubeconfig if asked.
pub async fn run(args: &SimArgs) -> Result<()> {
    let config = args.to_config()?;
    let stop = watch_for_signal().map_err(ClusterError::Signal)?;
    let cluster = start_cluster(config).await?;
    if let Some(path) = &args.kubeconfig_out {
        if let Err(error) = cluster.server().write_kubeconfig(path) {
            cluster.shutdown().await;
            return Err(error.into());
        }
        tracing::info!(path = %path.display(), "Wrote kubeconfig");
    }
    println!("{}", cluster.url());
    stop.await;
    let faults = cluster.server().fault_stats();
    tracing::info!(
        conflicts = faults.conflicts,
        errors = faults.errors,
        read_errors = faults.read_errors,
        delays = faults.delays,
        watch_disconnects = faults.watch_disconnects,
        "Stopping the simulated cluster; faults injected"
    );
    if tokio::time::timeout(SHUTDOWN_GRACE, cluster.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("Simulated cluster did not stop in time");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        sim: SimArgs,
    }

    fn parse(args: &[&str]) -> SimArgs {
        Cli::try_parse_from(std::iter::once("dra-sim").chain(args.iter().copied()))
            .expect("arguments parse")
            .sim
    }

    #[test]
    fn defaults_describe_a_small_gpu_cluster_on_a_free_loopback_port() {
        let config = parse(&[]).to_config().unwrap();
        assert_eq!(config.server.addr.to_string(), "127.0.0.1:0");
        assert_eq!((config.nodes, config.devices_per_node), (4, 8));
        assert_eq!(config.driver_name, "gpu.dra-ledger.io");
        assert_eq!(config.models, ["H100"]);
        assert_eq!(config.memory, ["80Gi"]);
        assert_eq!(config.resource_class, None);
    }

    #[test]
    fn lists_are_comma_separated() {
        let args = parse(&[
            "--models",
            "H100,A100",
            "--memory",
            "80Gi,40Gi",
            "--listen",
            "127.0.0.1:6443",
        ]);
        let config = args.to_config().unwrap();
        assert_eq!(config.models, ["H100", "A100"]);
        assert_eq!(config.memory, ["80Gi", "40Gi"]);
        assert_eq!(config.server.addr.port(), 6443);
    }

    #[test]
    fn memory_that_is_not_a_quantity_is_rejected_with_its_value() {
        let error = parse(&["--memory", "80GB"]).to_config().unwrap_err();
        assert!(error.to_string().contains("\"80GB\""), "{error}");
    }

    #[test]
    fn fault_flags_reach_the_server_config() {
        let config = parse(&[
            "--fault-seed",
            "7",
            "--fault-conflict-rate",
            "0.1",
            "--fault-error-rate",
            "0.05",
            "--fault-read-error-rate",
            "0.02",
            "--fault-delay-rate",
            "0.1",
            "--fault-delay",
            "100ms-200ms",
            "--fault-watch-max-lifetime",
            "3s",
        ])
        .to_config()
        .unwrap();
        let expected = Faults::seeded(7)
            .conflicts(0.1)
            .errors(0.05)
            .read_errors(0.02)
            .delays_between(0.1, Duration::from_millis(100), Duration::from_millis(200))
            .watch_disconnects(Duration::from_secs(3));
        assert_eq!(config.server.faults, expected);
    }

    #[test]
    fn without_fault_flags_nothing_is_injected() {
        let faults = parse(&[]).to_config().unwrap().server.faults;
        let injector = crate::server::faults::FaultInjector::new(faults);
        assert!((0..200).all(|_| injector.next_write() == crate::server::faults::WriteFault::None));
        assert!(!(0..200).any(|_| injector.next_read_fails()));
        assert_eq!(injector.next_watch_lifetime(), None);
    }

    #[test]
    fn fault_rate_above_one_is_rejected_naming_the_rate() {
        let error = parse(&["--fault-error-rate", "1.5"])
            .to_config()
            .unwrap_err();
        assert!(error.to_string().contains("error rate 1.5"), "{error}");
    }

    #[test]
    fn fault_delay_range_that_ends_before_it_starts_is_rejected() {
        let cli = Cli::try_parse_from(["dra-sim", "--fault-delay", "200ms-100ms"]);
        assert!(cli
            .unwrap_err()
            .to_string()
            .contains("ends before it starts"));
    }

    #[test]
    fn kubelet_dirs_come_from_a_root_per_node_or_one_flag_per_node() {
        let config = parse(&["--nodes", "2", "--kubelet-root", "/k"])
            .to_config()
            .unwrap();
        assert_eq!(
            config.kubelet_dirs,
            [
                ("node-0".to_owned(), PathBuf::from("/k/node-0")),
                ("node-1".to_owned(), PathBuf::from("/k/node-1")),
            ]
            .into()
        );
        let config = parse(&[
            "--kubelet-root",
            "/k",
            "--kubelet-dir",
            "node-1=/other",
            "--nodes",
            "2",
        ])
        .to_config()
        .unwrap();
        assert_eq!(config.kubelet_dirs["node-1"], PathBuf::from("/other"));
        let config = parse(&["--kubelet-dir", "node-0=/a"]).to_config().unwrap();
        assert_eq!(config.kubelet_dirs.len(), 1);
        assert!(parse(&[]).to_config().unwrap().kubelet_dirs.is_empty());
    }

    #[test]
    fn a_kubelet_dir_must_name_a_node_and_a_directory() {
        let error = parse(&["--kubelet-dir", "node-9=/a"])
            .to_config()
            .unwrap_err();
        assert!(error.to_string().contains("node-9"), "{error}");
        assert!(Cli::try_parse_from(["dra-sim", "--kubelet-dir", "node-0"]).is_err());
        assert!(Cli::try_parse_from(["dra-sim", "--kubelet-dir", "=/a"]).is_err());
    }

    #[test]
    fn no_kubelet_turns_the_kubelets_off_and_excludes_kubelet_dirs() {
        assert!(parse(&[]).to_config().unwrap().actors.kubelets);
        assert!(
            !parse(&["--no-kubelet"])
                .to_config()
                .unwrap()
                .actors
                .kubelets
        );
        for flag in [["--kubelet-dir", "node-0=/a"], ["--kubelet-root", "/k"]] {
            let args = ["dra-sim", "--no-kubelet", flag[0], flag[1]];
            let error = Cli::try_parse_from(args).unwrap_err().to_string();
            assert!(error.contains("cannot be used with"), "{error}");
        }
        // The library's configuration refuses the same combination.
        let mut config = parse(&["--nodes", "1", "--kubelet-dir", "node-0=/a"])
            .to_config()
            .unwrap();
        config.actors.kubelets = false;
        let error = config.validate().unwrap_err().to_string();
        assert!(error.contains("turned off"), "{error}");
    }

    #[test]
    fn zero_numa_nodes_is_rejected() {
        let error = parse(&["--numa-nodes", "0"]).to_config().unwrap_err();
        assert!(error.to_string().contains("numa"), "{error}");
    }
}
