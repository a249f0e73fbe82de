//! The node agent on a simulated 1.34 cluster: the agents publish one `ResourceSlice` per node,
//! the kubelet calls `v1.DRAPlugin` for claims allocated from those slices, pods run only once
//! their claim's CDI spec is written, sharing from our opaque device configuration is enforced
//! on the node, a running pod's claim shows its devices Ready in its status and none of ours
//! once the pod is gone, and an inventory change shows in the slice with a higher pool
//! generation.

use std::time::Duration;

use serde_json::{json, Value};
use testkit::eventually;

use crate::e2e_support::{DRIVER, WAIT};
use crate::v1_support::{gpu_pci_address, gpu_uuid, h100s, ClusterV1};

/// Our opaque device configuration sharing the claim's devices with up to `consumers` claims.
fn shared(consumers: u32) -> Value {
    json!([{
        "source": "FromClaim",
        "requests": ["gpu"],
        "opaque": {"driver": DRIVER, "parameters": {
            "apiVersion": "dra-ledger.io/v1alpha1", "kind": "DeviceConfig",
            "sharing": {"mode": "Shared", "maxConsumers": consumers},
        }},
    }])
}

/// A claim spec asking for one device of class `gpu`.
fn one_gpu() -> Value {
    json!({"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}})
}

/// `GET /v1/prepared` of the agent on `node`.
async fn prepared_on(v1: &ClusterV1, node: &str) -> String {
    let (_, admin) = v1
        .agents
        .admin_addrs()
        .into_iter()
        .find(|(n, _)| *n == node)
        .unwrap();
    let (status, body) = tokio::task::spawn_blocking(move || {
        testkit::process::http_get(&admin.to_string(), "/v1/prepared")
    })
    .await
    .unwrap();
    assert_eq!(status, 200, "{body}");
    body
}

/// One slice per node, written by its agent: our driver, the pool named after the node, `devices`.
async fn assert_one_slice_per_node(v1: &ClusterV1, devices: &[&str]) {
    for slice in v1.slices().await {
        let spec = &slice.spec;
        assert_eq!(spec.driver, DRIVER);
        let node = spec.node_name.clone().unwrap();
        assert_eq!(spec.pool.name, node, "the pool is named after the node");
        assert_eq!(spec.pool.resource_slice_count, 1);
        let names: Vec<&str> = spec.devices.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, devices, "{node}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slices_prepare_sharing_and_unprepare_on_a_1_34_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let v1 = ClusterV1::start(dir.path(), &[h100s(2), h100s(2)], Duration::from_secs(60)).await;

    assert_one_slice_per_node(&v1, &["gpu-0", "gpu-1"]).await;

    v1.device_class("gpu", &format!("device.driver == \"{DRIVER}\""))
        .await;
    // Claim a shares gpu-1 of node-0 with one more consumer.
    let a = v1.claim("a", one_gpu()).await;
    let pod_a = v1.pod("a", "a", "node-0").await;
    v1.allocate(
        "a",
        &[(DRIVER, "node-0", "gpu-1")],
        "node-0",
        shared(2),
        &pod_a,
    )
    .await;
    let uid_a = a.metadata.uid.clone().unwrap();
    eventually("pod a running", WAIT, || async {
        let running = v1.phase("a").await.as_deref() == Some("Running");
        if running {
            let env = v1.cdi_env("node-0", &uid_a);
            let env = env.expect("pod a Running before its claim was prepared");
            assert!(env.contains("DRA_LEDGER_DEVICES=gpu-1"), "{env}");
        }
        running
    })
    .await;

    // Claim b wants gpu-1 exclusively: the agent refuses it while claim a holds the device.
    let uid_a_text = uid_a.clone();
    let b = v1.claim("b", one_gpu()).await;
    let pod_b = v1.pod("b", "b", "node-0").await;
    v1.allocate(
        "b",
        &[(DRIVER, "node-0", "gpu-1")],
        "node-0",
        json!([]),
        &pod_b,
    )
    .await;
    // (An earlier event may tell that the pod was not yet in the claim's reservedFor.)
    let refusal = eventually("pod b's prepare refused by the agent", WAIT, || async {
        v1.events("b", "FailedPrepareDynamicResources")
            .await
            .into_iter()
            .find(|message| message.contains("gpu-1"))
    })
    .await;
    assert!(refusal.contains(&uid_a_text), "names the holder: {refusal}");
    assert_ne!(v1.phase("b").await.as_deref(), Some("Running"));
    let uid_b = b.metadata.uid.clone().unwrap();
    assert!(v1.cdi_env("node-0", &uid_b).is_none());

    // A claim on the other node is prepared there.
    let c = v1.claim("c", one_gpu()).await;
    let pod_c = v1.pod("c", "c", "node-1").await;
    v1.allocate(
        "c",
        &[(DRIVER, "node-1", "gpu-0")],
        "node-1",
        json!([]),
        &pod_c,
    )
    .await;
    let uid_c = c.metadata.uid.clone().unwrap();
    eventually("pod c running on node-1", WAIT, || async {
        v1.phase("c").await.as_deref() == Some("Running")
    })
    .await;
    assert!(v1.cdi_env("node-1", &uid_c).is_some());
    assert!(prepared_on(&v1, "node-1").await.contains(&uid_c));

    // Deleting pod a unprepares claim a before the pod is gone; then claim b gets gpu-1.
    v1.pods()
        .delete("a", &kube::api::DeleteParams::default())
        .await
        .unwrap();
    eventually("pod a gone", WAIT, || async {
        let gone = v1.phase("a").await.is_none();
        if gone {
            assert!(
                v1.cdi_env("node-0", &uid_a).is_none(),
                "pod a gone before its claim was unprepared"
            );
        }
        gone
    })
    .await;
    assert!(!prepared_on(&v1, "node-0").await.contains(&uid_a));
    eventually("pod b running once gpu-1 is free", WAIT, || async {
        v1.phase("b").await.as_deref() == Some("Running")
    })
    .await;
    let env = v1.cdi_env("node-0", &uid_b).unwrap();
    assert!(env.contains("DRA_LEDGER_DEVICES=gpu-1"), "{env}");
    v1.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_pods_claim_shows_its_device_ready_and_none_of_ours_once_the_pod_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let v1 = ClusterV1::start(dir.path(), &[h100s(2)], Duration::from_secs(60)).await;
    v1.device_class("gpu", &format!("device.driver == \"{DRIVER}\""))
        .await;
    let claim = v1.running_pod("a", "node-0", "gpu-1").await;
    let uid = claim.metadata.uid.clone().unwrap();
    let status = eventually("claim a's device status", WAIT, || async {
        let status = v1.device_status("a").await;
        (!status.is_empty()).then_some(status)
    })
    .await;
    assert_eq!(status.len(), 1, "{status:?}");
    let entry = &status[0];
    assert_eq!(
        (&entry["driver"], &entry["pool"], &entry["device"]),
        (&json!(DRIVER), &json!("node-0"), &json!("gpu-1"))
    );
    let condition = &entry["conditions"][0];
    assert_eq!(
        (
            &condition["type"],
            &condition["status"],
            &condition["reason"]
        ),
        (&json!("Ready"), &json!("True"), &json!("Prepared"))
    );
    let cdi_id = format!("{DRIVER}/claim={uid}");
    assert!(
        condition["message"].as_str().unwrap().ends_with(&cdi_id),
        "{condition}"
    );
    assert_eq!(
        entry["data"],
        json!({"apiVersion": "dra-ledger.io/v1alpha1", "kind": "DeviceData",
            "uuid": gpu_uuid("node-0", "gpu-1"), "pciAddress": gpu_pci_address("gpu-1")})
    );

    // The pod goes: the kubelet unprepares the claim, the resourceclaim controller deallocates
    // it, and neither the agent's entry nor a refused deallocation is left.
    v1.pods()
        .delete("a", &kube::api::DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "claim a deallocated without our device status",
        WAIT,
        || async {
            let claim = v1.claims().get("a").await.unwrap();
            !claim.is_allocated() && v1.device_status("a").await.is_empty()
        },
    )
    .await;
    v1.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inventory_change_republishes_the_pool_with_a_higher_generation() {
    let dir = tempfile::tempdir().unwrap();
    let v1 = ClusterV1::start(dir.path(), &[h100s(2)], Duration::from_millis(200)).await;
    let before = v1.slices().await.remove(0);
    assert_eq!(before.spec.devices.len(), 2);

    v1.set_inventory("node-0", &h100s(1));
    let after = eventually("the slice shows one device", WAIT, || async {
        let slices = v1.slices().await;
        (slices.len() == 1 && slices[0].spec.devices.len() == 1).then(|| slices[0].clone())
    })
    .await;
    assert_eq!(after.spec.devices[0].name, "gpu-0");
    assert!(
        after.spec.pool.generation > before.spec.pool.generation,
        "generation {} then {}",
        before.spec.pool.generation,
        after.spec.pool.generation
    );
    v1.shutdown().await;
}
