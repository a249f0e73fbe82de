//! Prepare and unprepare of a batch of claims, the contract the gRPC services call: one answer
//! per claim UID, an error on one claim never failing the batch. A claim comes either with the
//! controller's resource handle (Kubernetes 1.30, [`ClaimRequest`]) or with the devices its
//! allocation names on this node already read from the API server (Kubernetes 1.34+,
//! [`AllocatedClaim`]); both are prepared the same way.

use dra_allocator::model::Sharing;

use crate::device::DeviceShare;

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

/// One claim of a v1 kubelet request, its devices read from the claim's allocation
/// (`status.allocation.devices.results` of this driver on this node).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AllocatedClaim {
    /// The claim's UID.
    pub uid: String,
    /// The claim's namespace.
    pub namespace: String,
    /// The claim's name.
    pub name: String,
    /// The devices of this node allocated to the claim, each once.
    pub devices: Vec<String>,
    /// The shares of `devices` allocated to the claim (devices allocated to several claims at
    /// once); a device without one the claim holds whole.
    pub shares: Vec<DeviceShare>,
    /// How the claim holds its whole devices, from its opaque configuration.
    pub sharing: Sharing,
    /// Admin access (KEP 5018): the devices are prepared whoever else holds them, and the claim
    /// keeps no other claim from them; `sharing` does not apply.
    pub admin_access: bool,
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
    /// The claim's allocation cannot be prepared as it stands (it differs from what is prepared
    /// for the claim, or the claim is being unprepared).
    #[error("claim {uid}: allocation: {reason}")]
    Allocation {
        /// The claim UID.
        uid: String,
        /// What is wrong.
        reason: String,
    },
    /// The claim names a device this node does not have.
    #[error("claim {uid}: device {device} is not on this node")]
    UnknownDevice {
        /// The claim UID.
        uid: String,
        /// The device name.
        device: String,
    },
    /// The claim names a MIG partition for which no MIG device exists, so a container could not
    /// be confined to it (it would see the whole GPU).
    #[error(
        "claim {uid}: device {device} is a MIG partition with no MIG device: a container would \
         see the whole GPU; create the MIG instance (or give the partition's MIG UUID in a file \
         inventory) before using it"
    )]
    UnconfinedPartition {
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

    /// Prepares every claim of `claims` with the devices and sharing it carries, the same way as
    /// [`ClaimPreparer::prepare`] once a handle is read. Idempotent per claim UID.
    fn prepare_allocated(
        &self,
        claims: &[AllocatedClaim],
    ) -> Vec<(String, Result<Vec<String>, PrepareError>)>;

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

mod fit;
mod journal_preparer;

pub use journal_preparer::{JournalPreparer, RecoverError, MAX_HANDLE_BYTES};
