//! `dra-ledger admin cordon` on a simulated 1.37 cluster (`--dra-api v1`, `DeviceTaintRule`
//! served in `resource.k8s.io/v1`): cordon writes a `NoSchedule` rule with our
//! `<driver>/cordoned` key selecting the device, so the kube-scheduler sends new pods to other
//! devices while the ledger shows the device cordoned; uncordon deletes the rule and the device
//! is allocated again. (On 1.34 the same calls answer 409: `v1_mirror`.)

use std::path::Path;
use std::time::Duration;

use dra_node::local::LocalSettings;
use dra_sim::cluster::ClusterHandle;
use dra_sim::{ApiOverrides, KubernetesVersion};
use dra_types::api_mode::DraApi;
use dra_types::resource_v1::DeviceTaintRule;
use kube::api::ListParams;
use kube::Api;
use testkit::eventually;

use crate::e2e_support::{DRIVER, WAIT};
use crate::v1_mirror::{call, class_of, get, node_counts, one_of, settings, start_ready};
use crate::v1_support::{h100s, ClusterV1};

async fn cluster_137(dir: &Path) -> ClusterV1 {
    let settings = LocalSettings {
        driver_name: DRIVER.into(),
        gc_interval: Duration::from_secs(60),
        inventory_interval: Duration::from_secs(60),
    };
    let v1 = ClusterV1::start_release(
        dir,
        &[h100s(1), h100s(1)],
        (KubernetesVersion::V1_37, ApiOverrides::default()),
        &settings,
        ClusterHandle::kube_client,
    )
    .await;
    v1.overlay_device_classes().await;
    v1
}

async fn rules(v1: &ClusterV1) -> Vec<DeviceTaintRule> {
    Api::<DeviceTaintRule>::all(v1.client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cordon_sends_new_pods_elsewhere_and_uncordon_brings_the_device_back() {
    let dir = tempfile::tempdir().unwrap();
    let v1 = cluster_137(dir.path()).await;
    let controller = start_ready(&v1, settings(dir.path(), DraApi::V1)).await;
    let cordon = "/v1/nodes/node-0/devices/gpu-0/cordon";
    let (status, body) = call(&controller, "POST", cordon, true).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["cordoned"], true);
    let written = rules(&v1).await;
    assert_eq!(written.len(), 1);
    let spec = serde_json::to_value(&written[0].spec).unwrap();
    assert_eq!(
        spec,
        serde_json::json!({"deviceSelector": {"driver": DRIVER, "pool": "node-0", "device": "gpu-0"},
            "taint": {"key": format!("{DRIVER}/cordoned"), "effect": "NoSchedule",
                "timeAdded": spec["taint"]["timeAdded"]}})
    );
    let nodes = get(&controller, "/v1/nodes").await;
    let cordoned_node = nodes["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == "node-0")
        .unwrap();
    assert_eq!(cordoned_node["devices"]["cordoned"], 1, "{nodes}");
    // Idempotent: a second cordon keeps the one rule.
    assert_eq!(call(&controller, "POST", cordon, true).await.0, 200);
    assert_eq!(rules(&v1).await.len(), 1);

    v1.template("h100", one_of(&class_of("h100"))).await;
    v1.pod_from_template("first", "h100").await;
    let first = eventually("first is scheduled", WAIT, || async {
        v1.node_of("first").await
    })
    .await;
    assert_eq!(first, "node-1", "the cordoned device is not handed out");
    v1.pod_from_template("second", "h100").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        v1.node_of("second").await,
        None,
        "no free device but the cordoned one"
    );

    let (status, body) = call(
        &controller,
        "POST",
        "/v1/nodes/node-0/devices/gpu-0/uncordon",
        true,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(rules(&v1).await.is_empty());
    let second = eventually("second is scheduled", WAIT, || async {
        v1.node_of("second").await
    })
    .await;
    assert_eq!(second, "node-0");
    eventually(
        "the ledger shows it uncordoned and allocated",
        WAIT,
        || async {
            (node_counts(&controller).await.get("node-0") == Some(&(1, 1, 0))).then_some(())
        },
    )
    .await;
    controller.shutdown().await.unwrap();
    v1.shutdown().await;
}
