//! The whole path on a node: the simulated cluster with a kubelet per node that drives real
//! node agents (in this process, file inventories), and the controller allocating. A pod is
//! Running only once its claim's CDI spec exists on its node, the spec names the allocated
//! devices, and deleting the pod unprepares the claim (spec and journal entry gone) before the
//! pod disappears.

use std::time::Duration;

use dra_node::local::{LocalAgents, LocalNode, LocalSettings};
use dra_sim::actors::plugins::{PLUGINS_DIR, REGISTRY_DIR};
use dra_sim::cluster::{start_cluster, ClusterConfig, ClusterHandle};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1alpha2::ResourceSlice;
use kube::api::{DeleteParams, ListParams};
use kube::Api;
use testkit::eventually;

use crate::e2e_support::{assert_consistent, count, Env, Running, CLASS, DRIVER, WAIT};

/// Two devices on one NUMA node per node, each with a device file of its own.
pub(crate) fn inventory(dir: &std::path::Path) -> String {
    let devices: Vec<String> = (0..2)
        .map(|i| {
            let node = dir.join(format!("gpu-{i}"));
            std::fs::write(&node, b"").unwrap();
            format!(
                "  - name: gpu-{i}\n    attributes: {{model: H100, numa: 0, memory: {{quantity: 80Gi}}}}\n    deviceNodes: [{}]\n",
                node.display()
            )
        })
        .collect();
    format!("devices:\n{}", devices.concat())
}

/// A two-node cluster whose kubelets drive an agent each, once both nodes' slices are there.
async fn cluster_with_agents(dir: &std::path::Path) -> (ClusterHandle, LocalAgents) {
    let mut config = ClusterConfig {
        nodes: 2,
        devices_per_node: 2,
        ..ClusterConfig::default()
    };
    let nodes: Vec<LocalNode> = ["node-0", "node-1"]
        .iter()
        .map(|name| {
            let root = dir.join(name);
            std::fs::create_dir_all(&root).unwrap();
            let inventory_path = root.join("devices.yaml");
            std::fs::write(&inventory_path, inventory(&root)).unwrap();
            let kubelet = root.join("kubelet");
            config
                .kubelet_dirs
                .insert((*name).to_owned(), kubelet.clone());
            LocalNode {
                name: (*name).to_owned(),
                registry_dir: kubelet.join(REGISTRY_DIR),
                plugins_dir: kubelet.join(PLUGINS_DIR),
                dir: root.join("agent"),
                inventory: inventory_path,
            }
        })
        .collect();
    let cluster = start_cluster(config).await.expect("cluster starts");
    let client = cluster.kube_client();
    let agents = LocalAgents::start(
        &nodes,
        &LocalSettings {
            driver_name: DRIVER.into(),
            gc_interval: Duration::from_secs(60),
            inventory_interval: Duration::from_secs(60),
        },
        Some(&client),
    )
    .await
    .unwrap();
    // The kubelets publish the agents' devices.
    let slices: Api<ResourceSlice> = Api::all(client);
    eventually("both nodes' slices from their agents", WAIT, || async {
        slices
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len()
            == 2
    })
    .await;
    (cluster, agents)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_run_only_once_prepared_and_deleting_them_unprepares() {
    let dir = tempfile::tempdir().unwrap();
    let (cluster, agents) = cluster_with_agents(dir.path()).await;
    let client = cluster.kube_client();
    let mut env = Env::connect(client.clone()).await;
    env.params("pair", count(2)).await;
    env.template("pair", CLASS, "pair").await;
    let controller = Running::start(&env.client, &env.ledger_path(), 2).await;
    for pod in ["a", "b"] {
        env.pod(pod, &[("gpu", "pair")]).await;
    }

    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    for pod in ["a", "b"] {
        // Watched until Running: whenever the pod is Running, its claim's spec is on its node.
        let (node, uid) = eventually(format!("pod {pod} running"), WAIT, || async {
            let p = pods.get(pod).await.unwrap();
            let node = p.spec.as_ref()?.node_name.clone()?;
            let claim = env.claims_of_pod(pod).await.remove("gpu")?;
            let file = agents.cdi_file(&node, &claim.uid).unwrap();
            let running = p.status.as_ref()?.phase.as_deref() == Some("Running");
            if running {
                assert!(file.exists(), "{pod} Running before its claim was prepared");
                let spec: serde_json::Value =
                    serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
                let env_vars = spec["devices"][0]["containerEdits"]["env"].to_string();
                let devices = claim.data.devices.join(",");
                assert!(
                    env_vars.contains(&format!("DRA_LEDGER_DEVICES={devices}")),
                    "{env_vars}"
                );
                return Some((node, claim.uid));
            }
            None
        })
        .await;
        assert!(agents.cdi_specs().contains(&(node, uid)));
    }
    assert_eq!(agents.cdi_specs().len(), 2, "one spec per claim");

    let claim_a = env.claims_of_pod("a").await.remove("gpu").unwrap();
    let node_a = claim_a.data.node.clone();
    pods.delete("a", &DeleteParams::default()).await.unwrap();
    eventually("pod a gone", WAIT, || async {
        let gone = pods.get_opt("a").await.unwrap().is_none();
        if gone {
            assert!(
                !agents
                    .cdi_specs()
                    .contains(&(node_a.clone(), claim_a.uid.clone())),
                "pod a gone before its claim was unprepared"
            );
        }
        gone
    })
    .await;
    assert_eq!(agents.cdi_specs().len(), 1, "pod b's claim stays prepared");
    let (_, admin) = agents
        .admin_addrs()
        .into_iter()
        .find(|(node, _)| *node == node_a)
        .unwrap();
    let prepared = tokio::task::spawn_blocking(move || {
        testkit::process::http_get(&admin.to_string(), "/v1/prepared")
    })
    .await
    .unwrap();
    assert_eq!(prepared.0, 200);
    assert!(
        !prepared.1.contains(&claim_a.uid),
        "the journal entry is gone too: {}",
        prepared.1
    );
    controller.stop().await;
    env.cluster = Some(cluster);
    let ledger = dra_allocator::ledger::Ledger::open(env.ledger_path(), DRIVER).unwrap();
    assert_consistent(&env, &ledger).await;
    agents.shutdown().await.unwrap();
    env.shutdown().await;
}
