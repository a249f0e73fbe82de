//! `kubernetes-validate --strict` against the Kubernetes 1.34 schemas (unknown fields
//! rejected), for the tests that check the `resource.k8s.io/v1` objects the agent writes
//! (`tests/v1`, and the slices the agent publishes in `tests/kubelet`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The Kubernetes version whose schemas the objects are checked against.
pub const KUBERNETES: &str = "1.34.0";

/// The tool, or `None` (the test is skipped, or fails under CI) when it is not installed.
pub fn kubernetes_validate() -> Option<PathBuf> {
    testkit::require_tool("kubernetes-validate", "pip install kubernetes-validate")
}

/// Runs the tool on `file`.
pub fn validate(tool: &Path, file: &Path) -> Output {
    Command::new(tool)
        .args(["--strict", "-k", KUBERNETES])
        .arg(file)
        .output()
        .unwrap()
}

/// The tool's exit status and output, for a failure message.
pub fn report(out: &Output) -> String {
    format!(
        "status {}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}
