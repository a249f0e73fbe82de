//! GPU sharing end to end on a simulated 1.37 cluster with the real agent (a file inventory of
//! one node): one H100-like GPU published as seven 1g partitions and one 7g partition over one
//! counter set, and a second GPU that several claims share by capacity.
//!
//! - Seven pods asking for a 1g partition get the seven, each claim's CDI spec naming its
//!   partition's MIG UUID in `NVIDIA_VISIBLE_DEVICES`; an eighth waits with the scheduler's
//!   `FailedScheduling` note; a pod asking for the 7g partition waits while any 1g is held and
//!   runs once none is.
//! - Two claims of 40Gi share the 80Gi GPU, each prepared with its share ID and limits
//!   (`DRA_LEDGER_SHARE_ID`, `DRA_LEDGER_MEMORY_LIMIT`, `DRA_LEDGER_COMPUTE_SHARE` from the
//!   allocation's `consumedCapacity`); a third waits until one of them is gone.
//! - With the mirror (`dra-ledger run`) following the cluster, seven held 1g partitions are one
//!   GPU equivalent and two 40Gi shares are the shared GPU's 80Gi of 80Gi, in the node's
//!   capacity, on the devices (each partition's GPU, each share with its claim) and in the
//!   metrics.

use std::fmt::Write;
use std::time::Duration;

use dra_node::local::LocalSettings;
use dra_sim::cluster::ClusterHandle;
use dra_sim::{ApiOverrides, KubernetesVersion};
use dra_types::api_mode::DraApi;
use kube::api::DeleteParams;
use serde_json::{json, Value};
use testkit::eventually;

use crate::e2e_support::{DRIVER, WAIT};
use crate::v1_mirror::{call_text, get, settings, start_ready};
use crate::v1_support::{h100s, ClusterV1};

/// The node's inventory: `gpu-0` as partitions over `gpu-0-counters`, `gpu-1` shared by
/// capacity.
fn inventory() -> String {
    let counters = |memory: u32, compute: u32| {
        format!(
            "    consumesCounters:\n      - counterSet: gpu-0-counters\n        counters: \
             {{memory-slices: {{value: \"{memory}\"}}, compute-slices: {{value: \"{compute}\"}}}}\n"
        )
    };
    let mut text = String::from(
        "sharedCounters:\n  - name: gpu-0-counters\n    counters: {memory-slices: {value: \"8\"}, \
         compute-slices: {value: \"7\"}}\ndevices:\n",
    );
    for i in 0..7 {
        write!(
            text,
            "  - name: gpu-0-mig-1g-{i}\n    attributes: {{model: H100, profile: 1g.10gb, shared: \
             false, uuid: {}}}\n    capacity: {{memory: {{value: 10Gi}}}}\n",
            mig_uuid("1g", i)
        )
        .unwrap();
        text += &counters(1, 1);
    }
    write!(
        text,
        "  - name: gpu-0-mig-7g-0\n    attributes: {{model: H100, profile: 7g.80gb, shared: false, \
         uuid: {}}}\n    \
         capacity: {{memory: {{value: 80Gi}}}}\n",
        mig_uuid("7g", 0)
    )
    .unwrap();
    text += &counters(8, 7);
    text += "  - name: gpu-1\n    attributes: {model: H100, profile: whole, shared: true}\n    \
             env: {NVIDIA_VISIBLE_DEVICES: GPU-node-0-gpu-1}\n    \
             allowMultipleAllocations: true\n    capacity:\n      memory: {value: 80Gi, \
             requestPolicy: {default: 10Gi, validRange: {min: 1Gi, step: 1Gi}}}\n      \
             compute: {value: \"100\", requestPolicy: {default: \"50\", validRange: {min: \
             \"1\", step: \"1\"}}}\n";
    text
}

/// The MIG device UUID of partition `profile`-`index` in the inventory.
fn mig_uuid(profile: &str, index: usize) -> String {
    format!("MIG-node-0-{profile}-{index}")
}

/// The 1.37 cluster of one node serving [`inventory`], with a device class per partition
/// profile and one for the shared GPU, and a claim template for each.
async fn cluster(dir: &std::path::Path) -> ClusterV1 {
    let settings = LocalSettings {
        driver_name: DRIVER.into(),
        gc_interval: Duration::from_secs(60),
        inventory_interval: Duration::from_millis(500),
    };
    let v1 = ClusterV1::start_release(
        dir,
        &[h100s(1)],
        (KubernetesVersion::V1_37, ApiOverrides::default()),
        &settings,
        ClusterHandle::kube_client,
    )
    .await;
    v1.write_inventory("node-0", &inventory());
    eventually(
        "the partitions and the shared GPU published",
        WAIT,
        || async {
            let devices: Vec<String> = v1
                .slices()
                .await
                .into_iter()
                .flat_map(|s| s.spec.devices)
                .map(|d| d.name)
                .collect();
            devices.len() == 9 && devices.iter().any(|d| d == "gpu-1")
        },
    )
    .await;
    let attribute = |name: &str| format!("device.attributes['{DRIVER}'].{name}");
    for (class, expression) in [
        ("mig-1g", format!("{} == '1g.10gb'", attribute("profile"))),
        ("mig-7g", format!("{} == '7g.80gb'", attribute("profile"))),
        ("shared-gpu", format!("{} == true", attribute("shared"))),
    ] {
        v1.device_class(
            class,
            &format!("device.driver == '{DRIVER}' && {expression}"),
        )
        .await;
        let request = if class == "shared-gpu" {
            json!({"name": "gpu", "exactly": {"deviceClassName": class,
                "capacity": {"requests": {"memory": "40Gi"}}}})
        } else {
            json!({"name": "gpu", "exactly": {"deviceClassName": class}})
        };
        v1.template(class, json!({"devices": {"requests": [request]}}))
            .await;
    }
    v1
}

async fn wait_running(v1: &ClusterV1, pod: &str) {
    eventually(format!("{pod} runs"), WAIT, || async {
        v1.phase(pod).await.as_deref() == Some("Running")
    })
    .await;
}

async fn delete_and_wait(v1: &ClusterV1, pod: &str) {
    v1.pods()
        .delete(pod, &DeleteParams::default())
        .await
        .unwrap();
    eventually(format!("{pod} gone"), WAIT, || async {
        v1.phase(pod).await.is_none()
    })
    .await;
}

/// The device allocated to pod `pod`'s claim and the claim's CDI env on `node-0`, once the
/// spec is written.
async fn prepared(v1: &ClusterV1, pod: &str) -> (String, Option<String>, String) {
    let claim = v1.claim_of(pod).await;
    let uid = claim.metadata.uid.clone().unwrap();
    let result = claim.status.unwrap().allocation.unwrap().devices.results[0].clone();
    let env = eventually(format!("the CDI spec of {pod}'s claim"), WAIT, || async {
        v1.cdi_env("node-0", &uid)
    })
    .await;
    (result.device, result.share_id, env)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn seven_1g_partitions_go_to_seven_pods_and_the_7g_waits_until_none_is_held() {
    let dir = tempfile::tempdir().unwrap();
    let v1 = cluster(dir.path()).await;
    let small: Vec<String> = (0..7).map(|i| format!("small-{i}")).collect();
    for pod in &small {
        v1.pod_from_template(pod, "mig-1g").await;
    }
    let mut partitions = Vec::new();
    for pod in &small {
        wait_running(&v1, pod).await;
        let (device, share, env) = prepared(&v1, pod).await;
        assert_eq!(share, None, "a partition is no share");
        let index: usize = device
            .strip_prefix("gpu-0-mig-1g-")
            .unwrap()
            .parse()
            .unwrap();
        let visible = format!("NVIDIA_VISIBLE_DEVICES={}", mig_uuid("1g", index));
        assert!(env.contains(&visible), "{pod}: {visible} not in {env}");
        partitions.push(device);
    }
    partitions.sort();
    partitions.dedup();
    assert_eq!(partitions.len(), 7, "seven distinct partitions");
    v1.pod_from_template("small-7", "mig-1g").await;
    let note = v1.failed_scheduling("default", "small-7").await;
    assert!(note.contains("cannot allocate all claims"), "{note}");
    v1.pod_from_template("whole", "mig-7g").await;
    let note = v1.failed_scheduling("default", "whole").await;
    assert!(note.contains("cannot allocate all claims"), "{note}");
    for pod in &small {
        delete_and_wait(&v1, pod).await;
    }
    wait_running(&v1, "small-7").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        v1.phase("whole").await.as_deref(),
        Some("Pending"),
        "the 7g waits while a 1g is held"
    );
    delete_and_wait(&v1, "small-7").await;
    wait_running(&v1, "whole").await;
    let (device, _, env) = prepared(&v1, "whole").await;
    assert_eq!(device, "gpu-0-mig-7g-0");
    assert!(env.contains(&format!("NVIDIA_VISIBLE_DEVICES={}", mig_uuid("7g", 0))));
    v1.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_claims_of_40gi_share_one_80gi_gpu_and_a_third_waits() {
    let dir = tempfile::tempdir().unwrap();
    let v1 = cluster(dir.path()).await;
    for pod in ["half-0", "half-1"] {
        v1.pod_from_template(pod, "shared-gpu").await;
    }
    let mut shares = Vec::new();
    for pod in ["half-0", "half-1"] {
        wait_running(&v1, pod).await;
        let (device, share, env) = prepared(&v1, pod).await;
        assert_eq!(device, "gpu-1");
        let share = share.expect("a share of a multi-allocation device has a share ID");
        for wanted in [
            format!("DRA_LEDGER_SHARE_ID={share}"),
            "DRA_LEDGER_MEMORY_LIMIT=40Gi".to_owned(),
            "DRA_LEDGER_COMPUTE_SHARE=50".to_owned(),
            "NVIDIA_VISIBLE_DEVICES=GPU-node-0-gpu-1".to_owned(),
        ] {
            assert!(env.contains(&wanted), "{pod}: {wanted} not in {env}");
        }
        shares.push(share);
    }
    assert_ne!(shares[0], shares[1], "each claim has its own share");
    v1.pod_from_template("half-2", "shared-gpu").await;
    let note = v1.failed_scheduling("default", "half-2").await;
    assert!(note.contains("cannot allocate all claims"), "{note}");
    delete_and_wait(&v1, "half-0").await;
    wait_running(&v1, "half-2").await;
    let (_, share, _) = prepared(&v1, "half-1").await;
    assert_eq!(
        share.as_deref(),
        Some(shares[1].as_str()),
        "the other share stays"
    );
    v1.shutdown().await;
}

/// The item of `node` in `GET /v1/nodes`.
fn node_item(nodes: &Value, node: &str) -> Value {
    nodes["items"]
        .as_array()
        .and_then(|items| items.iter().find(|n| n["name"] == node))
        .cloned()
        .unwrap_or(Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_mirror_shows_partitions_and_shares_as_capacity_in_the_api_and_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let v1 = cluster(dir.path()).await;
    let controller = start_ready(&v1, settings(dir.path(), DraApi::V1)).await;
    let small: Vec<String> = (0..7).map(|i| format!("small-{i}")).collect();
    for pod in &small {
        v1.pod_from_template(pod, "mig-1g").await;
    }
    for pod in ["half-0", "half-1"] {
        v1.pod_from_template(pod, "shared-gpu").await;
    }
    for pod in small.iter().map(String::as_str).chain(["half-0", "half-1"]) {
        wait_running(&v1, pod).await;
    }

    let capacity = eventually("both GPUs full in the node's capacity", WAIT, || async {
        let capacity =
            node_item(&get(&controller, "/v1/nodes").await, "node-0")["capacity"].clone();
        (capacity["equivalentsAllocated"] == json!(2.0)).then_some(capacity)
    })
    .await;
    assert_eq!(capacity["units"], 2, "{capacity}");
    assert_eq!(
        capacity["capacity"]["memory"],
        json!({"allocated": "80Gi", "total": "80Gi"}),
        "{capacity}"
    );
    assert_eq!(
        capacity["capacity"]["compute-slices"],
        json!({"allocated": "7", "total": "7"}),
        "{capacity}"
    );

    let devices = get(&controller, "/v1/nodes/node-0/devices").await;
    let device = |name: &str| {
        devices["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["name"] == name)
            .cloned()
            .unwrap()
    };
    for i in 0..7 {
        assert_eq!(
            device(&format!("gpu-0-mig-1g-{i}"))["parent"],
            "gpu-0-counters"
        );
    }
    let shares = device("gpu-1")["shares"].as_array().unwrap().clone();
    assert_eq!(shares.len(), 2, "{shares:?}");
    let mut names: Vec<&str> = shares.iter().map(|s| s["name"].as_str().unwrap()).collect();
    names.sort_unstable();
    let claim_names = [
        v1.claim_of("half-0").await.metadata.name.unwrap(),
        v1.claim_of("half-1").await.metadata.name.unwrap(),
    ];
    let mut expected: Vec<&str> = claim_names.iter().map(String::as_str).collect();
    expected.sort_unstable();
    assert_eq!(names, expected);
    for share in &shares {
        assert_eq!(share["consumed"]["memory"], "40Gi", "{share}");
        assert!(share["shareId"].is_string(), "{share}");
    }

    let utilisation = get(&controller, "/v1/utilisation").await;
    assert_eq!(
        utilisation["capacityByModel"]["H100"]["equivalentsAllocated"],
        json!(2.0),
        "{utilisation}"
    );
    let (_, metrics) = call_text(&controller, "GET", "/metrics", false).await;
    let gib = 1u64 << 30;
    for series in [
        "dra_ledger_device_equivalents_allocated{model=\"H100\"} 2".to_owned(),
        "dra_ledger_device_equivalents_published{model=\"H100\"} 2".to_owned(),
        format!(
            "dra_ledger_capacity_allocated{{capacity=\"memory\",model=\"H100\"}} {}",
            80 * gib
        ),
        format!(
            "dra_ledger_capacity_published{{capacity=\"memory\",model=\"H100\"}} {}",
            80 * gib
        ),
    ] {
        assert!(
            metrics.contains(&series),
            "{series} missing from\n{metrics}"
        );
    }
    controller.shutdown().await.unwrap();
    v1.shutdown().await;
}
