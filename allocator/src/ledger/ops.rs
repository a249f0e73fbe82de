//! The claim operations as they run inside the writer's transaction: allocate (one claim, or all
//! of a pod's claims at once), confirm, release and abort. Each reads and decides first and writes
//! only once nothing can be refused any more, so a refused operation leaves the batch untouched.

use super::records::{
    AllocationRecord, AllocationState, AuditEvent, Consumer, IntentKind, IntentRecord, Resolution,
    StoredSharing,
};
use super::store::fnv1a;
use super::types::{same_placement, AllocateRequest, Allocation, ClaimRef, PodClaimRequest};
use super::writer::Tx;
use super::{LedgerError, Result};
use crate::fit::{self, FitError, NamedRequest, Placement, Reservations};
use crate::model::EffectiveRequest;

/// The public view of a stored allocation.
pub(crate) fn allocation_view(uid: &str, record: &AllocationRecord) -> Allocation {
    Allocation {
        claim: ClaimRef::new(uid, &record.namespace, &record.name),
        pod_uid: record.pod_uid.clone(),
        node: record.node.clone(),
        devices: record.devices.clone(),
        sharing: record.sharing.into(),
        state: record.state,
        intent: record.intent,
        created_ms: record.created_ms,
        updated_ms: record.updated_ms,
    }
}

/// The fingerprint that tells a repeat from an allocation with different parameters.
pub(crate) fn fingerprint(request: &EffectiveRequest) -> u64 {
    fnv1a(&postcard::to_allocvec(request).unwrap_or_default())
}

pub(crate) fn check_name(what: &str, value: &str) -> Result<()> {
    if value.is_empty() || value.contains('\0') {
        return Err(LedgerError::InvalidInput {
            reason: format!("{what} {value:?} must be non-empty and free of zero bytes"),
        });
    }
    Ok(())
}

fn check_claim(claim: &ClaimRef) -> Result<()> {
    check_name("claim uid", &claim.uid)?;
    check_name("claim namespace", &claim.namespace)?;
    check_name("claim name", &claim.name)
}

fn unsatisfiable(error: &FitError) -> LedgerError {
    LedgerError::Unsatisfiable {
        reason: error.to_string(),
    }
}

/// A repeat of an allocation: the same devices if the parameters match, else a conflict.
fn repeat(
    tx: &Tx<'_, '_>,
    uid: &str,
    node: Option<&str>,
    request: &EffectiveRequest,
) -> Result<Option<Allocation>> {
    let Some(existing) = tx.allocation(uid)? else {
        return Ok(None);
    };
    let same_request = existing
        .request_fingerprint
        .is_none_or(|fp| fp == fingerprint(request));
    let same_node = node.is_none_or(|n| n == existing.node);
    if same_request && same_node {
        Ok(Some(allocation_view(uid, &existing)))
    } else {
        Err(LedgerError::ClaimConflict {
            uid: uid.to_owned(),
        })
    }
}

/// Allocates one claim on its node, or on the best node.
pub(crate) fn allocate(tx: &mut Tx<'_, '_>, request: &AllocateRequest) -> Result<Allocation> {
    check_claim(&request.claim)?;
    if let Some(node) = &request.node {
        check_name("node", node)?;
    }
    if let Some(existing) = repeat(
        tx,
        &request.claim.uid,
        request.node.as_deref(),
        &request.request,
    )? {
        return Ok(existing);
    }
    let named = NamedRequest {
        name: &request.claim.name,
        request: &request.request,
    };
    let no_reservations = Reservations::new();
    let placement = match &request.node {
        Some(node) => fit::choose_on_node(&tx.state.inventory, node, named, &no_reservations),
        None => fit::choose_node(&tx.state.inventory, named, &no_reservations),
    }
    .map_err(|e| unsatisfiable(&e))?;
    record(
        tx,
        &request.claim,
        request.pod_uid.as_deref(),
        &placement,
        &request.request,
    )
}

/// Allocates all claims of a pod on `node`, or none of them. Claims already allocated there with
/// the same parameters are returned as they are.
pub(crate) fn allocate_pod(
    tx: &mut Tx<'_, '_>,
    pod_uid: &str,
    node: &str,
    claims: &[PodClaimRequest],
) -> Result<Vec<Allocation>> {
    check_name("pod uid", pod_uid)?;
    check_name("node", node)?;
    for (i, claim) in claims.iter().enumerate() {
        check_claim(&claim.claim)?;
        if claims[..i].iter().any(|c| c.claim.uid == claim.claim.uid) {
            return Err(LedgerError::InvalidInput {
                reason: format!("claim {} appears twice in one pod request", claim.claim.uid),
            });
        }
    }
    let mut results: Vec<Option<Allocation>> = Vec::with_capacity(claims.len());
    for claim in claims {
        results.push(repeat(tx, &claim.claim.uid, Some(node), &claim.request)?);
    }
    let fresh: Vec<&PodClaimRequest> = claims
        .iter()
        .zip(&results)
        .filter(|(_, done)| done.is_none())
        .map(|(claim, _)| claim)
        .collect();
    let named: Vec<NamedRequest<'_>> = fresh
        .iter()
        .map(|c| NamedRequest {
            name: &c.claim.name,
            request: &c.request,
        })
        .collect();
    let placements = if named.is_empty() {
        Vec::new()
    } else {
        fit::choose_for_pod(&tx.state.inventory, node, &named, &Reservations::new())
            .map_err(|e| unsatisfiable(&e))?
    };
    let mut placed = fresh.into_iter().zip(placements);
    let mut out = Vec::with_capacity(claims.len());
    for done in results {
        if let Some(existing) = done {
            out.push(existing);
        } else {
            let (claim, placement) = placed.next().ok_or_else(|| {
                LedgerError::Storage("fitting returned too few placements".to_owned())
            })?;
            out.push(record(
                tx,
                &claim.claim,
                Some(pod_uid),
                &placement,
                &claim.request,
            )?);
        }
    }
    Ok(out)
}

/// Writes a new pending allocation: the intent, the reservation on every device, the audit entry
/// and the in-memory inventory.
fn record(
    tx: &mut Tx<'_, '_>,
    claim: &ClaimRef,
    pod_uid: Option<&str>,
    placement: &Placement,
    request: &EffectiveRequest,
) -> Result<Allocation> {
    let sharing = StoredSharing::from(request.sharing);
    let mut devices = Vec::with_capacity(placement.devices.len());
    for name in &placement.devices {
        let record = tx.device(&placement.node, name)?.ok_or_else(|| {
            LedgerError::Storage(format!(
                "chosen device {name} on node {} is not in the devices table",
                placement.node
            ))
        })?;
        devices.push((name, record));
    }
    let now = tx.now();
    let intent = tx.journal(IntentRecord {
        claim_uid: claim.uid.clone(),
        kind: IntentKind::Allocate,
        node: placement.node.clone(),
        devices: placement.devices.clone(),
        at_ms: now,
        resolution: None,
    })?;
    for (name, mut device) in devices {
        device.consumers.push(Consumer {
            claim_uid: claim.uid.clone(),
            sharing,
        });
        tx.put_device(&placement.node, name, device)?;
        tx.state
            .inventory
            .add_consumer(&placement.node, name, &claim.uid, request.sharing)
            .map_err(|e| LedgerError::Storage(format!("inventory out of step: {e}")))?;
    }
    let allocation = AllocationRecord {
        namespace: claim.namespace.clone(),
        name: claim.name.clone(),
        pod_uid: pod_uid.map(str::to_owned),
        node: placement.node.clone(),
        devices: placement.devices.clone(),
        sharing,
        request_fingerprint: Some(fingerprint(request)),
        state: AllocationState::Pending,
        intent: intent.0,
        created_ms: now,
        updated_ms: now,
    };
    let view = allocation_view(&claim.uid, &allocation);
    tx.put_allocation(&claim.uid, allocation)?;
    tx.audit(AuditEvent::Allocated {
        claim_uid: claim.uid.clone(),
        node: placement.node.clone(),
        devices: placement.devices.clone(),
    })?;
    Ok(view)
}

/// Marks the allocation as seen in the cluster. Repeats are no-ops.
pub(crate) fn confirm(tx: &mut Tx<'_, '_>, uid: &str) -> Result<Allocation> {
    let mut record = tx
        .allocation(uid)?
        .ok_or_else(|| LedgerError::ClaimNotFound {
            uid: uid.to_owned(),
        })?;
    if record.state == AllocationState::Confirmed {
        return Ok(allocation_view(uid, &record));
    }
    let now = tx.now();
    tx.resolve(record.intent, Resolution::Confirmed)?;
    tx.journal(IntentRecord {
        claim_uid: uid.to_owned(),
        kind: IntentKind::Confirm,
        node: record.node.clone(),
        devices: record.devices.clone(),
        at_ms: now,
        resolution: None,
    })?;
    record.state = AllocationState::Confirmed;
    record.updated_ms = now;
    let view = allocation_view(uid, &record);
    tx.put_allocation(uid, record)?;
    tx.audit(AuditEvent::Confirmed {
        claim_uid: uid.to_owned(),
    })?;
    Ok(view)
}

/// [`confirm`] when the claim is still allocated on `node` with the same set of `devices`;
/// `false`, with nothing written, when it is not.
pub(crate) fn confirm_if_placed(
    tx: &mut Tx<'_, '_>,
    uid: &str,
    node: &str,
    devices: &[String],
) -> Result<bool> {
    let Some(record) = tx.allocation(uid)? else {
        return Ok(false);
    };
    if !same_placement(&record.node, &record.devices, node, devices) {
        return Ok(false);
    }
    confirm(tx, uid).map(|_| true)
}

/// Frees a claim's devices. `None` when the claim had no allocation.
pub(crate) fn release(tx: &mut Tx<'_, '_>, uid: &str) -> Result<Option<Allocation>> {
    let Some(record) = tx.allocation(uid)? else {
        return Ok(None);
    };
    free(tx, uid, &record, IntentKind::Release, Resolution::Released)?;
    tx.audit(AuditEvent::Released {
        claim_uid: uid.to_owned(),
        node: record.node.clone(),
        devices: record.devices.clone(),
    })?;
    Ok(Some(allocation_view(uid, &record)))
}

/// Drops an allocation that never reached the cluster. `None` when the claim had none.
pub(crate) fn abort(tx: &mut Tx<'_, '_>, uid: &str) -> Result<Option<Allocation>> {
    let Some(record) = tx.allocation(uid)? else {
        return Ok(None);
    };
    if record.state == AllocationState::Confirmed {
        return Err(LedgerError::AbortConfirmed {
            uid: uid.to_owned(),
        });
    }
    free(tx, uid, &record, IntentKind::Abort, Resolution::Aborted)?;
    tx.audit(AuditEvent::Aborted {
        claim_uid: uid.to_owned(),
        node: record.node.clone(),
        devices: record.devices.clone(),
    })?;
    Ok(Some(allocation_view(uid, &record)))
}

/// Removes the allocation and its consumers; a missing device left without consumers is deleted.
fn free(
    tx: &mut Tx<'_, '_>,
    uid: &str,
    record: &AllocationRecord,
    kind: IntentKind,
    resolution: Resolution,
) -> Result<()> {
    let now = tx.now();
    if record.state == AllocationState::Pending {
        tx.resolve(record.intent, resolution)?;
    }
    tx.journal(IntentRecord {
        claim_uid: uid.to_owned(),
        kind,
        node: record.node.clone(),
        devices: record.devices.clone(),
        at_ms: now,
        resolution: None,
    })?;
    let mut deleted = Vec::new();
    for name in &record.devices {
        let Some(mut device) = tx.device(&record.node, name)? else {
            continue;
        };
        device.consumers.retain(|c| c.claim_uid != uid);
        if device.missing && device.consumers.is_empty() {
            tx.remove_device(&record.node, name)?;
            deleted.push(name.clone());
        } else {
            tx.put_device(&record.node, name, device)?;
            tx.state
                .inventory
                .remove_consumer(&record.node, name, uid)
                .map_err(|e| LedgerError::Storage(format!("inventory out of step: {e}")))?;
        }
    }
    tx.remove_allocation(uid)?;
    if !deleted.is_empty() {
        super::inventory::refresh_node(tx, &record.node)?;
        for device in &deleted {
            tx.audit(AuditEvent::DeviceRemoved {
                node: record.node.clone(),
                device: device.clone(),
            })?;
        }
        super::admin_access::forget_devices(tx, &record.node, &deleted)?;
        super::health::forget_devices(tx, &record.node, &deleted)?;
    }
    Ok(())
}
