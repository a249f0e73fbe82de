//! `NodeListAndWatchResources`: the inventory first, then after every change.

use dra_types::kubelet::k8s::io::api::resource::v1alpha2::NamedResourcesInstance;
use dra_types::kubelet::v1alpha3::NodeListAndWatchResourcesResponse;

use crate::support::{gpu, inventory, next_message, Agent};

fn instances(message: &NodeListAndWatchResourcesResponse) -> &[NamedResourcesInstance] {
    assert_eq!(message.resources.len(), 1, "{message:?}");
    &message.resources[0]
        .named_resources
        .as_ref()
        .unwrap()
        .instances
}

fn names(message: &NodeListAndWatchResourcesResponse) -> Vec<&str> {
    instances(message)
        .iter()
        .map(|i| i.name.as_deref().unwrap())
        .collect()
}

#[tokio::test]
async fn the_resource_stream_starts_with_every_device_and_follows_the_inventory() {
    let mut agent = Agent::start();
    let mut stream = agent.resource_stream().await;
    let first = next_message(&mut stream).await;
    assert_eq!(names(&first), ["gpu-0", "gpu-1"]);
    let gpu0 = &instances(&first)[0];
    let attribute = |name: &str| {
        gpu0.attributes
            .iter()
            .find(|a| a.name.as_deref() == Some(name))
            .and_then(|a| a.attribute_value.clone())
            .unwrap()
    };
    assert_eq!(attribute("vendor").string.as_deref(), Some("nvidia"));
    assert_eq!(attribute("numa").int, Some(0));
    assert_eq!(
        attribute("memory")
            .quantity
            .and_then(|q| q.string)
            .as_deref(),
        Some("80Gi")
    );
    assert_eq!(
        attribute("driverVersion").version.as_deref(),
        Some("550.54.15")
    );
    assert_eq!(attribute("mig").bool, Some(false));

    agent
        .inventory
        .send_replace(inventory([gpu("gpu-1", 1), gpu("gpu-2", 0)]));
    let second = next_message(&mut stream).await;
    assert_eq!(names(&second), ["gpu-1", "gpu-2"]);

    agent.inventory.send_replace(inventory([]));
    let third = next_message(&mut stream).await;
    assert!(third.resources.is_empty(), "{third:?}");
    agent.stop().await.unwrap();
}

#[tokio::test]
async fn a_second_watcher_gets_the_current_inventory_first() {
    let mut agent = Agent::start();
    agent.inventory.send_replace(inventory([gpu("gpu-5", 0)]));
    let mut stream = agent.resource_stream().await;
    let first = next_message(&mut stream).await;
    assert_eq!(names(&first), ["gpu-5"]);
    agent.stop().await.unwrap();
}
