//! Shared devices in a simulated 1.37 cluster (`DRAPartitionableDevices` and
//! `DRAConsumableCapacity` on): the server takes a pool whose counter set has a slice of its
//! own, the scheduler hands out seven 1g partitions of one H100-like GPU to seven pods and keeps
//! an eighth, and a whole-GPU partition, waiting; two pods asking 40Gi share one 80Gi GPU with a
//! share ID each and a third waits. The kubelets are off: only the scheduler acts.

use dra_types::resource_v1::ResourceSlice;
use kube::core::ApiResource;
use kube::Client;
use serde_json::{json, Value};

use crate::device_taints::cluster;
use crate::scheduling_v1::{
    bound, claim, claim_ref, create, create_claim, create_pod, exactly, failed_scheduling,
    one_request, pod_node, DRIVER,
};

const UNAVAILABLE: &str = "0/2 nodes are available";

/// Slice `name` of node-0's pool (two slices) with `spec` added.
async fn pool_slice(client: &Client, name: &str, spec: Value) {
    let mut full = json!({"driver": DRIVER, "nodeName": "node-0",
        "pool": {"name": "node-0", "generation": 1, "resourceSliceCount": 2}});
    full.as_object_mut()
        .unwrap()
        .extend(spec.as_object().unwrap().clone());
    create(
        client,
        ApiResource::erase::<ResourceSlice>(&()),
        json!({"metadata": {"name": name}, "spec": full}),
    )
    .await;
}

/// A partition of `size` of the seven memory slices at `start`.
fn partition(size: usize, start: usize) -> Value {
    let counters: serde_json::Map<String, Value> = (start..start + size)
        .map(|i| (format!("memory-slice-{i}"), json!({"value": "1"})))
        .collect();
    json!({"name": format!("gpu-0-{size}g-{start}"),
        "attributes": {"profile": {"string": format!("{size}g")}},
        "consumesCounters": [{"counterSet": "gpu-0", "counters": counters}]})
}

async fn pod_for(client: &Client, name: &str, exact: Value) {
    create_claim(client, name, one_request(exact)).await;
    create_pod(client, name, claim_ref(name)).await;
}

fn profile(size: &str) -> Value {
    let selector = format!(r#"device.attributes["{DRIVER}"].profile == "{size}""#);
    exactly(&[selector.as_str()], json!({}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seven_1g_partitions_go_to_seven_pods_and_an_eighth_and_a_7g_wait() {
    let (_cluster, client) = cluster().await;
    let counters: serde_json::Map<String, Value> = (0..7)
        .map(|i| (format!("memory-slice-{i}"), json!({"value": "1"})))
        .collect();
    pool_slice(
        &client,
        "node-0-counters",
        json!({"sharedCounters": [{"name": "gpu-0", "counters": counters}]}),
    )
    .await;
    let mut devices: Vec<Value> = (0..7).map(|i| partition(1, i)).collect();
    devices.push(partition(7, 0));
    pool_slice(&client, "node-0-devices", json!({"devices": devices})).await;
    let mut held = Vec::new();
    for i in 0..7 {
        let name = format!("small-{i}");
        pod_for(&client, &name, profile("1g")).await;
        assert_eq!(bound(&client, &name).await, "node-0");
        let allocation = claim(&client, &name).await.allocation().cloned().unwrap();
        held.push(allocation.devices.results[0].device.clone());
    }
    held.sort();
    held.dedup();
    assert_eq!(held.len(), 7, "seven distinct partitions: {held:?}");
    pod_for(&client, "eighth", profile("1g")).await;
    pod_for(&client, "whole", profile("7g")).await;
    for waiting in ["eighth", "whole"] {
        failed_scheduling(&client, waiting, UNAVAILABLE).await;
        assert_eq!(pod_node(&client, waiting).await, None, "{waiting}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_pods_of_40gi_share_an_80gi_gpu_and_a_third_waits() {
    let (_cluster, client) = cluster().await;
    let gpu = json!({"name": "gpu-0", "allowMultipleAllocations": true,
        "attributes": {"model": {"string": "H100"}},
        "capacity": {"memory": {"value": "80Gi",
            "requestPolicy": {"default": "10Gi", "validRange": {"min": "10Gi", "step": "10Gi"}}}}});
    create(
        &client,
        ApiResource::erase::<ResourceSlice>(&()),
        json!({"metadata": {"name": "node-0-gpu"}, "spec": {"driver": DRIVER,
            "nodeName": "node-0", "pool": {"name": "node-0", "generation": 1,
            "resourceSliceCount": 1}, "devices": [gpu]}}),
    )
    .await;
    let half = exactly(&[], json!({"capacity": {"requests": {"memory": "40Gi"}}}));
    let mut shares = Vec::new();
    for name in ["first", "second"] {
        pod_for(&client, name, half.clone()).await;
        assert_eq!(bound(&client, name).await, "node-0");
        let allocation = claim(&client, name).await.allocation().cloned().unwrap();
        let result = &allocation.devices.results[0];
        assert_eq!(result.device, "gpu-0");
        assert_eq!(result.consumed_capacity["memory"].0, "40Gi");
        shares.push(result.share_id.clone().expect("a share ID"));
    }
    assert_ne!(shares[0], shares[1]);
    pod_for(&client, "third", half).await;
    failed_scheduling(&client, "third", UNAVAILABLE).await;
    assert_eq!(pod_node(&client, "third").await, None);
}
