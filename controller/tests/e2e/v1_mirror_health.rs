//! Device health in the mirror on a simulated 1.37 (device taints GA): a slice of our driver
//! whose device carries the `<driver>/unhealthy` taint makes the device unhealthy in the ledger,
//! with the reason and the taint's time, an audit entry, the admin API's counts, device view and
//! claim flag, and the metrics; the slice without the taint makes it healthy again. A claim that
//! waits while every free device is unhealthy gets an explanation naming them.

use dra_controller::process::RunningController;
use dra_sim::KubernetesVersion;
use dra_types::api_mode::DraApi;
use dra_types::resource_v1::ResourceSlice;
use kube::api::{Patch, PatchParams, PostParams};
use kube::Api;
use serde_json::{json, Value};
use testkit::eventually;

use crate::e2e_support::{DRIVER, WAIT};
use dra_controller::mirror::EXPLANATION_REASON;

use crate::v1_mirror::{call_text, class_of, get, notes, one_of, settings, start_ready};
use crate::v1_support::{h100s, ClusterV1};

/// A slice of our driver on `node-9`, which no agent serves, with `gpu-0` and `gpu-1`; `gpu-1`
/// (and `gpu-0` with `both`) tainted unhealthy for `reason` when given.
fn slice_with(generation: i64, reason: Option<&str>, both: bool) -> Value {
    let taints = reason.map_or_else(Vec::new, |reason| {
        vec![
            json!({"key": format!("{DRIVER}/unhealthy"), "value": reason,
            "effect": "NoSchedule", "timeAdded": "2026-01-02T03:04:05Z"}),
        ]
    });
    let first = if both { taints.clone() } else { Vec::new() };
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": "node-9-gpus"},
        "spec": {"driver": DRIVER, "nodeName": "node-9",
            "pool": {"name": "node-9", "generation": generation, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0", "taints": first}, {"name": "gpu-1", "taints": taints}]}})
}

/// [`slice_with`] with only `gpu-1` tainted.
fn slice(generation: i64, reason: Option<&str>) -> Value {
    slice_with(generation, reason, false)
}

/// The health of `gpu-1` of node-9 in the device view.
async fn health(controller: &RunningController) -> Value {
    let (status, body) = call_text(controller, "GET", "/v1/nodes/node-9/devices", false).await;
    if status != 200 {
        return Value::Null;
    }
    let devices: Value = serde_json::from_str(&body).unwrap();
    devices["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == "gpu-1")
        .map_or(Value::Null, |d| d["health"].clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tainted_device_is_unhealthy_in_the_ledger_until_the_taint_goes() {
    let dir = tempfile::tempdir().unwrap();
    let v1 = ClusterV1::start_on(KubernetesVersion::V1_37, dir.path(), &[h100s(1)]).await;
    let controller = start_ready(&v1, settings(dir.path(), DraApi::V1)).await;
    let slices = Api::<ResourceSlice>::all(v1.client.clone());
    let tainted: ResourceSlice = serde_json::from_value(slice(1, Some("XidCritical"))).unwrap();
    slices
        .create(&PostParams::default(), &tainted)
        .await
        .unwrap();

    let expected = json!({"state": "unhealthy", "reason": "XidCritical",
        "sinceMs": 1_767_323_045_000_u64});
    eventually("gpu-1 unhealthy in the ledger", WAIT, || async {
        (health(&controller).await == expected).then_some(())
    })
    .await;
    let nodes = get(&controller, "/v1/nodes").await;
    let node_9 = nodes["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == "node-9")
        .unwrap()
        .clone();
    assert_eq!(node_9["unhealthy"], 1);
    assert_eq!(node_9["devices"]["total"], 2);
    let audit = get(&controller, "/v1/audit?limit=1000").await;
    let unhealthy: Vec<&Value> = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event"] == "deviceUnhealthy")
        .collect();
    assert_eq!(unhealthy.len(), 1, "{audit}");
    assert_eq!(unhealthy[0]["reason"], "XidCritical");
    assert_eq!(unhealthy[0]["devices"], json!(["gpu-1"]));
    let (_, metrics) = call_text(&controller, "GET", "/metrics", false).await;
    for series in [
        "dra_ledger_unhealthy_devices{allocated=\"false\",node=\"node-9\"} 1",
        "dra_ledger_device_health_changes_total{health=\"unhealthy\",node=\"node-9\"} 1",
    ] {
        assert!(metrics.contains(series), "{series} missing from\n{metrics}");
    }

    // The taint goes: healthy again, one more audit entry, the counts follow.
    let healthy = slice(2, None);
    slices
        .patch(
            "node-9-gpus",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": healthy["spec"]})),
        )
        .await
        .unwrap();
    eventually("gpu-1 healthy again", WAIT, || async {
        (health(&controller).await == json!({"state": "healthy"})).then_some(())
    })
    .await;
    let audit = get(&controller, "/v1/audit?limit=1000").await;
    assert!(audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["event"] == "deviceHealthy" && e["devices"] == json!(["gpu-1"])));
    let (_, metrics) = call_text(&controller, "GET", "/metrics", false).await;
    for series in [
        "dra_ledger_unhealthy_devices{allocated=\"false\",node=\"node-9\"} 0",
        "dra_ledger_device_health_changes_total{health=\"healthy\",node=\"node-9\"} 1",
    ] {
        assert!(metrics.contains(series), "{series} missing from\n{metrics}");
    }
    controller.shutdown().await.unwrap();
    v1.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_waiting_while_every_free_device_is_unhealthy_is_told_so() {
    let dir = tempfile::tempdir().unwrap();
    let v1 = ClusterV1::start_on(KubernetesVersion::V1_37, dir.path(), &[h100s(1)]).await;
    v1.overlay_device_classes().await;
    let controller = start_ready(&v1, settings(dir.path(), DraApi::V1)).await;
    // node-0's only GPU goes to a pod; node-9's two GPUs are both tainted unhealthy.
    v1.template("h100", one_of(&class_of("h100"))).await;
    v1.pod_from_template("a", "h100").await;
    eventually("node-0's GPU allocated in the ledger", WAIT, || async {
        let nodes = get(&controller, "/v1/nodes").await;
        (nodes["items"][0]["devices"]["allocated"] == 1).then_some(())
    })
    .await;
    let tainted: ResourceSlice =
        serde_json::from_value(slice_with(1, Some("XidCritical"), true)).unwrap();
    Api::<ResourceSlice>::all(v1.client.clone())
        .create(&PostParams::default(), &tainted)
        .await
        .unwrap();

    v1.claim("waits", one_of(&class_of("h100"))).await;

    let note = eventually(
        "a NotAllocated event naming the unhealthy devices",
        WAIT,
        || async {
            notes(&v1, "waits", EXPLANATION_REASON)
                .await
                .into_iter()
                .find(|note| note.starts_with("every free device"))
        },
    )
    .await;
    assert_eq!(
        note,
        format!(
            "every free device of {DRIVER} (class {}) is unhealthy in the ledger, tainted \
             {DRIVER}/unhealthy: node-9/gpu-0 (XidCritical), node-9/gpu-1 (XidCritical): 3 \
             devices, 1 allocated, 0 cordoned, 0 missing",
            class_of("h100")
        )
    );
    controller.shutdown().await.unwrap();
    v1.shutdown().await;
}
