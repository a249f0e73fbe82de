//! `dra-ledger explain pod NAMESPACE/NAME`: reads the pod, its claims, its scheduling context and
//! the events about them from the cluster (`--kubeconfig`, else KUBECONFIG, ~/.kube/config or the
//! in-cluster config) and prints the report of `dra_controller::explain`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, Subcommand};

/// Flags of `dra-ledger explain`.
#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// What to explain.
    #[command(subcommand)]
    pub what: ExplainWhat,
}

/// The objects `explain` knows.
#[derive(Debug, Subcommand)]
pub enum ExplainWhat {
    /// Why a pod is pending, or where its devices are. Prints the pod's phase and node, each claim
    /// (allocated? on which node, which devices, shareable, reserved for whom), the drivers' last
    /// node check (the PodSchedulingContext's unsuitable nodes), the newest events about the pod,
    /// and for a pod that waits a line `why: ...` saying what blocks it and what to do.
    Pod {
        /// The pod as NAMESPACE/NAME.
        target: String,
        /// Kubeconfig file; without it KUBECONFIG, ~/.kube/config or the in-cluster config is used.
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
        /// The driver whose allocations are read from the claims.
        #[arg(long, default_value = super::DEFAULT_DRIVER_NAME)]
        driver_name: String,
    },
}

/// Runs `explain`.
pub async fn execute(args: &ExplainArgs) -> anyhow::Result<ExitCode> {
    let ExplainWhat::Pod {
        target,
        kubeconfig,
        driver_name,
    } = &args.what;
    let (namespace, name) = dra_controller::explain::parse_target(target)?;
    let config = super::run::kube_config(kubeconfig.as_ref()).await?;
    let client = kube::Client::try_from(config).context("cannot build the cluster client")?;
    let facts = dra_controller::explain::gather(&client, &namespace, &name).await?;
    print!("{}", dra_controller::explain::report(&facts, driver_name));
    Ok(ExitCode::SUCCESS)
}
