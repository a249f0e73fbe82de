use std::collections::{BTreeMap, BTreeSet};

use dra_allocator::ledger::{AdminAccess, ClaimRef};
use dra_types::resource_v1::ResourceClaim;

use super::*;
use crate::mirror::mapping::tests::{claim, gpu, held, inventory_of, slice, DRIVER};
use crate::mirror::mapping::{claim_mirror, plan};

/// `claim` with the results at `admin` (indexes) marked `adminAccess: true`.
fn with_admin(mut claim: ResourceClaim, admin: &[usize]) -> ResourceClaim {
    if let Some(allocation) = claim.status.as_mut().and_then(|s| s.allocation.as_mut()) {
        for i in admin {
            allocation.devices.results[*i].admin_access = Some(true);
        }
    }
    claim
}

fn recorded(uid: &str, node: &str, devices: &[&str]) -> AdminAccess {
    AdminAccess {
        claim: ClaimRef::new(uid, "ns", format!("claim-{uid}")),
        node: node.to_owned(),
        devices: devices.iter().map(|d| (*d).to_owned()).collect(),
        recorded_ms: 1,
        updated_ms: 1,
    }
}

fn request(uid: &str, node: &str, devices: &[&str]) -> AdminAccessRequest {
    AdminAccessRequest {
        claim: ClaimRef::new(uid, "ns", format!("claim-{uid}")),
        node: node.to_owned(),
        devices: devices.iter().map(|d| (*d).to_owned()).collect(),
    }
}

#[test]
fn a_claim_with_both_kinds_of_results_is_an_allocation_and_an_admin_access_apart() {
    let inventory = inventory_of(&[slice(
        "node-a",
        "node-a",
        1,
        vec![gpu("gpu-0"), gpu("gpu-1"), gpu("gpu-2")],
    )]);
    let mixed = with_admin(
        claim(
            "u1",
            &[
                ("work", DRIVER, "node-a", "gpu-0"),
                ("look", DRIVER, "node-a", "gpu-1"),
                ("look", DRIVER, "node-a", "gpu-2"),
                ("nic", "nic.example.com", "node-a", "nic-0"),
            ],
        ),
        &[1, 2],
    );

    let mirror = claim_mirror(&mixed, DRIVER, &inventory);

    let allocation = mirror.allocation.unwrap();
    assert_eq!(allocation.devices, ["gpu-0"]);
    assert_eq!(
        mirror.admin_access,
        Some(request("u1", "node-a", &["gpu-1", "gpu-2"]))
    );
    assert!(mirror.admin_unpublished.is_empty());
    assert_eq!(mirror.problem, None);
}

#[test]
fn admin_access_only_is_no_allocation_and_leaves_out_devices_no_slice_publishes() {
    let inventory = inventory_of(&[slice("node-a", "node-a", 1, vec![gpu("gpu-0")])]);
    let admin = with_admin(
        claim(
            "u1",
            &[
                ("look", DRIVER, "node-a", "gpu-0"),
                ("look", DRIVER, "node-a", "gpu-7"),
            ],
        ),
        &[0, 1],
    );
    let unpublished_only = with_admin(claim("u2", &[("look", DRIVER, "node-a", "gpu-9")]), &[0]);

    let mirror = claim_mirror(&admin, DRIVER, &inventory);
    let none = claim_mirror(&unpublished_only, DRIVER, &inventory);

    assert_eq!(mirror.allocation, None);
    assert_eq!(
        mirror.admin_access,
        Some(request("u1", "node-a", &["gpu-0"]))
    );
    assert_eq!(mirror.admin_unpublished, ["node-a/gpu-7"]);
    assert_eq!(none.admin_access, None);
    assert_eq!(none.admin_unpublished, ["node-a/gpu-9"]);
}

#[test]
fn admin_access_on_several_nodes_is_a_problem_and_not_recorded() {
    let inventory = inventory_of(&[
        slice("node-a", "node-a", 1, vec![gpu("gpu-0")]),
        slice("node-b", "node-b", 1, vec![gpu("gpu-0")]),
    ]);
    let split = with_admin(
        claim(
            "u1",
            &[
                ("look", DRIVER, "node-a", "gpu-0"),
                ("look", DRIVER, "node-b", "gpu-0"),
            ],
        ),
        &[0, 1],
    );

    let mirror = claim_mirror(&split, DRIVER, &inventory);

    assert_eq!(mirror.admin_access, None);
    assert!(
        mirror
            .problem
            .as_deref()
            .is_some_and(|p| p.starts_with("admin access: claim ns/claim-u1: devices of")),
        "{:?}",
        mirror.problem
    );
}

#[test]
fn admin_steps_record_replace_release_or_do_nothing_for_the_same_access() {
    let same = admin_steps_for(
        Some(&recorded("u", "node-a", &["gpu-0", "gpu-1"])),
        Some(&request("u", "node-a", &["gpu-1", "gpu-0"])),
    );
    let new = admin_steps_for(None, Some(&request("u", "node-a", &["gpu-0"])));
    let moved = admin_steps_for(
        Some(&recorded("u", "node-a", &["gpu-0"])),
        Some(&request("u", "node-a", &["gpu-1"])),
    );
    let gone = admin_steps_for(Some(&recorded("u", "node-a", &["gpu-0"])), None);

    assert_eq!(same, AdminSteps::default());
    assert_eq!(new.drift, Some(DriftKind::MissingInLedger));
    assert!(new.record.is_some() && !new.release);
    assert_eq!(moved.drift, Some(DriftKind::DeviceMismatch));
    assert_eq!(moved.record.unwrap().devices, ["gpu-1"]);
    assert_eq!(gone.drift, Some(DriftKind::OrphanInLedger));
    assert!(gone.release && gone.record.is_none());
}

#[test]
fn a_plan_repairs_admin_access_apart_from_allocations_and_leaves_unsettled_claims() {
    let allocations = vec![held("both", "node-a", &["gpu-0"])];
    let admin = vec![
        recorded("both", "node-a", &["gpu-1"]),
        recorded("gone", "node-a", &["gpu-0"]),
        recorded("late", "node-a", &["gpu-0"]),
    ];
    let inventory = inventory_of(&[slice(
        "node-a",
        "node-a",
        1,
        vec![gpu("gpu-0"), gpu("gpu-1"), gpu("gpu-2")],
    )]);
    let both = with_admin(
        claim(
            "both",
            &[
                ("work", DRIVER, "node-a", "gpu-0"),
                ("look", DRIVER, "node-a", "gpu-2"),
            ],
        ),
        &[1],
    );
    let fresh = with_admin(claim("fresh", &[("look", DRIVER, "node-a", "gpu-0")]), &[0]);
    let shown = BTreeMap::from([
        ("both".to_owned(), claim_mirror(&both, DRIVER, &inventory)),
        ("fresh".to_owned(), claim_mirror(&fresh, DRIVER, &inventory)),
    ]);
    let unsettled = BTreeSet::from(["late".to_owned()]);

    let plan = plan(&allocations, &admin, &shown, &unsettled);

    assert!(plan.steps.is_empty(), "{:?}", plan.steps);
    let drift: BTreeMap<&str, Option<DriftKind>> = plan
        .admin
        .iter()
        .map(|(uid, steps)| (uid.as_str(), steps.drift))
        .collect();
    assert_eq!(
        drift,
        BTreeMap::from([
            ("both", Some(DriftKind::DeviceMismatch)),
            ("fresh", Some(DriftKind::MissingInLedger)),
            ("gone", Some(DriftKind::OrphanInLedger)),
        ])
    );
    assert_eq!(plan.in_flight, 1);
}
