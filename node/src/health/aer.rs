//! The `sysfs` health source: for each device with a `pciAddress`, its PCI function under
//! `<sysfs-root>/bus/pci/devices/<address>`:
//!
//! - the function is gone from the bus (its directory vanished): `Gone`;
//! - `current_link_width` reads `0` (the link is down): `LinkDown`;
//! - the totals of `aer_dev_fatal` (`TOTAL_ERR_FATAL`) or `aer_dev_nonfatal`
//!   (`TOTAL_ERR_NONFATAL`) grew since the agent first read them: `PcieAerFatal` or
//!   `PcieAerNonFatal`. Counts from before the agent started are the baseline; an error that
//!   happened stays: the device is unhealthy until the agent restarts (as NVIDIA's driver treats
//!   a critical Xid), since the counters never go down.
//!
//! Functions without AER or link files (kernels without AER support, integrated GPUs) are judged
//! on what they have. The reading is I/O; [`total`] and [`judge`] are pure.

use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use dra_allocator::model::AttributeValue;

use super::{HealthError, HealthSource, HealthState, Observation, Observations, Reason};
use crate::device::Inventory;

/// The AER totals of a function; `None` where the file is missing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AerCounts {
    /// `TOTAL_ERR_FATAL` of `aer_dev_fatal`.
    pub fatal: Option<u64>,
    /// `TOTAL_ERR_NONFATAL` of `aer_dev_nonfatal`.
    pub nonfatal: Option<u64>,
}

/// The value of the line `key N` of an AER counter file (`TOTAL_ERR_FATAL 2`).
pub fn total(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let mut parts = line.split_whitespace();
        (parts.next() == Some(key))
            .then(|| parts.next()?.parse().ok())
            .flatten()
    })
}

/// The failure `now` shows against `baseline`, if any: fatal errors before non-fatal ones.
pub fn judge(baseline: &AerCounts, now: &AerCounts) -> Option<Observation> {
    let grew = |before: Option<u64>, after: Option<u64>| match (before, after) {
        (Some(before), Some(after)) if after > before => Some((before, after)),
        _ => None,
    };
    if let Some((before, after)) = grew(baseline.fatal, now.fatal) {
        return Some(Observation::unhealthy(
            Reason::PcieAerFatal,
            format!("PCIe AER fatal errors: {before} -> {after}"),
        ));
    }
    grew(baseline.nonfatal, now.nonfatal).map(|(before, after)| {
        Observation::unhealthy(
            Reason::PcieAerNonFatal,
            format!("PCIe AER non-fatal errors: {before} -> {after}"),
        )
    })
}

/// The PCI functions of the inventory's devices, watched under a sysfs root.
#[derive(Clone, Debug)]
pub struct AerHealth {
    sysfs: PathBuf,
    baseline: BTreeMap<String, AerCounts>,
    latched: BTreeMap<String, Observation>,
}

impl AerHealth {
    /// The source reading under the sysfs mount `sysfs` (`--sysfs-root`).
    pub fn new(sysfs: impl Into<PathBuf>) -> Self {
        AerHealth {
            sysfs: sysfs.into(),
            baseline: BTreeMap::new(),
            latched: BTreeMap::new(),
        }
    }

    fn device(&mut self, name: &str, dir: &Path) -> Result<Option<Observation>, HealthError> {
        if let Some(latched) = self.latched.get(name) {
            return Ok(Some(latched.clone()));
        }
        if !dir.exists() {
            return Ok(Some(Observation::unhealthy(
                Reason::Gone,
                format!("PCI function {} is gone", file_name(dir)),
            )));
        }
        if read(&dir.join("current_link_width"))?.is_some_and(|w| w.trim() == "0") {
            return Ok(Some(Observation::unhealthy(
                Reason::LinkDown,
                "PCIe link down (width 0)",
            )));
        }
        let counts = AerCounts {
            fatal: read(&dir.join("aer_dev_fatal"))?.and_then(|t| total(&t, "TOTAL_ERR_FATAL")),
            nonfatal: read(&dir.join("aer_dev_nonfatal"))?
                .and_then(|t| total(&t, "TOTAL_ERR_NONFATAL")),
        };
        let baseline = *self.baseline.entry(name.to_owned()).or_insert(counts);
        let failure = judge(&baseline, &counts);
        if let Some(failure) = &failure {
            self.latched.insert(name.to_owned(), failure.clone());
        }
        Ok(failure)
    }
}

fn file_name(dir: &Path) -> String {
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The file's text, `None` when it does not exist.
fn read(path: &Path) -> Result<Option<String>, HealthError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(source) => Err(HealthError::Sysfs {
            path: path.to_owned(),
            source,
        }),
    }
}

impl HealthSource for AerHealth {
    fn name(&self) -> &'static str {
        "sysfs"
    }

    fn observe(&mut self, inventory: &Inventory) -> Result<Observations, HealthError> {
        let mut observed = Observations::new();
        for (name, device) in inventory {
            let Some(AttributeValue::String(address)) = device.attributes.get("pciAddress") else {
                continue;
            };
            let dir = self.sysfs.join("bus/pci/devices").join(address);
            let observation = match self.device(name, &dir) {
                Ok(observation) => observation,
                // a function that errors on read (it is falling off the bus) is not known good
                Err(error) => Some(Observation {
                    state: HealthState::Unknown,
                    reason: None,
                    message: Some(error.to_string()),
                }),
            };
            if let Some(observation) = observation {
                observed.insert(name.clone(), observation);
            }
        }
        self.baseline.retain(|name, _| inventory.contains_key(name));
        self.latched.retain(|name, _| inventory.contains_key(name));
        Ok(observed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::NodeDevice;

    const ADDRESS: &str = "0000:3b:00.0";

    fn aer_file(key: &str, count: u64) -> String {
        format!("Undefined 0\nDLP 0\nSDES 0\nTLP 0\n{key} {count}\n")
    }

    struct Tree {
        root: tempfile::TempDir,
    }

    impl Tree {
        fn new() -> Self {
            let tree = Tree {
                root: tempfile::tempdir().unwrap(),
            };
            std::fs::create_dir_all(tree.function()).unwrap();
            tree.set("aer_dev_fatal", &aer_file("TOTAL_ERR_FATAL", 3));
            tree.set("aer_dev_nonfatal", &aer_file("TOTAL_ERR_NONFATAL", 0));
            tree.set("current_link_width", "16\n");
            tree
        }

        fn function(&self) -> PathBuf {
            self.root.path().join("bus/pci/devices").join(ADDRESS)
        }

        fn set(&self, file: &str, text: &str) {
            std::fs::write(self.function().join(file), text).unwrap();
        }
    }

    fn inventory() -> Inventory {
        let device = |name: &str, address: Option<&str>| NodeDevice {
            name: name.to_owned(),
            attributes: address
                .map(|a| {
                    [(
                        "pciAddress".to_owned(),
                        AttributeValue::String(a.to_owned()),
                    )]
                    .into()
                })
                .unwrap_or_default(),
            ..NodeDevice::default()
        };
        [
            ("gpu-0".to_owned(), device("gpu-0", Some(ADDRESS))),
            ("gpu-1".to_owned(), device("gpu-1", None)),
        ]
        .into()
    }

    #[test]
    fn the_totals_are_read_from_the_kernels_counter_files() {
        assert_eq!(
            total(&aer_file("TOTAL_ERR_FATAL", 7), "TOTAL_ERR_FATAL"),
            Some(7)
        );
        assert_eq!(total("TOTAL_ERR_FATAL x\n", "TOTAL_ERR_FATAL"), None);
        assert_eq!(total("DLP 1\n", "TOTAL_ERR_FATAL"), None);
    }

    #[test]
    fn counts_from_before_the_start_are_the_baseline_and_growth_is_unhealthy_for_good() {
        let tree = Tree::new();
        let mut source = AerHealth::new(tree.root.path());
        assert!(source.observe(&inventory()).unwrap().is_empty());
        tree.set("aer_dev_nonfatal", &aer_file("TOTAL_ERR_NONFATAL", 1));
        let observed = source.observe(&inventory()).unwrap();
        assert_eq!(observed["gpu-0"].reason, Some(Reason::PcieAerNonFatal));
        assert_eq!(
            observed["gpu-0"].message.as_deref(),
            Some("PCIe AER non-fatal errors: 0 -> 1")
        );
        tree.set("aer_dev_fatal", &aer_file("TOTAL_ERR_FATAL", 4));
        let observed = source.observe(&inventory()).unwrap();
        assert_eq!(
            observed["gpu-0"].reason,
            Some(Reason::PcieAerNonFatal),
            "the first failure stays as it was seen"
        );
        let mut fresh = AerHealth::new(tree.root.path());
        assert!(
            fresh.observe(&inventory()).unwrap().is_empty(),
            "a restarted agent starts from the counts it finds"
        );
    }

    #[test]
    fn a_fatal_error_wins_over_a_non_fatal_one_of_the_same_round() {
        let before = AerCounts {
            fatal: Some(0),
            nonfatal: Some(0),
        };
        let after = AerCounts {
            fatal: Some(1),
            nonfatal: Some(5),
        };
        assert_eq!(
            judge(&before, &after).unwrap().reason,
            Some(Reason::PcieAerFatal)
        );
        assert_eq!(judge(&before, &AerCounts::default()), None);
    }

    #[test]
    fn a_link_down_and_a_function_gone_from_the_bus_are_unhealthy_while_they_last() {
        let tree = Tree::new();
        let mut source = AerHealth::new(tree.root.path());
        tree.set("current_link_width", "0\n");
        assert_eq!(
            source.observe(&inventory()).unwrap()["gpu-0"].reason,
            Some(Reason::LinkDown)
        );
        tree.set("current_link_width", "16\n");
        assert!(source.observe(&inventory()).unwrap().is_empty());
        std::fs::remove_dir_all(tree.function()).unwrap();
        let observed = source.observe(&inventory()).unwrap();
        assert_eq!(observed["gpu-0"].reason, Some(Reason::Gone));
        assert_eq!(
            observed["gpu-0"].message.as_deref(),
            Some("PCI function 0000:3b:00.0 is gone")
        );
        assert!(
            !observed.contains_key("gpu-1"),
            "a device without a PCI address is not judged"
        );
    }
}
