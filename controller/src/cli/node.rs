//! `dra-ledger node`: the node agent (the kubelet DRA plugin of `dra_node`) until SIGTERM or
//! Ctrl-C.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use dra_node::agent::AgentConfig;
use dra_node::discovery::{DeviceSource, DiscoveryRoots};

use super::{parse_duration, wait_for_signal, LogFormat, DEFAULT_DRIVER_NAME};

/// Flags of `dra-ledger node`.
#[derive(Debug, Clone, clap::Args)]
pub struct NodeArgs {
    /// This node's name, as the kubelet and the allocations know it.
    #[arg(long, env = "NODE_NAME", value_name = "NAME")]
    pub node_name: String,

    /// The DRA driver name: the plugin's name, and the handles and CDI kind it serves.
    #[arg(long, default_value = DEFAULT_DRIVER_NAME, value_name = "NAME")]
    pub driver_name: String,

    /// Kubeconfig file for garbage collection; without it KUBECONFIG, ~/.kube/config or the
    /// in-cluster config is used.
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,

    /// The kubelet's plugin registry directory (the registration socket goes here).
    #[arg(
        long,
        default_value = "/var/lib/kubelet/plugins_registry",
        value_name = "DIR"
    )]
    pub kubelet_registry_dir: PathBuf,

    /// The kubelet's plugins directory (the service socket goes in DIR/DRIVER-NAME/plugin.sock).
    #[arg(long, default_value = "/var/lib/kubelet/plugins", value_name = "DIR")]
    pub kubelet_plugins_dir: PathBuf,

    /// Where the CDI specs of prepared claims are written.
    #[arg(long, default_value = "/var/run/cdi", value_name = "DIR")]
    pub cdi_dir: PathBuf,

    /// Where the prepare journal is kept (made mode 0700).
    #[arg(long, default_value = "/var/lib/dra-ledger/node", value_name = "DIR")]
    pub state_dir: PathBuf,

    /// Where the inventory comes from: sysfs, file:PATH (a YAML or JSON inventory) or nvml.
    #[arg(long, default_value = "sysfs", value_name = "SOURCE")]
    pub devices: DeviceSource,

    /// The sysfs mount that `--devices sysfs` scans.
    #[arg(long, default_value = "/sys", value_name = "DIR")]
    pub sysfs_root: PathBuf,

    /// The device directory device nodes are named under.
    #[arg(long, default_value = "/dev", value_name = "DIR")]
    pub dev_root: PathBuf,

    /// How often prepared claims are checked against the API server (gone or moved claims are
    /// unprepared).
    #[arg(long, default_value = "60s", value_parser = parse_duration, value_name = "DURATION")]
    pub gc_interval: Duration,

    /// How often the inventory is read again (SIGHUP reads it at once).
    #[arg(long, default_value = "30s", value_parser = parse_duration, value_name = "DURATION")]
    pub inventory_interval: Duration,

    /// Address of the agent's admin server (/healthz, /readyz, /metrics, /v1/prepared,
    /// /v1/devices).
    #[arg(long, default_value = "0.0.0.0:8081", value_name = "ADDR")]
    pub listen: SocketAddr,

    /// Log format on stderr (the filter comes from RUST_LOG, default info).
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// Runs the agent until a signal.
pub async fn node(args: NodeArgs) -> anyhow::Result<()> {
    let client = kube::Client::try_from(super::run::kube_config(args.kubeconfig.as_ref()).await?)?;
    let config = AgentConfig {
        node_name: args.node_name,
        driver_name: args.driver_name,
        registry_dir: args.kubelet_registry_dir,
        plugins_dir: args.kubelet_plugins_dir,
        cdi_dir: args.cdi_dir,
        state_dir: args.state_dir,
        devices: args.devices,
        roots: DiscoveryRoots {
            sysfs: args.sysfs_root,
            dev: args.dev_root,
            ..DiscoveryRoots::default()
        },
        gc_interval: args.gc_interval,
        inventory_interval: args.inventory_interval,
        listen: args.listen,
    };
    Box::pin(dra_node::agent::run(config, Some(client), async {
        if let Err(e) = wait_for_signal().await {
            tracing::error!(error = %e, "Cannot wait for signals; stopping");
        }
    }))
    .await?;
    Ok(())
}
