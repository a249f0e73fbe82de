//! The node's `resource.k8s.io/v1` `ResourceSlice` as the agent publishes it to a 1.34 API
//! server: from a fake sysfs, owned by the node, valid against the 1.34 schemas, updated in
//! place one generation up when a device disappears (no moment without it, as a watch sees),
//! left in place at a clean stop and adopted by the next start, duplicates removed after the
//! write, and written despite conflicts.

use std::time::Duration;

use dra_node::device::{Inventory, NodeDevice};
use dra_node::discovery::DeviceSource;
use dra_sim::server::faults::Faults;
use dra_types::resource_v1::{DeviceAttribute, ResourceSlice};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Node;
use kube::api::{PostParams, WatchEvent, WatchParams};

use crate::fake_sysfs::{FakeSysfs, CONTROLLER_3D, NVIDIA};
use crate::support::DRIVER;
use crate::v1_support::{slice_when, write_inventory, AgentSettings, Cluster134, V1Agent, NODE};
use crate::validate::{kubernetes_validate, report, validate};

/// A machine with two H100s on NUMA nodes 0 and 1.
fn two_gpus() -> FakeSysfs {
    let tree = FakeSysfs::new();
    for (bus, numa) in [(0x18u8, 0i64), (0x9d, 1)] {
        tree.function(
            &format!(
                "pci0000:{bus:02x}/0000:{bus:02x}:01.0/0000:{:02x}:00.0",
                bus + 1
            ),
            CONTROLLER_3D,
            NVIDIA,
            0x2330,
        )
        .numa(numa);
    }
    tree
}

fn sysfs_settings(tree: &FakeSysfs) -> AgentSettings {
    AgentSettings {
        devices: DeviceSource::Sysfs,
        roots: tree.roots(),
        ..AgentSettings::file(std::path::Path::new("unused"))
    }
}

fn devices(slice: &ResourceSlice) -> Vec<&str> {
    slice.spec.devices.iter().map(|d| d.name.as_str()).collect()
}

#[tokio::test]
async fn the_agent_publishes_its_nodes_devices_owned_by_the_node_and_valid_for_1_34() {
    let cluster = Cluster134::start().await;
    let tree = two_gpus();
    let dir = tempfile::tempdir().unwrap();
    let mut agent = V1Agent::start(&cluster, dir.path(), sysfs_settings(&tree)).await;
    let slice = slice_when(&cluster, "the node's slice", |s| s.spec.devices.len() == 2).await;
    let name = slice.metadata.name.clone().unwrap();
    assert!(name.starts_with(&format!("{NODE}-{DRIVER}-")), "{name}");
    assert_eq!(slice.spec.driver, DRIVER);
    assert_eq!(slice.spec.node_name.as_deref(), Some(NODE));
    assert_eq!(slice.spec.pool.name, NODE);
    assert_eq!(slice.spec.pool.generation, 1);
    assert_eq!(slice.spec.pool.resource_slice_count, 1);
    let nodes: kube::Api<Node> = kube::Api::all(cluster.client.clone());
    let node = nodes.get(NODE).await.unwrap();
    let owners = slice.metadata.owner_references.clone().unwrap();
    assert_eq!(owners.len(), 1);
    assert_eq!(
        (owners[0].kind.as_str(), owners[0].name.as_str()),
        ("Node", NODE)
    );
    assert_eq!(Some(&owners[0].uid), node.metadata.uid.as_ref());
    assert_eq!(owners[0].controller, Some(true));
    assert_eq!(devices(&slice), ["gpu-0", "gpu-1"]);
    let gpu = &slice.spec.devices[1];
    assert_eq!(
        gpu.attributes["vendor"],
        DeviceAttribute::String("nvidia".into())
    );
    assert_eq!(gpu.attributes["numa"], DeviceAttribute::Int(1));
    assert_eq!(
        gpu.attributes["pciAddress"],
        DeviceAttribute::String("0000:9e:00.0".into())
    );

    if let Some(tool) = kubernetes_validate() {
        // as JSON: YAML would leave the server's timestamps unquoted, which the tool reads as
        // dates rather than the strings the schema wants
        let file = dir.path().join("published-slice.json");
        let json = serde_json::to_string_pretty(&slice).unwrap();
        std::fs::write(&file, &json).unwrap();
        let out = validate(&tool, &file);
        assert!(out.status.success(), "{json}\n{}", report(&out));
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("passed"),
            "{}",
            report(&out)
        );
    }
    agent.stop().await.unwrap();
}

#[tokio::test]
async fn a_device_gone_from_sysfs_updates_the_slice_in_place_without_a_gap() {
    let cluster = Cluster134::start().await;
    let tree = two_gpus();
    let dir = tempfile::tempdir().unwrap();
    let mut agent = V1Agent::start(&cluster, dir.path(), sysfs_settings(&tree)).await;
    let first = slice_when(&cluster, "both GPUs published", |s| {
        s.spec.devices.len() == 2
    })
    .await;
    let version = first.metadata.resource_version.clone().unwrap();
    let events = cluster
        .slices()
        .watch(&WatchParams::default(), &version)
        .await
        .unwrap()
        .boxed();

    // the second GPU falls off the bus
    std::fs::remove_file(tree.sysfs().join("bus/pci/devices/0000:9e:00.0")).unwrap();
    let second = slice_when(&cluster, "the slice without the lost GPU", |s| {
        s.spec.devices.len() == 1
    })
    .await;
    assert_eq!(second.metadata.uid, first.metadata.uid, "updated in place");
    assert_eq!(second.metadata.name, first.metadata.name);
    assert_eq!(second.spec.pool.generation, 2);
    assert_eq!(devices(&second), ["gpu-0"]);

    // between the two, the pool was never without its slice or its remaining device
    let seen: Vec<_> = events
        .take_while(|event| {
            let done = matches!(event, Ok(WatchEvent::Modified(s)) if s.spec.pool.generation == 2);
            async move { !done }
        })
        .try_collect()
        .await
        .unwrap();
    for event in &seen {
        match event {
            WatchEvent::Modified(slice) => assert!(devices(slice).contains(&"gpu-0")),
            WatchEvent::Bookmark(_) => {}
            other => panic!("the pool's slice changed other than in place: {other:?}"),
        }
    }
    agent.stop().await.unwrap();
}

#[tokio::test]
async fn a_clean_stop_leaves_the_slice_and_the_next_start_adopts_it_one_generation_up() {
    let cluster = Cluster134::start().await;
    let dir = tempfile::tempdir().unwrap();
    let inventory = dir.path().join("devices.yaml");
    write_inventory(&inventory, &["gpu-0", "gpu-1"]);
    let mut agent = V1Agent::start(&cluster, dir.path(), AgentSettings::file(&inventory)).await;
    let first = slice_when(&cluster, "the node's slice", |s| s.spec.devices.len() == 2).await;
    agent.stop().await.unwrap();
    let after_stop = cluster.slices_of(NODE).await;
    assert_eq!(after_stop.len(), 1, "the slice stays at a clean stop");
    assert_eq!(after_stop[0].metadata.uid, first.metadata.uid);

    write_inventory(&inventory, &["gpu-0", "gpu-1", "gpu-2"]);
    let mut agent = V1Agent::start(&cluster, dir.path(), AgentSettings::file(&inventory)).await;
    let adopted = slice_when(&cluster, "the adopted slice", |s| s.spec.devices.len() == 3).await;
    assert_eq!(adopted.metadata.uid, first.metadata.uid);
    assert_eq!(adopted.spec.pool.generation, first.spec.pool.generation + 1);
    agent.stop().await.unwrap();
}

#[tokio::test]
async fn duplicate_slices_of_ours_are_removed_once_the_one_that_stays_is_written() {
    let cluster = Cluster134::start().await;
    for name in ["node-0-left-over-a", "node-0-left-over-b"] {
        let stale: Inventory = [(
            "gpu-9".to_owned(),
            NodeDevice {
                name: "gpu-9".into(),
                ..NodeDevice::default()
            },
        )]
        .into();
        let mut slice = dra_node::v1::slice_for(NODE, DRIVER, 3, &stale).unwrap();
        slice.metadata.generate_name = None;
        slice.metadata.name = Some(name.to_owned());
        cluster
            .slices()
            .create(&PostParams::default(), &slice)
            .await
            .unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let inventory = dir.path().join("devices.yaml");
    write_inventory(&inventory, &["gpu-0"]);
    let mut agent = V1Agent::start(&cluster, dir.path(), AgentSettings::file(&inventory)).await;
    let kept = slice_when(&cluster, "one slice with the inventory", |s| {
        devices(s) == ["gpu-0"]
    })
    .await;
    assert_eq!(kept.metadata.name.as_deref(), Some("node-0-left-over-a"));
    assert_eq!(kept.spec.pool.generation, 4);
    assert!(
        kept.metadata.owner_references.is_some(),
        "adopted: owned by the node"
    );
    agent.stop().await.unwrap();
}

#[tokio::test]
async fn the_slice_is_written_despite_write_conflicts() {
    let cluster = Cluster134::start().await;
    cluster.server.set_faults(Faults {
        seed: 7,
        write_conflict_rate: 0.6,
        ..Faults::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let inventory = dir.path().join("devices.yaml");
    write_inventory(&inventory, &["gpu-0", "gpu-1"]);
    let mut settings = AgentSettings::file(&inventory);
    settings.inventory_interval = Duration::from_millis(200);
    let mut agent = V1Agent::start(&cluster, dir.path(), settings).await;
    let first = slice_when(&cluster, "the slice", |s| s.spec.devices.len() == 2).await;
    write_inventory(&inventory, &["gpu-0"]);
    let second = slice_when(&cluster, "the updated slice", |s| s.spec.devices.len() == 1).await;
    assert_eq!(second.metadata.uid, first.metadata.uid);
    assert!(
        cluster.server.fault_stats().conflicts > 0,
        "conflicts were injected"
    );
    cluster.server.set_faults(Faults::default());
    agent.stop().await.unwrap();
}
