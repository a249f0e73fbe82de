//! A fake sysfs in a temporary directory laid out as the kernel lays it out: each PCI function
//! a directory under `devices/pciDDDD:BB/...` (its place in the PCI tree), and
//! `bus/pci/devices/<address>` a relative symlink to it.

use std::path::{Path, PathBuf};

use dra_node::discovery::DiscoveryRoots;

pub const NVIDIA: u16 = 0x10de;
pub const AMD: u16 = 0x1002;
pub const INTEL: u16 = 0x8086;
pub const MELLANOX: u16 = 0x15b3;
pub const ASPEED: u16 = 0x1a03;

pub const VGA: u32 = 0x03_00_00;
pub const CONTROLLER_3D: u32 = 0x03_02_00;
pub const DISPLAY_OTHER: u32 = 0x03_80_00;
pub const PROCESSING_ACCELERATOR: u32 = 0x12_00_00;
pub const ETHERNET: u32 = 0x02_00_00;
pub const BRIDGE_OTHER: u32 = 0x06_80_00;

/// The place in the PCI tree of the first slot's function.
pub const FIRST_SLOT: &str = "pci0000:00/0000:00:01.0/0000:01:00.0";

pub struct FakeSysfs {
    pub dir: tempfile::TempDir,
}

pub struct Function {
    pub dir: PathBuf,
}

impl FakeSysfs {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("sys/bus/pci/devices")).unwrap();
        FakeSysfs { dir }
    }

    pub fn sysfs(&self) -> PathBuf {
        self.dir.path().join("sys")
    }

    /// Roots with this tree, `/dev` as the device root and the fixture `pci.ids`.
    pub fn roots(&self) -> DiscoveryRoots {
        DiscoveryRoots {
            sysfs: self.sysfs(),
            dev: PathBuf::from("/dev"),
            pci_ids: vec![
                Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/discovery/fixtures/pci.ids")
            ],
        }
    }

    /// A PCI function at `path` below `devices/` (`pci0000:3a/0000:3a:00.0/0000:3b:00.0`), with
    /// its `class`, `vendor` and `device` files and the `bus/pci/devices` link.
    pub fn function(&self, path: &str, class: u32, vendor: u16, device: u16) -> Function {
        let dir = self.sysfs().join("devices").join(path);
        std::fs::create_dir_all(&dir).unwrap();
        let address = dir.file_name().unwrap().to_str().unwrap().to_owned();
        std::fs::write(dir.join("class"), format!("{class:#08x}\n")).unwrap();
        std::fs::write(dir.join("vendor"), format!("{vendor:#06x}\n")).unwrap();
        std::fs::write(dir.join("device"), format!("{device:#06x}\n")).unwrap();
        let link = self.sysfs().join("bus/pci/devices").join(&address);
        std::os::unix::fs::symlink(Path::new("../../../devices").join(path), link).unwrap();
        Function { dir }
    }
}

impl FakeSysfs {
    /// A GPU (a 3D controller) of `vendor` and `device` at the first slot,
    /// `0000:01:00.0` behind the root port `0000:00:01.0`.
    pub fn gpu(&self, vendor: u16, device: u16) -> Function {
        self.function(FIRST_SLOT, CONTROLLER_3D, vendor, device)
    }
}

impl Function {
    pub fn numa(self, node: i64) -> Self {
        std::fs::write(self.dir.join("numa_node"), format!("{node}\n")).unwrap();
        self
    }

    /// Entries of the function's `drm` directory (`card1`, `renderD129`).
    pub fn drm(self, names: &[&str]) -> Self {
        for name in names {
            std::fs::create_dir_all(self.dir.join("drm").join(name)).unwrap();
        }
        self
    }

    pub fn write(self, file: &str, content: &str) -> Self {
        std::fs::write(self.dir.join(file), content).unwrap();
        self
    }

    pub fn remove(self, file: &str) -> Self {
        std::fs::remove_file(self.dir.join(file)).unwrap();
        self
    }
}
