//! The PCI IDs database (`pci.ids`, from the `hwdata` or `pciutils` packages) as far as device
//! naming needs it: vendor lines (`10de  NVIDIA Corporation`) and their tab-indented device lines
//! (`\t2330  GH100 [H100 SXM5 80GB]`). Subsystem lines (two tabs), comments and the device class
//! section at the end (`C 03  Display controller`) are skipped. The database comes from a third
//! party, so a line that does not parse is skipped rather than failing discovery.
//!
//! Parsing is pure; only [`load`] reads a file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::DiscoveryError;

/// Where distributions install `pci.ids`, in the order they are tried.
pub const DEFAULT_PATHS: [&str; 3] = [
    "/usr/share/hwdata/pci.ids",
    "/usr/share/misc/pci.ids",
    "/usr/share/pci.ids",
];

/// Device names by `(vendor, device)` ID.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PciIds {
    devices: BTreeMap<(u16, u16), String>,
}

impl PciIds {
    /// Parses the text of a `pci.ids` file.
    pub fn parse(text: &str) -> Self {
        let mut devices = BTreeMap::new();
        let mut vendor: Option<u16> = None;
        for line in text.lines() {
            if line.starts_with('#') || line.trim().is_empty() {
                continue;
            }
            if line.starts_with("C ") {
                // The class section: no more vendors follow.
                break;
            }
            if let Some(rest) = line.strip_prefix('\t') {
                if rest.starts_with('\t') {
                    continue; // a subsystem line
                }
                if let (Some(vendor), Some((device, name))) = (vendor, id_and_name(rest)) {
                    devices.insert((vendor, device), name.to_owned());
                }
            } else {
                vendor = id_and_name(line).map(|(id, _)| id);
            }
        }
        PciIds { devices }
    }

    /// The name of a device, as the database spells it.
    pub fn device_name(&self, vendor: u16, device: u16) -> Option<&str> {
        self.devices.get(&(vendor, device)).map(String::as_str)
    }
}

/// `XXXX  name`: four hex digits, whitespace, the name.
fn id_and_name(line: &str) -> Option<(u16, &str)> {
    let (id, name) = line.split_once(char::is_whitespace)?;
    if id.len() != 4 {
        return None;
    }
    let id = u16::from_str_radix(id, 16).ok()?;
    let name = name.trim();
    (!name.is_empty()).then_some((id, name))
}

/// Reads the first of `candidates` that exists; `None` when none does (the database is
/// optional: models are then named by device ID).
///
/// # Errors
/// A candidate that exists but cannot be read.
pub fn load(candidates: &[PathBuf]) -> Result<Option<PciIds>, DiscoveryError> {
    for path in candidates {
        match read(path) {
            Ok(text) => return Ok(Some(PciIds::parse(&text))),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(DiscoveryError::PciIds {
                    path: path.clone(),
                    source,
                })
            }
        }
    }
    Ok(None)
}

/// The file's text; a few distributions' copies carry Latin-1 names, read lossily.
fn read(path: &Path) -> std::io::Result<String> {
    std::fs::read(path).map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
# pci.ids sample
#\tcomment with a tab
1002  Advanced Micro Devices, Inc. [AMD/ATI]
\t74a1  Aqua Vanjaram [Instinct MI300X]
\t\t1002 74a1  Instinct MI300X
10de  NVIDIA Corporation
\t2330  GH100 [H100 SXM5 80GB]
\tzzzz  not an id
8086  Intel Corporation
\t0bd5  Ponte Vecchio XT (1 Tile) [Data Center GPU Max 1100]

C 03  Display controller
\t00  VGA compatible controller
";

    #[test]
    fn device_lines_are_named_under_their_vendor() {
        let ids = PciIds::parse(SAMPLE);
        assert_eq!(
            ids.device_name(0x10de, 0x2330),
            Some("GH100 [H100 SXM5 80GB]")
        );
        assert_eq!(
            ids.device_name(0x1002, 0x74a1),
            Some("Aqua Vanjaram [Instinct MI300X]")
        );
        assert_eq!(
            ids.device_name(0x8086, 0x0bd5),
            Some("Ponte Vecchio XT (1 Tile) [Data Center GPU Max 1100]")
        );
    }

    #[test]
    fn subsystems_classes_and_malformed_lines_are_skipped() {
        let ids = PciIds::parse(SAMPLE);
        assert_eq!(ids.devices.len(), 3, "{:?}", ids.devices);
        assert_eq!(ids.device_name(0x10de, 0x0000), None);
    }

    #[test]
    fn missing_database_is_none_and_the_first_existing_candidate_wins() {
        let dir = tempfile::tempdir().unwrap();
        let second = dir.path().join("pci.ids");
        std::fs::write(&second, SAMPLE).unwrap();
        let missing = dir.path().join("absent");
        assert_eq!(load(std::slice::from_ref(&missing)).unwrap(), None);
        let ids = load(&[missing, second]).unwrap().unwrap();
        assert!(ids.device_name(0x10de, 0x2330).is_some());
    }
}
