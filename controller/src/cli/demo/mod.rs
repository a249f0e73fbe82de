//! `dra-ledger demo`: a simulated cluster, the controller with a ledger, the admin API and a
//! workload in one process, with a progress line every second.
//!
//! Steps: start the simulated cluster (nodes whose devices are published as ResourceSlices),
//! apply the parameter CRDs and create the class, parameters, templates and immediate claims
//! ([`setup`]); start the controller; submit the workload ([`workload`]) and print progress
//! ([`progress`]) until every pod finished, the `--duration` limit or Ctrl-C; delete the immediate
//! claims, wait for their deallocation, verify the ledger and print a summary (`drive`). With `--pods 0`
//! there is no workload: the demo serves until Ctrl-C or `--duration`.

pub mod agents;
mod drive;
pub mod progress;
pub mod setup;
pub mod stall;
pub mod v1;
pub mod workload;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use dra_sim::cluster::cli::InventoryArgs;
use dra_sim::cluster::{start_cluster, ClusterConfig, ClusterHandle};
use dra_sim::server::ServerConfig;
use dra_sim::KubernetesVersion;
use dra_types::api_mode::DraApi;

use super::{parse_duration, watch_for_signal, LogFormat};
use dra_controller::process::{ProcessConfig, RunningController};
use dra_node::local::LocalAgents;
use workload::WorkloadShape;

/// Flags of `dra-ledger demo`. The inventory flags are `dra-ledger sim`'s, with a mix of
/// models and memory sizes and NUMA nodes that leave room for pairs by default.
#[derive(Debug, Clone, clap::Args)]
#[command(
    mut_arg("models", |a| a.default_value("H100,A100")),
    mut_arg("memory", |a| a.default_value("80Gi,40Gi")),
    mut_arg("numa_nodes", |a| a.default_value("auto")),
)]
pub struct DemoArgs {
    /// Simulated nodes.
    #[arg(long, default_value_t = 8, value_name = "N")]
    pub nodes: usize,

    /// Devices per node, published in one ResourceSlice per node.
    #[arg(long, default_value_t = 8, value_name = "N")]
    pub devices_per_node: usize,

    /// The driver name (the workload's classes, the node agents and the controller use it) and
    /// the devices' models, memory and NUMA nodes.
    #[command(flatten)]
    pub inventory: InventoryArgs,

    /// Pods in the workload; each runs 2 to 5 seconds with one or two claims. 0 starts no
    /// workload: the cluster and the controller serve until Ctrl-C or --duration, for work
    /// of your own (see --kubeconfig-out).
    #[arg(long, default_value_t = 200, value_name = "N")]
    pub pods: usize,

    /// Stop after this long (e.g. 60s, 2m); by default the demo ends when every pod finished.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    pub duration: Option<Duration>,

    /// Also write a kubeconfig for the demo's cluster here, so that kubectl can look in and
    /// add work (`kubectl --kubeconfig PATH get pods -A`).
    #[arg(long, value_name = "PATH")]
    pub kubeconfig_out: Option<PathBuf>,

    /// Ledger file to use (kept afterwards); by default a file in a temporary directory.
    #[arg(long, value_name = "PATH")]
    pub ledger: Option<PathBuf>,

    /// Address of the admin API and metrics; port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:8080", value_name = "ADDR")]
    pub listen: SocketAddr,

    /// Concurrent controller workers.
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub workers: usize,

    /// File holding the bearer token of the mutating admin endpoints and the backup (without
    /// it they answer 403).
    #[arg(long, value_name = "PATH")]
    pub admin_token_file: Option<PathBuf>,

    /// The Kubernetes release the simulated cluster plays: 1.30 (`v1alpha2`: the controller
    /// allocates, with immediate claims in the workload) or 1.34 to 1.37 (`v1`: the
    /// scheduler allocates from the slices the node agents publish, by the DeviceClasses of
    /// deploy/overlays/kubernetes-1.34, and the controller mirrors the allocations into the
    /// ledger).
    #[arg(long, default_value = "1.30", value_name = "1.30|1.34|1.35|1.36|1.37")]
    pub kubernetes_version: KubernetesVersion,

    /// Run no node agents: the simulator publishes the devices itself and its kubelet starts
    /// pods without preparing their claims (the control plane alone).
    #[arg(long)]
    pub no_node_agents: bool,

    /// Log format on stderr (the filter comes from RUST_LOG, default error so progress stays readable).
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

fn check(args: &DemoArgs) -> anyhow::Result<()> {
    if args.nodes == 0 || args.devices_per_node == 0 {
        anyhow::bail!("--nodes and --devices-per-node must be at least 1");
    }
    if let Some(path) = &args.admin_token_file {
        // Fails before the simulated cluster starts; read again when the controller starts.
        dra_api::AdminToken::from_file(path)?;
    }
    Ok(())
}

/// Runs the demo; exit code 0 when the workload finished (or the time limit passed) and the
/// ledger verified consistent.
pub async fn demo(args: DemoArgs) -> anyhow::Result<ExitCode> {
    check(&args)?;
    let workdir = tempfile::Builder::new()
        .prefix("dra-ledger-demo-")
        .tempdir()
        .context("cannot create a temporary directory")?;
    let ledger_path = args
        .ledger
        .clone()
        .unwrap_or_else(|| workdir.path().join("ledger.redb"));
    let mut config = ClusterConfig {
        server: ServerConfig {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            ..ServerConfig::default()
        },
        nodes: args.nodes,
        devices_per_node: args.devices_per_node,
        kubernetes_version: args.kubernetes_version,
        ..ClusterConfig::default()
    };
    args.inventory.apply(&mut config);
    let numa = config.numa_nodes;
    if !args.no_node_agents {
        config.kubelet_dirs = agents::kubelet_dirs(workdir.path(), &config);
    }
    let cluster = start_cluster(config.clone())
        .await
        .context("cannot start the simulated cluster")?;
    let node_agents = if args.no_node_agents {
        None
    } else {
        match agents::start(workdir.path(), &config, &cluster.kube_client()).await {
            Ok(started) => Some(started),
            Err(e) => {
                cluster.shutdown().await;
                return Err(e.context("cannot start the node agents"));
            }
        }
    };
    let result = with_cluster(
        &args,
        &cluster,
        node_agents.as_ref(),
        &ledger_path,
        numa,
        workdir.path(),
    )
    .await;
    // The agents stop before the cluster: their sockets go, and the kubelet lets them go.
    let stopped = match node_agents {
        Some(node_agents) => node_agents.shutdown().await,
        None => Ok(()),
    };
    cluster.shutdown().await;
    let code = result?;
    stopped.context("node agents")?;
    Ok(code)
}

/// Creates what the workload's pods use (classes and templates, in the release's API) and
/// returns the workload's shape.
async fn create_workload_objects(
    args: &DemoArgs,
    client: &kube::Client,
    numa: usize,
) -> anyhow::Result<WorkloadShape> {
    let pairs = args.devices_per_node / numa >= 2;
    let v1 = args.kubernetes_version.serves_v1();
    let driver = args.inventory.driver_name.as_str();
    // About one pod in 25 uses an immediate claim; they hold at most a quarter of the devices.
    // 1.34 has no immediate allocation: a claim is allocated when a pod needs it.
    let immediate_claims = if v1 {
        0
    } else {
        (args.pods / 25)
            .max(1)
            .min(args.nodes * args.devices_per_node / 4)
            .min(args.pods)
    };
    if v1 {
        v1::create_device_classes(client, driver).await?;
        v1::create_templates(client, driver, pairs).await?;
    } else {
        setup::apply_crds(client).await?;
        setup::create_classes_and_templates(client, driver, pairs).await?;
    }
    Ok(WorkloadShape {
        pods: args.pods,
        immediate_claims,
        pairs,
        prioritized: v1,
    })
}

/// The controller of the demo: the process settings of `dra-ledger run` against the
/// in-process cluster, allocating on 1.30 and mirroring on 1.34 (`v1`).
fn process_config(
    args: &DemoArgs,
    ledger_path: &std::path::Path,
    v1: bool,
) -> anyhow::Result<ProcessConfig> {
    let admin_token = args
        .admin_token_file
        .as_deref()
        .map(dra_api::AdminToken::from_file)
        .transpose()?;
    Ok(ProcessConfig {
        driver_name: args.inventory.driver_name.clone(),
        ledger: ledger_path.to_path_buf(),
        workers: args.workers,
        listen: args.listen,
        // Writes to the in-process API server land within milliseconds, so allocations left
        // behind by an earlier run on a reused --ledger can be released much sooner than in
        // a real cluster.
        reconcile_interval: Duration::from_secs(20),
        recheck_delay: Duration::from_secs(2),
        grace_period: Some(Duration::from_secs(15)),
        admin_token,
        leader: None,
        leader_url: dra_controller::leader::LeaderUrlTemplate::default(),
        replica: "demo".to_owned(),
        // On 1.30 the controller allocates; on 1.34 the scheduler does and the controller
        // mirrors, explaining a claim that waits for 10 s.
        dra_api: if v1 { DraApi::V1 } else { DraApi::V1alpha2 },
        explain_after: v1.then_some(Duration::from_secs(10)),
        history_retention: None,
        history_rollup_after: None,
    })
}

/// The banner: the cluster's size and workload, the device page (first of the addresses), the
/// ledger, the cluster (`cluster`: its URL and how kubectl reaches it) and the admin API at
/// `admin`.
fn print_banner(
    args: &DemoArgs,
    shape: WorkloadShape,
    ledger_path: &std::path::Path,
    cluster: &str,
    admin: std::net::SocketAddr,
) {
    if args.kubernetes_version.serves_v1() {
        println!(
            "dra-ledger demo on Kubernetes 1.34 (resource.k8s.io/v1): {} nodes x {} devices, {} pods; \
             the scheduler allocates, the ledger mirrors",
            args.nodes, args.devices_per_node, args.pods
        );
    } else {
        println!(
            "dra-ledger demo: {} nodes x {} devices, {} pods ({} with immediate claims)",
            args.nodes, args.devices_per_node, args.pods, shape.immediate_claims
        );
    }
    println!("  page:        http://{admin}/  (open it in a browser: the devices at a glance)");
    println!("  ledger:      {}", ledger_path.display());
    println!("  cluster:     {cluster}");
    println!(
        "  admin API:   http://{admin}/healthz  http://{admin}/readyz  http://{admin}/metrics  http://{admin}/v1/"
    );
}

/// The node agents' admin addresses and where they write CDI specs.
fn print_agents(agents: &LocalAgents, workdir: &std::path::Path) {
    let addrs: Vec<String> = agents
        .admin_addrs()
        .iter()
        .map(|(node, addr)| format!("{node} http://{addr}"))
        .collect();
    println!("  node agents: {}", addrs.join(", "));
    if let Some((node, addr)) = agents.admin_addrs().first() {
        println!(
            "               (dra-ledger admin --server http://{addr} prepared: the claims prepared on {node})"
        );
    }
    println!(
        "  CDI specs:   {}",
        workdir.join("nodes/<node>/cdi").display()
    );
}

async fn with_cluster(
    args: &DemoArgs,
    cluster: &ClusterHandle,
    node_agents: Option<&LocalAgents>,
    ledger_path: &std::path::Path,
    numa: usize,
    workdir: &std::path::Path,
) -> anyhow::Result<ExitCode> {
    let client = cluster.kube_client();
    let v1 = args.kubernetes_version.serves_v1();
    let shape = create_workload_objects(args, &client, numa).await?;
    let kubeconfig_path = args
        .kubeconfig_out
        .clone()
        .unwrap_or_else(|| workdir.join("kubeconfig"));
    cluster.server().write_kubeconfig(&kubeconfig_path)?;

    let mut client_config =
        kube::Config::new(cluster.url().parse().context("simulated server URL")?);
    setup::NAMESPACE.clone_into(&mut client_config.default_namespace);
    client_config.read_timeout = None;
    let controller =
        RunningController::start(process_config(args, ledger_path, v1)?, client_config).await?;
    print_banner(
        args,
        shape,
        ledger_path,
        &format!(
            "{} (kubectl --kubeconfig {})",
            cluster.url(),
            kubeconfig_path.display()
        ),
        controller.local_addr,
    );
    if let Some(agents) = node_agents {
        print_agents(agents, workdir);
    }
    if shape.pods == 0 {
        println!(
            "  no workload (--pods 0): serving until Ctrl-C{}",
            args.duration
                .map_or_else(String::new, |d| format!(" or after {d:?}"))
        );
    }
    let outcome = drive::drive(args, cluster, &controller, node_agents, shape).await;
    let stopped = controller.shutdown().await;
    let code = outcome?;
    stopped?;
    Ok(code)
}
