//! `dra-ledger run`: the controller against a real cluster until SIGTERM or Ctrl-C.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use dra_api::AdminToken;
use kube::config::{KubeConfigOptions, Kubeconfig};
use tracing::info;

use super::stack::{Stack, StackConfig};
use super::{default_ledger_path, parse_duration, LogFormat, DEFAULT_DRIVER_NAME};
use crate::framework::ControllerConfig;

/// Flags of `dra-ledger run`.
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// The DRA driver name: ResourceClasses and ResourceSlices with this `driverName` are ours.
    #[arg(long, default_value = DEFAULT_DRIVER_NAME, value_name = "NAME")]
    pub driver_name: String,

    /// The ledger file (redb); created when missing, migrated (after a backup copy) when older.
    #[arg(long, default_value_os_t = default_ledger_path(), value_name = "PATH")]
    pub ledger: PathBuf,

    /// Concurrent controller workers.
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub workers: usize,

    /// Address of the admin API and metrics (/healthz, /readyz, /metrics, /v1/...).
    #[arg(long, default_value = "0.0.0.0:8080", value_name = "ADDR")]
    pub listen: SocketAddr,

    /// File holding the bearer token of the mutating admin endpoints (without it they answer 403).
    #[arg(long, value_name = "PATH")]
    pub admin_token_file: Option<PathBuf>,

    /// Log format on stderr (the filter comes from RUST_LOG, default info).
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// How often the ledger is compared with the cluster and drift repaired (e.g. 30s, 5m).
    #[arg(long, default_value = "5m", value_parser = parse_duration, value_name = "DURATION")]
    pub reconcile_interval: Duration,

    /// Kubeconfig file; without it KUBECONFIG, ~/.kube/config or the in-cluster config is used.
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
}

/// The client configuration: `--kubeconfig`, else inferred (KUBECONFIG, ~/.kube/config,
/// in-cluster service account).
async fn kube_config(kubeconfig: Option<&PathBuf>) -> anyhow::Result<kube::Config> {
    match kubeconfig {
        Some(path) => {
            let file = Kubeconfig::read_from(path)
                .with_context(|| format!("cannot read kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
                .await
                .with_context(|| format!("invalid kubeconfig {}", path.display()))
        }
        None => kube::Config::infer().await.context(
            "no cluster configuration found (use --kubeconfig, KUBECONFIG or run in a pod)",
        ),
    }
}

/// Runs the controller until SIGTERM or Ctrl-C, then shuts down gracefully.
pub async fn run(args: RunArgs) -> anyhow::Result<()> {
    let admin_token = args
        .admin_token_file
        .as_deref()
        .map(AdminToken::from_file)
        .transpose()?;
    let config = kube_config(args.kubeconfig.as_ref()).await?;
    let stack = Stack::start(
        StackConfig {
            driver_name: args.driver_name,
            ledger: args.ledger,
            workers: args.workers,
            listen: args.listen,
            reconcile_interval: args.reconcile_interval,
            recheck_delay: ControllerConfig::default().recheck_delay,
            grace_period: None,
            admin_token,
        },
        config,
    )
    .await?;
    let waited = super::wait_for_signal().await;
    info!("Shutting down: no new work; finishing syncs and ledger commits in flight");
    stack.shutdown().await?;
    waited.context("signal handling failed")?;
    Ok(())
}
