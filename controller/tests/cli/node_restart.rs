//! `dra-ledger node` killed with SIGKILL and started again under the same socket paths, ten
//! times, against `dra-ledger sim --kubelet-root` playing each release: every incarnation is
//! registered again by the simulated kubelet (its `/readyz` answers 200) and prepares the claim
//! of a new pod, which runs (on 1.30 with `dra-ledger run` allocating).

use std::time::Duration;

use serde_json::{json, Value};

use crate::cli_support::agent::{start_agent, AgentDirs};
use crate::cli_support::{http_get, spawn, terminate, wait_exit, KillOnDrop, Lines, BINARY};
use testkit::eventually_blocking;
use testkit::process::{http_request, http_send_json, signal};

/// How many times the agent is started.
const INCARNATIONS: usize = 10;
/// How long one step (registration, a pod running, a pod gone) may take. Generous: on 1.30 the
/// first pod also waits for the controller's start (ledger, informers, the scheduler's backoff),
/// and the test shares two cores with the demo tests.
const STEP: Duration = Duration::from_secs(90);
/// How often a step is checked.
const POLL: Duration = Duration::from_millis(50);

/// The release's claim asking for one device of class `gpu` and the pod using it.
fn claim_and_pod(version: &str, name: &str) -> (&'static str, Value, Value) {
    let (group, spec, pod_claim) = if version == "1.30" {
        (
            "resource.k8s.io/v1alpha2",
            json!({"resourceClassName": "gpu"}),
            json!({"name": "gpu", "source": {"resourceClaimName": name}}),
        )
    } else {
        (
            "resource.k8s.io/v1",
            json!({"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}),
            json!({"name": "gpu", "resourceClaimName": name}),
        )
    };
    let claim = json!({
        "apiVersion": group, "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default"}, "spec": spec,
    });
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "containers": [{"name": "c", "image": "busybox", "resources": {"claims": [{"name": "gpu"}]}}],
            "resourceClaims": [pod_claim],
        },
    });
    (group, claim, pod)
}

/// Creates claim and pod `name`, waits until the pod runs with its claim prepared by the agent
/// at `agent` (its `/v1/prepared` lists the claim), deletes the pod and waits until it is gone
/// (which it is only once its claim is unprepared).
fn run_pod_prepared_by(api: &str, agent: &str, version: &str, name: &str) {
    let (group, claim, pod) = claim_and_pod(version, name);
    let created = http_send_json(
        api,
        "POST",
        &format!("/apis/{group}/namespaces/default/resourceclaims"),
        &claim.to_string(),
    );
    assert_eq!(created.status, 201, "{}", created.body);
    let created = http_send_json(
        api,
        "POST",
        "/api/v1/namespaces/default/pods",
        &pod.to_string(),
    );
    assert_eq!(created.status, 201, "{}", created.body);
    let pod_path = format!("/api/v1/namespaces/default/pods/{name}");
    eventually_blocking(
        format_args!("{version}: pod {name} running, prepared by the agent at {agent}"),
        STEP,
        POLL,
        || {
            let (_, body) = http_get(api, &pod_path);
            let pod: Value = serde_json::from_str(&body).ok()?;
            (pod["status"]["phase"] == "Running").then_some(())
        },
    );
    let (status, prepared) = http_get(agent, "/v1/prepared");
    assert_eq!(status, 200, "{prepared}");
    assert!(prepared.contains(name), "{version}: {prepared}");
    // The pod goes only after the agent unprepared its claim.
    assert_eq!(http_request(api, "DELETE", &pod_path).status, 200);
    eventually_blocking(
        format_args!("{version}: pod {name} gone"),
        STEP,
        POLL,
        || http_get(api, &pod_path).0 == 404,
    );
}

/// Starts an agent in `dirs` and waits until the kubelet registered it (its `/readyz` answers
/// 200); `what` names it in a failure.
fn start_registered(dirs: &AgentDirs<'_>, what: &str) -> (KillOnDrop, Lines, String) {
    let (agent, logs, addr) = start_agent(dirs, &[]);
    let agent = KillOnDrop(agent);
    eventually_blocking(
        format_args!("{what} registered (/readyz 200)"),
        STEP,
        POLL,
        || http_get(&addr, "/readyz").0 == 200,
    );
    (agent, logs, addr)
}

fn agent_incarnations_register_and_prepare(version: &str) {
    let dir = tempfile::tempdir().unwrap();
    let kubelets = dir.path().join("kubelets");
    let sim = testkit::sim::start_sim(
        BINARY,
        dir.path(),
        &[
            "--nodes",
            "1",
            "--kubelet-root",
            kubelets.to_str().unwrap(),
            "--kubernetes-version",
            version,
            "--resource-class",
            "gpu",
        ],
    );
    let api = sim.url.trim_start_matches("http://").to_owned();
    // 1.30: the controller allocates.
    let _controller = (version == "1.30").then(|| {
        let mut run = spawn(&[
            "run",
            "--kubeconfig",
            sim.kubeconfig.to_str().unwrap(),
            "--ledger",
            dir.path().join("ledger.redb").to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
        ]);
        let logs = Lines::stderr(&mut run);
        (KillOnDrop(run), logs)
    });
    let inventory = dir.path().join("devices.yaml");
    std::fs::write(
        &inventory,
        "devices:\n  - name: gpu-0\n    attributes: {model: L4}\n  - name: gpu-1\n    attributes: {model: L4}\n",
    )
    .unwrap();
    let dirs = AgentDirs::with_kubelet(
        &sim.kubeconfig,
        &kubelets.join("node-0"),
        dir.path(),
        &inventory,
    );
    for incarnation in 0..INCARNATIONS {
        let (mut agent, mut logs, addr) =
            start_registered(&dirs, &format!("{version}: incarnation {incarnation}"));
        run_pod_prepared_by(&api, &addr, version, &format!("p-{incarnation}"));
        signal(&agent, "KILL");
        wait_exit(&mut agent, Duration::from_secs(10));
        logs.drain();
    }
    let (mut agent, _logs, _) =
        start_registered(&dirs, &format!("{version}: the last incarnation"));
    terminate(&agent);
    assert!(wait_exit(&mut agent, Duration::from_secs(30)).success());
    drop(sim);
}

#[test]
fn a_node_agent_killed_and_restarted_is_registered_again_and_prepares_on_1_30() {
    agent_incarnations_register_and_prepare("1.30");
}

#[test]
fn a_node_agent_killed_and_restarted_is_registered_again_and_prepares_on_every_v1_release() {
    for version in dra_sim::KubernetesVersion::v1_releases() {
        agent_incarnations_register_and_prepare(version.as_str());
    }
}
