use dra_allocator::model::AttributeValue;

use super::*;
use crate::device::NodeDevice;

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

#[test]
fn the_first_slice_is_created_at_generation_one_owned_by_the_node() {
    let plan = plan(&[], &desired(&["gpu-0"]), &owner(), 0);
    let Some(SliceWrite::Create(slice)) = &plan.write else {
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
    assert!(plan.delete.is_empty() && plan.keep.is_none());
}

#[test]
fn an_up_to_date_slice_is_left_alone() {
    let existing = [stored("s1", 4, &["gpu-0", "gpu-1"])];
    let plan = plan(&existing, &desired(&["gpu-0", "gpu-1"]), &owner(), 0);
    assert_eq!(plan.write, None);
    assert_eq!(plan.generation, 4);
    assert_eq!(plan.keep.as_deref(), Some("s1"));
}

#[test]
fn a_change_updates_the_existing_slice_in_place_one_generation_up() {
    let existing = [stored("s1", 4, &["gpu-0", "gpu-1"])];
    let plan = plan(&existing, &desired(&["gpu-0"]), &owner(), 0);
    let Some(SliceWrite::Update(slice)) = &plan.write else {
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
    let plan = plan(&existing, &desired(&["gpu-0"]), &owner(), 6);
    assert_eq!(plan.generation, 7);
    let recreated = super::plan(&[], &desired(&["gpu-0"]), &owner(), 6);
    assert_eq!(recreated.generation, 7);
}

#[test]
fn duplicates_are_deleted_after_the_highest_one_is_written_above_them() {
    let existing = [
        stored("old", 2, &["gpu-0"]),
        stored("twin-b", 5, &["gpu-0", "gpu-1"]),
        stored("twin-a", 5, &["gpu-0", "gpu-1"]),
    ];
    let plan = plan(&existing, &desired(&["gpu-0", "gpu-1"]), &owner(), 0);
    // the keeper is the first by name among the highest, moved above its twin
    let Some(SliceWrite::Update(slice)) = &plan.write else {
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
    let plan = plan(&existing, &desired(&["gpu-0"]), &owner(), 0);
    assert_eq!(plan.write, None);
    assert_eq!(plan.keep.as_deref(), Some("new"));
    assert_eq!(plan.delete, ["old"]);
}

#[test]
fn a_slice_of_ours_without_the_node_as_owner_is_adopted_without_a_new_generation() {
    let mut orphan = stored("s1", 3, &["gpu-0"]);
    orphan.metadata.owner_references = None;
    let plan = plan(&[orphan], &desired(&["gpu-0"]), &owner(), 0);
    let Some(SliceWrite::Update(slice)) = &plan.write else {
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
        &desired(&["gpu-0"]),
        &owner(),
        0,
    );
    let Some(SliceWrite::Create(slice)) = &plan.write else {
        panic!("{plan:?}");
    };
    // above the other pool's generation, which consumers of the driver may still see
    assert_eq!(slice.spec.pool.generation, 10);
    assert_eq!(plan.delete, ["other-pool"]);
}
