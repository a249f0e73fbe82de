//! [`JournalPreparer`]: the [`ClaimPreparer`] over the prepare journal and the CDI directory.
//!
//! Prepare of a batch: every claim is checked (its handle is our data, for this claim and this
//! node, or its devices and shares come read from its allocation; either way they must be
//! devices of the inventory that no other claim holds beyond what sharing allows, and shares of
//! a device never meet a claim holding it whole: [`super::fit`]),
//! then one journal transaction records `PrepareStarted` for all new claims, their CDI files are
//! written, and one transaction records them `Prepared` (or drops the ones whose file failed).
//! Unprepare records `UnprepareStarted`, removes the files and drops the entries. Batches run one
//! at a time. [`JournalPreparer::recover`] settles what a crash left half done.
//!
//! A crash test freezes the process between two durable steps at the failpoints
//! (`dra_allocator::failpoint`, compiled in with this crate's `failpoints` feature):
//! `node_after_prepare_started`, `node_cdi_before_rename` (in [`CdiDir::write`]),
//! `node_after_cdi_write` (all files of the batch), `node_after_prepared`,
//! `node_after_unprepare_started` and `node_after_cdi_remove`.

use dra_runtime::lock::{LockExt, RwLockExt};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock};

use dra_allocator::handle::{HandleData, HandleSharing};

use super::fit::{blocker, Want};
use super::{AllocatedClaim, ClaimPreparer, ClaimRequest, PrepareError, Recovery};
use crate::cdi::env::unconfined_mig_partition;
use crate::cdi::CdiDir;
use crate::device::{DeviceShare, Inventory, NodeDevice};
use crate::journal::{Entry, EntrySharing, EntryState, Journal, JournalError};

/// The largest resource handle data the API server stores (`ResourceHandleDataMaxSize`).
pub const MAX_HANDLE_BYTES: usize = 16 * 1024;

/// Where the kernel tells the current boot.
const BOOT_ID_FILE: &str = "/proc/sys/kernel/random/boot_id";

/// What failed while recovering at start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecoverError {
    /// The journal could not be read or written.
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// A CDI file could not be written, removed or listed.
    #[error("CDI spec of claim {uid}: {source}")]
    Cdi {
        /// The claim UID (empty for the directory listing).
        uid: String,
        /// The file system's error.
        #[source]
        source: std::io::Error,
    },
}

/// Prepares claims through the journal and the CDI directory.
pub struct JournalPreparer {
    journal: Journal,
    cdi: CdiDir,
    node: String,
    inventory: Arc<RwLock<Inventory>>,
    boot_id: String,
    batch: Mutex<()>,
}

impl std::fmt::Debug for JournalPreparer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JournalPreparer")
            .field("journal", &self.journal.path())
            .field("cdi", &self.cdi.dir())
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

/// One claim's answer to a prepare: its CDI IDs or its error.
type CdiIds = Result<Vec<String>, PrepareError>;

/// What one claim of a prepare batch wants, however the kubelet named it: its devices on this
/// node, its sharing, and how a refusal of its allocation reads.
struct Wanted<'a> {
    uid: &'a str,
    namespace: &'a str,
    name: &'a str,
    devices: Vec<String>,
    sharing: EntrySharing,
    shares: Vec<DeviceShare>,
    refuse: fn(&str, String) -> PrepareError,
}

/// A refusal of a claim's resource handle (the 1.30 path).
fn handle_error(uid: &str, reason: String) -> PrepareError {
    PrepareError::Handle {
        uid: uid.to_owned(),
        reason,
    }
}

/// A refusal of a claim's allocation as read from the API server (the v1 path).
fn allocation_error(uid: &str, reason: String) -> PrepareError {
    PrepareError::Allocation {
        uid: uid.to_owned(),
        reason,
    }
}

/// What the checks decided for one claim of a prepare batch.
enum Plan {
    /// Already prepared: these CDI IDs.
    Done(Vec<String>),
    /// To prepare with this entry.
    New(Entry),
}

fn sharing(handle: HandleSharing) -> EntrySharing {
    match handle {
        HandleSharing::Exclusive => EntrySharing::Exclusive,
        HandleSharing::Shared { max_consumers } => EntrySharing::Shared(max_consumers),
    }
}

/// The share IDs of `shares` as a refusal names them (` (shares a, b)`), nothing without any.
fn share_ids(shares: &[DeviceShare]) -> String {
    if shares.is_empty() {
        return String::new();
    }
    let ids: Vec<&str> = shares.iter().map(|s| s.share_id.as_str()).collect();
    format!(" (shares {})", ids.join(", "))
}

fn journal_error(uid: &str, error: &JournalError) -> PrepareError {
    PrepareError::Journal {
        uid: uid.to_owned(),
        source: error.to_string().into(),
    }
}

/// The answer to a batch whose journal could not be read: every claim fails with that error.
fn all_failed<T>(
    claims: &[ClaimRequest],
    error: &JournalError,
) -> Vec<(String, Result<T, PrepareError>)> {
    claims
        .iter()
        .map(|c| (c.uid.clone(), Err(journal_error(&c.uid, error))))
        .collect()
}

impl JournalPreparer {
    /// The preparer of node `node` over `journal`, writing specs into `cdi`, checking handles
    /// against `inventory`; `boot_id` is the current boot ([`JournalPreparer::current_boot_id`]).
    pub fn new(
        journal: Journal,
        cdi: CdiDir,
        node: &str,
        inventory: Arc<RwLock<Inventory>>,
        boot_id: &str,
    ) -> Self {
        JournalPreparer {
            journal,
            cdi,
            node: node.to_owned(),
            inventory,
            boot_id: boot_id.to_owned(),
            batch: Mutex::new(()),
        }
    }

    /// The kernel's boot ID, or `unknown` where there is none.
    pub fn current_boot_id() -> String {
        std::fs::read_to_string(BOOT_ID_FILE)
            .map_or_else(|_| "unknown".to_owned(), |s| s.trim().to_owned())
    }

    /// Every journal entry by claim UID.
    pub fn entries(&self) -> Result<BTreeMap<String, Entry>, JournalError> {
        self.journal.entries()
    }

    fn devices_of(&self, names: &[String]) -> Vec<NodeDevice> {
        let inventory = self.inventory.read_or_recover();
        names
            .iter()
            .map(|name| {
                inventory.get(name).cloned().unwrap_or_else(|| NodeDevice {
                    name: name.clone(),
                    ..NodeDevice::default()
                })
            })
            .collect()
    }

    /// Writes the spec of claim `uid` as its `entry` says.
    fn write_spec(&self, uid: &str, entry: &Entry) -> std::io::Result<()> {
        let devices = self.devices_of(&entry.devices);
        let refs: Vec<&NodeDevice> = devices.iter().collect();
        self.cdi
            .write(uid, &self.cdi.spec(uid, &refs, &entry.shares))
    }

    /// Settles every half-done entry and removes CDI files of ours without an entry.
    pub fn recover(&self) -> Result<Recovery, RecoverError> {
        let _batch = self.batch.lock_or_recover();
        let cdi_error = |uid: &str| {
            let uid = uid.to_owned();
            move |source| RecoverError::Cdi { uid, source }
        };
        let mut report = Recovery::default();
        let entries = self.journal.entries()?;
        let mut drop = Vec::new();
        for (uid, entry) in &entries {
            match entry.state {
                EntryState::PrepareStarted => {
                    self.cdi.remove_all_of(uid).map_err(cdi_error(uid))?;
                    drop.push(uid.as_str());
                    report.rolled_back.push(uid.clone());
                }
                EntryState::UnprepareStarted => {
                    self.cdi.remove_all_of(uid).map_err(cdi_error(uid))?;
                    drop.push(uid.as_str());
                    report.unprepared.push(uid.clone());
                }
                EntryState::Prepared if !self.cdi.exists(uid) => {
                    self.write_spec(uid, entry).map_err(cdi_error(uid))?;
                    report.rewritten.push(uid.clone());
                }
                EntryState::Prepared => {}
            }
        }
        self.journal.apply(&[], &drop)?;
        for uid in self.cdi.list().map_err(cdi_error(""))? {
            if !entries.contains_key(&uid) {
                self.cdi.remove_all_of(&uid).map_err(cdi_error(&uid))?;
                report.orphans_removed.push(uid);
            }
        }
        Ok(report)
    }

    /// What a claim of the 1.30 path wants: its handle read and checked (our data, written for
    /// this claim and this node).
    fn wanted_by_handle<'a>(&self, claim: &'a ClaimRequest) -> Result<Wanted<'a>, PrepareError> {
        let uid = claim.uid.as_str();
        if claim.resource_handle.len() > MAX_HANDLE_BYTES {
            return Err(handle_error(
                uid,
                format!(
                    "{} bytes, more than the {MAX_HANDLE_BYTES} the API server stores",
                    claim.resource_handle.len()
                ),
            ));
        }
        let data = HandleData::parse(&claim.resource_handle)
            .map_err(|e| handle_error(uid, e.to_string()))?;
        if data.claim_uid != uid {
            return Err(handle_error(
                uid,
                format!("written for claim {}", data.claim_uid),
            ));
        }
        if data.node != self.node {
            return Err(handle_error(
                uid,
                format!(
                    "allocated on node {}, this is node {}",
                    data.node, self.node
                ),
            ));
        }
        Ok(Wanted {
            uid,
            namespace: &claim.namespace,
            name: &claim.name,
            devices: data.devices,
            sharing: sharing(data.sharing),
            shares: Vec::new(),
            refuse: handle_error,
        })
    }

    /// The checks of one claim against the entries and the claims planned before it.
    fn plan(
        &self,
        wanted: Wanted<'_>,
        entries: &BTreeMap<String, Entry>,
        planned: &[(String, Entry)],
    ) -> Result<Plan, PrepareError> {
        let uid = wanted.uid;
        match entries.get(uid) {
            Some(entry)
                if entry.state == EntryState::Prepared
                    && entry.devices == wanted.devices
                    && entry.shares == wanted.shares =>
            {
                return Ok(Plan::Done(entry.cdi_ids.clone()))
            }
            Some(entry) if entry.state == EntryState::Prepared => {
                return Err((wanted.refuse)(
                    uid,
                    format!(
                        "prepared with devices {:?}{}; unprepare it first",
                        entry.devices,
                        share_ids(&entry.shares)
                    ),
                ))
            }
            Some(entry) if entry.state == EntryState::UnprepareStarted => {
                return Err((wanted.refuse)(uid, "being unprepared".to_owned()))
            }
            _ => {}
        }
        {
            let inventory = self.inventory.read_or_recover();
            if let Some(device) = wanted.devices.iter().find(|d| !inventory.contains_key(*d)) {
                return Err(PrepareError::UnknownDevice {
                    uid: uid.to_owned(),
                    device: device.clone(),
                });
            }
            if let Some(device) = wanted
                .devices
                .iter()
                .find(|d| inventory.get(*d).is_some_and(unconfined_mig_partition))
            {
                return Err(PrepareError::UnconfinedPartition {
                    uid: uid.to_owned(),
                    device: device.clone(),
                });
            }
        }
        let holders: Vec<(&str, &Entry)> = entries
            .iter()
            .chain(planned.iter().map(|(u, e)| (u, e)))
            .filter(|(u, _)| u.as_str() != uid)
            .map(|(u, e)| (u.as_str(), e))
            .collect();
        for device in &wanted.devices {
            let want = Want {
                device,
                sharing: wanted.sharing,
                by_share: wanted.shares.iter().any(|s| s.device == *device),
            };
            if let Some(holder) = blocker(want, holders.iter().copied()) {
                return Err(PrepareError::DeviceInUse {
                    uid: uid.to_owned(),
                    device: device.clone(),
                    holder: holder.to_owned(),
                });
            }
        }
        Ok(Plan::New(Entry {
            state: EntryState::PrepareStarted,
            namespace: wanted.namespace.to_owned(),
            name: wanted.name.to_owned(),
            devices: wanted.devices,
            sharing: wanted.sharing,
            cdi_ids: vec![self.cdi.device_id(uid)],
            boot_id: self.boot_id.clone(),
            shares: wanted.shares,
        }))
    }

    /// Prepares a batch of claims, each read into what it wants (or refused while read): the
    /// checks, then the journal and CDI steps for the new ones together.
    fn prepare_wanted<'a>(
        &self,
        claims: impl Iterator<Item = (&'a str, Result<Wanted<'a>, PrepareError>)>,
    ) -> Vec<(String, CdiIds)> {
        let _batch = self.batch.lock_or_recover();
        let claims: Vec<_> = claims.collect();
        let entries = match self.journal.entries() {
            Ok(entries) => entries,
            Err(e) => {
                return claims
                    .iter()
                    .map(|(uid, _)| ((*uid).to_owned(), Err(journal_error(uid, &e))))
                    .collect()
            }
        };
        let mut answers: Vec<(String, Option<CdiIds>)> = Vec::new();
        let mut planned: Vec<(String, Entry)> = Vec::new();
        for (uid, wanted) in claims {
            // One answer per claim UID: a UID repeated in the batch is prepared once.
            if answers.iter().any(|(u, _)| u == uid) {
                continue;
            }
            let answer = match wanted.and_then(|w| self.plan(w, &entries, &planned)) {
                Ok(Plan::Done(ids)) if self.cdi.exists(uid) => Some(Ok(ids)),
                Ok(Plan::Done(ids)) => Some(
                    self.write_spec(uid, &entries[uid])
                        .map(|()| ids)
                        .map_err(|source| PrepareError::Cdi {
                            uid: uid.to_owned(),
                            source,
                        }),
                ),
                Ok(Plan::New(entry)) => {
                    planned.push((uid.to_owned(), entry));
                    None
                }
                Err(e) => Some(Err(e)),
            };
            answers.push((uid.to_owned(), answer));
        }
        let mut finished = self.prepare_planned(&planned);
        answers
            .into_iter()
            .filter_map(|(uid, answer)| {
                let answer = answer.or_else(|| finished.remove(&uid))?;
                Some((uid, answer))
            })
            .collect()
    }
}

impl ClaimPreparer for JournalPreparer {
    fn prepare(&self, claims: &[ClaimRequest]) -> Vec<(String, Result<Vec<String>, PrepareError>)> {
        self.prepare_wanted(
            claims
                .iter()
                .map(|c| (c.uid.as_str(), self.wanted_by_handle(c))),
        )
    }

    fn prepare_allocated(
        &self,
        claims: &[AllocatedClaim],
    ) -> Vec<(String, Result<Vec<String>, PrepareError>)> {
        self.prepare_wanted(claims.iter().map(|c| {
            let wanted = Wanted {
                uid: &c.uid,
                namespace: &c.namespace,
                name: &c.name,
                devices: c.devices.clone(),
                sharing: if c.admin_access {
                    EntrySharing::AdminAccess
                } else {
                    sharing(c.sharing.into())
                },
                shares: c.shares.clone(),
                refuse: allocation_error,
            };
            (c.uid.as_str(), Ok(wanted))
        }))
    }

    fn unprepare(&self, claims: &[ClaimRequest]) -> Vec<(String, Result<(), PrepareError>)> {
        let _batch = self.batch.lock_or_recover();
        let entries = match self.journal.entries() {
            Ok(entries) => entries,
            Err(e) => return all_failed(claims, &e),
        };
        let mut started: Vec<(String, Entry)> = Vec::new();
        for claim in claims {
            if let Some(entry) = entries.get(&claim.uid) {
                if !started.iter().any(|(u, _)| *u == claim.uid) {
                    let mut entry = entry.clone();
                    entry.state = EntryState::UnprepareStarted;
                    started.push((claim.uid.clone(), entry));
                }
            }
        }
        let puts: Vec<(&str, &Entry)> = started.iter().map(|(u, e)| (u.as_str(), e)).collect();
        if let Err(e) = self.journal.apply(&puts, &[]) {
            return claims
                .iter()
                .map(|c| {
                    let answer = if entries.contains_key(&c.uid) {
                        Err(journal_error(&c.uid, &e))
                    } else {
                        Ok(())
                    };
                    (c.uid.clone(), answer)
                })
                .collect();
        }
        if !started.is_empty() {
            dra_allocator::failpoint::hit("node_after_unprepare_started");
        }
        let mut failed: BTreeMap<String, std::io::Error> = BTreeMap::new();
        let mut removed = Vec::new();
        for (uid, _) in &started {
            match self.cdi.remove_all_of(uid) {
                Ok(()) => removed.push(uid.as_str()),
                Err(e) => {
                    failed.insert(uid.clone(), e);
                }
            }
        }
        if !started.is_empty() {
            dra_allocator::failpoint::hit("node_after_cdi_remove");
        }
        let dropped = self.journal.apply(&[], &removed);
        claims
            .iter()
            .map(|c| {
                let answer = if let Some(source) = failed.remove(&c.uid) {
                    Err(PrepareError::Cdi {
                        uid: c.uid.clone(),
                        source,
                    })
                } else if let (Err(e), true) = (&dropped, entries.contains_key(&c.uid)) {
                    Err(journal_error(&c.uid, e))
                } else {
                    Ok(())
                };
                (c.uid.clone(), answer)
            })
            .collect()
    }
}

impl JournalPreparer {
    /// Journals, writes and confirms the planned claims; the CDI IDs or the error text per UID.
    fn prepare_planned(
        &self,
        planned: &[(String, Entry)],
    ) -> BTreeMap<String, Result<Vec<String>, PrepareError>> {
        let mut out = BTreeMap::new();
        if planned.is_empty() {
            return out;
        }
        let puts: Vec<(&str, &Entry)> = planned.iter().map(|(u, e)| (u.as_str(), e)).collect();
        if let Err(e) = self.journal.apply(&puts, &[]) {
            for (uid, _) in planned {
                out.insert(uid.clone(), Err(journal_error(uid, &e)));
            }
            return out;
        }
        dra_allocator::failpoint::hit("node_after_prepare_started");
        let mut prepared = Vec::new();
        let mut failed = Vec::new();
        for (uid, entry) in planned {
            match self.write_spec(uid, entry) {
                Ok(()) => {
                    let mut entry = entry.clone();
                    entry.state = EntryState::Prepared;
                    prepared.push((uid.clone(), entry));
                }
                Err(e) => {
                    let _ = self.cdi.remove_all_of(uid);
                    failed.push(uid.as_str());
                    out.insert(
                        uid.clone(),
                        Err(PrepareError::Cdi {
                            uid: uid.clone(),
                            source: e,
                        }),
                    );
                }
            }
        }
        dra_allocator::failpoint::hit("node_after_cdi_write");
        let puts: Vec<(&str, &Entry)> = prepared.iter().map(|(u, e)| (u.as_str(), e)).collect();
        match self.journal.apply(&puts, &failed) {
            Ok(()) => {
                dra_allocator::failpoint::hit("node_after_prepared");
                for (uid, entry) in prepared {
                    out.insert(uid, Ok(entry.cdi_ids));
                }
            }
            Err(e) => {
                for (uid, _) in prepared {
                    let error = journal_error(&uid, &e);
                    out.insert(uid, Err(error));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests;
