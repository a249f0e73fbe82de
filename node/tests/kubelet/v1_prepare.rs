//! Prepare and unprepare through `v1.DRAPlugin` (and `v1beta1`) of claims the 1.34 scheduler
//! allocated, read by the agent from the API server and prepared by the real journal and CDI
//! directory: one `Device` per result of ours on this node, errors per claim (another driver,
//! another node, a claim deleted or replaced before the prepare, a bad configuration), sharing
//! from our opaque configuration, and garbage collection of a claim deleted while prepared.

use std::time::Duration;

use dra_types::kubelet::k8s::io::kubelet::pkg::apis::dra::v1beta1;
use testkit::eventually::eventually;

use crate::opaque::shared_config;
use crate::support::{DRIVER, PATIENCE};
use crate::v1_support::{
    register_as_kubelet_134, uid, v1beta1_claim, write_inventory, AgentSettings, Cluster134,
    V1Agent, NODE, OTHER_NODE,
};

/// A cluster and a registered agent of `node-0` with devices `gpu-0` to `gpu-3`.
async fn setup(dir: &std::path::Path, gc_interval: Duration) -> (Cluster134, V1Agent) {
    let cluster = Cluster134::start().await;
    let inventory = dir.join("devices.yaml");
    write_inventory(&inventory, &["gpu-0", "gpu-1", "gpu-2", "gpu-3"]);
    let mut settings = AgentSettings::file(&inventory);
    settings.gc_interval = gc_interval;
    let agent = V1Agent::start(&cluster, dir, settings).await;
    register_as_kubelet_134(agent.sockets.registration())
        .await
        .unwrap();
    (cluster, agent)
}

fn cdi_env(agent: &V1Agent, uid: &str) -> String {
    let spec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(agent.cdi.file(uid)).unwrap()).unwrap();
    spec["devices"][0]["containerEdits"]["env"].to_string()
}

#[tokio::test]
async fn an_allocated_claim_is_prepared_with_one_device_per_result_and_unprepared_by_uid() {
    let dir = tempfile::tempdir().unwrap();
    let (cluster, mut agent) = setup(dir.path(), Duration::from_secs(3600)).await;
    let claim = cluster
        .allocate(
            "pair",
            &[
                ("gpus", DRIVER, NODE, "gpu-1"),
                ("gpus", DRIVER, NODE, "gpu-2"),
            ],
            Vec::new(),
        )
        .await;
    let uid = uid(&claim);
    let answer = agent.prepare(&[&claim]).await;
    assert_eq!(answer.len(), 1);
    let entry = &answer[&uid];
    assert_eq!(entry.error, "");
    let cdi_id = format!("{DRIVER}/claim={uid}");
    let devices: Vec<(Vec<String>, &str, &str, Vec<String>)> = entry
        .devices
        .iter()
        .map(|d| {
            (
                d.request_names.clone(),
                d.pool_name.as_str(),
                d.device_name.as_str(),
                d.cdi_device_ids.clone(),
            )
        })
        .collect();
    assert_eq!(
        devices,
        [
            (vec!["gpus".to_owned()], NODE, "gpu-1", vec![cdi_id.clone()]),
            (vec!["gpus".to_owned()], NODE, "gpu-2", vec![cdi_id.clone()]),
        ]
    );
    assert!(
        cdi_env(&agent, &uid).contains("DRA_LEDGER_DEVICES=gpu-1,gpu-2"),
        "{}",
        cdi_env(&agent, &uid)
    );
    let (_, prepared) = agent.admin_get("/v1/prepared").await;
    assert_eq!(prepared["items"][0]["uid"], uid.as_str(), "{prepared}");

    // the kubelet repeats a prepare it did not see answered: the same answer
    let again = agent.prepare(&[&claim]).await;
    assert_eq!(again[&uid], *entry);

    // unprepare names the claim only; the API server is not asked (the claim may be gone)
    cluster.delete_claim("pair").await;
    let answer = agent.unprepare(&[&claim]).await;
    assert_eq!(answer[&uid].error, "");
    assert!(!agent.cdi.file(&uid).exists());
    let repeat = agent.unprepare(&[&claim]).await;
    assert_eq!(repeat[&uid].error, "", "an unknown claim is success");
    agent.stop().await.unwrap();
}

#[tokio::test]
async fn claims_of_another_driver_or_another_node_fail_alone_in_their_batch() {
    let dir = tempfile::tempdir().unwrap();
    let (cluster, mut agent) = setup(dir.path(), Duration::from_secs(3600)).await;
    let good = cluster.allocate_here("good", "gpu-0").await;
    let foreign = cluster
        .allocate(
            "nic",
            &[("nic", "nic.example.com", NODE, "eth-0")],
            Vec::new(),
        )
        .await;
    let elsewhere = cluster
        .allocate(
            "elsewhere",
            &[("gpu", DRIVER, OTHER_NODE, "gpu-0")],
            Vec::new(),
        )
        .await;
    let answer = agent.prepare(&[&good, &foreign, &elsewhere]).await;
    assert_eq!(answer.len(), 3);
    assert_eq!(answer[&uid(&good)].error, "");
    assert_eq!(answer[&uid(&good)].devices.len(), 1);
    assert_eq!(
        answer[&uid(&foreign)].error,
        format!("claim default/nic: the allocation has no device of driver {DRIVER}")
    );
    assert_eq!(
        answer[&uid(&elsewhere)].error,
        format!(
            "claim default/elsewhere: the devices of driver {DRIVER} are allocated in pool \
             node-1, not in this node's pool node-0"
        )
    );
    assert!(answer[&uid(&foreign)].devices.is_empty());
    assert_eq!(agent.cdi.list().unwrap(), [uid(&good)]);
    agent.stop().await.unwrap();
}

#[tokio::test]
async fn a_claim_deleted_before_its_prepare_is_refused_and_one_recreated_under_its_name_is_replaced(
) {
    let dir = tempfile::tempdir().unwrap();
    let (cluster, mut agent) = setup(dir.path(), Duration::from_secs(3600)).await;
    let old = cluster.allocate_here("gpu", "gpu-0").await;
    cluster.delete_claim("gpu").await;
    let answer = agent.prepare(&[&old]).await;
    assert_eq!(
        answer[&uid(&old)].error,
        "claim default/gpu: not found (deleted since it was allocated?)"
    );
    let new = cluster.allocate_here("gpu", "gpu-0").await;
    let answer = agent.prepare(&[&old]).await;
    assert_eq!(
        answer[&uid(&old)].error,
        format!(
            "claim default/gpu: got replaced (UID {}, the kubelet asked for {})",
            uid(&new),
            uid(&old)
        )
    );
    assert!(agent.cdi.list().unwrap().is_empty());
    agent.stop().await.unwrap();
}

#[tokio::test]
async fn a_v1beta1_kubelet_prepares_and_unprepares_the_same_way() {
    let dir = tempfile::tempdir().unwrap();
    let (cluster, mut agent) = setup(dir.path(), Duration::from_secs(3600)).await;
    let claim = cluster.allocate_here("beta", "gpu-3").await;
    let uid = uid(&claim);
    let mut kubelet = agent.v1beta1().await;
    let answer = kubelet
        .node_prepare_resources(v1beta1::NodePrepareResourcesRequest {
            claims: vec![v1beta1_claim(&claim)],
        })
        .await
        .unwrap()
        .into_inner();
    let entry = &answer.claims[&uid];
    assert_eq!(entry.error, "");
    assert_eq!(entry.devices.len(), 1);
    assert_eq!(entry.devices[0].device_name, "gpu-3");
    assert_eq!(entry.devices[0].pool_name, NODE);
    assert_eq!(entry.devices[0].request_names, ["gpu"]);
    assert_eq!(
        entry.devices[0].cdi_device_ids,
        [format!("{DRIVER}/claim={uid}")]
    );
    assert!(agent.cdi.file(&uid).exists());
    let answer = kubelet
        .node_unprepare_resources(v1beta1::NodeUnprepareResourcesRequest {
            claims: vec![v1beta1_claim(&claim)],
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(answer.claims[&uid].error, "");
    assert!(!agent.cdi.file(&uid).exists());
    agent.stop().await.unwrap();
}

#[tokio::test]
async fn our_opaque_configuration_in_the_allocation_decides_sharing_and_a_bad_one_names_its_field()
{
    let dir = tempfile::tempdir().unwrap();
    let (cluster, mut agent) = setup(dir.path(), Duration::from_secs(3600)).await;
    let mut sharing = Vec::new();
    for name in ["first", "second", "third"] {
        let results = [("gpu", DRIVER, NODE, "gpu-0")];
        sharing.push(
            cluster
                .allocate(name, &results, vec![shared_config(DRIVER, 2)])
                .await,
        );
    }
    let [first, second, third] = <[_; 3]>::try_from(sharing).unwrap();
    let exclusive = cluster.allocate_here("exclusive", "gpu-0").await;
    let mut bad = shared_config(DRIVER, 2);
    if let Some(opaque) = bad.opaque.as_mut() {
        opaque.parameters["sharing"]["timeSlice"] = "Long".into();
    }
    let misconfigured = cluster
        .allocate(
            "misconfigured",
            &[("gpu", DRIVER, NODE, "gpu-1")],
            vec![bad],
        )
        .await;
    let answer = agent
        .prepare(&[&first, &second, &third, &exclusive, &misconfigured])
        .await;
    let error = |claim| answer[&uid(claim)].error.clone();
    assert_eq!(error(&first), "");
    assert_eq!(
        error(&second),
        "",
        "two claims share gpu-0 within maxConsumers 2"
    );
    assert!(
        error(&third).contains("device gpu-0 is prepared for claim"),
        "{}",
        error(&third)
    );
    assert!(
        error(&exclusive).contains("device gpu-0 is prepared for claim"),
        "{}",
        error(&exclusive)
    );
    assert_eq!(
        error(&misconfigured),
        "claim default/misconfigured: \
         status.allocation.devices.config[0].opaque.parameters.sharing.timeSlice: unknown field \
         (known: mode, maxConsumers)"
    );
    let mut prepared = agent.cdi.list().unwrap();
    prepared.sort();
    let mut expected = vec![uid(&first), uid(&second)];
    expected.sort();
    assert_eq!(prepared, expected);
    agent.stop().await.unwrap();
}

#[tokio::test]
async fn a_prepared_claim_deleted_from_the_api_server_is_unprepared_by_garbage_collection() {
    let dir = tempfile::tempdir().unwrap();
    let (cluster, mut agent) = setup(dir.path(), Duration::from_millis(200)).await;
    let kept = cluster.allocate_here("kept", "gpu-0").await;
    let dropped = cluster.allocate_here("dropped", "gpu-1").await;
    let answer = agent.prepare(&[&kept, &dropped]).await;
    assert!(answer.values().all(|c| c.error.is_empty()), "{answer:?}");
    cluster.delete_claim("dropped").await;
    // counted once the unprepare is done, spec and journal entry gone
    let addr = agent.admin.to_string();
    eventually("the deleted claim collected", PATIENCE, || {
        let addr = addr.clone();
        async move {
            let (_, metrics) =
                tokio::task::spawn_blocking(move || testkit::process::http_get(&addr, "/metrics"))
                    .await
                    .unwrap();
            metrics.contains("dra_ledger_node_gc_removed_total{kind=\"claim\"} 1")
        }
    })
    .await;
    assert!(!agent.cdi.file(&uid(&dropped)).exists());
    assert!(
        agent.cdi.file(&uid(&kept)).exists(),
        "the claim still allocated here stays"
    );
    let (_, prepared) = agent.admin_get("/v1/prepared").await;
    let uids: Vec<&str> = prepared["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["uid"].as_str())
        .collect();
    assert_eq!(uids, [uid(&kept)]);
    agent.stop().await.unwrap();
}
