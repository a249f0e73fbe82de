//! The allocation result this driver writes into a claim and reads back when it rebuilds or
//! reconciles the ledger: one `resourceHandle` `{driverName, data}` whose `data` is JSON
//! `{"node", "devices", "sharing", "claimUID"}`, `availableOnNodes` selecting the node by
//! `metadata.name`, and `shareable` from the claim parameters (with an example in
//! `docs/driver.md`, "Allocation result").
//!
//! The handle data itself, the contract with the node agent, is `dra_allocator::handle`
//! (re-exported here).
//!
//! Pure conversions; must not depend on the ledger handle or the API client. Malformed data is an
//! error, never a panic.

pub use dra_allocator::handle::{HandleData, HandleDataError, HandleSharing};
use k8s_openapi::api::core::v1::{NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};
use k8s_openapi::api::resource::v1alpha2::{AllocationResult, ResourceClaim, ResourceHandle};

/// The allocation result for `data` written by driver `driver_name`.
pub fn allocation_result(
    driver_name: &str,
    data: &HandleData,
    shareable: bool,
) -> AllocationResult {
    AllocationResult {
        resource_handles: Some(vec![ResourceHandle {
            driver_name: Some(driver_name.to_owned()),
            data: Some(data.to_json()),
            structured_data: None,
        }]),
        available_on_nodes: Some(NodeSelector {
            node_selector_terms: vec![NodeSelectorTerm {
                match_expressions: None,
                match_fields: Some(vec![NodeSelectorRequirement {
                    key: "metadata.name".to_owned(),
                    operator: "In".to_owned(),
                    values: Some(vec![data.node.clone()]),
                }]),
            }],
        }),
        shareable: Some(shareable),
    }
}

/// What a claim's status says about an allocation by driver `driver_name`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClaimAllocationState {
    /// The claim is not allocated.
    Unallocated,
    /// The claim is allocated by another driver.
    OtherDriver,
    /// The claim is allocated by this driver with this data.
    Ours(HandleData),
}

/// Reads the allocation of `claim` as written by driver `driver_name`. An allocation of ours
/// whose handle is missing or malformed is an error naming what is wrong.
pub fn claim_allocation(
    claim: &ResourceClaim,
    driver_name: &str,
) -> Result<ClaimAllocationState, HandleDataError> {
    let Some(status) = claim.status.as_ref() else {
        return Ok(ClaimAllocationState::Unallocated);
    };
    let Some(allocation) = status.allocation.as_ref() else {
        return Ok(ClaimAllocationState::Unallocated);
    };
    if status.driver_name.as_deref() != Some(driver_name) {
        return Ok(ClaimAllocationState::OtherDriver);
    }
    let handles: Vec<&ResourceHandle> = allocation
        .resource_handles
        .iter()
        .flatten()
        .filter(|h| h.driver_name.as_deref().is_none_or(|d| d == driver_name))
        .collect();
    let [handle] = handles.as_slice() else {
        return Err(HandleDataError::HandleCount {
            driver: driver_name.to_owned(),
            found: handles.len(),
        });
    };
    let text = handle.data.as_deref().ok_or(HandleDataError::NoData)?;
    let data = HandleData::parse(text)?;
    let uid = claim.metadata.uid.as_deref().unwrap_or_default();
    if data.claim_uid != uid {
        return Err(HandleDataError::ClaimUidMismatch {
            data: data.claim_uid,
            claim: uid.to_owned(),
        });
    }
    Ok(ClaimAllocationState::Ours(data))
}
