//! Admin access in the simulated 1.37 scheduler, after the allocator of
//! `k8s.io/dynamic-resource-allocation/structured`: an `adminAccess` request gets a device
//! whether or not another claim holds it, its result says `adminAccess: true`, and such an
//! allocation takes the device from no one (it stays allocatable for the claims that follow).

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;

use crate::scheduling_v1::{
    bound, claim, claim_ref, cluster_at, create_claim, create_pod, devices, exactly,
    failed_scheduling, gpu, one_request, publish,
};
use dra_sim::KubernetesVersion;

async fn label_default_for_admin_access(client: &Client) {
    let label = json!({"metadata": {"labels": {"resource.kubernetes.io/admin-access": "true"}}});
    Api::<Namespace>::all(client.clone())
        .patch("default", &PatchParams::default(), &Patch::Merge(&label))
        .await
        .unwrap();
}

fn admin_request() -> serde_json::Value {
    one_request(exactly(&[], json!({"adminAccess": true})))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_access_claim_gets_an_allocated_device_and_leaves_it_allocatable() {
    let (_cluster, client) = cluster_at(KubernetesVersion::V1_37).await;
    label_default_for_admin_access(&client).await;
    publish(&client, "node-1", vec![gpu("gpu-0", "H100", 0, "80Gi")]).await;

    // The admin claim first: it gets the node's one device...
    create_claim(&client, "monitor", admin_request()).await;
    create_pod(&client, "monitor", claim_ref("monitor")).await;
    assert_eq!(bound(&client, "monitor").await, "node-1");
    let monitor = claim(&client, "monitor").await;
    let results = &monitor.allocation().unwrap().devices.results;
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].device, "gpu-0");
    assert_eq!(results[0].admin_access, Some(true));

    // ...which stays free for an ordinary claim,
    create_claim(&client, "work", one_request(exactly(&[], json!({})))).await;
    create_pod(&client, "worker", claim_ref("work")).await;
    assert_eq!(bound(&client, "worker").await, "node-1");
    assert_eq!(devices(&client, "work").await, ["gpu=gpu-0"]);
    assert_eq!(
        claim(&client, "work")
            .await
            .allocation()
            .unwrap()
            .devices
            .results[0]
            .admin_access,
        None
    );

    // which does hold it: a second ordinary claim finds nothing,
    create_claim(&client, "more", one_request(exactly(&[], json!({})))).await;
    create_pod(&client, "more", claim_ref("more")).await;
    failed_scheduling(
        &client,
        "more",
        "0/2 nodes are available: 2 cannot allocate all claims",
    )
    .await;

    // while another admin claim still gets the device in use.
    create_claim(&client, "audit", admin_request()).await;
    create_pod(&client, "audit", claim_ref("audit")).await;
    assert_eq!(bound(&client, "audit").await, "node-1");
    assert_eq!(devices(&client, "audit").await, ["gpu=gpu-0"]);
}
