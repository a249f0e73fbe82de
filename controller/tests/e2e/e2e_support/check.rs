//! The cluster-wide checks every end-to-end test ends with, from the claims in the cluster and
//! the ledger: no device held twice, sharing limits kept, ledger and cluster in agreement.
//!
//! Reads only; asserts (panics) on a broken invariant.

use std::collections::{BTreeMap, BTreeSet};

use dra_allocator::ledger::{AllocationQuery, Ledger};
use dra_controller::driver::handle::HandleSharing;

use super::{AllocatedClaim, Env};

/// Checks the whole cluster against the ledger: the ledger verifies; no exclusive device is
/// named by two allocated claims and no device is both exclusive and shared; a shared device has
/// at most `maxConsumers` claims; every allocated claim is in the ledger with the same node and
/// devices, and the ledger holds no allocation the cluster does not show; a bound pod runs on the
/// node of each of its allocated claims.
pub async fn assert_consistent(env: &Env, ledger: &Ledger) {
    let report = ledger.verify().expect("verify runs");
    assert!(
        report.is_consistent(),
        "ledger verify: {:?}",
        report.problems
    );

    let claims = env.allocated_claims().await;
    let mut holders: BTreeMap<(String, String), Vec<(String, HandleSharing)>> = BTreeMap::new();
    for claim in &claims {
        let devices: BTreeSet<_> = claim.data.devices.iter().collect();
        assert_eq!(
            devices.len(),
            claim.data.devices.len(),
            "claim {} names a device twice",
            claim.name
        );
        for device in &claim.data.devices {
            holders
                .entry((claim.data.node.clone(), device.clone()))
                .or_default()
                .push((claim.name.clone(), claim.data.sharing));
        }
    }
    for ((node, device), users) in &holders {
        let exclusive = users
            .iter()
            .filter(|(_, s)| *s == HandleSharing::Exclusive)
            .count();
        if exclusive > 0 {
            assert_eq!(
                users.len(),
                1,
                "{node}/{device} held exclusively and by others: {users:?}"
            );
        }
        for (_, sharing) in users {
            if let HandleSharing::Shared { max_consumers } = sharing {
                assert!(
                    users.len() <= *max_consumers as usize,
                    "{node}/{device} shared by {} claims, at most {max_consumers}: {users:?}",
                    users.len()
                );
            }
        }
    }

    let mut in_cluster = BTreeSet::new();
    for claim in &claims {
        let held = ledger
            .allocation(&claim.uid)
            .expect("ledger read")
            .unwrap_or_else(|| {
                panic!(
                    "claim {} allocated in the cluster but not in the ledger",
                    claim.name
                )
            });
        assert_eq!(
            (&held.node, &held.devices),
            (&claim.data.node, &claim.data.devices),
            "ledger and claim {} disagree",
            claim.name
        );
        in_cluster.insert(claim.uid.clone());
    }
    let mut in_ledger = BTreeSet::new();
    let mut query = AllocationQuery {
        limit: 500,
        ..AllocationQuery::default()
    };
    loop {
        let page = ledger.allocations(&query).expect("ledger allocations");
        in_ledger.extend(page.items.into_iter().map(|a| a.claim.uid));
        match page.next {
            Some(next) => query.after = Some(next),
            None => break,
        }
    }
    assert_eq!(
        in_ledger, in_cluster,
        "the ledger holds exactly the allocations the claims show"
    );
    let nodes = ledger.nodes().expect("ledger nodes");
    let held_total: u64 = nodes.iter().map(|n| n.counts.allocated).sum();
    let shown_total = holders.len() as u64;
    assert_eq!(
        held_total, shown_total,
        "devices in use: ledger {held_total}, claims {shown_total}"
    );

    let pods = env.pods().await;
    for claim in &claims {
        if let Some(Some(node)) = claim.pod.as_ref().and_then(|p| pods.get(p)) {
            assert_eq!(
                node, &claim.data.node,
                "pod of claim {} runs elsewhere",
                claim.name
            );
        }
    }
}

/// Devices in use per node as the claims show them (a shared device counts once).
pub fn usage_per_node(claims: &[AllocatedClaim]) -> BTreeMap<String, usize> {
    let mut devices: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for claim in claims {
        devices
            .entry(claim.data.node.clone())
            .or_default()
            .extend(claim.data.devices.iter().cloned());
    }
    devices
        .into_iter()
        .map(|(node, set)| (node, set.len()))
        .collect()
}
