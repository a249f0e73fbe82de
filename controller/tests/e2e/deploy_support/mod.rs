//! Support of `deploy_manifests.rs`: the manifests under `deploy/` as parsed documents, the
//! `kubernetes-validate` runner, the CRD schema checker ([`schema`]), the request recorder with
//! the RBAC rule matching ([`rbac`]) and the flags of a `dra-ledger run` command line as the
//! binary reads them ([`run_flags`]).

// Kubernetes kind names are prose in these docs.
#![allow(clippy::doc_markdown)]

pub mod rbac;
pub mod run_flags;
pub mod schema;
pub mod workload;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The API group of the driver's custom resources.
pub const CUSTOM_GROUP: &str = "dra-ledger.io";
/// The Kubernetes version the base manifests and the examples must validate against.
pub const KUBERNETES_VERSION: &str = "1.30.0";
/// The kustomization file: a kustomize input, not a Kubernetes object.
pub const KUSTOMIZATION: &str = "kustomization.yaml";
/// The directory of the overlays for later Kubernetes releases, under `deploy/`.
pub const OVERLAYS: &str = "overlays";

/// The `deploy/` directory of the repository.
pub fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy")
}

/// The base manifests, `deploy/base/`.
pub fn base_dir() -> PathBuf {
    deploy_dir().join("base")
}

/// Every YAML file under `deploy/` (recursively) but the overlays, sorted: the base, the
/// examples and the kustomizations, all for Kubernetes 1.30.
pub fn yaml_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    collect(&deploy_dir(), &mut files);
    files.sort();
    files
}

fn collect(dir: &Path, files: &mut Vec<PathBuf>) {
    let entries =
        std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            if path != deploy_dir().join(OVERLAYS) {
                collect(&path, files);
            }
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            files.push(path);
        }
    }
}

/// The Kubernetes manifests for 1.30: every YAML file of [`yaml_files`] but the kustomizations.
pub fn manifest_files() -> Vec<PathBuf> {
    yaml_files()
        .into_iter()
        .filter(|p| p.file_name().is_none_or(|n| n != KUSTOMIZATION))
        .collect()
}

/// An overlay rendered by `kubectl kustomize deploy/overlays/<name>`, kept in a file for
/// `kubernetes-validate`.
pub struct Rendered {
    /// The rendered manifests (deleted on drop).
    pub file: tempfile::NamedTempFile,
    /// Their documents.
    pub documents: Vec<Document>,
}

impl Rendered {
    /// The one document of `kind` named `name`; panics when there is not exactly one.
    pub fn find(&self, kind: &str, name: &str) -> Document {
        one_of(self.documents.clone(), kind, name)
    }
}

/// Renders overlay `name` with kubectl; `None` (after the skip message) when kubectl is missing
/// outside CI.
pub fn render_overlay(name: &str) -> Option<Rendered> {
    let kubectl =
        testkit::tools::require_tool("kubectl", "https://kubernetes.io/docs/tasks/tools/")?;
    let dir = deploy_dir().join(OVERLAYS).join(name);
    let output = Command::new(kubectl)
        .arg("kustomize")
        .arg(&dir)
        .output()
        .expect("kubectl runs");
    assert!(
        output.status.success(),
        "kubectl kustomize {}: {}",
        dir.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    let mut file = tempfile::Builder::new()
        .suffix(".yaml")
        .tempfile()
        .expect("temporary file");
    std::io::Write::write_all(&mut file, &output.stdout).expect("write the rendered overlay");
    let documents = documents(file.path());
    Some(Rendered { file, documents })
}

/// One document of a manifest file.
#[derive(Debug, Clone)]
pub struct Document {
    /// The file it comes from.
    pub file: PathBuf,
    /// The document as JSON.
    pub value: Value,
}

impl Document {
    /// `apiVersion`.
    pub fn api_version(&self) -> &str {
        self.value["apiVersion"].as_str().unwrap_or_default()
    }

    /// `kind`.
    pub fn kind(&self) -> &str {
        self.value["kind"].as_str().unwrap_or_default()
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        self.value["metadata"]["name"].as_str().unwrap_or_default()
    }

    /// Whether it is one of the driver's custom resources.
    pub fn is_custom(&self) -> bool {
        self.api_version().split('/').next() == Some(CUSTOM_GROUP)
    }

    /// The document as a typed object; panics naming the file when it does not fit.
    pub fn parse<T: serde::de::DeserializeOwned>(&self) -> T {
        serde_json::from_value(self.value.clone()).unwrap_or_else(|e| {
            panic!(
                "{} {} in {}: {e}",
                self.kind(),
                self.name(),
                self.file.display()
            )
        })
    }
}

/// The non-empty documents of `file`.
pub fn documents(file: &Path) -> Vec<Document> {
    let text = std::fs::read_to_string(file)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
    serde_yaml::Deserializer::from_str(&text)
        .map(|doc| {
            let value: Value = serde::Deserialize::deserialize(doc)
                .unwrap_or_else(|e| panic!("{} is not valid YAML: {e}", file.display()));
            value
        })
        .filter(|value| !value.is_null())
        .map(|value| Document {
            file: file.to_path_buf(),
            value,
        })
        .collect()
}

/// Every document of every manifest.
pub fn all_documents() -> Vec<Document> {
    manifest_files().iter().flat_map(|f| documents(f)).collect()
}

/// The one document of `kind` named `name` among the 1.30 manifests; panics when there is not
/// exactly one.
pub fn find(kind: &str, name: &str) -> Document {
    one_of(all_documents(), kind, name)
}

fn one_of(documents: Vec<Document>, kind: &str, name: &str) -> Document {
    let mut found: Vec<_> = documents
        .into_iter()
        .filter(|d| d.kind() == kind && d.name() == name)
        .collect();
    assert_eq!(found.len(), 1, "expected one {kind} {name} under deploy/");
    found.remove(0)
}

/// What `kubernetes-validate` said about some files.
#[derive(Debug)]
pub struct Validation {
    /// Whether it exited with status 0.
    pub success: bool,
    /// Its stdout and stderr, one message per line.
    pub lines: Vec<String>,
}

/// Runs `kubernetes-validate --strict` for Kubernetes `version` (`1.30.0`) on `files`. `None`
/// when the tool is not installed: a failure when the environment variable `CI` is set,
/// otherwise the caller skips with a message.
pub fn kubernetes_validate(version: &str, files: &[PathBuf]) -> Option<Validation> {
    let output = Command::new("kubernetes-validate")
        .arg("--kubernetes-version")
        .arg(version)
        .arg("--strict")
        .args(files)
        .output();
    match output {
        Ok(output) => {
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
            Some(Validation {
                success: output.status.success(),
                lines: text.lines().map(str::to_owned).collect(),
            })
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            testkit::tools::skip_or_fail(&format!(
                "kubernetes-validate is not installed (pip install kubernetes-validate); the \
                 manifests were not checked against the Kubernetes {version} schemas"
            ));
            None
        }
        Err(error) => panic!("cannot run kubernetes-validate: {error}"),
    }
}
