//! What must hold after every kill, once the parent has recovered the directory as the agent does
//! at start: every entry `Prepared` with its CDI file (whole, naming the entry's devices), no file
//! of ours (spec or temporary) without an entry, other vendors' files untouched, no device of an
//! exclusive claim held by another claim, no shared device over `maxConsumers`, no device held
//! both whole and by shares, every
//! acknowledged prepare present with its devices and CDI IDs, every acknowledged unprepare gone.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use dra_node::journal::{Entry, EntrySharing, EntryState};
use dra_node::prepare::Recovery;

use crate::acks::Acknowledged;
use crate::setup::{self, DRIVER};

/// Spec files of other vendors, placed in the CDI directory before the first child: names close
/// to ours that recovery must leave alone.
const FOREIGN: [&str; 3] = [
    "nvidia.com-gpu.yaml",
    "other.example.com-claim_u1.json",
    "gpu.dra-ledger.io.example-claim_u2.json",
];

/// The other vendors' files with their contents.
pub struct Foreign(Vec<(PathBuf, Vec<u8>)>);

impl Foreign {
    /// Writes the other vendors' files into the CDI directory under `root`.
    pub fn place(root: &Path) -> Foreign {
        let dir = setup::cdi_dir(root).dir().to_owned();
        let files = FOREIGN
            .iter()
            .map(|name| {
                let path = dir.join(name);
                let text = format!("{{\"cdiVersion\":\"0.3.0\",\"kind\":\"{name}/x\"}}\n");
                std::fs::write(&path, &text).unwrap();
                (path, text.into_bytes())
            })
            .collect();
        Foreign(files)
    }

    fn contains(&self, path: &Path) -> bool {
        self.0.iter().any(|(p, _)| p == path)
    }

    fn assert_untouched(&self, kill: &str) {
        for (path, contents) in &self.0 {
            let now = std::fs::read(path)
                .unwrap_or_else(|e| panic!("{kill}: {} is gone: {e}", path.display()));
            assert!(&now == contents, "{kill}: {} changed", path.display());
        }
    }
}

/// Recovers the directory under `root` and checks it; `kill` names the kill in failures. Returns
/// what recovery settled.
pub fn recover_and_check(
    root: &Path,
    kill: &str,
    acks: &Acknowledged,
    foreign: &Foreign,
) -> Recovery {
    let preparer = setup::open(root);
    let recovery = preparer
        .recover()
        .unwrap_or_else(|e| panic!("{kill}: recovery failed: {e}"));
    assert!(
        recovery.rewritten.is_empty(),
        "{kill}: Prepared entries without their CDI file: {:?}",
        recovery.rewritten
    );
    let again = preparer.recover().unwrap();
    assert_eq!(
        again,
        Recovery::default(),
        "{kill}: a second recovery found work"
    );
    let entries = preparer.entries().unwrap();
    drop(preparer);
    check_files(root, kill, &entries, foreign);
    check_sharing(kill, &entries);
    check_acknowledged(kill, &entries, acks);
    recovery
}

fn check_files(root: &Path, kill: &str, entries: &BTreeMap<String, Entry>, foreign: &Foreign) {
    let cdi = setup::cdi_dir(root);
    for (uid, entry) in entries {
        assert_eq!(entry.state, EntryState::Prepared, "{kill}: claim {uid}");
        assert_eq!(entry.cdi_ids, [cdi.device_id(uid)], "{kill}: claim {uid}");
        let text = std::fs::read_to_string(cdi.file(uid))
            .unwrap_or_else(|e| panic!("{kill}: the CDI file of {uid}: {e}"));
        let spec: serde_json::Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{kill}: the CDI file of {uid} is torn: {e}\n{text}"));
        assert_eq!(spec["kind"], format!("{DRIVER}/claim"), "{kill}: {uid}");
        assert_eq!(spec["devices"][0]["name"], uid.as_str(), "{kill}: {uid}");
        let devices = format!("DRA_LEDGER_DEVICES={}", entry.devices.join(","));
        let env = &spec["devices"][0]["containerEdits"]["env"];
        assert!(
            env.as_array()
                .is_some_and(|env| env.iter().any(|e| *e == devices.as_str())),
            "{kill}: the CDI file of {uid} does not name {:?}: {text}",
            entry.devices
        );
    }
    for file in std::fs::read_dir(cdi.dir()).unwrap() {
        let path = file.unwrap().path();
        if foreign.contains(&path) {
            continue;
        }
        let ours = entries.keys().any(|uid| cdi.file(uid) == path);
        assert!(ours, "{kill}: {} has no journal entry", path.display());
    }
    foreign.assert_untouched(kill);
}

fn check_sharing(kill: &str, entries: &BTreeMap<String, Entry>) {
    let mut holders: BTreeMap<&str, Vec<(&str, EntrySharing)>> = BTreeMap::new();
    let mut shared: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (uid, entry) in entries {
        // Admin access holds a device from no one.
        let counted = entry.sharing != EntrySharing::AdminAccess;
        for share in entry.shares.iter().filter(|_| counted) {
            shared.entry(&share.device).or_default().push(uid);
        }
        let whole = entry
            .devices
            .iter()
            .filter(|d| !entry.shares.iter().any(|s| s.device == **d));
        for device in whole.filter(|_| counted) {
            holders
                .entry(device)
                .or_default()
                .push((uid, entry.sharing));
        }
    }
    for (device, claims) in &shared {
        assert!(
            !holders.contains_key(device),
            "{kill}: device {device} is held by shares {claims:?} and whole by {:?}",
            holders[device]
        );
    }
    for (device, claims) in &holders {
        let mut limit = usize::MAX;
        for (_, sharing) in claims {
            limit = limit.min(match sharing {
                EntrySharing::Exclusive => 1,
                EntrySharing::Shared(max) => *max as usize,
                EntrySharing::AdminAccess => usize::MAX,
            });
        }
        assert!(
            claims.len() <= limit,
            "{kill}: device {device} is held beyond its sharing: {claims:?}"
        );
    }
}

fn check_acknowledged(kill: &str, entries: &BTreeMap<String, Entry>, acks: &Acknowledged) {
    for (uid, held) in &acks.held {
        let entry = entries
            .get(uid)
            .unwrap_or_else(|| panic!("{kill}: the acknowledged prepare of {uid} is lost"));
        assert_eq!(entry.devices, held.devices, "{kill}: devices of {uid}");
        assert_eq!(entry.cdi_ids, held.cdi_ids, "{kill}: CDI IDs of {uid}");
    }
    for uid in &acks.gone {
        assert!(
            !entries.contains_key(uid),
            "{kill}: the acknowledged unprepare of {uid} is undone"
        );
    }
}
