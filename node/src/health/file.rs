//! The `file:PATH` health source: the `health` and `healthMessage` fields of the inventory file
//! (`crate::discovery::file`), read again each round, so an operator marks a device by editing
//! the file (the agent reads it every `--inventory-interval` and at once on SIGHUP).

use std::path::PathBuf;

use super::{HealthError, HealthSource, Observations};
use crate::device::Inventory;
use crate::discovery::file::read_health;

/// The health fields of the inventory file at a path.
#[derive(Clone, Debug)]
pub struct FileHealth {
    path: PathBuf,
}

impl FileHealth {
    /// The source over the inventory file at `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        FileHealth { path: path.into() }
    }
}

impl HealthSource for FileHealth {
    fn name(&self) -> &'static str {
        "file"
    }

    fn observe(&mut self, inventory: &Inventory) -> Result<Observations, HealthError> {
        let mut observed = read_health(&self.path)?;
        observed.retain(|name, _| inventory.contains_key(name));
        Ok(observed)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{HealthState, Reason};
    use super::*;
    use crate::discovery::file::parse;

    const FILE: &str = "devices:
  - name: gpu-0
    health: Unhealthy
    healthMessage: fan failed
  - name: gpu-1
    health: Unknown
  - name: gpu-2
    health: Healthy
  - name: gpu-3
";

    #[test]
    fn the_file_marks_unhealthy_and_unknown_devices_with_their_message() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("devices.yaml");
        std::fs::write(&path, FILE).unwrap();
        let inventory = parse(FILE).unwrap();
        let observed = FileHealth::new(&path).observe(&inventory).unwrap();
        assert_eq!(observed.keys().collect::<Vec<_>>(), ["gpu-0", "gpu-1"]);
        assert_eq!(observed["gpu-0"].state, HealthState::Unhealthy);
        assert_eq!(observed["gpu-0"].reason, Some(Reason::Marked));
        assert_eq!(observed["gpu-0"].message.as_deref(), Some("fan failed"));
        assert_eq!(observed["gpu-1"].state, HealthState::Unknown);
        assert_eq!(observed["gpu-1"].message, None);
    }

    #[test]
    fn a_health_value_of_no_known_kind_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("devices.yaml");
        std::fs::write(&path, "devices:\n  - name: gpu-0\n    health: Broken\n").unwrap();
        let error = FileHealth::new(&path)
            .observe(&Inventory::new())
            .unwrap_err()
            .to_string();
        assert!(error.contains("Broken"), "{error}");
    }
}
