//! The simulated cluster as a `dra-ledger sim` child process: started with a kubeconfig for the
//! test and the controllers, stopped with SIGTERM (killed if the test panics); its log, which
//! ends with the counts of the faults it injected, is kept in a file.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};

/// A running `dra-ledger sim`.
pub struct SimProcess {
    child: Option<Child>,
    /// The kubeconfig it wrote.
    pub kubeconfig: PathBuf,
    /// Its API server URL.
    pub url: String,
    log: PathBuf,
}

impl SimProcess {
    /// Starts `dra-ledger sim` with `args` (nodes, devices, fault flags); its log goes to
    /// `dir/sim.log`. Returns once it printed its URL.
    pub async fn start(dir: &Path, args: &[String]) -> SimProcess {
        let kubeconfig = dir.join("kubeconfig");
        let log = std::fs::File::create(dir.join("sim.log")).expect("sim log file");
        let mut child = Command::new(env!("CARGO_BIN_EXE_dra-ledger"))
            .args(["sim", "--log-format", "json"])
            .args(args)
            .arg("--kubeconfig-out")
            .arg(&kubeconfig)
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("dra-ledger sim starts");
        let stdout = child.stdout.take().expect("stdout piped");
        let url = tokio::task::spawn_blocking(move || {
            use std::io::BufRead;
            let mut lines = std::io::BufReader::new(stdout).lines();
            let url = lines
                .by_ref()
                .map_while(Result::ok)
                .find(|l| l.starts_with("http://"));
            // Keep reading so that the pipe never fills.
            std::thread::spawn(move || lines.for_each(drop));
            url
        })
        .await
        .expect("reader task")
        .unwrap_or_else(|| {
            let log = std::fs::read_to_string(dir.join("sim.log")).unwrap_or_default();
            panic!("dra-ledger sim printed no URL; its log:\n{log}")
        });
        SimProcess {
            child: Some(child),
            kubeconfig,
            url,
            log: dir.join("sim.log"),
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
    pub fn stop(mut self) -> String {
        if let Some(mut child) = self.child.take() {
            super::signal(child.id(), "TERM");
            let deadline = std::time::Instant::now() + Duration::from_secs(30);
            while child.try_wait().ok().flatten().is_none() {
                if std::time::Instant::now() > deadline {
                    let _ = child.kill();
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.wait();
        }
        std::fs::read_to_string(&self.log).unwrap_or_default()
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

impl Drop for SimProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
