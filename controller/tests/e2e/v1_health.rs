//! Device health end to end on a simulated cluster with the real agents (file inventories):
//!
//! - 1.37: a device marked `Unhealthy` in its node's inventory file is tainted
//!   `gpu.dra-ledger.io/unhealthy` within one inventory interval; a new pod asking for the class
//!   is placed on the other node; once no untainted device is left a pod waits with the
//!   scheduler's `FailedScheduling` text, and a pod tolerating the taint gets the tainted device;
//!   the pod already running on the device shows it `Unhealthy` with the message in
//!   `status.containerStatuses[].allocatedResourcesStatus` (the kubelet's health stream); marking
//!   the devices healthy again takes the taints off and the pod's status back to `Healthy`.
//!   `dra-ledger explain pod`, run as a process, names the tainted devices with their reason as
//!   why the waiting pod waits, and the running pod's unhealthy device.
//! - 1.30: the marked device leaves the node's `ResourceSlice` (the agent withholds it from the
//!   resource stream) and comes back when healthy.
//!
//!   The controller's mirror, running beside them, records the change in the ledger (the device
//!   view's health with the reason, the node's unhealthy count, a `deviceUnhealthy` audit entry)
//!   and its reversal.

use std::path::Path;
use std::time::{Duration, Instant};

use dra_node::local::{LocalAgents, LocalNode, LocalSettings};
use dra_sim::actors::plugins::{PLUGINS_DIR, REGISTRY_DIR};
use dra_sim::cluster::{start_cluster, ClusterConfig, ClusterHandle};
use dra_sim::{ApiOverrides, KubernetesVersion};
use dra_types::resource_v1::ResourceSlice;
use k8s_openapi::api::resource::v1alpha2::ResourceSlice as SliceV1alpha2;
use kube::api::ListParams;
use kube::Api;
use serde_json::{json, Value};
use testkit::eventually;

use crate::e2e_support::{DRIVER, WAIT};
use crate::v1_mirror::{self, get, start_ready};
use crate::v1_support::{h100s, ClusterV1};
use dra_controller::process::RunningController;
use dra_types::api_mode::DraApi;

/// How often the agents read their inventory (and so judge health).
const INTERVAL: Duration = Duration::from_millis(500);

/// Marks `devices` of the inventory file at `path` with `health` and a message, or takes the
/// marks off (`None`); the file is replaced at once, so an agent never reads half of it.
fn mark(path: &Path, devices: &[&str], health: Option<&str>) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut out = String::new();
    let mut current = "";
    for line in text.lines() {
        if line.starts_with("    health") {
            continue;
        }
        out.push_str(line);
        out.push('\n');
        if let Some(name) = line.strip_prefix("  - name: ") {
            current = if devices.contains(&name) { name } else { "" };
        }
        if line.starts_with("    deviceNodes") && !current.is_empty() {
            if let Some(health) = health {
                out += "    health: ";
                out += health;
                out += "
    healthMessage: fan failed
";
            }
        }
    }
    let partial = path.with_extension("partial");
    std::fs::write(&partial, out).unwrap();
    std::fs::rename(partial, path).unwrap();
}

fn inventory_of<'a>(v1: &'a ClusterV1, node: &str) -> &'a Path {
    &v1.inventories.iter().find(|(n, _)| n == node).unwrap().1
}

/// The taints of our health key on each device of `node`'s slice.
async fn health_taints(v1: &ClusterV1, node: &str) -> Vec<(String, Value)> {
    let key = format!("{DRIVER}/unhealthy");
    Api::<ResourceSlice>::all(v1.client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|s| s.spec.node_name.as_deref() == Some(node))
        .flat_map(|s| s.spec.devices)
        .flat_map(|d| {
            let name = d.name.clone();
            d.taints
                .into_iter()
                .filter(|t| t.key == key)
                .map(move |t| (name.clone(), serde_json::to_value(t).unwrap()))
        })
        .collect()
}

/// `allocatedResourcesStatus` of the first container of pod `name`.
async fn allocated_status(v1: &ClusterV1, name: &str) -> Value {
    let pod = v1.pods().get(name).await.unwrap();
    pod.data["status"]["containerStatuses"][0]["allocatedResourcesStatus"].clone()
}

/// The output of `dra-ledger explain pod default/<name>` run as a process against the cluster
/// (a kubeconfig written into `dir`, the API chosen by discovery).
async fn explain(v1: &ClusterV1, dir: &Path, name: &str) -> String {
    let kubeconfig = dir.join("explain-kubeconfig");
    v1.cluster.server().write_kubeconfig(&kubeconfig).unwrap();
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_dra-ledger"))
        .args([
            "explain",
            "pod",
            &format!("default/{name}"),
            "--driver-name",
            DRIVER,
        ])
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .output()
        .await
        .expect("dra-ledger runs");
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    text
}

/// `explain pod` names node-0's tainted devices with their reason as why pod `waiting` waits,
/// and the unhealthy device the kubelet reports for pod `running`.
async fn explains_the_waiting_and_the_running_pod(v1: &ClusterV1, dir: &Path) {
    let text = explain(v1, dir, "waiting").await;
    let why = text
        .lines()
        .find(|l| l.starts_with("why: "))
        .unwrap_or_default();
    for device in ["gpu-0", "gpu-1"] {
        let named = format!("{device} on node-0 is unhealthy (Marked since ");
        assert!(why.contains(&named), "{text}");
    }
    assert!(
        why.contains(&format!("taint {DRIVER}/unhealthy:NoSchedule")),
        "{text}"
    );
    assert!(why.contains("cannot allocate all claims"), "{text}");
    let text = explain(v1, dir, "running").await;
    assert!(
        text.starts_with("pod default/running: Running on node-0\n"),
        "{text}"
    );
    assert!(text.contains(": Unhealthy: fan failed"), "{text}");
    assert!(
        text.contains("health: the kubelet reports device "),
        "{text}"
    );
}

/// A pod `name` asking for one device of class `gpu` through its own claim, tolerating the
/// health taint when `tolerate`.
async fn pod_for_class(v1: &ClusterV1, name: &str, tolerate: bool) {
    let mut exactly = json!({"deviceClassName": "gpu"});
    if tolerate {
        exactly["tolerations"] =
            json!([{"key": format!("{DRIVER}/unhealthy"), "operator": "Exists"}]);
    }
    v1.claim(
        name,
        json!({"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}),
    )
    .await;
    v1.create_pod(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "containers": [{"name": "main", "image": "busybox",
                            "resources": {"claims": [{"name": "gpu"}]}}],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": name}],
        },
    }))
    .await;
}

#[tokio::test]
async fn on_1_37_an_unhealthy_device_is_tainted_avoided_tolerated_reported_and_restored() {
    let dir = tempfile::tempdir().unwrap();
    let settings = LocalSettings {
        driver_name: DRIVER.into(),
        gc_interval: Duration::from_secs(60),
        inventory_interval: INTERVAL,
    };
    let v1 = ClusterV1::start_release(
        dir.path(),
        &[h100s(2), h100s(1)],
        (KubernetesVersion::V1_37, ApiOverrides::default()),
        &settings,
        ClusterHandle::kube_client,
    )
    .await;
    v1.device_class("gpu", &format!("device.driver == {DRIVER:?}"))
        .await;
    let controller = start_ready(&v1, v1_mirror::settings(dir.path(), DraApi::V1)).await;
    let running = v1.running_pod("running", "node-0", "gpu-0").await;
    let running_uid = running.metadata.uid.clone().unwrap();

    let marked = Instant::now();
    mark(
        inventory_of(&v1, "node-0"),
        &["gpu-0", "gpu-1"],
        Some("Unhealthy"),
    );
    let taints = eventually("node-0's devices tainted", WAIT, || async {
        let taints = health_taints(&v1, "node-0").await;
        (taints.len() == 2).then_some(taints)
    })
    .await;
    let took = marked.elapsed();
    assert!(
        took < INTERVAL + Duration::from_secs(3),
        "tainted {took:?} after the mark"
    );
    for (device, taint) in &taints {
        assert_eq!(taint["value"], "Marked", "{device}: {taint}");
        assert_eq!(taint["effect"], "NoSchedule", "{device}: {taint}");
        assert!(taint["timeAdded"].is_string(), "{device}: {taint}");
    }
    assert!(health_taints(&v1, "node-1").await.is_empty());

    let status = eventually(
        "the running pod shows its device unhealthy",
        WAIT,
        || async {
            let status = allocated_status(&v1, "running").await;
            (status[0]["resources"][0]["health"] == "Unhealthy").then_some(status)
        },
    )
    .await;
    assert_eq!(
        status,
        json!([{"name": "claim:gpu", "resources": [{
            "resourceID": format!("{DRIVER}/claim={running_uid}"),
            "health": "Unhealthy",
            "message": "fan failed",
        }]}])
    );

    pod_for_class(&v1, "elsewhere", false).await;
    eventually("the new pod placed on node-1", WAIT, || async {
        v1.node_of("elsewhere").await.as_deref() == Some("node-1")
    })
    .await;
    pod_for_class(&v1, "waiting", false).await;
    let note = v1.failed_scheduling("default", "waiting").await;
    assert!(note.contains("cannot allocate all claims"), "{note}");
    assert_eq!(v1.node_of("waiting").await, None);
    explains_the_waiting_and_the_running_pod(&v1, dir.path()).await;
    pod_for_class(&v1, "tolerant", true).await;
    eventually("the tolerant pod placed on node-0", WAIT, || async {
        v1.node_of("tolerant").await.as_deref() == Some("node-0")
    })
    .await;
    let tolerant = v1.claims().get("tolerant").await.unwrap();
    let results = tolerant.status.unwrap().allocation.unwrap().devices.results;
    assert_eq!(results[0].device, "gpu-1", "the tainted free device");

    ledger_sees_node_0_unhealthy(&controller).await;

    mark(inventory_of(&v1, "node-0"), &[], None);
    eventually("node-0's taints gone", WAIT, || async {
        health_taints(&v1, "node-0").await.is_empty()
    })
    .await;
    eventually("the running pod shows its device healthy", WAIT, || async {
        allocated_status(&v1, "running").await
            == json!([{"name": "claim:gpu", "resources": [{
                "resourceID": format!("{DRIVER}/claim={running_uid}"),
                "health": "Healthy",
            }]}])
    })
    .await;
    ledger_sees_node_0_healthy(&controller).await;
    controller.shutdown().await.unwrap();
    v1.shutdown().await;
}

/// Each device of `node` in the ledger's device view with its health state, e.g.
/// `gpu-0 unhealthy Marked`.
async fn ledger_health(controller: &RunningController, node: &str) -> Vec<String> {
    let devices = get(controller, &format!("/v1/nodes/{node}/devices")).await;
    devices["items"].as_array().map_or_else(Vec::new, |items| {
        items
            .iter()
            .map(|d| {
                let health = &d["health"];
                let reason = health["reason"].as_str().unwrap_or("-");
                format!(
                    "{} {} {reason}",
                    d["name"].as_str().unwrap(),
                    health["state"].as_str().unwrap()
                )
            })
            .collect()
    })
}

/// The ledger (through the mirror) shows both GPUs of node-0 unhealthy for `Marked`: the device
/// view, the node counts and an audit entry per device.
async fn ledger_sees_node_0_unhealthy(controller: &RunningController) {
    eventually(
        "the ledger sees node-0's devices unhealthy",
        WAIT,
        || async {
            ledger_health(controller, "node-0").await
                == ["gpu-0 unhealthy Marked", "gpu-1 unhealthy Marked"]
        },
    )
    .await;
    let nodes = get(controller, "/v1/nodes").await;
    let unhealthy: Vec<(String, Value)> = nodes["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["name"].as_str().unwrap().to_owned(),
                n["unhealthy"].clone(),
            )
        })
        .collect();
    assert_eq!(
        unhealthy,
        [
            ("node-0".to_owned(), json!(2)),
            ("node-1".to_owned(), json!(0))
        ]
    );
    let audit = get(controller, "/v1/audit?limit=1000").await;
    let marked_devices: Vec<&Value> = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event"] == "deviceUnhealthy" && e["node"] == "node-0")
        .flat_map(|e| e["devices"].as_array().unwrap())
        .collect();
    assert_eq!(marked_devices.len(), 2, "{audit}");
}

/// The ledger shows node-0's GPUs healthy again, with a `deviceHealthy` audit entry.
async fn ledger_sees_node_0_healthy(controller: &RunningController) {
    eventually(
        "the ledger sees node-0's devices healthy again",
        WAIT,
        || async {
            ledger_health(controller, "node-0").await == ["gpu-0 healthy -", "gpu-1 healthy -"]
        },
    )
    .await;
    let audit = get(controller, "/v1/audit?limit=1000").await;
    assert!(audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["event"] == "deviceHealthy" && e["node"] == "node-0"));
}

/// The devices of node-0's `v1alpha2` slice.
async fn devices_130(client: &kube::Client) -> Vec<String> {
    Api::<SliceV1alpha2>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|s| s.node_name.as_deref() == Some("node-0"))
        .flat_map(|s| s.named_resources.map(|n| n.instances).unwrap_or_default())
        .map(|i| i.name)
        .collect()
}

#[tokio::test]
async fn on_1_30_an_unhealthy_device_leaves_the_inventory_and_returns() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("node-0");
    std::fs::create_dir_all(&root).unwrap();
    let inventory = root.join("devices.yaml");
    std::fs::write(&inventory, crate::node_agents::inventory(&root)).unwrap();
    let kubelet = root.join("kubelet");
    let mut config = ClusterConfig {
        nodes: 1,
        devices_per_node: 2,
        ..ClusterConfig::default()
    };
    config.kubelet_dirs.insert("node-0".into(), kubelet.clone());
    let cluster = start_cluster(config).await.expect("cluster starts");
    let client = cluster.kube_client();
    let node = LocalNode {
        name: "node-0".into(),
        registry_dir: kubelet.join(REGISTRY_DIR),
        plugins_dir: kubelet.join(PLUGINS_DIR),
        dir: root.join("agent"),
        inventory: inventory.clone(),
    };
    let settings = LocalSettings {
        driver_name: DRIVER.into(),
        gc_interval: Duration::from_secs(60),
        inventory_interval: INTERVAL,
    };
    let agents = LocalAgents::start(&[node], &settings, Some(&client))
        .await
        .unwrap();
    eventually("both devices published", WAIT, || async {
        devices_130(&client).await == ["gpu-0", "gpu-1"]
    })
    .await;
    mark(&inventory, &["gpu-1"], Some("Unhealthy"));
    eventually("gpu-1 withheld", WAIT, || async {
        devices_130(&client).await == ["gpu-0"]
    })
    .await;
    mark(&inventory, &[], None);
    eventually("gpu-1 back", WAIT, || async {
        devices_130(&client).await == ["gpu-0", "gpu-1"]
    })
    .await;
    agents.shutdown().await.unwrap();
    cluster.shutdown().await;
}
