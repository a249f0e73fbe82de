use dra_allocator::model::AttributeValue;

use super::*;
use crate::device::{Inventory, NodeDevice};
use crate::v1::pool::pool_slices;
use crate::v1::pool::tests::partitioned;
use crate::v1::slice_for;

const DRIVER: &str = "gpu.dra-ledger.io";
const NODE: &str = "node-a";
const NODE_UID: &str = "node-uid";

fn inventory(names: &[&str]) -> Inventory {
    names
        .iter()
        .map(|name| {
            let device = NodeDevice {
                name: (*name).to_owned(),
                attributes: [("model".to_owned(), AttributeValue::String("H100".into()))].into(),
                ..NodeDevice::default()
            };
            ((*name).to_owned(), device)
        })
        .collect()
}

fn desired(names: &[&str]) -> ResourceSlice {
    slice_for(NODE, DRIVER, 0, &inventory(names)).unwrap()
}

fn owner() -> OwnerReference {
    node_owner(NODE, NODE_UID)
}

/// A slice as the API server lists it: named, owned by the node, at `generation`.
fn stored(name: &str, generation: i64, devices: &[&str]) -> ResourceSlice {
    let mut slice = desired(devices);
    slice.metadata.name = Some(name.to_owned());
    slice.metadata.resource_version = Some("7".to_owned());
    slice.metadata.owner_references = Some(vec![owner()]);
    slice.spec.pool.generation = generation;
    slice
}

fn device_names(slice: &ResourceSlice) -> Vec<&str> {
    slice.spec.devices.iter().map(|d| d.name.as_str()).collect()
}

/// The one write of `plan`.
fn only_write(plan: &SlicePlan) -> &SliceWrite {
    assert_eq!(plan.writes.len(), 1, "{plan:?}");
    &plan.writes[0]
}

#[test]
fn the_first_slice_is_created_at_generation_one_owned_by_the_node() {
    let plan = plan(&[], &[desired(&["gpu-0"])], &owner(), 0);
    let SliceWrite::Create(slice) = only_write(&plan) else {
        panic!("{plan:?}");
    };
    assert_eq!(slice.spec.pool.generation, 1);
    assert_eq!(plan.generation, 1);
    assert_eq!(
        slice.metadata.generate_name.as_deref(),
        Some("node-a-gpu.dra-ledger.io-")
    );
    let refs = slice.metadata.owner_references.as_ref().unwrap();
    assert_eq!(refs.len(), 1);
    assert_eq!(
        (
            refs[0].kind.as_str(),
            refs[0].name.as_str(),
            refs[0].uid.as_str()
        ),
        ("Node", NODE, NODE_UID)
    );
    assert_eq!(refs[0].controller, Some(true));
    assert!(plan.delete.is_empty() && plan.keep.is_empty());
}

#[test]
fn an_up_to_date_slice_is_left_alone() {
    let existing = [stored("s1", 4, &["gpu-0", "gpu-1"])];
    let plan = plan(&existing, &[desired(&["gpu-0", "gpu-1"])], &owner(), 0);
    assert!(plan.writes.is_empty(), "{plan:?}");
    assert_eq!(plan.generation, 4);
    assert_eq!(plan.keep, ["s1"]);
}

#[test]
fn a_change_updates_the_existing_slice_in_place_one_generation_up() {
    let existing = [stored("s1", 4, &["gpu-0", "gpu-1"])];
    let plan = plan(&existing, &[desired(&["gpu-0"])], &owner(), 0);
    let SliceWrite::Update(slice) = only_write(&plan) else {
        panic!("{plan:?}");
    };
    assert_eq!(slice.metadata.name.as_deref(), Some("s1"));
    assert_eq!(slice.metadata.resource_version.as_deref(), Some("7"));
    assert_eq!(slice.spec.pool.generation, 5);
    assert_eq!(device_names(slice), ["gpu-0"]);
    assert!(plan.delete.is_empty());
}

#[test]
fn the_generation_never_goes_below_what_this_agent_wrote() {
    // the slice was deleted and written again by someone at a lower generation
    let existing = [stored("s9", 1, &["gpu-0", "gpu-1"])];
    let plan = plan(&existing, &[desired(&["gpu-0"])], &owner(), 6);
    assert_eq!(plan.generation, 7);
    let recreated = super::plan(&[], &[desired(&["gpu-0"])], &owner(), 6);
    assert_eq!(recreated.generation, 7);
}

#[test]
fn duplicates_are_deleted_after_the_highest_one_is_written_above_them() {
    let existing = [
        stored("old", 2, &["gpu-0"]),
        stored("twin-b", 5, &["gpu-0", "gpu-1"]),
        stored("twin-a", 5, &["gpu-0", "gpu-1"]),
    ];
    let plan = plan(&existing, &[desired(&["gpu-0", "gpu-1"])], &owner(), 0);
    // the keeper is the first by name among the highest, moved above its twin
    let SliceWrite::Update(slice) = only_write(&plan) else {
        panic!("{plan:?}");
    };
    assert_eq!(slice.metadata.name.as_deref(), Some("twin-a"));
    assert_eq!(slice.spec.pool.generation, 6);
    let mut deleted = plan.delete.clone();
    deleted.sort();
    assert_eq!(deleted, ["old", "twin-b"]);
}

#[test]
fn an_older_duplicate_is_only_deleted() {
    let existing = [stored("old", 2, &["gpu-0"]), stored("new", 3, &["gpu-0"])];
    let plan = plan(&existing, &[desired(&["gpu-0"])], &owner(), 0);
    assert!(plan.writes.is_empty(), "{plan:?}");
    assert_eq!(plan.keep, ["new"]);
    assert_eq!(plan.delete, ["old"]);
}

#[test]
fn a_slice_of_ours_without_the_node_as_owner_is_adopted_without_a_new_generation() {
    let mut orphan = stored("s1", 3, &["gpu-0"]);
    orphan.metadata.owner_references = None;
    let plan = plan(&[orphan], &[desired(&["gpu-0"])], &owner(), 0);
    let SliceWrite::Update(slice) = only_write(&plan) else {
        panic!("{plan:?}");
    };
    assert_eq!(slice.spec.pool.generation, 3);
    assert_eq!(
        slice.metadata.owner_references.as_ref().unwrap()[0].uid,
        NODE_UID
    );
}

#[test]
fn other_drivers_and_nodes_are_not_touched_and_another_pool_of_ours_is_removed() {
    let mut foreign = stored("foreign", 9, &["gpu-0"]);
    foreign.spec.driver = "other.example.com".into();
    let mut elsewhere = stored("elsewhere", 9, &["gpu-0"]);
    elsewhere.spec.node_name = Some("node-b".into());
    let mut other_pool = stored("other-pool", 9, &["gpu-0"]);
    other_pool.spec.pool.name = "node-a-extra".into();
    let plan = plan(
        &[foreign, elsewhere, other_pool],
        &[desired(&["gpu-0"])],
        &owner(),
        0,
    );
    let SliceWrite::Create(slice) = only_write(&plan) else {
        panic!("{plan:?}");
    };
    // above the other pool's generation, which consumers of the driver may still see
    assert_eq!(slice.spec.pool.generation, 10);
    assert_eq!(plan.delete, ["other-pool"]);
}

/// The pool of `found` as the API server lists it after a publish at `generation`: the
/// slices named `s0`, `s1`, ... in layout order.
fn stored_pool(found: &Discovered, generation: i64) -> Vec<ResourceSlice> {
    pool_slices(NODE, DRIVER, generation, found, Served::ALL)
        .unwrap()
        .into_iter()
        .enumerate()
        .map(|(i, mut slice)| {
            slice.metadata.name = Some(format!("s{i}"));
            slice.metadata.owner_references = Some(vec![owner()]);
            slice
        })
        .collect()
}

fn desired_pool(found: &Discovered) -> Vec<ResourceSlice> {
    pool_slices(NODE, DRIVER, 0, found, Served::ALL).unwrap()
}

#[test]
fn a_multi_slice_pool_is_created_counter_sets_first_at_one_generation() {
    // 9 GPUs of 8 partitions: counter sets in 2 slices (8 + 1), 72 partitions in 2 (64 + 8)
    let found = partitioned(9, 8);
    let plan = plan(&[], &desired_pool(&found), &owner(), 0);
    assert_eq!(plan.writes.len(), 4);
    assert!(plan.writes.iter().all(
        |w| matches!(w, SliceWrite::Create(s) if s.spec.pool.generation == 1
            && s.spec.pool.resource_slice_count == 4)
    ));
    let sets: Vec<usize> = plan
        .writes
        .iter()
        .map(|w| w.slice().spec.shared_counters.len())
        .collect();
    assert_eq!(sets, [8, 1, 0, 0]);
}

#[test]
fn an_unchanged_multi_slice_pool_is_left_alone() {
    let found = partitioned(9, 8);
    let plan = plan(&stored_pool(&found, 3), &desired_pool(&found), &owner(), 0);
    assert!(plan.writes.is_empty(), "{plan:?}");
    assert!(plan.delete.is_empty());
    assert_eq!(plan.generation, 3);
    assert_eq!(plan.keep, ["s0", "s1", "s2", "s3"]);
}

#[test]
fn a_change_in_one_slice_rewrites_every_slice_of_the_pool_one_generation_up() {
    let before = partitioned(2, 8);
    let mut after = before.clone();
    after.devices.remove("gpu-1-part-7");
    after.sharing.remove("gpu-1-part-7");
    let plan = plan(&stored_pool(&before, 3), &desired_pool(&after), &owner(), 0);
    assert_eq!(plan.generation, 4);
    assert_eq!(
        plan.writes.len(),
        2,
        "both slices move to the new generation"
    );
    for write in &plan.writes {
        let SliceWrite::Update(slice) = write else {
            panic!("{write:?}");
        };
        assert_eq!(slice.spec.pool.generation, 4);
    }
    assert_eq!(device_names(plan.writes[1].slice()).len(), 15);
    assert!(plan.delete.is_empty());
}

#[test]
fn a_pool_that_shrinks_deletes_its_surplus_slices_after_the_writes() {
    let before = partitioned(9, 8);
    let after = partitioned(1, 8);
    let plan = plan(&stored_pool(&before, 3), &desired_pool(&after), &owner(), 0);
    assert_eq!(plan.generation, 4);
    // the first counter-set slice and the first device slice are updated in place into the
    // new two; the other two are deleted once the writes are done
    assert!(plan
        .writes
        .iter()
        .all(|w| matches!(w, SliceWrite::Update(_))));
    let updated: Vec<&str> = plan
        .writes
        .iter()
        .filter_map(|w| w.slice().metadata.name.as_deref())
        .collect();
    assert_eq!(updated, ["s0", "s2"]);
    assert_eq!(plan.delete, ["s1", "s3"]);
    assert!(plan
        .writes
        .iter()
        .all(|w| w.slice().spec.pool.resource_slice_count == 2));
}

#[test]
fn a_whole_device_slice_becomes_a_partitioned_pool_updated_in_place() {
    let mut found = partitioned(1, 2);
    found.devices.insert(
        "gpu-9".into(),
        NodeDevice {
            name: "gpu-9".into(),
            ..NodeDevice::default()
        },
    );
    // on a 1.35 server the pool was published without the partitions: one slice of gpu-9
    let whole = pool_slices(NODE, DRIVER, 2, &found, Served::NONE).unwrap();
    let mut existing = whole[0].clone();
    existing.metadata.name = Some("whole".into());
    existing.metadata.owner_references = Some(vec![owner()]);
    let plan = plan(&[existing], &desired_pool(&found), &owner(), 0);
    assert_eq!(plan.generation, 3);
    // the counter-set slice is created first; "whole" becomes the device slice in place
    let [SliceWrite::Create(sets), SliceWrite::Update(devices)] = plan.writes.as_slice() else {
        panic!("{plan:?}");
    };
    assert_eq!(sets.spec.shared_counters.len(), 1);
    assert_eq!(devices.metadata.name.as_deref(), Some("whole"));
    assert_eq!(
        device_names(devices),
        ["gpu-0-part-0", "gpu-0-part-1", "gpu-9"]
    );
    assert!(plan.delete.is_empty());
}

#[test]
fn the_sharing_fields_left_out_on_1_35_publish_the_whole_devices_only() {
    let mut found = partitioned(1, 7);
    found.devices.insert(
        "gpu-9".into(),
        NodeDevice {
            name: "gpu-9".into(),
            ..NodeDevice::default()
        },
    );
    let desired = pool_slices(NODE, DRIVER, 0, &found, Served::NONE).unwrap();
    let plan = plan(&[], &desired, &owner(), 0);
    let SliceWrite::Create(slice) = only_write(&plan) else {
        panic!("{plan:?}");
    };
    assert_eq!(device_names(slice), ["gpu-9"]);
    assert!(slice.spec.shared_counters.is_empty());
    assert_eq!(slice.spec.pool.resource_slice_count, 1);
}
