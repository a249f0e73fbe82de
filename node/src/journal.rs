//! The prepare journal: the agent's durable record of what it prepared, in its own redb file
//! under `--state-dir`, keyed by claim UID, and the shares of devices that claims hold beside
//! other claims keyed by claim UID and share ID. An entry goes `PrepareStarted` (written before any
//! side effect) -> `Prepared` (the CDI file is written) -> `UnprepareStarted` (before the CDI file
//! is removed) -> gone, so that after a crash at any point the next start can finish or roll
//! back what was half done (`prepare::JournalPreparer::recover`).
//!
//! Records are postcard with a versioned type name (the ledger's `Stored` codec); a `meta`
//! table holds the schema version and the driver name. A file of a newer schema or of another
//! driver is refused before anything is written, so it stays byte-identical. Every write is one
//! durable transaction (a batch of claims shares it). Owns storage only: no CDI, no checks.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use dra_allocator::ledger::tables::{Record, Stored};
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition, TableError};
use serde::{Deserialize, Serialize};

use crate::device::DeviceShare;

/// The newest schema version this build reads and writes. Version 2 added
/// [`EntrySharing::AdminAccess`], version 3 the `shares` table. A file stays at version 1 (what
/// an older release reads) until the transaction that writes its first entry needing more
/// records the version that entry needs with it, so an agent rolled back to an older release
/// keeps its journal unless admin access or shares were used, and refuses a newer file rather
/// than misreading it.
pub const SCHEMA_VERSION: u32 = 3;
/// The version of a file without admin-access entries or shares.
const BASE_VERSION: u32 = 1;
/// The version a file needs once it holds an admin-access entry.
const ADMIN_ACCESS_VERSION: u32 = 2;
/// The version a file needs once it holds a share.
const SHARES_VERSION: u32 = 3;

/// Schema version and driver name, in the ledger's frozen `meta` format (so that
/// `dra_migrations::inspect` reads it). Invariant: written in the file's first transaction.
const META: TableDefinition<&str, &[u8]> = dra_migrations::META;
/// Entries keyed by claim UID. Invariant: at most one entry per claim; a `Prepared` entry's CDI
/// file was written and synced before the entry was.
const ENTRIES: TableDefinition<&str, Stored<Entry>> = TableDefinition::new("entries");
/// The shares a claim holds, keyed by claim UID and share ID (schema version 3; the table
/// exists from the first share on). Invariant: every row's claim has an entry in `entries`,
/// whose `devices` name the row's device; rows are written and removed in the transactions that
/// write and remove their claim's entry.
const SHARES: TableDefinition<(&str, &str), Stored<ShareRecord>> = TableDefinition::new("shares");

const VERSION_KEY: &str = dra_migrations::SCHEMA_VERSION_KEY;
const DRIVER_KEY: &str = dra_migrations::DRIVER_NAME_KEY;

/// Where a claim is in its prepare and unprepare.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum EntryState {
    /// Recorded before the CDI file is written; the claim is not usable yet.
    PrepareStarted,
    /// The CDI file is written; the kubelet has (or will get) the CDI IDs.
    Prepared,
    /// Recorded before the CDI file is removed.
    UnprepareStarted,
}

/// How a claim holds its devices, as its handle said.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum EntrySharing {
    /// Alone.
    Exclusive,
    /// With at most this many claims per device.
    Shared(u32),
    /// With admin access (schema version 2): beside any other claim, and in no one's way.
    AdminAccess,
}

/// One claim's journal entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The step the claim is at.
    pub state: EntryState,
    /// The claim's namespace.
    pub namespace: String,
    /// The claim's name.
    pub name: String,
    /// The devices of this node the claim holds.
    pub devices: Vec<String>,
    /// How it holds them.
    pub sharing: EntrySharing,
    /// The CDI device IDs handed to the kubelet.
    pub cdi_ids: Vec<String>,
    /// The boot the CDI file was written in (the CDI directory is often tmpfs).
    pub boot_id: String,
    /// The shares of devices the claim holds beside other claims, in `devices` order; its
    /// other devices it holds whole. Stored in the `shares` table, not in the entry's record,
    /// so that the record stays what version 1 reads.
    #[serde(skip)]
    pub shares: Vec<DeviceShare>,
}

impl Record for Entry {
    const TYPE_NAME: &'static str = "dra_node::PrepareEntry@v1";
}

/// One row of the `shares` table: the device shared and what the share consumes of it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct ShareRecord {
    device: String,
    consumed: BTreeMap<String, String>,
}

impl Record for ShareRecord {
    const TYPE_NAME: &'static str = "dra_node::PrepareShare@v1";
}

/// What failed in the journal.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JournalError {
    /// The file could not be opened: corrupt, truncated, or not a redb file.
    #[error("open prepare journal {path}: {source}")]
    Open {
        /// The file.
        path: PathBuf,
        /// redb's error.
        #[source]
        source: redb::DatabaseError,
    },
    /// The file was written by a newer release.
    #[error("prepare journal {path} has schema version {found}, newer than {SCHEMA_VERSION} which this release reads; it was left unchanged")]
    NewerSchema {
        /// The file.
        path: PathBuf,
        /// Its schema version.
        found: u32,
    },
    /// The file belongs to another driver.
    #[error(
        "prepare journal {path} belongs to driver {found}, not {expected}; it was left unchanged"
    )]
    OtherDriver {
        /// The file.
        path: PathBuf,
        /// Its driver.
        found: String,
        /// Ours.
        expected: String,
    },
    /// An existing file could not be read: empty, truncated, corrupt, or without its meta table.
    #[error("prepare journal {path} cannot be read; it was left unchanged: {source}")]
    Inspect {
        /// The file.
        path: PathBuf,
        /// What the inspection found.
        #[source]
        source: dra_migrations::MigrationError,
    },
    /// A stored entry does not decode.
    #[error("prepare journal entry of claim {uid} does not decode: {reason}")]
    Undecodable {
        /// The claim UID.
        uid: String,
        /// The codec's error.
        reason: String,
    },
    /// A transaction failed.
    #[error("prepare journal: {0}")]
    Storage(#[source] Box<redb::Error>),
}

fn storage(error: impl Into<redb::Error>) -> JournalError {
    JournalError::Storage(Box::new(error.into()))
}

/// Result alias of the journal.
pub type Result<T, E = JournalError> = std::result::Result<T, E>;

/// The open journal.
#[derive(Debug)]
pub struct Journal {
    db: Database,
    path: PathBuf,
}

impl Journal {
    /// Opens (or creates) the journal at `path` for `driver`. An existing file is inspected
    /// from an in-memory copy first, so that a file this release must refuse is never written.
    pub fn open(path: impl AsRef<Path>, driver: &str) -> Result<Journal> {
        let path = path.as_ref().to_owned();
        let exists = path.exists();
        if exists {
            let info = dra_migrations::inspect(&path).map_err(|source| JournalError::Inspect {
                path: path.clone(),
                source,
            })?;
            if info.schema_version > SCHEMA_VERSION {
                return Err(JournalError::NewerSchema {
                    path,
                    found: info.schema_version,
                });
            }
            if info.driver_name != driver {
                return Err(JournalError::OtherDriver {
                    path,
                    found: info.driver_name,
                    expected: driver.to_owned(),
                });
            }
        }
        let db = Database::create(&path).map_err(|source| JournalError::Open {
            path: path.clone(),
            source,
        })?;
        let journal = Journal { db, path };
        if !exists {
            journal.initialize(driver)?;
        }
        Ok(journal)
    }

    /// The version the file records, as of `txn`.
    fn recorded_version(txn: &redb::WriteTransaction) -> Result<Option<u32>> {
        let meta = txn.open_table(META).map_err(storage)?;
        let found = meta
            .get(VERSION_KEY)
            .map_err(storage)?
            .and_then(|v| <[u8; 4]>::try_from(v.value()).ok())
            .map(u32::from_be_bytes);
        Ok(found)
    }

    /// Raises the file's recorded version to `needed` within `txn`, where it is lower.
    fn require_version(txn: &redb::WriteTransaction, needed: u32) -> Result<()> {
        if Self::recorded_version(txn)?.is_none_or(|found| found < needed) {
            let mut meta = txn.open_table(META).map_err(storage)?;
            meta.insert(VERSION_KEY, needed.to_be_bytes().as_slice())
                .map_err(storage)?;
        }
        Ok(())
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn initialize(&self, driver: &str) -> Result<()> {
        let txn = self.db.begin_write().map_err(storage)?;
        {
            let mut meta = txn.open_table(META).map_err(storage)?;
            meta.insert(VERSION_KEY, BASE_VERSION.to_be_bytes().as_slice())
                .map_err(storage)?;
            meta.insert(DRIVER_KEY, driver.as_bytes())
                .map_err(storage)?;
            txn.open_table(ENTRIES).map_err(storage)?;
        }
        txn.commit().map_err(storage)
    }

    /// Every entry by claim UID, each with its shares.
    pub fn entries(&self) -> Result<BTreeMap<String, Entry>> {
        let txn = self.db.begin_read().map_err(storage)?;
        let table = txn.open_table(ENTRIES).map_err(storage)?;
        let mut out = BTreeMap::new();
        for item in table.iter().map_err(storage)? {
            let (key, value) = item.map_err(storage)?;
            let uid = key.value().to_owned();
            let entry = value.value().map_err(|u| JournalError::Undecodable {
                uid: uid.clone(),
                reason: u.reason,
            })?;
            out.insert(uid, entry);
        }
        let shares = match txn.open_table(SHARES) {
            Ok(shares) => shares,
            Err(TableError::TableDoesNotExist(_)) => return Ok(out),
            Err(e) => return Err(storage(e)),
        };
        for item in shares.iter().map_err(storage)? {
            let (key, value) = item.map_err(storage)?;
            let (uid, share_id) = key.value();
            let record = value.value().map_err(|u| JournalError::Undecodable {
                uid: uid.to_owned(),
                reason: u.reason,
            })?;
            if let Some(entry) = out.get_mut(uid) {
                entry.shares.push(DeviceShare {
                    device: record.device,
                    share_id: share_id.to_owned(),
                    consumed: record.consumed,
                });
            }
        }
        for entry in out.values_mut() {
            let devices = &entry.devices;
            entry
                .shares
                .sort_by_key(|s| devices.iter().position(|d| *d == s.device));
        }
        Ok(out)
    }

    /// Writes every entry of `put` and removes every UID of `remove`, in one durable transaction.
    pub fn apply(&self, put: &[(&str, &Entry)], remove: &[&str]) -> Result<()> {
        if put.is_empty() && remove.is_empty() {
            return Ok(());
        }
        let txn = self.db.begin_write().map_err(storage)?;
        if put
            .iter()
            .any(|(_, entry)| entry.sharing == EntrySharing::AdminAccess)
        {
            Self::require_version(&txn, ADMIN_ACCESS_VERSION)?;
        }
        if put.iter().any(|(_, entry)| !entry.shares.is_empty()) {
            Self::require_version(&txn, SHARES_VERSION)?;
        }
        {
            let mut table = txn.open_table(ENTRIES).map_err(storage)?;
            for (uid, entry) in put {
                table.insert(*uid, Ok((*entry).clone())).map_err(storage)?;
            }
            for uid in remove {
                table.remove(*uid).map_err(storage)?;
            }
        }
        if Self::recorded_version(&txn)?.is_some_and(|v| v >= SHARES_VERSION) {
            let mut shares = txn.open_table(SHARES).map_err(storage)?;
            for uid in put
                .iter()
                .map(|(uid, _)| *uid)
                .chain(remove.iter().copied())
            {
                remove_shares_of(&mut shares, uid)?;
            }
            for (uid, entry) in put {
                for share in &entry.shares {
                    let record = ShareRecord {
                        device: share.device.clone(),
                        consumed: share.consumed.clone(),
                    };
                    shares
                        .insert((*uid, share.share_id.as_str()), Ok(record))
                        .map_err(storage)?;
                }
            }
        }
        txn.commit().map_err(storage)
    }
}

/// Removes every share of claim `uid` from `shares`.
fn remove_shares_of(
    shares: &mut redb::Table<'_, (&'static str, &'static str), Stored<ShareRecord>>,
    uid: &str,
) -> Result<()> {
    let mut ids = Vec::new();
    for item in shares.range((uid, "")..).map_err(storage)? {
        let (key, _) = item.map_err(storage)?;
        let (owner, id) = key.value();
        if owner != uid {
            break;
        }
        ids.push(id.to_owned());
    }
    for id in ids {
        shares.remove((uid, id.as_str())).map_err(storage)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
