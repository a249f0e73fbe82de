//! The node's pool when its devices are shared, as the agent publishes it to the simulator's
//! API server: on 1.37 (partitionable devices and consumable capacity on) the counter sets in a
//! slice of their own and the partitions and the shared GPU in another, both of one generation
//! counting two slices; on 1.35 (both gates off, the server drops the fields) the whole GPU
//! only, as a device for one claim, written once and not again.

use std::path::{Path, PathBuf};
use std::time::Duration;

use dra_sim::KubernetesVersion;
use dra_types::resource_v1::ResourceSlice;
use testkit::eventually;

use crate::v1_support::{AgentSettings, Cluster134, V1Agent, NODE, SLICE_PATIENCE};

/// Seven 1g partitions and a 7g partition of `gpu-0` over its counter set, and `gpu-1` shared
/// by capacity (the file source's fixture).
fn partitions_inventory() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/discovery/fixtures/partitions.yaml")
}

/// The pool of ours on `node-0` once it is `count` slices of one generation, counter-set
/// slices first.
async fn pool_of(cluster: &Cluster134, count: i64) -> Vec<ResourceSlice> {
    eventually("the node's pool", SLICE_PATIENCE, || async {
        let mut slices = cluster.slices_of(NODE).await;
        let complete = i64::try_from(slices.len()) == Ok(count)
            && slices.iter().all(|s| {
                s.spec.pool.resource_slice_count == count
                    && s.spec.pool.generation == slices[0].spec.pool.generation
            });
        slices.sort_by_key(|s| s.spec.shared_counters.is_empty());
        complete.then_some(slices)
    })
    .await
}

#[tokio::test]
async fn on_1_37_counter_sets_partitions_and_a_shared_gpu_are_published_in_a_pool_of_two_slices() {
    let cluster = Cluster134::start_at(KubernetesVersion::V1_37).await;
    let dir = tempfile::tempdir().unwrap();
    let settings = AgentSettings::file(&partitions_inventory());
    let mut agent = V1Agent::start(&cluster, dir.path(), settings).await;
    let pool = pool_of(&cluster, 2).await;
    let sets = &pool[0].spec;
    assert!(sets.devices.is_empty());
    assert_eq!(sets.shared_counters.len(), 1);
    assert_eq!(sets.shared_counters[0].name, "gpu-0-counters");
    let devices = &pool[1].spec;
    assert_eq!(devices.devices.len(), 9);
    let one_g = devices
        .devices
        .iter()
        .find(|d| d.name == "gpu-0-mig-1g-3")
        .unwrap();
    assert_eq!(one_g.consumes_counters[0].counter_set, "gpu-0-counters");
    let shared = devices.devices.iter().find(|d| d.name == "gpu-1").unwrap();
    assert_eq!(shared.allow_multiple_allocations, Some(true));
    assert!(shared.capacity["memory"].request_policy.is_some());
    agent.stop().await.unwrap();
}

#[tokio::test]
async fn on_1_35_only_the_whole_gpu_is_published_for_one_claim_and_written_once() {
    let cluster = Cluster134::start_at(KubernetesVersion::V1_35).await;
    let dir = tempfile::tempdir().unwrap();
    let settings = AgentSettings::file(&partitions_inventory());
    let mut agent = V1Agent::start(&cluster, dir.path(), settings).await;
    let pool = pool_of(&cluster, 1).await;
    let spec = &pool[0].spec;
    assert!(spec.shared_counters.is_empty());
    let names: Vec<&str> = spec.devices.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(
        names,
        ["gpu-1"],
        "no partition is published as a whole device"
    );
    let gpu = &spec.devices[0];
    assert_eq!(gpu.allow_multiple_allocations, None);
    assert_eq!(gpu.capacity["memory"].request_policy, None);
    assert_eq!(gpu.capacity["memory"].value.0, "80Gi");

    // the inventory is read again every 100 ms: the pool is not written again
    let version = pool[0].metadata.resource_version.clone();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let again = cluster.slices_of(NODE).await;
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].metadata.resource_version, version);
    agent.stop().await.unwrap();
}
