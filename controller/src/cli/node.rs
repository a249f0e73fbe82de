//! `dra-ledger node`: the node agent (the kubelet DRA plugin of `dra_node`) until SIGTERM or
//! Ctrl-C; `dra-ledger node check`: a device source's inventory and health watch alone.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;

use dra_node::agent::{AgentConfig, ApiAccess, HealthConfig};
use dra_node::check::{CheckConfig, CheckError};
use dra_node::discovery::gpu_sharing::GpuSharing;
use dra_node::discovery::{DeviceSource, DiscoveryRoots};
use dra_node::v1::taints::TaintEffect;
use dra_types::api_mode::DraApi;

use super::{parse_duration, watch_for_signal, LogFormat, DEFAULT_DRIVER_NAME};

/// Flags of `dra-ledger node`.
#[derive(Debug, Clone, clap::Args)]
pub struct NodeArgs {
    /// A tool instead of the agent.
    #[command(subcommand)]
    pub command: Option<NodeCommand>,

    /// This node's name, as the kubelet and the allocations know it (required to run the
    /// agent).
    #[arg(long, env = "NODE_NAME", value_name = "NAME", required = true)]
    pub node_name: Option<String>,

    /// The DRA driver name: the plugin's name, and the handles and CDI kind it serves.
    #[arg(long, default_value = DEFAULT_DRIVER_NAME, value_name = "NAME")]
    pub driver_name: String,

    /// Kubeconfig file for the API server (garbage collection; in v1 mode also the claims and
    /// the node's ResourceSlice); without it KUBECONFIG, ~/.kube/config or the in-cluster config
    /// is used.
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,

    /// The DRA API to speak: v1alpha2 (Kubernetes 1.30: the v1alpha3.Node kubelet service with
    /// the controller's resource handles, the kubelet publishes the ResourceSlice), v1 (1.34+:
    /// the v1.DRAPlugin and v1beta1.DRAPlugin kubelet services, claims read from the API
    /// server, the agent publishes the node's ResourceSlice), or auto: v1 where the API server
    /// serves resource.k8s.io/v1, else v1alpha2 where it serves resource.k8s.io/v1alpha2, else
    /// an error.
    #[arg(long, default_value = "auto", value_name = "auto|v1alpha2|v1")]
    pub dra_api: DraApi,

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

    /// Where the devices come from.
    #[command(flatten)]
    pub source: SourceArgs,

    /// How often prepared claims are checked against the API server (gone or moved claims are
    /// unprepared).
    #[arg(long, default_value = "60s", value_parser = parse_duration, value_name = "DURATION")]
    pub gc_interval: Duration,

    /// How often the inventory is read again (SIGHUP reads it at once); in v1 mode also how
    /// often the node's ResourceSlice is checked and written again if it changed or vanished.
    #[arg(long, default_value = "30s", value_parser = parse_duration, value_name = "DURATION")]
    pub inventory_interval: Duration,

    /// The effect of the taint (key `<driver-name>/unhealthy`, value the reason) that an unhealthy
    /// device gets in the node's ResourceSlice (v1 mode): NoSchedule keeps new claims off it,
    /// NoExecute also evicts the pods using it, None only shows it. In v1alpha2 mode an
    /// unhealthy device leaves the published inventory instead.
    #[arg(long, default_value = "NoSchedule", value_name = "EFFECT")]
    pub unhealthy_taint_effect: TaintEffect,

    /// How long every health source must report a device healthy before a device that was
    /// unhealthy (or unknown) is healthy again; a device turns unhealthy at once. Health is
    /// judged with each inventory read, so the wait is rounded up to the inventory interval.
    #[arg(long, default_value = "60s", value_parser = parse_duration, value_name = "DURATION")]
    pub health_settle_time: Duration,

    /// Address of the agent's admin server (/healthz, /readyz, /metrics, /v1/prepared,
    /// /v1/devices).
    #[arg(long, default_value = "0.0.0.0:8081", value_name = "ADDR")]
    pub listen: SocketAddr,

    /// Log format on stderr (the filter comes from RUST_LOG, default info).
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// Where the agent (and `node check`) reads the devices and their health.
#[derive(Debug, Clone, clap::Args)]
pub struct SourceArgs {
    /// Where the inventory comes from: sysfs, file:PATH (a YAML or JSON inventory) or nvml.
    #[arg(long, default_value = "sysfs", value_name = "SOURCE")]
    pub devices: DeviceSource,

    /// The sysfs mount that `--devices sysfs` scans and the health checks read.
    #[arg(long, default_value = "/sys", value_name = "DIR")]
    pub sysfs_root: PathBuf,

    /// The device directory device nodes are named under.
    #[arg(long, default_value = "/dev", value_name = "DIR")]
    pub dev_root: PathBuf,

    /// How `--devices nvml` shares whole GPUs: none (one claim per GPU) or capacity (several
    /// claims per GPU, each asking an amount of its memory and compute; needs Kubernetes 1.36+,
    /// DRAConsumableCapacity). GPUs in MIG mode are published as MIG partitions either way. An
    /// inventory file states its sharing itself.
    #[arg(long, default_value = "none", value_name = "MODE")]
    pub gpu_sharing: GpuSharing,
}

impl SourceArgs {
    /// The device source with its sharing.
    fn devices(&self) -> anyhow::Result<DeviceSource> {
        match (&self.devices, self.gpu_sharing) {
            (DeviceSource::Nvml(_), sharing) => Ok(DeviceSource::Nvml(sharing)),
            (other, GpuSharing::None) => Ok(other.clone()),
            (other, sharing) => {
                anyhow::bail!("--gpu-sharing {sharing} applies to --devices nvml only, not {other}")
            }
        }
    }

    /// The host directories discovery reads.
    fn roots(&self) -> DiscoveryRoots {
        DiscoveryRoots {
            sysfs: self.sysfs_root.clone(),
            dev: self.dev_root.clone(),
            ..DiscoveryRoots::default()
        }
    }
}

/// The tools of `dra-ledger node`.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum NodeCommand {
    /// Read a device source's inventory and watch its health for a while, without Kubernetes:
    /// prints one JSON object per line, the inventory first, then each change of a device's
    /// health, then every device's health at the end. For checking a node's hardware (e.g.
    /// `--devices nvml` on an NVIDIA machine: node/scripts/nvml-check.sh).
    Check(CheckArgs),
}

/// Flags of `dra-ledger node check`.
#[derive(Debug, Clone, clap::Args)]
pub struct CheckArgs {
    /// Where the devices come from.
    #[command(flatten)]
    pub source: SourceArgs,

    /// How long the health is watched after the inventory is printed.
    #[arg(long, default_value = "30s", value_parser = parse_duration, value_name = "DURATION")]
    pub watch: Duration,

    /// How often the inventory and its health are read during the watch (NVML events are taken
    /// at once).
    #[arg(long, default_value = "1s", value_parser = parse_duration, value_name = "DURATION")]
    pub interval: Duration,
}

/// Runs `dra-ledger node check`: the report goes to stdout.
pub async fn check(args: CheckArgs) -> anyhow::Result<()> {
    let devices = args.source.devices()?;
    let nvml = matches!(devices, DeviceSource::Nvml(_));
    let config = CheckConfig {
        roots: args.source.roots(),
        devices,
        watch: args.watch,
        interval: args.interval,
    };
    let mut out = std::io::stdout();
    let checked = dra_node::check::check(&config, &mut out).await;
    if nvml && matches!(checked, Err(CheckError::Discovery { .. })) {
        return checked.context(
            "NVML is not usable here: the NVIDIA driver's libnvidia-ml.so.1 must be installed and \
             visible to this process, and the binary built with the nvml feature",
        );
    }
    Ok(checked?)
}

/// Runs the agent until a signal.
pub async fn node(args: NodeArgs) -> anyhow::Result<()> {
    let stop = watch_for_signal().context("cannot watch for SIGTERM and Ctrl-C")?;
    let client = kube::Client::try_from(super::run::kube_config(args.kubeconfig.as_ref()).await?)?;
    let node_name = args
        .node_name
        .context("--node-name (or NODE_NAME) is required to run the agent")?;
    let config = AgentConfig {
        node_name,
        driver_name: args.driver_name,
        registry_dir: args.kubelet_registry_dir,
        plugins_dir: args.kubelet_plugins_dir,
        cdi_dir: args.cdi_dir,
        state_dir: args.state_dir,
        roots: args.source.roots(),
        devices: args.source.devices()?,
        gc_interval: args.gc_interval,
        inventory_interval: args.inventory_interval,
        listen: args.listen,
        health: HealthConfig {
            settle: args.health_settle_time,
            taint_effect: args.unhealthy_taint_effect,
        },
    };
    let access = ApiAccess {
        client: Some(client),
        dra_api: args.dra_api,
    };
    Box::pin(dra_node::agent::run_with_api(config, access, stop)).await?;
    Ok(())
}
