//! The `file:PATH` source's sharing fields: counter sets, partitions that consume them, and
//! capacities with request policies, read as the v1 API writes them and checked strictly.

use dra_node::discovery::{file, DeviceSource, DiscoveryRoots};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::file::fixture;

fn refused(text: &str) -> String {
    file::parse_discovered(text).unwrap_err().to_string()
}

const SET: &str =
    "sharedCounters:\n  - name: gpu-0-counters\n    counters: {memory: {value: 80Gi}}\n";

#[test]
fn partitions_consume_the_counter_sets_the_file_defines() {
    let found = file::read_discovered(&fixture("partitions.yaml")).unwrap();
    assert_eq!(found.devices.len(), 9);
    let set = &found.counter_sets["gpu-0-counters"];
    assert_eq!(set.counters["memory-slices"].value, Quantity("8".into()));
    assert_eq!(set.counters["compute-slices"].value, Quantity("7".into()));
    let one = &found.sharing["gpu-0-mig-1g-3"];
    assert!(!one.allow_multiple_allocations);
    assert_eq!(one.capacity["memory"].value, Quantity("10Gi".into()));
    assert_eq!(one.consumes_counters.len(), 1);
    assert_eq!(one.consumes_counters[0].counter_set, "gpu-0-counters");
    assert_eq!(
        one.consumes_counters[0].counters["compute-slices"].value,
        Quantity("1".into())
    );
    let seven = &found.sharing["gpu-0-mig-7g-0"].consumes_counters[0];
    assert_eq!(seven.counters["memory-slices"].value, Quantity("8".into()));
}

#[test]
fn a_shared_device_keeps_its_request_policies() {
    let found = file::read_discovered(&fixture("partitions.yaml")).unwrap();
    let gpu = &found.sharing["gpu-1"];
    assert!(gpu.allow_multiple_allocations);
    let memory = gpu.capacity["memory"].request_policy.as_ref().unwrap();
    assert_eq!(memory.default, Some(Quantity("10Gi".into())));
    let range = memory.valid_range.as_ref().unwrap();
    assert_eq!(range.min, Some(Quantity("1Gi".into())));
    assert_eq!(range.max, None);
    assert_eq!(range.step, Some(Quantity("1Gi".into())));
    let compute = gpu.capacity["compute"].request_policy.as_ref().unwrap();
    assert_eq!(compute.valid_values.len(), 3);
}

#[test]
fn devices_without_sharing_fields_have_no_sharing_entry() {
    let found = file::parse_discovered(
        "devices:\n  - name: gpu-0\n    attributes: {memory: {quantity: 80Gi}}\n",
    )
    .unwrap();
    assert!(found.sharing.is_empty());
    assert!(found.counter_sets.is_empty());
    assert_eq!(found.devices.len(), 1);
}

#[test]
fn the_file_source_discovers_counter_sets_and_the_others_none() {
    let source = DeviceSource::File(fixture("partitions.yaml"));
    let found = source.discover_all(&DiscoveryRoots::default()).unwrap();
    assert_eq!(found.counter_sets.len(), 1);
    assert_eq!(found.sharing.len(), 9);
    let devices = source.discover(&DiscoveryRoots::default()).unwrap();
    assert_eq!(devices, found.devices);
}

#[test]
fn consuming_an_undefined_counter_set_is_refused_naming_device_and_field() {
    let text = "devices:\n  - name: gpu-0-mig-1g-0\n    consumesCounters:\n      - counterSet: gpu-9-counters\n        counters: {memory: {value: 10Gi}}\n";
    assert_eq!(
        refused(text),
        "device gpu-0-mig-1g-0: consumesCounters.gpu-9-counters: the counter set gpu-9-counters is not defined in sharedCounters"
    );
}

#[test]
fn consuming_a_counter_the_set_lacks_is_refused() {
    let text = format!("{SET}devices:\n  - name: p\n    consumesCounters:\n      - counterSet: gpu-0-counters\n        counters: {{cores: {{value: \"1\"}}}}\n");
    assert_eq!(
        refused(&text),
        "device p: consumesCounters.gpu-0-counters: the counter set gpu-0-counters has no counter cores"
    );
}

#[test]
fn bad_quantities_names_and_fields_are_refused_naming_where() {
    let capacity = "devices:\n  - name: gpu-0\n    capacity: {memory: {value: lots}}\n";
    assert!(refused(capacity).starts_with("device gpu-0: capacity.memory.value: \"lots\""));
    let policy = "devices:\n  - name: gpu-0\n    capacity: {memory: {value: 8Gi, requestPolicy: {default: x}}}\n";
    assert!(refused(policy).starts_with("device gpu-0: capacity.memory.requestPolicy: \"x\""));
    let unknown = "devices:\n  - name: gpu-0\n    capacity: {memory: {value: 8Gi, requestPolicy: {minimum: 1Gi}}}\n";
    assert!(refused(unknown).contains("unknown field `minimum`"));
    let set =
        "sharedCounters:\n  - name: Bad_Set\n    counters: {memory: {value: 1Gi}}\ndevices: []\n";
    assert_eq!(
        refused(set),
        "counter set Bad_Set: name: \"Bad_Set\" is not a valid name"
    );
    let counter =
        "sharedCounters:\n  - name: s\n    counters: {memory: {value: many}}\ndevices: []\n";
    assert!(refused(counter).starts_with("counter set s: counters.memory: \"many\""));
    let camel =
        "sharedCounters:\n  - name: s\n    counters: {memorySlices: {value: \"8\"}}\ndevices: []\n";
    assert_eq!(
        refused(camel),
        "counter set s: counters.memorySlices: \"memorySlices\" is not a valid name"
    );
    let twice = "sharedCounters:\n  - name: s\n    counters: {}\n  - name: s\n    counters: {}\ndevices: []\n";
    assert_eq!(
        refused(twice),
        "counter set s: name: the counter set s is defined twice"
    );
}

#[test]
fn a_capacity_given_also_as_a_quantity_attribute_is_refused() {
    let text = "devices:\n  - name: gpu-0\n    attributes: {memory: {quantity: 80Gi}}\n    capacity: {memory: {value: 80Gi}}\n";
    assert_eq!(
        refused(text),
        "device gpu-0: capacity.memory: also given as a quantity attribute; give it once"
    );
}

#[test]
fn more_than_two_consumptions_are_refused() {
    let entry = "      - counterSet: gpu-0-counters\n        counters: {memory: {value: 1Gi}}\n";
    let text = format!("{SET}devices:\n  - name: p\n    consumesCounters:\n{entry}{entry}{entry}");
    assert_eq!(
        refused(&text),
        "device p: consumesCounters: 3 entries, at most 2"
    );
}
