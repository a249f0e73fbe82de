//! What a v1 `ResourceClaim` read from the API server asks this node to prepare: the claim
//! checked against the kubelet's request (same UID, allocated), the allocation results of our
//! driver in this node's pool (the pool is named after the node), the share of each result on
//! a device allocated to several claims at once (its `shareID` and `consumedCapacity`), and the
//! sharing our configuration gives them ([`super::config`]). Pure: the claim is read by the
//! caller.

use std::collections::{BTreeMap, BTreeSet};

use dra_allocator::model::Sharing;

use super::config::{config_for, our_configs, ConfigError, ScopedConfig};
use crate::device::DeviceShare;
use crate::prepare::{AllocatedClaim, ClaimRequest};
use dra_types::resource_v1::ResourceClaim;

/// One allocated device of ours on this node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeResult {
    /// The request it was allocated for (`req` or `req/sub`).
    pub request: String,
    /// Its pool (this node's).
    pub pool: String,
    /// Its name in the pool.
    pub device: String,
    /// Allocated with admin access.
    pub admin_access: bool,
    /// The result's share of a device allocated to several claims at once (`shareID`).
    pub share_id: Option<String>,
    /// What the share consumes of the device's capacities (`consumedCapacity`).
    pub consumed: BTreeMap<String, String>,
}

/// The part of a claim's allocation this node prepares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeAllocation {
    /// The claim's UID.
    pub uid: String,
    /// The claim's namespace.
    pub namespace: String,
    /// The claim's name.
    pub name: String,
    /// Our results in this node's pool, in the order of the allocation.
    pub results: Vec<NodeResult>,
    /// How the claim holds them.
    pub sharing: Sharing,
    /// Every result here has admin access (then `sharing` does not apply).
    pub admin_access: bool,
}

impl NodeAllocation {
    /// The claim as the preparer takes it: each device once, in result order, and each share.
    pub fn to_claim(&self) -> AllocatedClaim {
        let mut seen = BTreeSet::new();
        let devices = self
            .results
            .iter()
            .filter(|r| seen.insert(r.device.as_str()))
            .map(|r| r.device.clone())
            .collect();
        let mut seen = BTreeSet::new();
        let shares = self
            .results
            .iter()
            .filter_map(|r| Some((r, r.share_id.as_deref()?)))
            .filter(|(r, id)| seen.insert((r.device.as_str(), *id)))
            .map(|(r, id)| DeviceShare {
                device: r.device.clone(),
                share_id: id.to_owned(),
                consumed: r.consumed.clone(),
            })
            .collect();
        AllocatedClaim {
            uid: self.uid.clone(),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            devices,
            shares,
            sharing: self.sharing,
            admin_access: self.admin_access,
        }
    }
}

/// Why a claim of a prepare request cannot be prepared here; the text goes to the kubelet (and
/// into the pod's event), so it names the claim.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClaimError {
    /// The API server has no claim of that namespace and name.
    #[error("claim {namespace}/{name}: not found (deleted since it was allocated?)")]
    NotFound {
        /// The namespace.
        namespace: String,
        /// The name.
        name: String,
    },
    /// The claim under that name has another UID: the one the kubelet asked for was deleted.
    #[error(
        "claim {namespace}/{name}: got replaced (UID {found}, the kubelet asked for {expected})"
    )]
    Replaced {
        /// The namespace.
        namespace: String,
        /// The name.
        name: String,
        /// The UID the kubelet asked for.
        expected: String,
        /// The UID of the claim the API server has.
        found: String,
    },
    /// The claim has no allocation.
    #[error("claim {namespace}/{name}: not allocated")]
    NotAllocated {
        /// The namespace.
        namespace: String,
        /// The name.
        name: String,
    },
    /// The allocation has no device of our driver.
    #[error("claim {namespace}/{name}: the allocation has no device of driver {driver}")]
    NoDeviceOfDriver {
        /// The namespace.
        namespace: String,
        /// The name.
        name: String,
        /// Our driver.
        driver: String,
    },
    /// Our devices are all in other pools: the claim is allocated on another node.
    #[error(
        "claim {namespace}/{name}: the devices of driver {driver} are allocated in pool {pools}, \
         not in this node's pool {node}"
    )]
    OtherNode {
        /// The namespace.
        namespace: String,
        /// The name.
        name: String,
        /// Our driver.
        driver: String,
        /// The pools named, comma-separated.
        pools: String,
        /// This node.
        node: String,
    },
    /// Our configuration in the allocation cannot be taken.
    #[error("claim {namespace}/{name}: {source}")]
    Config {
        /// The namespace.
        namespace: String,
        /// The name.
        name: String,
        /// What is wrong, with the field.
        #[source]
        source: ConfigError,
    },
    /// Our devices of the claim are configured with different sharing; the agent holds all
    /// devices of one claim one way.
    #[error(
        "claim {namespace}/{name}: request {first} is configured {first_sharing} and request \
         {second} {second_sharing}; all devices of one claim must share alike on this driver"
    )]
    MixedSharing {
        /// The namespace.
        namespace: String,
        /// The name.
        name: String,
        /// One request.
        first: String,
        /// Its sharing.
        first_sharing: SharingText,
        /// Another request.
        second: String,
        /// Its sharing.
        second_sharing: SharingText,
    },
    /// Some of our devices of the claim have admin access and some do not.
    #[error(
        "claim {namespace}/{name}: request {admin} has admin access and request {plain} does \
         not; all devices of one claim on a node must be held alike on this driver"
    )]
    MixedAccess {
        /// The namespace.
        namespace: String,
        /// The name.
        name: String,
        /// A request with admin access.
        admin: String,
        /// A request without.
        plain: String,
    },
    /// The claim could not be read from the API server.
    #[error("claim {namespace}/{name}: reading it from the API server: {source}")]
    Read {
        /// The namespace.
        namespace: String,
        /// The name.
        name: String,
        /// The client's error (boxed: it is large and rare).
        #[source]
        source: Box<kube::Error>,
    },
}

/// A sharing as an error message says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SharingText(pub Sharing);

impl std::fmt::Display for SharingText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Sharing::Exclusive => f.write_str("Exclusive"),
            Sharing::Shared { max_consumers } => write!(f, "Shared (maxConsumers {max_consumers})"),
        }
    }
}

/// What `claim` (the API server's object under the request's namespace and name, if any) asks
/// node `node` to prepare for `driver`, checked against `request` (the kubelet's UID).
pub fn node_allocation(
    request: &ClaimRequest,
    claim: Option<&ResourceClaim>,
    driver: &str,
    node: &str,
) -> Result<NodeAllocation, ClaimError> {
    let namespace = || request.namespace.clone();
    let name = || request.name.clone();
    let claim = claim.ok_or_else(|| ClaimError::NotFound {
        namespace: namespace(),
        name: name(),
    })?;
    let found = claim.metadata.uid.as_deref().unwrap_or_default();
    if found != request.uid {
        return Err(ClaimError::Replaced {
            namespace: namespace(),
            name: name(),
            expected: request.uid.clone(),
            found: found.to_owned(),
        });
    }
    let allocation = claim
        .status
        .as_ref()
        .and_then(|s| s.allocation.as_ref())
        .ok_or_else(|| ClaimError::NotAllocated {
            namespace: namespace(),
            name: name(),
        })?;
    let devices = &allocation.devices;
    let ours: Vec<_> = devices
        .results
        .iter()
        .filter(|r| r.driver == driver)
        .collect();
    if ours.is_empty() {
        return Err(ClaimError::NoDeviceOfDriver {
            namespace: namespace(),
            name: name(),
            driver: driver.to_owned(),
        });
    }
    let here: Vec<NodeResult> = ours
        .iter()
        .filter(|r| r.pool == node)
        .map(|r| NodeResult {
            request: r.request.clone(),
            pool: r.pool.clone(),
            device: r.device.clone(),
            admin_access: r.admin_access == Some(true),
            share_id: r.share_id.clone(),
            consumed: r
                .consumed_capacity
                .iter()
                .map(|(name, quantity)| (name.clone(), quantity.0.clone()))
                .collect(),
        })
        .collect();
    if here.is_empty() {
        let pools: BTreeSet<&str> = ours.iter().map(|r| r.pool.as_str()).collect();
        return Err(ClaimError::OtherNode {
            namespace: namespace(),
            name: name(),
            driver: driver.to_owned(),
            pools: pools.into_iter().collect::<Vec<_>>().join(", "),
            node: node.to_owned(),
        });
    }
    let configs = our_configs(devices, driver).map_err(|source| ClaimError::Config {
        namespace: namespace(),
        name: name(),
        source,
    })?;
    let admin_access = one_access(request, &here)?;
    let sharing = if admin_access {
        Sharing::Exclusive
    } else {
        one_sharing(request, &here, &configs)?
    };
    Ok(NodeAllocation {
        uid: request.uid.clone(),
        namespace: namespace(),
        name: name(),
        results: here,
        sharing,
        admin_access,
    })
}

/// Whether every result of `here` has admin access; a claim with both kinds on this node is
/// refused (the journal holds a claim's devices one way).
fn one_access(request: &ClaimRequest, here: &[NodeResult]) -> Result<bool, ClaimError> {
    let admin = here.iter().find(|r| r.admin_access);
    let plain = here.iter().find(|r| !r.admin_access);
    match (admin, plain) {
        (Some(admin), Some(plain)) => Err(ClaimError::MixedAccess {
            namespace: request.namespace.clone(),
            name: request.name.clone(),
            admin: admin.request.clone(),
            plain: plain.request.clone(),
        }),
        (admin, _) => Ok(admin.is_some()),
    }
}

/// The one sharing `configs` give every result of `here`; exclusive when there is none.
fn one_sharing(
    request: &ClaimRequest,
    here: &[NodeResult],
    configs: &[ScopedConfig],
) -> Result<Sharing, ClaimError> {
    let mut first: Option<(&str, Sharing)> = None;
    for result in here {
        let sharing = config_for(&result.request, configs).sharing;
        match first {
            None => first = Some((&result.request, sharing)),
            Some((first_request, other)) if other != sharing => {
                return Err(ClaimError::MixedSharing {
                    namespace: request.namespace.clone(),
                    name: request.name.clone(),
                    first: first_request.to_owned(),
                    first_sharing: SharingText(other),
                    second: result.request.clone(),
                    second_sharing: SharingText(sharing),
                })
            }
            Some(_) => {}
        }
    }
    Ok(first.map_or(Sharing::Exclusive, |(_, sharing)| sharing))
}

#[cfg(test)]
mod tests;
