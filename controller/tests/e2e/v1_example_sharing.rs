//! The example driver's sharing demos (`fixtures/dra-example-driver/v1/`, copied unchanged
//! from kubernetes-sigs/dra-example-driver `demo/examples/`): `partitionable-devices`,
//! `gpu-allow-multiple-allocations` and `gpu-allow-multiple-allocations-partitionable`,
//! created as `kubectl create -f` creates them on the simulated 1.37 cluster, with our node
//! agent serving their driver `gpu.example.com` from an inventory file that describes what
//! their chart's GPU profile publishes with the demo's settings (two GPUs of 80Gi memory and
//! 100 compute; four partitions per GPU and a full-GPU device over one counter set per GPU
//! with `gpuPartitions=4`; request policies of 1Gi and 1 steps with
//! `gpuAllowMultipleAllocations=true`). Each demo's outcome is checked: its pods run with the
//! devices, partitions or shares the demo describes, and each share is prepared with its
//! share ID and the limits it consumes. The demos' class selects every device of the driver;
//! our slice lists the devices in name order (`gpu-0-full` before `gpu-0-partition-0`, where
//! the example driver lists partitions first), so the scheduler's first fit may take full-GPU
//! devices where the example driver's would take partitions: the checks accept any device
//! over a counter set, and that the counters are never overcommitted.

use std::collections::BTreeSet;
use std::fmt::Write;
use std::time::Duration;

use dra_types::resource_v1::ResourceClaim;
use testkit::eventually;

use crate::e2e_support::WAIT;
use crate::v1_examples::{claim, cluster_reading_every, create, running};
use crate::v1_support::ClusterV1;

/// The example chart's GPU profile with `numDevices=2`: `partitions` per GPU (none: whole
/// GPUs) and, where `multiple`, devices that several claims share by capacity.
fn example_inventory(partitions: u64, multiple: bool) -> String {
    let capacity = |memory_gi: u64, compute: u64| {
        if multiple {
            format!(
                "    allowMultipleAllocations: true\n    capacity:\n      memory: {{value: \
                 {memory_gi}Gi, requestPolicy: {{default: {memory_gi}Gi, validRange: {{min: 1Gi, \
                 step: 1Gi, max: {memory_gi}Gi}}}}}}\n      compute: {{value: \"{compute}\", \
                 requestPolicy: {{default: \"{compute}\", validRange: {{min: \"1\", step: \"1\", \
                 max: \"{compute}\"}}}}}}\n"
            )
        } else {
            format!(
                "    capacity: {{memory: {{value: {memory_gi}Gi}}, compute: {{value: \
                 \"{compute}\"}}}}\n"
            )
        }
    };
    let consumes = |gpu: u64, memory_gi: u64, compute: u64| {
        format!(
            "    consumesCounters:\n      - counterSet: gpu-{gpu}-counters\n        counters: \
             {{memory: {{value: {memory_gi}Gi}}, compute: {{value: \"{compute}\"}}}}\n"
        )
    };
    let mut counters = String::new();
    let mut devices = String::new();
    for gpu in 0..2 {
        let attributes = format!(
            "index: {gpu}, uuid: gpu-{gpu}-uuid, model: LATEST-GPU-MODEL, \
             driverVersion: {{version: 1.0.0}}"
        );
        if partitions == 0 {
            writeln!(
                devices,
                "  - name: gpu-{gpu}\n    attributes: {{{attributes}}}"
            )
            .unwrap();
            devices += &capacity(80, 100);
            continue;
        }
        writeln!(
            counters,
            "  - name: gpu-{gpu}-counters\n    counters: {{memory: {{value: 80Gi}}, \
             compute: {{value: \"100\"}}}}"
        )
        .unwrap();
        let (memory, compute) = (80 / partitions, 100 / partitions);
        for j in 0..partitions {
            writeln!(
                devices,
                "  - name: gpu-{gpu}-partition-{j}\n    attributes: {{{attributes}, \
                 partition: {j}, partitionable: true}}"
            )
            .unwrap();
            devices += &capacity(memory, compute);
            devices += &consumes(gpu, memory, compute);
        }
        writeln!(
            devices,
            "  - name: gpu-{gpu}-full\n    attributes: {{{attributes}, partitionable: true, \
             full: true}}"
        )
        .unwrap();
        devices += &capacity(80, 100);
        devices += &consumes(gpu, 80, 100);
    }
    let counters = if counters.is_empty() {
        String::new()
    } else {
        format!("sharedCounters:\n{counters}")
    };
    format!("{counters}devices:\n{devices}")
}

/// Whether `device` is one of the devices the partitionable profile publishes over a GPU's
/// counter set (a partition or the full GPU, which the demos' class both select).
fn partition_of_the_demo(device: &str) -> bool {
    device.contains("-partition-") || device.ends_with("-full")
}

/// The example's 1.37 cluster serving `inventory`, once the agent published it: every device
/// of the file, each marked for multiple allocations where the file marks it.
async fn example_cluster(dir: &std::path::Path, inventory: &str) -> ClusterV1 {
    let v1 = cluster_reading_every(dir, None, Duration::from_millis(500)).await;
    v1.write_inventory("node-0", inventory);
    let wanted: BTreeSet<(String, bool)> = inventory
        .split("  - name: ")
        .skip(1)
        .filter_map(|device| {
            let (name, rest) = device.split_once('\n')?;
            let multiple = rest.contains("allowMultipleAllocations: true");
            (!name.ends_with("-counters")).then(|| (name.to_owned(), multiple))
        })
        .collect();
    eventually("the example's devices published", WAIT, || async {
        let published: BTreeSet<(String, bool)> = v1
            .slices()
            .await
            .into_iter()
            .flat_map(|s| s.spec.devices)
            .map(|d| (d.name, d.allow_multiple_allocations == Some(true)))
            .collect();
        published == wanted
    })
    .await;
    v1
}

/// The claim of pod `pod` of `namespace` once it runs, and the CDI env of that claim.
async fn running_claim(v1: &ClusterV1, namespace: &str, pod: &str) -> (ResourceClaim, String) {
    let data = running(v1, namespace, pod).await;
    let name = data["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let name = if name.is_empty() {
        data["spec"]["resourceClaims"][0]["resourceClaimName"]
            .as_str()
            .unwrap()
            .to_owned()
    } else {
        name
    };
    let claim = claim(v1, namespace, &name).await;
    let uid = claim.metadata.uid.clone().unwrap();
    let env = eventually(format!("the CDI spec of {pod}'s claim"), WAIT, || async {
        v1.cdi_env("node-0", &uid)
    })
    .await;
    (claim, env)
}

/// Checks that both pods of a multiple-allocations demo run on shares, each prepared with its
/// share ID and the `memory` and `compute` it asked for; the devices they got.
async fn assert_shares(
    v1: &ClusterV1,
    namespace: &str,
    memory: &str,
    compute: &str,
) -> Vec<String> {
    let mut devices = Vec::new();
    let mut shares = BTreeSet::new();
    for pod in ["pod0", "pod1"] {
        let (claim, env) = running_claim(v1, namespace, pod).await;
        let result = claim.allocation().unwrap().devices.results[0].clone();
        let share = result.share_id.clone().expect("a share ID");
        assert_eq!(result.consumed_capacity["memory"].0, memory, "{pod}");
        for wanted in [
            format!("DRA_LEDGER_SHARE_ID={share}"),
            format!("DRA_LEDGER_MEMORY_LIMIT={memory}"),
            format!("DRA_LEDGER_COMPUTE_SHARE={compute}"),
        ] {
            assert!(env.contains(&wanted), "{pod}: {wanted} not in {env}");
        }
        shares.insert(share);
        devices.push(result.device);
    }
    assert_eq!(shares.len(), 2, "each pod has its own share");
    devices
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_partitionable_devices_demo_gets_two_partitions() {
    let dir = tempfile::tempdir().unwrap();
    let v1 = example_cluster(dir.path(), &example_inventory(4, false)).await;
    create(&v1, "partitionable-devices.yaml").await;
    let (claim, env) = running_claim(&v1, "partitionable-devices", "pod0").await;
    let devices: Vec<String> = claim
        .allocation()
        .unwrap()
        .devices
        .results
        .iter()
        .map(|r| r.device.clone())
        .collect();
    assert_eq!(devices.len(), 2, "{devices:?}");
    assert_ne!(devices[0], devices[1], "two devices");
    // Each GPU's counters hold 80Gi: what the two devices take of one GPU must fit in them.
    for gpu in ["gpu-0-", "gpu-1-"] {
        let taken: u32 = devices
            .iter()
            .filter(|d| d.starts_with(gpu))
            .map(|d| if d.ends_with("-full") { 80 } else { 20 })
            .sum();
        assert!(taken <= 80, "{devices:?} overcommit {gpu}");
    }
    assert!(
        devices.iter().all(|d| partition_of_the_demo(d)),
        "{devices:?}"
    );
    assert!(
        env.contains(&format!("DRA_LEDGER_DEVICES={}", devices.join(","))),
        "{env}"
    );
    assert!(
        !env.contains("DRA_LEDGER_SHARE_ID"),
        "partitions are no shares: {env}"
    );
    v1.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_allow_multiple_allocations_demo_shares_one_gpu_between_two_pods() {
    let dir = tempfile::tempdir().unwrap();
    let v1 = example_cluster(dir.path(), &example_inventory(0, true)).await;
    create(&v1, "gpu-allow-multiple-allocations.yaml").await;
    let devices = assert_shares(&v1, "gpu-allow-multiple-allocations", "16Gi", "20").await;
    assert_eq!(devices[0], devices[1], "both pods on one GPU: {devices:?}");
    v1.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_partitionable_allow_multiple_allocations_demo_shares_partitions() {
    let dir = tempfile::tempdir().unwrap();
    let v1 = example_cluster(dir.path(), &example_inventory(4, true)).await;
    create(&v1, "gpu-allow-multiple-allocations-partitionable.yaml").await;
    let devices = assert_shares(
        &v1,
        "gpu-allow-multiple-allocations-partitionable",
        "8Gi",
        "10",
    )
    .await;
    assert_eq!(
        devices[0], devices[1],
        "both pods on one device: {devices:?}"
    );
    assert!(partition_of_the_demo(&devices[0]), "{devices:?}");
    v1.shutdown().await;
}
