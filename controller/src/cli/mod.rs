//! The `dra-ledger` command line: argument definitions (clap derive) and dispatch to the
//! subcommands.
//!
//! - `run` ([`run`]): the controller against a cluster;
//! - `node` ([`node`]): the node agent, the kubelet plugin of `dra_node`;
//! - `demo` (`demo`): simulated cluster, workload, controller and admin API in one process;
//! - `sim`: only the simulated cluster (the flags and loop of `dra_sim::cluster::cli`);
//! - `crds`: the CRD manifests of `dra_controller::params`;
//! - `ledger` ([`ledger_tools`]): offline inspect, verify, backup and migrate;
//! - `admin` ([`admin`]): the admin API of a running process as tables or JSON;
//! - `explain` ([`explain`]): why a pod is pending, or where its devices are.
//!
//! `demo` and `sim` exist only with the `demo` feature of `dra-controller` (on by default), the
//! only thing that links the simulated cluster of `dra-sim` into the binary; the product image is
//! built without it.
//!
//! Part of the `dra-ledger` binary, not of the `dra_controller` library. Owns process concerns
//! only (flags, logging, signals, exit codes); the controller logic lives in `dra_framework` and
//! `dra_controller` (whose `process` module assembles a running controller). `main.rs` only
//! calls [`main`].

pub mod admin;
#[cfg(feature = "demo")]
pub mod demo;
pub mod explain;
pub mod ledger_tools;
mod logging;
pub mod node;
pub mod run;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub use dra_runtime::process::{parse_duration, watch_for_signal};
pub use logging::LogFormat;

/// The default DRA driver name.
pub const DEFAULT_DRIVER_NAME: &str = "gpu.dra-ledger.io";

/// dra-ledger: a Kubernetes DRA driver for GPUs with a durable ledger of every device allocation.
///
/// On Kubernetes 1.34+ (resource.k8s.io/v1) the node agent publishes each node's devices and the
/// kube-scheduler allocates; `run` mirrors every allocation into the ledger. On Kubernetes
/// 1.27-1.30 (resource.k8s.io/v1alpha2) `run` is the driver's controller and allocates itself.
/// `--dra-api auto` (the default) finds which one a cluster serves.
#[cfg_attr(feature = "demo", doc = "")]
#[cfg_attr(
    feature = "demo",
    doc = "Start with `dra-ledger demo`: a simulated cluster, a workload and the controller in one process."
)]
#[derive(Debug, Parser)]
#[command(name = "dra-ledger", version, propagate_version = true)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the controller against a Kubernetes cluster.
    Run(run::RunArgs),
    /// Run the node agent: the kubelet plugin that prepares allocated devices as CDI devices.
    #[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
    Node(node::NodeArgs),
    /// Run a simulated cluster, a workload and the controller in one process, printing progress.
    #[cfg(feature = "demo")]
    Demo(demo::DemoArgs),
    /// Run only the simulated cluster on loopback (for kubectl and `dra-ledger run`).
    #[cfg(feature = "demo")]
    Sim(SimCommandArgs),
    /// Print the CustomResourceDefinitions of the parameter objects as YAML.
    Crds,
    /// Offline tools for a ledger file (the controller must not be running on it).
    Ledger(ledger_tools::LedgerArgs),
    /// Query and operate a running dra-ledger through its admin API.
    ///
    /// Any replica may be reached: `/v1` answers come from the leader's ledger (a standby
    /// forwards the request), and the replica that answered is printed on stderr after the answer
    /// (`answered by replica R (forwarded by S)`).
    Admin(admin::AdminArgs),
    /// Explain an object of the cluster: `explain pod NAMESPACE/NAME` says why the pod is pending
    /// (in one actionable sentence) or where its devices are.
    Explain(explain::ExplainArgs),
}

/// Flags of `dra-ledger sim`: those of the `dra-sim` binary.
#[cfg(feature = "demo")]
#[derive(Debug, clap::Args)]
pub struct SimCommandArgs {
    #[command(flatten)]
    sim: dra_sim::cluster::cli::SimArgs,
    /// Log format on stderr.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
}

/// Parses the arguments of the process, runs the subcommand and returns the exit code: 0 on
/// success, 1 on failure (the error is printed on stderr), 2 on bad usage.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match execute(cli) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {}", error_text(&error));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes joined by `: `, leaving out a cause whose text the message before
/// it already ends with (many error types print their source in their own message).
pub fn error_text(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let part = cause.to_string();
        if text.ends_with(&part) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&part);
    }
    text
}

/// Runs one parsed command line.
pub fn execute(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Crds => {
            print!("{}", dra_controller::params::crd_manifests());
            Ok(ExitCode::SUCCESS)
        }
        Command::Ledger(args) => ledger_tools::execute(&args),
        Command::Admin(args) => admin::execute(&args),
        Command::Explain(args) => runtime()?.block_on(explain::execute(&args)),
        Command::Run(args) => {
            crate::tune_allocator();
            logging::init(args.log_format, "info");
            runtime()?.block_on(run::run(args))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Node(node::NodeArgs {
            command: Some(node::NodeCommand::Check(args)),
            ..
        }) => {
            logging::init(LogFormat::Text, "warn");
            runtime()?.block_on(node::check(args))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Node(args) => {
            crate::tune_allocator();
            logging::init(args.log_format, "info");
            runtime()?.block_on(node::node(args))?;
            Ok(ExitCode::SUCCESS)
        }
        #[cfg(feature = "demo")]
        Command::Demo(args) => {
            logging::init(args.log_format, "error");
            runtime()?.block_on(demo::demo(args))
        }
        #[cfg(feature = "demo")]
        Command::Sim(args) => {
            logging::init(args.log_format, "info");
            runtime()?.block_on(dra_sim::cluster::cli::run(&args.sim))?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}

/// The ledger path default of `run`.
pub fn default_ledger_path() -> PathBuf {
    PathBuf::from("/var/lib/dra-ledger/ledger.redb")
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use std::time::Duration;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot open ledger file x: {source}")]
    struct Open {
        source: std::io::Error,
    }

    #[test]
    fn error_text_names_each_cause_once() {
        let io = std::io::Error::other("Permission denied (os error 13)");
        let error = anyhow::Error::new(Open { source: io }).context("cannot open the ledger x");
        assert_eq!(
            error_text(&error),
            "cannot open the ledger x: cannot open ledger file x: Permission denied (os error 13)"
        );
        let plain = anyhow::anyhow!("inner").context("outer");
        assert_eq!(error_text(&plain), "outer: inner");
    }

    #[test]
    fn command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn run_defaults_match_the_specification() {
        let cli = Cli::try_parse_from(["dra-ledger", "run"]).unwrap();
        let Command::Run(args) = cli.command else {
            panic!("not run")
        };
        assert_eq!(args.driver_name, "gpu.dra-ledger.io");
        assert_eq!(args.ledger, default_ledger_path());
        assert_eq!(args.workers, 10);
        assert_eq!(args.listen.to_string(), "0.0.0.0:8080");
        assert_eq!(args.reconcile_interval, Duration::from_secs(300));
        assert_eq!(args.log_format, LogFormat::Text);
    }

    #[cfg(feature = "demo")]
    #[test]
    fn demo_duration_accepts_a_time_limit() {
        let cli = Cli::try_parse_from(["dra-ledger", "demo", "--pods", "20", "--duration", "90s"])
            .unwrap();
        let Command::Demo(args) = cli.command else {
            panic!("not demo")
        };
        assert_eq!(args.pods, 20);
        assert_eq!(args.duration, Some(Duration::from_secs(90)));
        assert_eq!(args.listen.to_string(), "127.0.0.1:8080");
    }

    /// The spellings every duration flag of every command accepts.
    const DURATIONS: [(&str, Duration); 5] = [
        ("500ms", Duration::from_millis(500)),
        ("2s", Duration::from_secs(2)),
        ("90", Duration::from_secs(90)),
        ("1h", Duration::from_secs(3600)),
        ("1h30m", Duration::from_secs(5400)),
    ];

    #[test]
    fn run_duration_flags_accept_every_duration_spelling() {
        for (text, expected) in DURATIONS {
            for flag in [
                "--reconcile-interval",
                "--leader-elect-lease-duration",
                "--leader-elect-renew-deadline",
                "--leader-elect-retry-period",
            ] {
                let cli = Cli::try_parse_from(["dra-ledger", "run", flag, text])
                    .unwrap_or_else(|error| panic!("{flag} {text}: {error}"));
                let Command::Run(args) = cli.command else {
                    panic!("not run")
                };
                let parsed = match flag {
                    "--reconcile-interval" => args.reconcile_interval,
                    "--leader-elect-lease-duration" => args.leader_elect_lease_duration,
                    "--leader-elect-renew-deadline" => args.leader_elect_renew_deadline,
                    _ => args.leader_elect_retry_period,
                };
                assert_eq!(parsed, expected, "{flag} {text}");
            }
        }
    }

    #[cfg(feature = "demo")]
    #[test]
    fn sim_and_demo_duration_flags_accept_the_same_spellings_as_run() {
        for (text, expected) in DURATIONS {
            let cli = Cli::try_parse_from([
                "dra-ledger",
                "sim",
                "--fault-delay",
                text,
                "--fault-watch-max-lifetime",
                text,
            ])
            .unwrap_or_else(|error| panic!("sim {text}: {error}"));
            let Command::Sim(args) = cli.command else {
                panic!("not sim")
            };
            assert_eq!(args.sim.fault_delay, (expected, expected), "{text}");
            assert_eq!(args.sim.fault_watch_max_lifetime, Some(expected), "{text}");

            let cli = Cli::try_parse_from(["dra-ledger", "demo", "--duration", text])
                .unwrap_or_else(|error| panic!("demo {text}: {error}"));
            let Command::Demo(args) = cli.command else {
                panic!("not demo")
            };
            assert_eq!(args.duration, Some(expected), "{text}");
        }
        let range = format!("{}-{}", DURATIONS[0].0, DURATIONS[3].0);
        let cli = Cli::try_parse_from(["dra-ledger", "sim", "--fault-delay", &range]).unwrap();
        let Command::Sim(args) = cli.command else {
            panic!("not sim")
        };
        assert_eq!(args.sim.fault_delay, (DURATIONS[0].1, DURATIONS[3].1));
    }

    #[cfg(not(feature = "demo"))]
    #[test]
    fn build_without_demo_has_no_demo_or_sim_subcommand() {
        for name in ["demo", "sim"] {
            let error = Cli::try_parse_from(["dra-ledger", name]).unwrap_err();
            assert_eq!(
                error.kind(),
                clap::error::ErrorKind::InvalidSubcommand,
                "{name}"
            );
        }
    }

    #[test]
    fn bad_flag_values_are_usage_errors() {
        for argv in [
            &["dra-ledger", "run", "--workers", "many"][..],
            &["dra-ledger", "run", "--log-format", "xml"],
            &["dra-ledger", "demo", "--duration", "soon"],
            &["dra-ledger", "ledger", "verify"],
        ] {
            let error = Cli::try_parse_from(argv).unwrap_err();
            assert_eq!(error.exit_code(), 2, "{argv:?}");
        }
    }
}
