//! `dra-ledger node` as a process: it reads a file inventory (again on SIGHUP), creates its
//! private sockets and state, serves its admin API (not ready while no kubelet has registered
//! it; `dra-ledger admin prepared` reads it) and removes its sockets on SIGTERM; against
//! `dra-ledger sim --kubelet-root` the simulated kubelet registers it and publishes its devices.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use crate::cli_support::agent::{start_agent, AgentDirs};
use crate::cli_support::{binary, http_get, signal, start_sim, terminate, wait_exit};
use testkit::eventually_blocking;

#[test]
fn the_node_agent_serves_its_inventory_reads_it_again_on_sighup_and_removes_its_sockets_on_sigterm()
{
    let dir = tempfile::tempdir().unwrap();
    let sim = start_sim(dir.path());
    let inventory = dir.path().join("devices.yaml");
    std::fs::write(
        &inventory,
        "devices:\n  - name: gpu-0\n    attributes:\n      model: H100\n      memory: {quantity: 80Gi}\n    deviceNodes: [/dev/null]\n",
    )
    .unwrap();
    let (mut agent, mut logs, addr) = start_agent(
        &AgentDirs {
            kubeconfig: &sim.kubeconfig,
            registry: dir.path().join("registry"),
            plugins: dir.path().join("plugins"),
            cdi: dir.path().join("cdi"),
            state: dir.path().join("state"),
            inventory: &inventory,
        },
        &["--inventory-interval", "1h"],
    );
    let (status, body) = http_get(&addr, "/v1/devices");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("gpu-0"), "{body}");
    std::fs::write(
        &inventory,
        "devices:\n  - name: gpu-0\n    attributes: {model: H100}\n  - name: gpu-1\n    attributes: {model: H100}\n",
    )
    .unwrap();
    signal(&agent, "HUP");
    eventually_blocking(
        "the second device after SIGHUP",
        Duration::from_secs(30),
        Duration::from_millis(100),
        || {
            let (status, body) = http_get(&addr, "/v1/devices");
            (status == 200 && body.contains("gpu-1")).then_some(())
        },
    );
    let admin = binary()
        .args(["admin", "--server", &format!("http://{addr}"), "prepared"])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&admin.stdout);
    assert!(admin.status.success(), "{admin:?}");
    assert_eq!(
        table.lines().count(),
        1,
        "headers only, nothing prepared: {table}"
    );
    assert_eq!(
        table.split_whitespace().collect::<Vec<_>>(),
        ["CLAIM", "NAMESPACE/NAME", "DEVICES", "CDI", "DEVICES"],
        "{table}"
    );
    let (status, body) = http_get(&addr, "/readyz");
    assert_eq!(status, 503, "no kubelet has registered the plugin: {body}");
    assert!(body.contains("\"journalOpen\":true"), "{body}");
    let registration = dir.path().join("registry/gpu.dra-ledger.io.sock");
    let plugin = dir.path().join("plugins/gpu.dra-ledger.io/plugin.sock");
    for socket in [&registration, &plugin] {
        let mode = std::fs::metadata(socket).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", socket.display());
    }
    let state = std::fs::metadata(dir.path().join("state"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(state, 0o700);
    terminate(&agent);
    let status = wait_exit(&mut agent, Duration::from_secs(30));
    logs.drain();
    assert!(status.success(), "exit {status:?}:\n{}", logs.text());
    assert!(
        !registration.exists() && !plugin.exists(),
        "sockets left behind"
    );
    drop(sim);
}

#[test]
fn the_node_agent_registers_with_the_simulated_kubelet_and_publishes_its_devices() {
    let dir = tempfile::tempdir().unwrap();
    let kubelets = dir.path().join("kubelets");
    let sim = testkit::sim::start_sim(
        crate::cli_support::BINARY,
        dir.path(),
        &[
            "--nodes",
            "1",
            "--devices-per-node",
            "2",
            "--kubelet-root",
            kubelets.to_str().unwrap(),
        ],
    );
    let inventory = dir.path().join("devices.yaml");
    std::fs::write(
        &inventory,
        "devices:\n  - name: gpu-a\n    attributes: {model: L4}\n  - name: gpu-b\n    attributes: {model: L4}\n",
    )
    .unwrap();
    let (mut agent, mut logs, addr) = start_agent(
        &AgentDirs::with_kubelet(
            &sim.kubeconfig,
            &kubelets.join("node-0"),
            dir.path(),
            &inventory,
        ),
        &[],
    );
    eventually_blocking(
        "the agent ready (registered by the kubelet)",
        Duration::from_secs(30),
        Duration::from_millis(100),
        || http_get(&addr, "/readyz").0 == 200,
    );
    let (_, metrics) = http_get(&addr, "/metrics");
    assert!(
        metrics.contains("dra_ledger_node_registered 1"),
        "{metrics}"
    );
    // The kubelet wrote node-0's slice from the agent's inventory, not the simulated one.
    let slices = eventually_blocking(
        "node-0's slice with the agent's devices",
        Duration::from_secs(30),
        Duration::from_millis(100),
        || {
            let (status, body) = http_get(
                sim.url.trim_start_matches("http://"),
                "/apis/resource.k8s.io/v1alpha2/resourceslices",
            );
            (status == 200 && body.contains("gpu-a")).then_some(body)
        },
    );
    assert!(
        slices.contains("gpu-b") && !slices.contains("gpu-0"),
        "{slices}"
    );
    terminate(&agent);
    let status = wait_exit(&mut agent, Duration::from_secs(30));
    logs.drain();
    assert!(status.success(), "exit {status:?}:\n{}", logs.text());
    drop(sim);
}
