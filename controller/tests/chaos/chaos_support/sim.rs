//! The simulated cluster as a `dra-ledger sim` child process: started with a kubeconfig for the
//! test and the controllers, stopped with SIGTERM (killed if the test panics); its log, which
//! ends with the counts of the faults it injected, is kept in a file.

use std::path::{Path, PathBuf};

use kube::config::{KubeConfigOptions, Kubeconfig};
use testkit::sim::{start_sim, Sim};

/// A running `dra-ledger sim`.
pub struct SimProcess {
    sim: Sim,
    /// The kubeconfig it wrote.
    pub kubeconfig: PathBuf,
    /// Its API server URL.
    pub url: String,
}

impl SimProcess {
    /// Starts `dra-ledger sim` with `args` (nodes, devices, fault flags) and JSON logs; its log
    /// goes to `dir/sim.log`. Returns once it printed its URL.
    pub async fn start(dir: &Path, args: &[String]) -> SimProcess {
        let dir = dir.to_owned();
        let all: Vec<String> = ["--log-format", "json"]
            .into_iter()
            .map(str::to_owned)
            .chain(args.iter().cloned())
            .collect();
        let sim = tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = all.iter().map(String::as_str).collect();
            start_sim(env!("CARGO_BIN_EXE_dra-ledger"), &dir, &args)
        })
        .await
        .expect("dra-ledger sim starts");
        SimProcess {
            kubeconfig: sim.kubeconfig.clone(),
            url: sim.url.clone(),
            sim,
        }
    }

    /// A client of its API server (default namespace `default`).
    pub async fn client(&self) -> kube::Client {
        let file = Kubeconfig::read_from(&self.kubeconfig).expect("kubeconfig reads");
        let config = kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
            .await
            .expect("kubeconfig is valid");
        kube::Client::try_from(config).expect("client builds")
    }

    /// Stops it with SIGTERM, waits up to 30 s and returns its log.
    pub fn stop(self) -> String {
        self.sim.stop()
    }
}

/// The fault flags of the chaos tests, seeded from `seed`: 10% of writes answered 409 Conflict
/// and 5% 500, 2% of gets and lists 500, 10% of writes delayed by 100–200 ms, every watch ended
/// after a random time of up to 4 s.
pub fn fault_args(seed: u64) -> Vec<String> {
    [
        "--fault-seed",
        &(seed % 1_000_000).to_string(),
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
        "4s",
    ]
    .map(String::from)
    .to_vec()
}

/// The number in field `field` of the simulator's last JSON log line that has it (e.g. the
/// `watch_disconnects` of the faults injected, logged when it stops).
pub fn logged_count(log: &str, field: &str) -> Option<u64> {
    log.lines().rev().find_map(|line| {
        let entry: serde_json::Value = serde_json::from_str(line).ok()?;
        entry["fields"][field].as_u64()
    })
}
