//! What the parent and the child of the crash test share: the layout of the test directory (the
//! journal under `state/`, the CDI directory `cdi/`, the inventory file `inventory.json` of a few
//! devices), the preparer opened over it as the agent opens it, the claims of the workload and a
//! small seeded random generator.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use dra_allocator::handle::{HandleData, HandleSharing};
use dra_node::cdi::CdiDir;
use dra_node::journal::{Entry, EntrySharing, Journal};
use dra_node::prepare::{ClaimRequest, JournalPreparer};

/// The driver whose journal and CDI files are tested.
pub const DRIVER: &str = "gpu.dra-ledger.io";
/// The node the handles name.
pub const NODE: &str = "crash-node";
/// How many devices the inventory has.
pub const DEVICES: usize = 6;

/// The journal file under `root`.
pub fn journal_path(root: &Path) -> PathBuf {
    root.join("state").join("journal.redb")
}

/// The CDI directory under `root`.
pub fn cdi_dir(root: &Path) -> CdiDir {
    CdiDir::new(root.join("cdi"), DRIVER)
}

fn inventory_path(root: &Path) -> PathBuf {
    root.join("inventory.json")
}

/// The name of device `index`.
pub fn device_name(index: usize) -> String {
    format!("gpu-{index}")
}

/// Writes the inventory file and creates the state and CDI directories.
pub fn create(root: &Path) {
    let devices: Vec<serde_json::Value> = (0..DEVICES)
        .map(|i| {
            serde_json::json!({
                "name": device_name(i),
                "deviceNodes": [format!("/dev/dri/renderD{}", 128 + i)],
                "env": {format!("GPU_{i}"): i.to_string()},
            })
        })
        .collect();
    let text = serde_json::json!({ "devices": devices }).to_string();
    std::fs::write(inventory_path(root), text).unwrap();
    std::fs::create_dir_all(root.join("state")).unwrap();
    std::fs::create_dir_all(cdi_dir(root).dir()).unwrap();
}

/// The preparer over the directory, with the inventory read from its file.
pub fn open(root: &Path) -> JournalPreparer {
    let inventory = dra_node::discovery::file::read(&inventory_path(root)).unwrap();
    let journal = Journal::open(journal_path(root), DRIVER).unwrap();
    JournalPreparer::new(
        journal,
        cdi_dir(root),
        NODE,
        Arc::new(RwLock::new(inventory)),
        "crash-boot",
    )
}

/// The kubelet's request of claim `uid` holding `devices` as `sharing` says.
pub fn request(uid: &str, devices: Vec<String>, sharing: HandleSharing) -> ClaimRequest {
    let resource_handle = HandleData {
        node: NODE.to_owned(),
        devices,
        sharing,
        claim_uid: uid.to_owned(),
    }
    .to_json();
    ClaimRequest {
        uid: uid.to_owned(),
        namespace: "crash".to_owned(),
        name: format!("claim-{uid}"),
        resource_handle,
    }
}

/// The request that prepared journal entry `entry` of claim `uid`, as the kubelet repeats it
/// (the crash tests prepare through resource handles, which have no admin access).
pub fn request_of_entry(uid: &str, entry: &Entry) -> ClaimRequest {
    let sharing = match entry.sharing {
        EntrySharing::Exclusive | EntrySharing::AdminAccess => HandleSharing::Exclusive,
        EntrySharing::Shared(max_consumers) => HandleSharing::Shared { max_consumers },
    };
    request(uid, entry.devices.clone(), sharing)
}

pub use testkit::random::Random;
