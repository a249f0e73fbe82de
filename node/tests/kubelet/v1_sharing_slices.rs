//! The node's pool when its devices are shared, as the agent publishes it to the simulator's
//! API server: on 1.37 (partitionable devices and consumable capacity on) the counter sets in a
//! slice of their own and the partitions and the shared GPU in another, both of one generation
//! counting two slices; on 1.35 (both gates off, the server drops the fields) the whole GPU
//! only, as a device for one claim, written once and not again. And the pool the `nvml`
//! mapping makes of a MIG GPU and a capacity-shared one, and the inventory file
//! `docs/node-agent.md` shows, accepted by the 1.37 validation.

use std::path::{Path, PathBuf};
use std::time::Duration;

use dra_node::discovery::gpu_sharing::GpuSharing;
use dra_node::discovery::nvml::{discovered_from, GpuInfo, GpuLibrary, MigPlacement, MigProfile};
use dra_node::discovery::DiscoveryError;
use dra_node::health::HealthMap;
use dra_node::v1::pool::Served;
use dra_node::v1::slices::SlicePublisher;
use dra_sim::KubernetesVersion;
use dra_types::resource_v1::ResourceSlice;
use testkit::eventually;

use crate::support::DRIVER;
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

/// NVML as a list: an H100 in MIG mode with 1g.10gb and 7g.80gb, and one without MIG.
struct TwoH100s;

impl GpuLibrary for TwoH100s {
    fn devices(&self) -> Result<Vec<GpuInfo>, DiscoveryError> {
        let gpu = |uuid: &str, bus: &str, mig: bool| GpuInfo {
            uuid: uuid.to_owned(),
            name: "NVIDIA H100 80GB HBM3".to_owned(),
            memory_total_bytes: 81_559 << 20,
            pci_bus_id: bus.to_owned(),
            mig_enabled: Some(mig),
            mig_profiles: if mig {
                let placements = |size, starts: &[u32]| {
                    starts
                        .iter()
                        .map(|&start| MigPlacement { start, size })
                        .collect()
                };
                vec![
                    MigProfile {
                        profile: 0,
                        id: 19,
                        slice_count: 1,
                        memory_mib: 9856,
                        placements: placements(1, &[0, 1, 2, 3, 4, 5, 6]),
                    },
                    MigProfile {
                        profile: 4,
                        id: 0,
                        slice_count: 7,
                        memory_mib: 80896,
                        placements: placements(8, &[0]),
                    },
                ]
            } else {
                Vec::new()
            },
            ..GpuInfo::default()
        };
        Ok(vec![
            gpu("GPU-aaaa", "00000000:1B:00.0", true),
            gpu("GPU-bbbb", "00000000:9D:00.0", false),
        ])
    }
}

#[tokio::test]
async fn the_nvml_pool_of_mig_partitions_and_a_capacity_shared_gpu_is_valid_for_1_37() {
    let cluster = Cluster134::start_at(KubernetesVersion::V1_37).await;
    let roots = dra_node::discovery::DiscoveryRoots::default();
    let found = discovered_from(&TwoH100s, &roots, GpuSharing::Capacity).unwrap();
    let mut publisher = SlicePublisher::new(&cluster.client, NODE, DRIVER);
    let outcome = publisher.publish(&found, &HealthMap::new()).await.unwrap();
    assert_eq!(publisher.served(), Some(Served::ALL));
    assert_eq!(outcome.slices.len(), 2);
    let pool = pool_of(&cluster, 2).await;
    assert_eq!(pool[0].spec.shared_counters[0].name, "gpu-0-counter-set");
    let names: Vec<&str> = pool[1]
        .spec
        .devices
        .iter()
        .map(|d| d.name.as_str())
        .collect();
    assert_eq!(names.len(), 10, "{names:?}");
    assert!(names.contains(&"gpu-0-mig-7g80gb-0-0"));
    let shared = pool[1]
        .spec
        .devices
        .iter()
        .find(|d| d.name == "gpu-1")
        .unwrap();
    assert_eq!(shared.allow_multiple_allocations, Some(true));
}

/// The inventory file of `docs/node-agent.md` with MIG partitions and a capacity-shared GPU.
fn documented_inventory() -> String {
    let docs = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/node-agent.md"),
    )
    .unwrap();
    let block = docs
        .split("  ```yaml\n")
        .find(|block| block.contains("gpu-1-counter-set"))
        .and_then(|block| block.split("  ```").next())
        .unwrap();
    block
        .lines()
        .map(|line| line.strip_prefix("  ").unwrap_or(line))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn the_documented_inventory_of_partitions_and_a_shared_gpu_publishes_on_1_37() {
    let cluster = Cluster134::start_at(KubernetesVersion::V1_37).await;
    let found = dra_node::discovery::file::parse_discovered(&documented_inventory()).unwrap();
    let mut publisher = SlicePublisher::new(&cluster.client, NODE, DRIVER);
    publisher.publish(&found, &HealthMap::new()).await.unwrap();
    let pool = pool_of(&cluster, 2).await;
    assert_eq!(pool[0].spec.shared_counters[0].counters.len(), 10);
    assert_eq!(pool[1].spec.devices.len(), 5);
}
