//! Prepare and unprepare of a batch of claims, the contract the gRPC service calls: one answer
//! per claim UID, an error on one claim never failing the batch.

/// One claim of a kubelet request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClaimRequest {
    /// The claim's UID, the key of everything the agent keeps.
    pub uid: String,
    /// The claim's namespace.
    pub namespace: String,
    /// The claim's name.
    pub name: String,
    /// The resource handle data the controller wrote (`dra_allocator::handle::HandleData` as
    /// JSON); empty in an unprepare request of a kubelet that no longer has it.
    pub resource_handle: String,
}

/// Why one claim could not be prepared or unprepared; the text goes to the kubelet, which puts it
/// in the pod's `FailedPrepareDynamicResources` event, so it names the claim and what is wrong.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PrepareError {
    /// The resource handle is not this driver's handle data, or names another claim or node.
    #[error("claim {uid}: resource handle: {reason}")]
    Handle {
        /// The claim UID.
        uid: String,
        /// What is wrong with the handle.
        reason: String,
    },
    /// The handle names a device this node does not have.
    #[error("claim {uid}: device {device} is not on this node")]
    UnknownDevice {
        /// The claim UID.
        uid: String,
        /// The device name.
        device: String,
    },
    /// A device of the handle is prepared for other claims and cannot be shared with this one.
    #[error("claim {uid}: device {device} is prepared for claim {holder}")]
    DeviceInUse {
        /// The claim UID.
        uid: String,
        /// The device name.
        device: String,
        /// A claim the device is prepared for.
        holder: String,
    },
    /// The journal could not record the step.
    #[error("claim {uid}: prepare journal: {source}")]
    Journal {
        /// The claim UID.
        uid: String,
        /// The journal's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The CDI spec could not be written or removed.
    #[error("claim {uid}: CDI spec: {source}")]
    Cdi {
        /// The claim UID.
        uid: String,
        /// The file system's error.
        #[source]
        source: std::io::Error,
    },
}

/// Prepares and unprepares claims on this node. Calls block (they commit to disk); the gRPC
/// service runs them off the async runtime.
pub trait ClaimPreparer: Send + Sync + 'static {
    /// Prepares every claim of `claims`; for each claim UID, the fully qualified CDI device IDs
    /// (`vendor/class=name`) or the error of that claim. Idempotent per claim UID.
    fn prepare(&self, claims: &[ClaimRequest]) -> Vec<(String, Result<Vec<String>, PrepareError>)>;

    /// Unprepares every claim of `claims`; for each claim UID, success or the error of that
    /// claim. An unknown claim UID is success.
    fn unprepare(&self, claims: &[ClaimRequest]) -> Vec<(String, Result<(), PrepareError>)>;
}

/// What a start found half done and how it was settled.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovery {
    /// `PrepareStarted` entries rolled back (their CDI file removed); the kubelet prepares them
    /// again.
    pub rolled_back: Vec<String>,
    /// `UnprepareStarted` entries completed.
    pub unprepared: Vec<String>,
    /// `Prepared` entries whose CDI file was missing (a reboot emptied the directory) and was
    /// written again.
    pub rewritten: Vec<String>,
    /// CDI files of ours without a journal entry, removed.
    pub orphans_removed: Vec<String>,
}

mod journal_preparer;

pub use journal_preparer::{JournalPreparer, RecoverError, MAX_HANDLE_BYTES};
