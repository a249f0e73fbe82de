//! Where the inventory of this node comes from: the `--devices` flag's value parsed into a
//! [`DeviceSource`], and [`DeviceSource::discover`], which reads the inventory once. Reading it
//! again (on SIGHUP and every `--inventory-interval`) is the caller's job.
//!
//! - [`sysfs`]: display and 3D controllers of NVIDIA, AMD and Intel under
//!   `<sysfs-root>/bus/pci/devices`, named with the [`pci_ids`] database where one is installed;
//! - [`file`](mod@file): a YAML or JSON inventory written by an operator;
//! - [`nvml`]: NVIDIA GPUs through the NVIDIA management library (the library itself only with
//!   the cargo feature `nvml`; the mapping of its answers to devices is always built and tested),
//!   with MIG partitions and capacity sharing mapped by [`gpu_sharing`].
//!
//! Discovery reads files and (for `nvml`) a shared library; it never talks to Kubernetes and
//! knows nothing of claims, the journal or CDI.

pub mod file;
pub mod gpu_sharing;
pub mod nvml;
pub mod pci_ids;
pub mod sysfs;

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use crate::device::{Discovered, Inventory};
use gpu_sharing::GpuSharing;

/// Where the inventory is read from: the value of `--devices`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeviceSource {
    /// PCI display and 3D controllers found in sysfs (`sysfs`).
    Sysfs,
    /// An inventory file (`file:PATH`).
    File(PathBuf),
    /// NVIDIA GPUs through NVML (`nvml`), whole GPUs shared as `--gpu-sharing` says.
    Nvml(GpuSharing),
}

/// The host directories discovery reads, and where the PCI IDs database may be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiscoveryRoots {
    /// The sysfs mount (`--sysfs-root`, `/sys` on a host).
    pub sysfs: PathBuf,
    /// The device directory (`--dev-root`, `/dev` on a host); device nodes are named under it.
    pub dev: PathBuf,
    /// Candidate paths of `pci.ids`, tried in order; the first that exists is used.
    pub pci_ids: Vec<PathBuf>,
}

impl Default for DiscoveryRoots {
    fn default() -> Self {
        DiscoveryRoots {
            sysfs: PathBuf::from("/sys"),
            dev: PathBuf::from("/dev"),
            pci_ids: pci_ids::DEFAULT_PATHS.iter().map(PathBuf::from).collect(),
        }
    }
}

/// Why the inventory could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DiscoveryError {
    /// A sysfs file or directory discovery needs could not be read.
    #[error("reading {path}: {source}")]
    SysfsRead {
        /// The file or directory.
        path: PathBuf,
        /// What the read returned.
        #[source]
        source: std::io::Error,
    },
    /// A sysfs file held something other than what the kernel writes there.
    #[error("unexpected content {content:?} in {path}: {reason}")]
    SysfsContent {
        /// The file.
        path: PathBuf,
        /// Its content, trimmed.
        content: String,
        /// What was expected.
        reason: &'static str,
    },
    /// The PCI IDs database exists but could not be read.
    #[error("reading the pci ids database {path}: {source}")]
    PciIds {
        /// The database file.
        path: PathBuf,
        /// What the read returned.
        #[source]
        source: std::io::Error,
    },
    /// The inventory file could not be read.
    #[error("reading the inventory file {path}: {source}")]
    InventoryRead {
        /// The file.
        path: PathBuf,
        /// What the read returned.
        #[source]
        source: std::io::Error,
    },
    /// The inventory file is not a valid inventory.
    #[error("inventory file {path}: {source}")]
    InventoryFile {
        /// The file.
        path: PathBuf,
        /// What is wrong, naming the device and field.
        #[source]
        source: file::InventoryFileError,
    },
    /// A call into the NVIDIA management library failed (or the library is not there).
    #[error("nvml {call}: {source}")]
    Nvml {
        /// The call, e.g. `init` or `device uuid`.
        call: &'static str,
        /// What the library returned.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The `nvml` source was asked for but this binary was built without it.
    #[error("the nvml device source is not built into this binary (cargo feature `nvml`)")]
    NvmlNotBuilt,
}

/// Why a `--devices` value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeviceSourceParse {
    /// `file:` without a path.
    #[error("`file:` needs a path, as in `file:/etc/dra-ledger/devices.yaml`")]
    EmptyFilePath,
    /// Anything else.
    #[error("unknown device source {0:?}: expected `sysfs`, `file:PATH` or `nvml`")]
    Unknown(String),
}

impl FromStr for DeviceSource {
    type Err = DeviceSourceParse;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "sysfs" => Ok(DeviceSource::Sysfs),
            "nvml" => Ok(DeviceSource::Nvml(GpuSharing::None)),
            _ => match text.strip_prefix("file:") {
                Some("") => Err(DeviceSourceParse::EmptyFilePath),
                Some(path) => Ok(DeviceSource::File(PathBuf::from(path))),
                None => Err(DeviceSourceParse::Unknown(text.to_owned())),
            },
        }
    }
}

impl fmt::Display for DeviceSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceSource::Sysfs => f.write_str("sysfs"),
            DeviceSource::File(path) => write!(f, "file:{}", path.display()),
            DeviceSource::Nvml(_) => f.write_str("nvml"),
        }
    }
}

impl DeviceSource {
    /// Reads the inventory once.
    ///
    /// # Errors
    /// What the source reports: an unreadable sysfs file, an invalid inventory file, NVML failing
    /// (or not built in).
    pub fn discover(&self, roots: &DiscoveryRoots) -> Result<Inventory, DiscoveryError> {
        self.discover_all(roots).map(|found| found.devices)
    }

    /// Reads the inventory once with how its devices are shared and the pool's counter sets
    /// (from an inventory file, or MIG partitions and capacity sharing from NVML).
    ///
    /// # Errors
    /// As [`DeviceSource::discover`].
    pub fn discover_all(&self, roots: &DiscoveryRoots) -> Result<Discovered, DiscoveryError> {
        match self {
            DeviceSource::Sysfs => sysfs::discover(roots).map(Discovered::from),
            DeviceSource::File(path) => file::read_discovered(path),
            DeviceSource::Nvml(sharing) => nvml::discover(roots, *sharing),
        }
    }
}

/// The name of the `index`th GPU in PCI address order, the same for every source: `gpu-0`, ...
pub(crate) fn gpu_name(index: usize) -> String {
    format!("gpu-{index}")
}
