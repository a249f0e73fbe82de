//! `dra-ledger explain pod NAMESPACE/NAME`: reads the pod, its claims and the events about them
//! from the cluster (`--kubeconfig`, else KUBECONFIG, ~/.kube/config or the in-cluster config),
//! with the PodSchedulingContext on `v1alpha2` and our driver's slices and the device taints on
//! `v1` (`--dra-api`, by discovery as `run` chooses), and prints the report of
//! `dra_controller::explain`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use dra_types::api_mode::{resolve, ApiMode, DraApi};

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
    /// and for a pod that waits a line `why: ...` saying what blocks it and what to do. On
    /// resource.k8s.io/v1 the claims' allocations are the kube-scheduler's, the extended-resource
    /// claim is listed too, `why:` names the devices of the driver that carry a taint the
    /// claim's requests do not tolerate (unhealthy with reason and since, cordoned, any other
    /// NoSchedule/NoExecute taint of a slice or DeviceTaintRule) before the scheduler's last
    /// message, and a running pod shows the device health the kubelet reports.
    Pod {
        /// The pod as NAMESPACE/NAME.
        target: String,
        /// Kubeconfig file; without it KUBECONFIG, ~/.kube/config or the in-cluster config is used.
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
        /// The driver whose allocations are read from the claims.
        #[arg(long, default_value = super::DEFAULT_DRIVER_NAME)]
        driver_name: String,
        /// The DRA API of the cluster: v1alpha2 (Kubernetes 1.30), v1 (1.34+), or auto: v1
        /// where the API server serves resource.k8s.io/v1, else v1alpha2 where it serves
        /// resource.k8s.io/v1alpha2, else an error.
        #[arg(long, default_value = "auto", value_name = "auto|v1alpha2|v1")]
        dra_api: DraApi,
    },
}

/// Runs `explain`.
pub async fn execute(args: &ExplainArgs) -> anyhow::Result<ExitCode> {
    let ExplainWhat::Pod {
        target,
        kubeconfig,
        driver_name,
        dra_api,
    } = &args.what;
    let (namespace, name) = dra_controller::explain::parse_target(target)?;
    let config = super::run::kube_config(kubeconfig.as_ref()).await?;
    let client = kube::Client::try_from(config).context("cannot build the cluster client")?;
    let text = match resolve(*dra_api, Some(&client)).await? {
        ApiMode::V1alpha2 => {
            let facts = dra_controller::explain::gather(&client, &namespace, &name).await?;
            dra_controller::explain::report(&facts, driver_name)
        }
        ApiMode::V1 => {
            let facts =
                dra_controller::explain::gather_v1(&client, &namespace, &name, driver_name).await?;
            dra_controller::explain::report_v1(&facts, driver_name)
        }
    };
    print!("{text}");
    Ok(ExitCode::SUCCESS)
}
