//! Device health as the whole agent shows it, a device marked in its file inventory: on 1.37
//! the slice taint appears within one inventory interval and goes when the device is healthy
//! again; on 1.34 (device taints dropped by the API server) the device leaves the slice instead
//! and the slice is not rewritten in a loop; the kubelet's health stream starts with every
//! device and follows each change; on 1.30 (no API server: `v1alpha2`) the device leaves the
//! resource stream and comes back.

use std::path::Path;
use std::time::{Duration, Instant};

use dra_node::agent::{AgentConfig, HealthConfig};
use dra_node::grpc::PluginSockets;
use dra_sim::KubernetesVersion;
use dra_types::kubelet::v1alpha1::dra_resource_health_client::DraResourceHealthClient;
use dra_types::kubelet::v1alpha1::{
    HealthStatus, NodeWatchResourcesRequest, NodeWatchResourcesResponse,
};
use dra_types::kubelet::v1alpha3::node_client::NodeClient;
use dra_types::kubelet::v1alpha3::{
    NodeListAndWatchResourcesRequest, NodeListAndWatchResourcesResponse,
};
use dra_types::resource_v1::ResourceSlice;
use testkit::eventually::eventually;
use tokio::sync::oneshot;

use crate::support::{connect, DRIVER, PATIENCE};
use crate::v1_support::{agent_config, slice_when, AgentSettings, Cluster134, V1Agent, NODE};

/// An inventory file of gpu-0 and gpu-1, gpu-1 with `health` (and a message) when given.
fn write_health(path: &Path, health: Option<&str>) {
    let mut text = String::from(
        "devices:\n  - name: gpu-0\n    attributes: {model: H100}\n  - name: gpu-1\n    attributes: {model: H100}\n",
    );
    if let Some(health) = health {
        text += "    health: ";
        text += health;
        text += "
    healthMessage: fan failed
";
    }
    std::fs::write(path, text).unwrap();
}

fn settings(inventory: &Path, interval: Duration) -> AgentSettings {
    AgentSettings {
        inventory_interval: interval,
        health: HealthConfig {
            settle: interval,
            ..HealthConfig::default()
        },
        ..AgentSettings::file(inventory)
    }
}

fn taints_of<'s>(
    slice: &'s ResourceSlice,
    device: &str,
) -> &'s [dra_types::resource_v1::DeviceTaint] {
    &slice
        .spec
        .devices
        .iter()
        .find(|d| d.name == device)
        .unwrap()
        .taints
}

#[tokio::test]
async fn a_device_marked_unhealthy_is_tainted_within_one_inventory_interval_and_untainted_when_healthy(
) {
    let cluster = Cluster134::start_at(KubernetesVersion::V1_37).await;
    let dir = tempfile::tempdir().unwrap();
    let inventory = dir.path().join("devices.yaml");
    write_health(&inventory, None);
    let interval = Duration::from_millis(500);
    let mut agent = V1Agent::start(&cluster, dir.path(), settings(&inventory, interval)).await;
    slice_when(&cluster, "both devices untainted", |s| {
        s.spec.devices.len() == 2 && s.spec.devices.iter().all(|d| d.taints.is_empty())
    })
    .await;

    let marked = Instant::now();
    write_health(&inventory, Some("Unhealthy"));
    let slice = slice_when(&cluster, "gpu-1 tainted", |s| {
        !taints_of(s, "gpu-1").is_empty()
    })
    .await;
    let took = marked.elapsed();
    // one interval until the file is read again, and the slice write after it
    assert!(
        took < interval + Duration::from_secs(2),
        "tainted after {took:?}"
    );
    let taint = &taints_of(&slice, "gpu-1")[0];
    assert_eq!(taint.key, format!("{DRIVER}/unhealthy"));
    assert_eq!(taint.value.as_deref(), Some("Marked"));
    assert_eq!(taint.effect, "NoSchedule");
    assert!(taint.time_added.is_some());
    assert!(taints_of(&slice, "gpu-0").is_empty());

    let (status, body) = agent.admin_get("/v1/devices").await;
    assert_eq!(status, 200, "{body}");
    let gpu1 = body["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == "gpu-1")
        .unwrap()
        .clone();
    assert_eq!(gpu1["health"]["state"], "Unhealthy", "{body}");
    assert_eq!(gpu1["health"]["reason"], "Marked", "{body}");
    assert_eq!(gpu1["health"]["message"], "fan failed", "{body}");
    let (_, metrics) = {
        let addr = agent.admin.to_string();
        tokio::task::spawn_blocking(move || testkit::process::http_get(&addr, "/metrics"))
            .await
            .unwrap()
    };
    assert!(
        metrics.contains("dra_ledger_node_devices_unhealthy 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("dra_ledger_node_health_changes_total{state=\"unhealthy\"} 1"),
        "{metrics}"
    );

    write_health(&inventory, Some("Healthy"));
    slice_when(&cluster, "gpu-1 untainted", |s| {
        taints_of(s, "gpu-1").is_empty()
    })
    .await;
    agent.stop().await.unwrap();
}

#[tokio::test]
async fn where_taints_are_dropped_the_unhealthy_device_leaves_the_slice_without_a_rewrite_loop() {
    let cluster = Cluster134::start_at(KubernetesVersion::V1_34).await;
    let dir = tempfile::tempdir().unwrap();
    let inventory = dir.path().join("devices.yaml");
    write_health(&inventory, None);
    let interval = Duration::from_millis(100);
    let mut agent = V1Agent::start(&cluster, dir.path(), settings(&inventory, interval)).await;
    slice_when(&cluster, "both devices", |s| s.spec.devices.len() == 2).await;
    write_health(&inventory, Some("Unhealthy"));
    let without = slice_when(&cluster, "gpu-1 left out", |s| {
        s.spec
            .devices
            .iter()
            .map(|d| d.name.as_str())
            .collect::<Vec<_>>()
            == ["gpu-0"]
    })
    .await;
    tokio::time::sleep(interval * 10).await;
    let later = slice_when(&cluster, "the slice", |_| true).await;
    assert_eq!(
        later.metadata.resource_version, without.metadata.resource_version,
        "no write while nothing changes"
    );
    write_health(&inventory, Some("Healthy"));
    slice_when(&cluster, "gpu-1 back", |s| s.spec.devices.len() == 2).await;
    agent.stop().await.unwrap();
}

/// The next message of a health stream.
async fn next_health(
    stream: &mut tonic::Streaming<NodeWatchResourcesResponse>,
) -> NodeWatchResourcesResponse {
    tokio::time::timeout(PATIENCE, stream.message())
        .await
        .unwrap()
        .unwrap()
        .unwrap()
}

/// The health of `device` in `message`.
fn health_of(message: &NodeWatchResourcesResponse, device: &str) -> (HealthStatus, String) {
    let entry = message
        .devices
        .iter()
        .find(|d| {
            d.device
                .as_ref()
                .is_some_and(|id| id.device_name == device && id.pool_name == NODE)
        })
        .unwrap_or_else(|| panic!("{device} in {message:?}"));
    (entry.health(), entry.message.clone())
}

#[tokio::test]
async fn the_health_stream_sends_every_device_first_and_then_each_change() {
    let cluster = Cluster134::start_at(KubernetesVersion::V1_37).await;
    let dir = tempfile::tempdir().unwrap();
    let inventory = dir.path().join("devices.yaml");
    write_health(&inventory, None);
    let mut agent = V1Agent::start(
        &cluster,
        dir.path(),
        settings(&inventory, Duration::from_millis(100)),
    )
    .await;
    let mut client = DraResourceHealthClient::new(connect(agent.sockets.plugin()).await);
    let mut stream = client
        .node_watch_resources(NodeWatchResourcesRequest {})
        .await
        .unwrap()
        .into_inner();
    let first = next_health(&mut stream).await;
    assert_eq!(first.devices.len(), 2, "{first:?}");
    assert_eq!(health_of(&first, "gpu-0").0, HealthStatus::Healthy);
    assert_eq!(health_of(&first, "gpu-1").0, HealthStatus::Healthy);
    assert!(first.devices.iter().all(|d| d.last_updated_time > 0));

    write_health(&inventory, Some("Unhealthy"));
    let unhealthy = loop {
        let message = next_health(&mut stream).await;
        if health_of(&message, "gpu-1").0 == HealthStatus::Unhealthy {
            break message;
        }
    };
    assert_eq!(health_of(&unhealthy, "gpu-1").1, "fan failed");
    assert_eq!(health_of(&unhealthy, "gpu-0").0, HealthStatus::Healthy);

    write_health(&inventory, Some("Unknown"));
    loop {
        let message = next_health(&mut stream).await;
        if health_of(&message, "gpu-1").0 == HealthStatus::Unknown {
            break;
        }
    }
    agent.stop().await.unwrap();
}

fn names(message: &NodeListAndWatchResourcesResponse) -> Vec<String> {
    message
        .resources
        .iter()
        .flat_map(|r| r.named_resources.iter().flat_map(|n| n.instances.iter()))
        .filter_map(|i| i.name.clone())
        .collect()
}

#[tokio::test]
async fn in_v1alpha2_mode_an_unhealthy_device_leaves_the_resource_stream_and_comes_back() {
    let dir = tempfile::tempdir().unwrap();
    let inventory = dir.path().join("devices.yaml");
    write_health(&inventory, None);
    let config: AgentConfig =
        agent_config(dir.path(), settings(&inventory, Duration::from_millis(100)));
    let sockets = PluginSockets::new(DRIVER, &config.registry_dir, &config.plugins_dir).unwrap();
    let listener = tokio::net::TcpListener::bind(config.listen).await.unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(dra_node::agent::run_on(listener, config, None, async {
        let _ = stopped.await;
    }));
    let plugin = sockets.plugin().to_owned();
    eventually("the plugin socket", PATIENCE, || {
        let exists = plugin.exists();
        async move { exists }
    })
    .await;
    let mut client = NodeClient::new(connect(sockets.plugin()).await);
    let mut stream = client
        .node_list_and_watch_resources(NodeListAndWatchResourcesRequest {})
        .await
        .unwrap()
        .into_inner();
    for (health, expected) in [
        (None, &["gpu-0", "gpu-1"][..]),
        (Some("Unhealthy"), &["gpu-0"][..]),
        // Unknown does not withhold a device
        (Some("Unknown"), &["gpu-0", "gpu-1"][..]),
        (Some("Unhealthy"), &["gpu-0"][..]),
        (None, &["gpu-0", "gpu-1"][..]),
    ] {
        write_health(&inventory, health);
        let message = tokio::time::timeout(PATIENCE, stream.message())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(names(&message), expected, "after health {health:?}");
    }
    let _ = stop.send(());
    tokio::time::timeout(PATIENCE, task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}
