//! `dra-sim`: runs a simulated Kubernetes 1.30 cluster (API server subset, scheduler with the DRA
//! plugin, resourceclaim controller, garbage collector, kubelet) on loopback until Ctrl-C.
//!
//! Thin wrapper: all logic lives in `dra_sim::cluster`.

use clap::Parser;
use dra_sim::cluster::cli::{run, SimArgs};

/// A simulated Kubernetes 1.30 cluster for `v1alpha2` DRA drivers.
///
/// Starts an API server on loopback with nodes whose devices are published as
/// resource.k8s.io/v1alpha2 resource slices, plus the control plane a DRA driver talks to: the
/// scheduler's dynamic resources plugin (pod scheduling contexts), the resourceclaim controller
/// (claims from templates, reservations), the garbage collector and a minimal kubelet (a pod
/// annotated sim.dra-ledger.io/run-seconds=N succeeds N seconds after it starts). Prints the API
/// server URL and runs until Ctrl-C or SIGTERM.
///
/// Example:
///   dra-sim --nodes 8 --devices-per-node 4 --models H100,A100 --memory 80Gi,40Gi \
///       --resource-class gpu --kubeconfig-out /tmp/sim.kubeconfig
///   kubectl --kubeconfig /tmp/sim.kubeconfig get nodes,resourceslices
#[derive(Debug, Parser)]
#[command(name = "dra-sim", version, verbatim_doc_comment)]
struct Cli {
    #[command(flatten)]
    sim: SimArgs,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    run(&cli.sim).await?;
    Ok(())
}
