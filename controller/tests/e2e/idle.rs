//! `GET /v1/idle` of `dra-ledger run` on both generations: a claim allocated without a consumer
//! is listed once idle for longer than `for`, and leaves the list when a pod uses it. On 1.30
//! the claim is an immediate one our controller allocates; on 1.37 one allocated without the
//! kube-scheduler's delete-protection finalizer, which the resourceclaim controller leaves
//! allocated.

use std::time::{Duration, SystemTime};

use dra_controller::process::RunningController;
use dra_sim::KubernetesVersion;
use dra_types::api_mode::DraApi;
use k8s_openapi::api::core::v1::{ClaimSource, Pod, PodResourceClaim};
use kube::api::{Patch, PatchParams, PostParams};
use kube::Api;
use serde_json::{json, Value};
use testkit::eventually;

use crate::e2e_support::{count, node, pod, Env, DRIVER, WAIT};
use crate::v1_mirror::{call, get, one_of, settings, start_ready};
use crate::v1_support::{h100s, ClusterV1};

/// The items of `GET /v1/idle?for=...` whose UID is `uid`.
pub(crate) fn idle_item(answer: &Value, uid: &str) -> Option<Value> {
    answer["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item["uid"] == uid)
        .cloned()
}

/// Waits until `GET /v1/idle?for=2s` lists claim `uid`, which `GET /v1/idle?for=60s` does not
/// yet; returns its item.
async fn idle_after_two_seconds(controller: &RunningController, uid: &str) -> Value {
    let not_yet = get(controller, "/v1/idle?for=60s").await;
    assert_eq!(idle_item(&not_yet, uid), None, "{not_yet}");
    let item = eventually("the claim idle for over 2 s", WAIT, || async {
        idle_item(&get(controller, "/v1/idle?for=2s").await, uid)
    })
    .await;
    assert!(item["idleSeconds"].as_u64().unwrap() >= 2, "{item}");
    item
}

/// Waits until `GET /v1/idle?for=0` no longer lists claim `uid`.
async fn no_longer_idle(controller: &RunningController, uid: &str) {
    eventually("the used claim no longer idle", WAIT, || async {
        idle_item(&get(controller, "/v1/idle?for=0").await, uid)
            .is_none()
            .then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v1alpha2_an_immediate_claim_no_pod_uses_is_idle_after_for_and_leaves_when_a_pod_uses_it() {
    let env = Env::start(&[node("node-0", "H100", "80Gi", &[0, 0])]).await;
    env.params("one", count(1)).await;
    let dir = tempfile::tempdir().unwrap();
    let url = env.cluster.as_ref().unwrap().url();
    let config = settings(dir.path(), DraApi::V1alpha2);
    let controller = RunningController::start(config, kube::Config::new(url.parse().unwrap()))
        .await
        .unwrap();
    tokio::time::timeout(WAIT, controller.wait_ready())
        .await
        .expect("the controller becomes ready");

    env.immediate_claim("spare", "one").await;
    let (claim, data) = env.allocated("spare").await;
    let uid = claim.metadata.uid.clone().unwrap();
    let item = idle_after_two_seconds(&controller, &uid).await;
    assert_eq!(
        (&item["name"], &item["node"], &item["devices"]),
        (&json!("spare"), &json!(data.node), &json!(data.devices))
    );

    let mut user = pod("user", &[]);
    let spec = user.spec.as_mut().unwrap();
    spec.resource_claims = Some(vec![PodResourceClaim {
        name: "gpu".into(),
        source: Some(ClaimSource {
            resource_claim_name: Some("spare".into()),
            resource_claim_template_name: None,
        }),
    }]);
    Api::<Pod>::default_namespaced(env.client.clone())
        .create(&PostParams::default(), &user)
        .await
        .unwrap();
    no_longer_idle(&controller, &uid).await;

    controller.shutdown().await.unwrap();
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn v1_an_allocation_no_pod_uses_is_idle_after_for_and_leaves_when_a_pod_uses_it() {
    let dir = tempfile::tempdir().unwrap();
    let v1 = ClusterV1::start_on(KubernetesVersion::V1_37, dir.path(), &[h100s(2)]).await;
    let controller = start_ready(&v1, settings(dir.path(), DraApi::V1)).await;
    let claim = v1.claim("spare", one_of("gpu")).await;
    let uid = claim.metadata.uid.clone().unwrap();

    let before = SystemTime::now();
    let status = json!({"status": {"allocation": {
        "devices": {"results": [
            {"request": "gpu", "driver": DRIVER, "pool": "node-0", "device": "gpu-1"}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["node-0"]}]}]},
    }}});
    v1.claims()
        .patch_status("spare", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    eventually("the allocation mirrored", WAIT, || async {
        let (status, claim) = call(&controller, "GET", &format!("/v1/claims/{uid}"), false).await;
        (status == 200 && claim["allocation"].is_object()).then_some(())
    })
    .await;
    let item = idle_after_two_seconds(&controller, &uid).await;
    assert!(before.elapsed().unwrap() > Duration::from_secs(2));
    assert_eq!(
        (
            &item["namespace"],
            &item["name"],
            &item["node"],
            &item["devices"]
        ),
        (
            &json!("default"),
            &json!("spare"),
            &json!("node-0"),
            &json!(["gpu-1"])
        )
    );
    let since = chrono::DateTime::parse_from_rfc3339(item["idleSince"].as_str().unwrap()).unwrap();
    let before_ms = before
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    assert!(i128::from(since.timestamp_millis()) >= i128::try_from(before_ms).unwrap() - 1000);

    let pod = v1.pod("user", "spare", "node-0").await;
    v1.allocate(
        "spare",
        &[(DRIVER, "node-0", "gpu-1")],
        "node-0",
        json!([]),
        &pod,
    )
    .await;
    no_longer_idle(&controller, &uid).await;

    controller.shutdown().await.unwrap();
    v1.shutdown().await;
}
