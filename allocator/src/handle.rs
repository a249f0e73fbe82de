//! The data of this driver's resource handle, the contract between the controller that writes it
//! into a claim's allocation and the node agent that prepares the devices it names: JSON
//! `{"node", "devices", "sharing", "claimUID"}` (an example is in `docs/driver.md`, "Allocation
//! result"). Parsing checks every field; malformed data is an error, never a panic.
//!
//! Pure data; no I/O.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::model::Sharing;

/// What is wrong with a claim's resource handle or its data.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HandleDataError {
    /// The data is not JSON of the expected shape.
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    /// `sharing.maxConsumers` given with mode `Exclusive`.
    #[error("maxConsumers is only allowed with mode Shared")]
    MaxConsumersWithExclusive,
    /// Mode `Shared` without `sharing.maxConsumers`.
    #[error("missing field `maxConsumers`")]
    MissingMaxConsumers,
    /// A sharing mode other than `Exclusive` or `Shared`.
    #[error("unknown variant `{0}`, expected `Exclusive` or `Shared`")]
    UnknownSharingMode(String),
    /// `node` is empty.
    #[error("node is empty")]
    EmptyNode,
    /// `claimUID` is empty.
    #[error("claimUID is empty")]
    EmptyClaimUid,
    /// `devices` is empty.
    #[error("devices is empty")]
    NoDevices,
    /// A device name is empty or repeated.
    #[error("device {0:?} is empty or listed twice")]
    BadDevice(String),
    /// `sharing.maxConsumers` is 0.
    #[error("sharing.maxConsumers must be at least 1")]
    ZeroMaxConsumers,
    /// The claim's allocation has not exactly one resource handle of the driver.
    #[error("expected one resource handle of driver {driver}, found {found}")]
    HandleCount {
        /// The driver name.
        driver: String,
        /// How many handles of the driver the allocation has.
        found: usize,
    },
    /// The driver's resource handle has no data.
    #[error("resource handle has no data")]
    NoData,
    /// The data names another claim.
    #[error("claimUID {data} does not match the claim's UID {claim}")]
    ClaimUidMismatch {
        /// The UID in the data.
        data: String,
        /// The claim's own UID.
        claim: String,
    },
}

/// Device sharing as written in the handle data: `{"mode": "Exclusive"}` or
/// `{"mode": "Shared", "maxConsumers": 4}` (the shape of the parameter objects). Any other
/// field, or `maxConsumers` with `Exclusive`, is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mode", try_from = "SharingText")]
pub enum HandleSharing {
    /// The claim holds its devices alone.
    Exclusive,
    /// Up to `maxConsumers` claims share each device.
    #[serde(rename_all = "camelCase")]
    Shared {
        /// How many claims may share one device.
        max_consumers: u32,
    },
}

/// The sharing object as read, before its fields are checked together. A derived internally
/// tagged enum would take `{"mode": "Exclusive", "maxConsumers": 4}` and unknown fields next to
/// a unit variant without complaint.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SharingText {
    mode: String,
    max_consumers: Option<u32>,
}

impl TryFrom<SharingText> for HandleSharing {
    type Error = HandleDataError;

    fn try_from(text: SharingText) -> Result<Self, HandleDataError> {
        match (text.mode.as_str(), text.max_consumers) {
            ("Exclusive", None) => Ok(HandleSharing::Exclusive),
            ("Exclusive", Some(_)) => Err(HandleDataError::MaxConsumersWithExclusive),
            ("Shared", Some(max_consumers)) => Ok(HandleSharing::Shared { max_consumers }),
            ("Shared", None) => Err(HandleDataError::MissingMaxConsumers),
            (other, _) => Err(HandleDataError::UnknownSharingMode(other.to_owned())),
        }
    }
}

impl From<Sharing> for HandleSharing {
    fn from(sharing: Sharing) -> Self {
        match sharing {
            Sharing::Exclusive => HandleSharing::Exclusive,
            Sharing::Shared { max_consumers } => HandleSharing::Shared { max_consumers },
        }
    }
}

impl From<HandleSharing> for Sharing {
    fn from(sharing: HandleSharing) -> Self {
        match sharing {
            HandleSharing::Exclusive => Sharing::Exclusive,
            HandleSharing::Shared { max_consumers } => Sharing::Shared { max_consumers },
        }
    }
}

/// The `data` of this driver's resource handle: what a node agent and a ledger rebuild read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HandleData {
    /// The node holding the devices.
    pub node: String,
    /// Device names on that node.
    pub devices: Vec<String>,
    /// How the claim holds them.
    pub sharing: HandleSharing,
    /// The UID of the claim the allocation belongs to.
    #[serde(rename = "claimUID")]
    pub claim_uid: String,
}

impl HandleData {
    /// The data as the JSON text stored in the handle.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Parses and checks handle data: a non-empty node and claim UID, at least one device, no
    /// device twice, `maxConsumers` at least 1.
    pub fn parse(text: &str) -> Result<HandleData, HandleDataError> {
        let data: HandleData = serde_json::from_str(text)?;
        if data.node.is_empty() {
            return Err(HandleDataError::EmptyNode);
        }
        if data.claim_uid.is_empty() {
            return Err(HandleDataError::EmptyClaimUid);
        }
        if data.devices.is_empty() {
            return Err(HandleDataError::NoDevices);
        }
        let mut seen = BTreeSet::new();
        if let Some(device) = data
            .devices
            .iter()
            .find(|d| d.is_empty() || !seen.insert(d.as_str()))
        {
            return Err(HandleDataError::BadDevice(device.clone()));
        }
        if data.sharing == (HandleSharing::Shared { max_consumers: 0 }) {
            return Err(HandleDataError::ZeroMaxConsumers);
        }
        Ok(data)
    }
}
