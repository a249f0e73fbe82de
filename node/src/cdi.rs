//! The CDI spec of one prepared claim (CDI 1.1.0 format): the file
//! `<cdi-dir>/<driver>-claim_<claimUID>.json`, `kind` `<driver>/claim`, one device named by the
//! claim UID, so the ID handed to the kubelet is `<driver>/claim=<claimUID>`. Its
//! `containerEdits` set the claim's environment ([`env`](mod@env): its UID, devices, the
//! devices' own variables, a MIG partition's UUID, the limits of its shares) and the device
//! nodes of every device. `cdiVersion` is the lowest version whose schema the file meets.
//!
//! Files are written atomically (a temporary file in the same directory, fsync, rename, fsync of
//! the directory), so a crash leaves the old file, the new one or none, never a torn one. Only
//! files with our name prefix are listed or removed; other vendors' specs are never touched.

pub mod env;

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::device::{DeviceShare, NodeDevice};

/// The lowest CDI version with `hostPath` on device nodes; plain env and device paths need only
/// 0.3.0.
const HOST_PATH_VERSION: &str = "0.5.0";
/// The lowest CDI version of the edits this agent writes without device nodes.
const BASE_VERSION: &str = "0.3.0";

/// Writes and removes the CDI specs of one driver in one directory.
#[derive(Clone, Debug)]
pub struct CdiDir {
    dir: PathBuf,
    driver: String,
}

impl CdiDir {
    /// The specs of `driver` in `dir` (created when first written).
    pub fn new(dir: impl Into<PathBuf>, driver: &str) -> Self {
        CdiDir {
            dir: dir.into(),
            driver: driver.to_owned(),
        }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn prefix(&self) -> String {
        format!("{}-claim_", self.driver)
    }

    /// The spec file of claim `uid`.
    pub fn file(&self, uid: &str) -> PathBuf {
        self.dir.join(format!("{}{uid}.json", self.prefix()))
    }

    /// The fully qualified CDI device ID of claim `uid`.
    pub fn device_id(&self, uid: &str) -> String {
        format!("{}/claim={uid}", self.driver)
    }

    /// The spec of claim `uid` holding `devices`, `shares` of them by share.
    pub fn spec(&self, uid: &str, devices: &[&NodeDevice], shares: &[DeviceShare]) -> Value {
        let env = env::claim_env(uid, devices, shares);
        let nodes: Vec<Value> = devices
            .iter()
            .flat_map(|d| d.device_nodes.iter())
            .map(|path| {
                let path = path.display().to_string();
                json!({"path": path, "hostPath": path})
            })
            .collect();
        let mut edits = json!({
            "env": env.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>(),
        });
        let version = if nodes.is_empty() {
            BASE_VERSION
        } else {
            edits["deviceNodes"] = Value::Array(nodes);
            HOST_PATH_VERSION
        };
        json!({
            "cdiVersion": version,
            "kind": format!("{}/claim", self.driver),
            "devices": [{"name": uid, "containerEdits": edits}],
        })
    }

    /// Writes `spec` as the file of claim `uid`, atomically and durably.
    pub fn write(&self, uid: &str, spec: &Value) -> io::Result<()> {
        fs::create_dir_all(&self.dir)?;
        let target = self.file(uid);
        let temp = self.dir.join(format!(".{}{uid}.json.tmp", self.prefix()));
        {
            let mut file = fs::File::create(&temp)?;
            file.write_all(serde_json::to_string_pretty(spec)?.as_bytes())?;
            file.sync_all()?;
        }
        dra_allocator::failpoint::hit("node_cdi_before_rename");
        fs::rename(&temp, &target)?;
        sync_dir(&self.dir)
    }

    /// Removes the file of claim `uid`; a missing file is no error.
    pub fn remove(&self, uid: &str) -> io::Result<()> {
        match fs::remove_file(self.file(uid)) {
            Ok(()) => sync_dir(&self.dir),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Whether the file of claim `uid` exists.
    pub fn exists(&self, uid: &str) -> bool {
        self.file(uid).is_file()
    }

    /// The claim UIDs of every spec file of ours, and our temporary files left by a crash.
    pub fn list(&self) -> io::Result<Vec<String>> {
        let entries = match fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let prefix = self.prefix();
        let mut uids = Vec::new();
        for entry in entries {
            let name = entry?.file_name();
            let Some(name) = name.to_str() else { continue };
            let name = name.strip_prefix('.').unwrap_or(name);
            let Some(rest) = name.strip_prefix(&prefix) else {
                continue;
            };
            let uid = rest
                .strip_suffix(".json.tmp")
                .or_else(|| rest.strip_suffix(".json"));
            if let Some(uid) = uid.filter(|u| !u.is_empty()) {
                uids.push(uid.to_owned());
            }
        }
        uids.sort();
        uids.dedup();
        Ok(uids)
    }

    /// Removes the file of claim `uid` and a temporary file of it.
    pub fn remove_all_of(&self, uid: &str) -> io::Result<()> {
        let temp = self.dir.join(format!(".{}{uid}.json.tmp", self.prefix()));
        // A leftover temporary file may or may not exist; the spec file decides the result.
        let _ = fs::remove_file(temp);
        self.remove(uid)
    }
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests;
