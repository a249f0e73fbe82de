//! The device status the agent writes into the claims it prepares (`status.devices`), on the
//! simulator's API server playing 1.34: our devices Ready with their UUID and PCI address once
//! prepared, none of ours once unprepared, another driver's entry kept throughout; a status
//! write that fails neither fails the prepare nor is lost: it is retried while the agent runs,
//! and written at the agent's next start when it stopped first.

use std::time::Duration;

use dra_sim::server::Faults;
use dra_types::resource_v1::ResourceClaim;
use kube::api::{Patch, PatchParams};
use serde_json::{json, Value};
use testkit::eventually::eventually;

use crate::support::{DRIVER, PATIENCE};
use crate::v1_support::{register_as_kubelet_134, uid, AgentSettings, Cluster134, V1Agent, NODE};

/// Another driver, whose device shares the claim with ours.
const NIC: &str = "nic.example.com";

/// A cluster and a registered agent of `node-0` with `gpu-0` (UUID and PCI address known),
/// `gpu-1` (PCI address known) and `gpu-2` (neither).
async fn setup(dir: &std::path::Path) -> (Cluster134, V1Agent) {
    let cluster = Cluster134::start().await;
    let agent = start_agent(&cluster, dir).await;
    (cluster, agent)
}

async fn start_agent(cluster: &Cluster134, dir: &std::path::Path) -> V1Agent {
    let inventory = dir.join("devices.yaml");
    std::fs::write(
        &inventory,
        "devices:\n\
         - name: gpu-0\n  attributes: {model: H100, uuid: GPU-5c2a, pciAddress: '0000:3b:00.0'}\n\
         - name: gpu-1\n  attributes: {model: H100, pciAddress: '0000:5e:00.0'}\n\
         - name: gpu-2\n  attributes: {model: H100}\n",
    )
    .unwrap();
    let agent = V1Agent::start(cluster, dir, AgentSettings::file(&inventory)).await;
    register_as_kubelet_134(agent.sockets.registration())
        .await
        .unwrap();
    agent
}

/// Claim `name` allocated `devices` of ours on this node and `eth1` of [`NIC`], whose driver
/// already reported it.
async fn allocate_beside_a_nic(
    cluster: &Cluster134,
    name: &str,
    devices: &[&str],
) -> ResourceClaim {
    let mut results: Vec<(&str, &str, &str, &str)> = devices
        .iter()
        .map(|device| ("gpu", DRIVER, NODE, *device))
        .collect();
    results.push(("nic", NIC, NODE, "eth1"));
    cluster.allocate(name, &results, Vec::new()).await;
    let nic = json!({"status": {"devices": [nic_entry()]}});
    cluster
        .claims()
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&nic))
        .await
        .unwrap()
}

fn nic_entry() -> Value {
    json!({"driver": NIC, "pool": NODE, "device": "eth1",
        "conditions": [{"type": "Ready", "status": "True", "reason": "Up", "message": "",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}],
        "networkData": {"interfaceName": "net1", "ips": ["10.0.0.5/24"]}})
}

/// `status.devices` of claim `name` as stored.
async fn device_status(cluster: &Cluster134, name: &str) -> Vec<Value> {
    let claim = cluster.claims().get(name).await.unwrap();
    let status = serde_json::to_value(claim.status.unwrap_or_default()).unwrap();
    status["devices"].as_array().cloned().unwrap_or_default()
}

/// The devices our entries of claim `name` name.
async fn ours(cluster: &Cluster134, name: &str) -> Vec<String> {
    device_status(cluster, name)
        .await
        .iter()
        .filter(|d| d["driver"] == DRIVER)
        .map(|d| d["device"].as_str().unwrap().to_owned())
        .collect()
}

/// The agent's `dra_ledger_node_claim_status_writes_total` of `outcome`.
async fn status_writes(agent: &V1Agent, outcome: &str) -> u64 {
    let addr = agent.admin.to_string();
    let (code, text) =
        tokio::task::spawn_blocking(move || testkit::process::http_get(&addr, "/metrics"))
            .await
            .unwrap();
    assert_eq!(code, 200, "{text}");
    let series = format!("dra_ledger_node_claim_status_writes_total{{outcome=\"{outcome}\"}} ");
    text.lines()
        .find_map(|line| line.strip_prefix(series.as_str()))
        .unwrap_or_else(|| panic!("{series} in\n{text}"))
        .trim()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn a_prepared_claim_shows_its_devices_ready_with_their_data_and_an_unprepared_one_none() {
    let dir = tempfile::tempdir().unwrap();
    let (cluster, mut agent) = setup(dir.path()).await;
    let claim = allocate_beside_a_nic(&cluster, "pair", &["gpu-0", "gpu-1"]).await;
    let uid = uid(&claim);
    let answer = agent.prepare(&[&claim]).await;
    assert_eq!(answer[&uid].error, "");

    eventually(
        "our two devices in the claim's status",
        PATIENCE,
        || async { ours(&cluster, "pair").await == ["gpu-0", "gpu-1"] },
    )
    .await;
    let status = device_status(&cluster, "pair").await;
    assert_eq!(
        status[0],
        nic_entry(),
        "the other driver's entry stays first"
    );
    let ready = |device: &Value| device["conditions"][0].clone();
    for device in &status[1..] {
        let condition = ready(device);
        assert_eq!(device["pool"], NODE);
        assert_eq!(condition["type"], "Ready");
        assert_eq!(condition["status"], "True");
        assert_eq!(condition["reason"], "Prepared");
        assert_eq!(
            condition["message"],
            format!("prepared on node {NODE} as CDI device {DRIVER}/claim={uid}")
        );
        assert!(condition["lastTransitionTime"].is_string(), "{condition}");
    }
    assert_eq!(
        status[1]["data"],
        json!({"apiVersion": "dra-ledger.io/v1alpha1", "kind": "DeviceData",
            "uuid": "GPU-5c2a", "pciAddress": "0000:3b:00.0"})
    );
    assert_eq!(
        status[2]["data"],
        json!({"apiVersion": "dra-ledger.io/v1alpha1", "kind": "DeviceData",
            "pciAddress": "0000:5e:00.0"})
    );
    assert_eq!(status_writes(&agent, "success").await, 1);

    // the kubelet repeats the prepare: nothing to write, the time stays
    let since = ready(&status[1])["lastTransitionTime"].clone();
    agent.prepare(&[&claim]).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        ready(&device_status(&cluster, "pair").await[1])["lastTransitionTime"],
        since
    );
    assert_eq!(status_writes(&agent, "success").await, 1);

    let answer = agent.unprepare(&[&claim]).await;
    assert_eq!(answer[&uid].error, "");
    eventually("none of ours in the claim's status", PATIENCE, || async {
        ours(&cluster, "pair").await.is_empty()
    })
    .await;
    assert_eq!(device_status(&cluster, "pair").await, [nic_entry()]);
    assert_eq!(status_writes(&agent, "error").await, 0);
    agent.stop().await.unwrap();
}

#[tokio::test]
async fn a_failing_status_write_does_not_fail_the_prepare_and_is_retried() {
    let dir = tempfile::tempdir().unwrap();
    let (cluster, mut agent) = setup(dir.path()).await;
    let claim = allocate_beside_a_nic(&cluster, "one", &["gpu-2"]).await;
    let uid = uid(&claim);

    // every write of the API server fails from now on; reads still work
    cluster.server.set_faults(Faults::seeded(1).errors(1.0));
    let answer = agent.prepare(&[&claim]).await;
    assert_eq!(
        answer[&uid].error, "",
        "the prepare does not wait for the status"
    );
    assert_eq!(answer[&uid].devices.len(), 1);
    assert!(agent.cdi.file(&uid).exists());
    eventually("two failed status writes", PATIENCE, || async {
        status_writes(&agent, "error").await >= 2
    })
    .await;
    assert!(ours(&cluster, "one").await.is_empty());

    cluster.server.set_faults(Faults::none());
    eventually(
        "the status written once writes work again",
        PATIENCE,
        || async { ours(&cluster, "one").await == ["gpu-2"] },
    )
    .await;
    let status = device_status(&cluster, "one").await;
    assert_eq!(status[0], nic_entry());
    assert_eq!(
        status[1].get("data"),
        None,
        "discovery knows nothing of gpu-2"
    );
    assert_eq!(status_writes(&agent, "success").await, 1);
    agent.stop().await.unwrap();
}

#[tokio::test]
async fn a_status_write_cut_short_by_a_stop_is_made_at_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    let (cluster, mut agent) = setup(dir.path()).await;
    let claim = allocate_beside_a_nic(&cluster, "one", &["gpu-0"]).await;
    let uid = uid(&claim);
    cluster.server.set_faults(Faults::seeded(2).errors(1.0));
    assert_eq!(agent.prepare(&[&claim]).await[&uid].error, "");
    eventually("a failed status write", PATIENCE, || async {
        status_writes(&agent, "error").await >= 1
    })
    .await;
    agent.stop().await.unwrap();
    cluster.server.set_faults(Faults::none());
    assert!(ours(&cluster, "one").await.is_empty());

    // the journal holds the claim prepared: the new agent reports it without a kubelet call
    let mut agent = start_agent(&cluster, dir.path()).await;
    eventually(
        "the status written by the restarted agent",
        PATIENCE,
        || async { ours(&cluster, "one").await == ["gpu-0"] },
    )
    .await;
    assert_eq!(device_status(&cluster, "one").await[0], nic_entry());
    agent.stop().await.unwrap();
}
