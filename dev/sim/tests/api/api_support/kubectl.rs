//! A `kubectl` binary run against a simulated API server through a kubeconfig of its own, with
//! its own home and discovery cache.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use dra_sim::server::SimServerHandle;

/// One kubectl binary pointed at one server.
pub struct Kubectl {
    binary: PathBuf,
    dir: tempfile::TempDir,
    kubeconfig: PathBuf,
}

impl Kubectl {
    /// `binary` talking to `server`.
    pub fn new(server: &SimServerHandle, binary: &Path) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        server.write_kubeconfig(&kubeconfig).unwrap();
        Self {
            binary: binary.to_owned(),
            dir,
            kubeconfig,
        }
    }

    /// The command for `args`, not started.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.binary);
        cmd.args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("HOME", self.dir.path())
            .arg("--cache-dir")
            .arg(self.dir.path().join("cache"));
        cmd
    }

    /// Runs kubectl in a blocking task; panics with its output on failure.
    pub async fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args).await;
        assert!(
            out.status.success(),
            "{} {args:?} failed: {}{}",
            self.binary.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs kubectl in a blocking task.
    pub async fn run(&self, args: &[&str]) -> Output {
        let mut cmd = self.command(args);
        tokio::task::spawn_blocking(move || cmd.output().unwrap())
            .await
            .unwrap()
    }

    /// Writes `text` to a file `name` in kubectl's directory; its path.
    pub fn write(&self, name: &str, text: &str) -> String {
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    }
}
