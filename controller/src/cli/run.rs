//! `dra-ledger run`: the controller against a real cluster until SIGTERM or Ctrl-C.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use dra_api::AdminToken;
use kube::config::{KubeConfigOptions, Kubeconfig};
use tracing::{error, info, warn};

use super::{default_ledger_path, parse_duration, LogFormat, DEFAULT_DRIVER_NAME};
use dra_controller::leader::{LeaderConfig, LeaderUrlTemplate, DEFAULT_LEADER_URL_TEMPLATE};
use dra_controller::process::{ProcessConfig, RunningController};
use dra_framework::ControllerConfig;
use dra_types::api_mode::DraApi;

/// Flags of `dra-ledger run`.
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// The DRA driver name: ResourceClasses and ResourceSlices with this `driverName` (on v1:
    /// the slices with this `spec.driver`, the allocation results of this driver and the
    /// DeviceClasses whose selectors name it) are ours.
    #[arg(long, default_value = DEFAULT_DRIVER_NAME, value_name = "NAME")]
    pub driver_name: String,

    /// The ledger file (redb); created when missing, migrated (after a backup copy) when older.
    #[arg(long, default_value_os_t = default_ledger_path(), value_name = "PATH")]
    pub ledger: PathBuf,

    /// Concurrent controller workers (v1alpha2; the v1 mirror has one loop).
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

    /// The DRA API to work with: v1alpha2 (Kubernetes 1.30: allocate claims of our
    /// ResourceClasses through PodSchedulingContexts), v1 (1.34+: the kube-scheduler allocates;
    /// allocate nothing, mirror our ResourceSlices and the claims' allocations of our devices
    /// into the ledger, count drift between slices and allocations, explain unallocated claims
    /// of our DeviceClasses in NotAllocated events; cordon answers 409), or auto: v1 where the
    /// API server serves resource.k8s.io/v1, else v1alpha2 where it serves
    /// resource.k8s.io/v1alpha2, else an error.
    #[arg(long, default_value = "auto", value_name = "auto|v1alpha2|v1")]
    pub dra_api: DraApi,

    /// Campaign for a coordination.k8s.io Lease and allocate (on v1: mirror into the ledger)
    /// only while holding it, so that of several replicas exactly one is active (the others
    /// wait as standbys). `false` only where a single instance is guaranteed.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub leader_elect: bool,

    /// Name of the leader Lease [default: the driver name].
    #[arg(long, value_name = "NAME")]
    pub leader_elect_lease_name: Option<String>,

    /// Namespace of the leader Lease [default: $POD_NAMESPACE, else the in-cluster service
    /// account's namespace, else `default`].
    #[arg(long, value_name = "NAMESPACE")]
    pub leader_elect_namespace: Option<String>,

    /// This replica's identity in the Lease, used as given: it must be unique among running
    /// processes, and a restart under the same identity takes its lease back at once [default:
    /// $POD_NAME, else the host name, plus a random suffix per process, so a restarted process
    /// waits for the lease to expire or be released].
    #[arg(long, value_name = "ID")]
    pub leader_elect_identity: Option<String>,

    /// How long the other replicas wait, after the Lease last changed, before taking it over.
    #[arg(long, default_value = "15s", value_parser = parse_duration, value_name = "DURATION")]
    pub leader_elect_lease_duration: Duration,

    /// How long the leader keeps writing without a successful renewal; shorter than the lease
    /// duration, and the difference is what a write in flight gets to land.
    #[arg(long, default_value = "10s", value_parser = parse_duration, value_name = "DURATION")]
    pub leader_elect_renew_deadline: Duration,

    /// Time between attempts to acquire or renew the Lease.
    #[arg(long, default_value = "2s", value_parser = parse_duration, value_name = "DURATION")]
    pub leader_elect_retry_period: Duration,

    /// Admin URL of the replica holding the Lease, where a standby forwards every /v1 request
    /// so that admin reads always come from the leader's ledger. `{identity}` is the holder's
    /// identity, `{pod}` that identity up to its first `_` (the pod name), `{namespace}` the
    /// Lease's namespace, `{port}` this replica's --listen port. The default is the leader pod
    /// under the StatefulSet's headless Service `dra-ledger-peers`.
    #[arg(long, default_value = DEFAULT_LEADER_URL_TEMPLATE, value_name = "TEMPLATE")]
    pub leader_url_template: LeaderUrlTemplate,

    /// How long the ledger keeps history for `admin usage` and `admin history` (e.g. 30d, 2160h):
    /// holder intervals that ended and device events older than this are dropped, a bounded
    /// number with each ledger commit. Intervals of claims still allocated are kept.
    #[arg(long, default_value = "90d", value_parser = parse_duration, value_name = "DURATION")]
    pub history_retention: Duration,

    /// How long ended holder intervals stay one by one (e.g. 7d, 48h); older ones are rolled up
    /// into hourly totals per namespace, node and model, a bounded number with each ledger commit.
    /// `admin usage` still counts them (by whole hours), but `--by claim` and `admin history` no
    /// longer list them. Must be shorter than --history-retention.
    #[arg(long, default_value = "7d", value_parser = parse_duration, value_name = "DURATION")]
    pub history_rollup_after: Duration,
}

impl RunArgs {
    /// `--history-rollup-after`, checked against `--history-retention`: intervals are pruned
    /// after the retention, so a rollup age not below it would never roll anything up.
    fn history_rollup_after(&self) -> anyhow::Result<Duration> {
        if self.history_rollup_after >= self.history_retention {
            anyhow::bail!(
                "--history-rollup-after ({}) must be shorter than --history-retention ({})",
                humanize(self.history_rollup_after),
                humanize(self.history_retention)
            );
        }
        Ok(self.history_rollup_after)
    }
}

/// A duration for messages, in the largest of days, hours or seconds that divides it.
fn humanize(duration: Duration) -> String {
    let seconds = duration.as_secs();
    match seconds {
        s if s > 0 && s % 86_400 == 0 => format!("{}d", s / 86_400),
        s if s > 0 && s % 3600 == 0 => format!("{}h", s / 3600),
        s => format!("{s}s"),
    }
}

/// The namespace file of an in-cluster service account.
const SERVICE_ACCOUNT_NAMESPACE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// A non-empty environment variable.
fn env_value(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// A number that differs between processes (random per process, mixed with the pid).
fn process_nonce() -> u32 {
    use std::hash::BuildHasher;
    std::collections::hash_map::RandomState::new().hash_one(std::process::id()) as u32
}

/// The name of this replica without leader election: $POD_NAME, else the host name, else
/// `dra-ledger`.
fn replica_name() -> String {
    env_value("POD_NAME")
        .or_else(|| env_value("HOSTNAME"))
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|h| h.trim().to_owned())
                .filter(|h| !h.is_empty())
        })
        .unwrap_or_else(|| dra_api::state::DEFAULT_REPLICA.to_owned())
}

impl RunArgs {
    /// The leader election settings these flags describe; `None` with `--leader-elect=false`.
    pub fn leader_config(&self) -> anyhow::Result<Option<LeaderConfig>> {
        if !self.leader_elect {
            return Ok(None);
        }
        let namespace = self
            .leader_elect_namespace
            .clone()
            .or_else(|| env_value("POD_NAMESPACE"))
            .or_else(|| {
                std::fs::read_to_string(SERVICE_ACCOUNT_NAMESPACE)
                    .ok()
                    .map(|ns| ns.trim().to_owned())
                    .filter(|ns| !ns.is_empty())
            })
            .unwrap_or_else(|| "default".to_owned());
        let identity = if let Some(identity) = self.leader_elect_identity.clone() {
            identity
        } else {
            let base = replica_name();
            format!("{base}_{:08x}", process_nonce())
        };
        let config = LeaderConfig {
            lease_duration: self.leader_elect_lease_duration,
            renew_deadline: self.leader_elect_renew_deadline,
            retry_period: self.leader_elect_retry_period,
            ..LeaderConfig::new(
                self.leader_elect_lease_name
                    .clone()
                    .unwrap_or_else(|| self.driver_name.clone()),
                namespace,
                identity,
            )
        };
        config
            .validate()
            .context("invalid leader election settings")?;
        Ok(Some(config))
    }
}

/// The client configuration: `--kubeconfig`, else inferred (KUBECONFIG, ~/.kube/config,
/// in-cluster service account).
pub(super) async fn kube_config(kubeconfig: Option<&PathBuf>) -> anyhow::Result<kube::Config> {
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

/// Runs the controller until SIGTERM or Ctrl-C, then shuts down gracefully. Losing the leader
/// lease also shuts down, and fails: the process exits non-zero so that it is restarted as a
/// standby with nothing of its old term in memory.
pub async fn run(args: RunArgs) -> anyhow::Result<()> {
    let leader = args.leader_config()?;
    let history_rollup_after = args.history_rollup_after()?;
    let stop = super::watch_for_signal().context("cannot watch for SIGTERM and Ctrl-C")?;
    let admin_token = args
        .admin_token_file
        .as_deref()
        .map(AdminToken::from_file)
        .transpose()?;
    let config = kube_config(args.kubeconfig.as_ref()).await?;
    let controller = RunningController::start(
        ProcessConfig {
            driver_name: args.driver_name,
            ledger: args.ledger,
            workers: args.workers,
            listen: args.listen,
            reconcile_interval: args.reconcile_interval,
            recheck_delay: ControllerConfig::default().recheck_delay,
            grace_period: None,
            admin_token,
            leader,
            leader_url: args.leader_url_template,
            replica: replica_name(),
            dra_api: args.dra_api,
            explain_after: None,
            history_retention: Some(args.history_retention),
            history_rollup_after: Some(history_rollup_after),
        },
        config,
    )
    .await?;
    let lost = controller.lost();
    tokio::select! {
        () = stop => {
            info!("Shutting down: no new work; finishing syncs and ledger commits in flight");
            controller.shutdown().await?;
            Ok(())
        }
        reason = lost => {
            error!(%reason, "Lost the leader lease: stopping; writes are already refused");
            if let Err(error) = controller.shutdown().await {
                warn!(%error, "Shutdown after losing the leader lease was not clean");
            }
            anyhow::bail!("lost the leader lease: {reason}")
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::cli::{Cli, Command};

    fn run_args(args: &[&str]) -> super::RunArgs {
        let command_line = ["dra-ledger", "run"].iter().chain(args).copied();
        match Cli::try_parse_from(command_line)
            .expect("arguments parse")
            .command
        {
            Command::Run(run) => run,
            other => panic!("not run: {other:?}"),
        }
    }

    #[test]
    fn default_identity_differs_per_process_and_lease_is_named_after_the_driver() {
        let args = run_args(&["--driver-name", "nic.example.com"]);
        let first = args.leader_config().unwrap().expect("on by default");
        let second = args.leader_config().unwrap().unwrap();
        assert_eq!(first.lease_name, "nic.example.com");
        assert_ne!(
            first.identity, second.identity,
            "a restart is a new candidate"
        );
        let (base, suffix) = first.identity.rsplit_once('_').expect("a suffix");
        assert!(!base.is_empty());
        assert!(suffix.len() == 8 && suffix.chars().all(|c| c.is_ascii_hexdigit()));
    }

    #[test]
    fn explicit_identity_is_used_as_given_and_election_can_be_turned_off() {
        let args = run_args(&[
            "--leader-elect-identity",
            "pod-0",
            "--leader-elect-namespace",
            "ops",
        ]);
        let config = args.leader_config().unwrap().unwrap();
        assert_eq!(
            (config.identity.as_str(), config.namespace.as_str()),
            ("pod-0", "ops")
        );
        assert!(run_args(&["--leader-elect=false"])
            .leader_config()
            .unwrap()
            .is_none());
    }

    #[test]
    fn the_dra_api_defaults_to_auto_and_takes_the_two_versions() {
        assert_eq!(run_args(&[]).dra_api, super::DraApi::Auto);
        assert_eq!(run_args(&["--dra-api", "v1"]).dra_api, super::DraApi::V1);
        assert_eq!(
            run_args(&["--dra-api", "v1alpha2"]).dra_api,
            super::DraApi::V1alpha2
        );
        let command_line = ["dra-ledger", "run", "--dra-api", "v2"];
        let error = Cli::try_parse_from(command_line).unwrap_err().to_string();
        assert!(error.contains("expected auto, v1alpha2 or v1"), "{error}");
    }

    #[test]
    fn inconsistent_timings_fail_with_a_clear_error() {
        let args = run_args(&["--leader-elect-renew-deadline", "20s"]);
        let error = args.leader_config().unwrap_err().to_string();
        assert!(
            error.contains("invalid leader election settings"),
            "{error}"
        );
    }
}
