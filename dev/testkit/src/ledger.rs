//! Ledger fixtures: devices, requests and claims built in one line each, a ledger opened on a
//! deterministic or a hand-moved clock, and the check that a ledger verifies.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use dra_allocator::ledger::{
    AdminAccessRequest, AllocateRequest, ClaimRef, Ledger, LedgerOptions, PodClaimRequest,
};
use dra_allocator::model::{
    AttributeValue, Device, EffectiveRequest, Operator, Policy, Requirement, Sharing,
};

/// The driver name of the ledger fixtures.
pub const DRIVER: &str = "gpu.example.com";

/// A device with a `model` string and a `numa` integer attribute.
pub fn gpu(name: &str, model: &str, numa: i64) -> Device {
    Device::new(name)
        .with("model", AttributeValue::String(model.to_owned()))
        .with("numa", AttributeValue::Int(numa))
}

/// `count` devices `gpu-0..` of `model`, two per NUMA node.
pub fn gpus(count: usize, model: &str) -> Vec<Device> {
    (0..count)
        .map(|i| {
            gpu(
                &format!("gpu-{i}"),
                model,
                i64::try_from(i / 2).expect("small"),
            )
        })
        .collect()
}

/// A request for `count` devices, packed, without a selector.
pub fn request(count: u8, sharing: Sharing) -> EffectiveRequest {
    EffectiveRequest {
        count,
        selector: Vec::new(),
        sharing,
        policy: Policy::Pack,
        same_attribute: None,
    }
}

/// A request for `count` exclusive devices of `model`.
pub fn model_request(count: u8, model: &str) -> EffectiveRequest {
    EffectiveRequest {
        selector: vec![Requirement::new("model", Operator::In, &[model])],
        ..request(count, Sharing::Exclusive)
    }
}

/// The claim `uid` in namespace `default`, named `claim-<uid>`.
pub fn claim(uid: &str) -> ClaimRef {
    ClaimRef::new(uid, "default", format!("claim-{uid}"))
}

/// An allocation request for claim `uid`.
pub fn allocate(uid: &str, node: Option<&str>, request: EffectiveRequest) -> AllocateRequest {
    AllocateRequest {
        claim: claim(uid),
        pod_uid: None,
        request,
        node: node.map(str::to_owned),
    }
}

/// The admin access of claim `uid` (see [`claim`]) to `devices` of `node`.
pub fn admin_access(uid: &str, node: &str, devices: &[&str]) -> AdminAccessRequest {
    AdminAccessRequest {
        claim: claim(uid),
        node: node.to_owned(),
        devices: devices.iter().map(|d| (*d).to_owned()).collect(),
    }
}

/// Allocates `count` exclusive devices on `node` to claim `uid` of `namespace` (named
/// `claim-<uid>`), failing the test if the ledger refuses.
pub fn allocate_on(ledger: &Ledger, uid: &str, namespace: &str, node: &str, count: u8) {
    ledger
        .allocate(AllocateRequest {
            claim: ClaimRef::new(uid, namespace, format!("claim-{uid}")),
            pod_uid: None,
            request: request(count, Sharing::Exclusive),
            node: Some(node.to_owned()),
        })
        .unwrap_or_else(|error| panic!("allocate {uid} on {node}: {error}"));
}

/// A pod claim request.
pub fn pod_claim(uid: &str, request: EffectiveRequest) -> PodClaimRequest {
    PodClaimRequest {
        claim: claim(uid),
        request,
    }
}

/// Options with a clock that advances one millisecond per reading, from 1000.
pub fn options() -> LedgerOptions {
    let now = Arc::new(AtomicU64::new(1000));
    LedgerOptions {
        clock: Arc::new(move || now.fetch_add(1, Ordering::Relaxed)),
        ..LedgerOptions::default()
    }
}

/// A clock that stands still until the test moves it (unix milliseconds), for intervals exact
/// to the millisecond.
#[derive(Clone)]
pub struct ManualClock(Arc<AtomicU64>);

impl ManualClock {
    /// A clock reading `start_ms`.
    pub fn at(start_ms: u64) -> Self {
        ManualClock(Arc::new(AtomicU64::new(start_ms)))
    }

    /// Moves the clock `seconds` on.
    pub fn advance_secs(&self, seconds: u64) {
        self.0.fetch_add(seconds * 1000, Ordering::Relaxed);
    }

    /// The time it reads.
    pub fn now_ms(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    /// Ledger options reading this clock.
    pub fn options(&self) -> LedgerOptions {
        let now = self.0.clone();
        LedgerOptions {
            clock: Arc::new(move || now.load(Ordering::Relaxed)),
            ..LedgerOptions::default()
        }
    }
}

/// Opens `dir/ledger.redb` for [`DRIVER`] with [`options`].
pub fn open(dir: &Path) -> Ledger {
    Ledger::open_with(dir.join("ledger.redb"), DRIVER, options()).expect("open ledger")
}

/// Fails the test with every problem `verify()` finds.
pub fn assert_consistent(ledger: &Ledger) {
    let report = ledger.verify().expect("verify runs");
    assert!(
        report.is_consistent(),
        "ledger inconsistent: {:#?}",
        report.problems
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fixture_ledger_allocates_and_verifies() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ledger = open(dir.path());
        ledger
            .set_inventory("node-a", gpus(4, "H100"))
            .expect("inventory");
        allocate_on(&ledger, "c1", "team-a", "node-a", 2);
        assert_consistent(&ledger);
    }
}
