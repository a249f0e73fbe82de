//! The simulated kubelet of a node with a kubelet directory against the real node agent
//! (`dra_node::agent::run` in-process, with an inventory file and temporary directories): the
//! agent registers, its devices become the node's `ResourceSlice` and follow the inventory file,
//! a pod runs only once its claim is prepared (the agent's CDI spec exists), a bad handle is a
//! `FailedPrepareDynamicResources` event with the pod kept Pending, deleting the pod unprepares
//! the claim before the pod is gone, and stopping the agent deletes the node's slice.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use dra_allocator::handle::{HandleData, HandleSharing};
use dra_node::agent::{AgentConfig, AgentError};
use dra_node::discovery::{DeviceSource, DiscoveryRoots};
use dra_sim::actors::plugins::PluginsConfig;
use dra_sim::actors::ActorsConfig;
use dra_sim::cluster::{start_cluster, ClusterConfig, ClusterHandle, DEFAULT_DRIVER_NAME};
use k8s_openapi::api::core::v1::{ClaimSource, Container, Pod, PodResourceClaim, PodSpec};
use k8s_openapi::api::resource::v1alpha2::{
    AllocationResult, ResourceClaim, ResourceClaimConsumerReference, ResourceClaimStatus,
    ResourceHandle, ResourceSlice,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client};
use testkit::eventually;

use crate::support::{create_v1alpha2_claim, events_about, list};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

const NODE: &str = "node-0";
const DRIVER: &str = DEFAULT_DRIVER_NAME;
const CLASS: &str = "gpu";
const PATIENCE: Duration = Duration::from_secs(20);

/// The running agent: its stop signal and its task.
type RunningAgent = (oneshot::Sender<()>, JoinHandle<Result<(), AgentError>>);

/// A two-node cluster whose first node has a kubelet directory, and the node agent serving it.
struct Setup {
    cluster: ClusterHandle,
    client: Client,
    dir: tempfile::TempDir,
    agent: Option<RunningAgent>,
}

impl Setup {
    async fn start() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("kubelet");
        let config = ClusterConfig {
            nodes: 2,
            devices_per_node: 2,
            resource_class: Some(CLASS.into()),
            kubelet_dirs: BTreeMap::from([(NODE.to_owned(), root.clone())]),
            actors: ActorsConfig {
                plugins: PluginsConfig {
                    registry_poll: Duration::from_millis(50),
                    registration_retry: Duration::from_millis(50),
                    stream_retry: Duration::from_millis(200),
                    prepare_retry: Duration::from_millis(100),
                    prepare_retry_max: Duration::from_millis(500),
                    claim_poll: Duration::from_millis(50),
                    ..PluginsConfig::default()
                },
                ..ActorsConfig::default()
            },
            ..ClusterConfig::default()
        };
        let cluster = start_cluster(config).await.expect("cluster starts");
        let client = cluster.kube_client();
        write_inventory(&dir.path().join("devices.yaml"), &["gpu-0", "gpu-1"]);
        let agent = AgentConfig {
            node_name: NODE.into(),
            driver_name: DRIVER.into(),
            registry_dir: root.join("plugins_registry"),
            plugins_dir: root.join("plugins"),
            cdi_dir: dir.path().join("cdi"),
            state_dir: dir.path().join("state"),
            devices: DeviceSource::File(dir.path().join("devices.yaml")),
            roots: DiscoveryRoots::default(),
            gc_interval: Duration::from_secs(3600),
            inventory_interval: Duration::from_millis(100),
            listen: "127.0.0.1:0".parse().unwrap(),
            health: dra_node::agent::HealthConfig::default(),
        };
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(dra_node::agent::run(agent, None, async {
            let _ = stopped.await;
        }));
        Setup {
            cluster,
            client,
            dir,
            agent: Some((stop, task)),
        }
    }

    fn inventory(&self) -> PathBuf {
        self.dir.path().join("devices.yaml")
    }

    fn cdi_file(&self, claim_uid: &str) -> PathBuf {
        self.dir
            .path()
            .join("cdi")
            .join(format!("{DRIVER}-claim_{claim_uid}.json"))
    }

    async fn stop_agent(&mut self) {
        if let Some((stop, task)) = self.agent.take() {
            let _ = stop.send(());
            tokio::time::timeout(PATIENCE, task)
                .await
                .expect("the agent stops")
                .unwrap()
                .expect("the agent ran without error");
        }
    }

    async fn shutdown(mut self) {
        self.stop_agent().await;
        self.cluster.shutdown().await;
    }
}

fn write_inventory(path: &Path, devices: &[&str]) {
    let mut text = String::from("devices:\n");
    for device in devices {
        writeln!(
            text,
            "  - name: {device}\n    attributes:\n      model: H100\n      memory: {{quantity: 80Gi}}"
        )
        .unwrap();
    }
    // Written next to the file and renamed, so that the agent never reads half a file.
    let partial = path.with_extension("partial");
    std::fs::write(&partial, text).unwrap();
    std::fs::rename(partial, path).unwrap();
}

async fn slices_of_node(client: &Client, node: &str) -> Vec<ResourceSlice> {
    list(Api::<ResourceSlice>::all(client.clone()))
        .await
        .into_iter()
        .filter(|s| s.node_name.as_deref() == Some(node))
        .collect()
}

fn device_names(slice: &ResourceSlice) -> Vec<String> {
    slice
        .named_resources
        .iter()
        .flat_map(|n| n.instances.iter().map(|i| i.name.clone()))
        .collect()
}

/// The devices of the node's only slice once it has exactly `devices`.
async fn wait_for_devices(client: &Client, devices: &[&str]) -> ResourceSlice {
    let what = format!("the slice of {NODE} lists {devices:?}");
    eventually(what, PATIENCE, || async {
        let slices = slices_of_node(client, NODE).await;
        (slices.len() == 1 && device_names(&slices[0]) == devices).then(|| slices[0].clone())
    })
    .await
}

/// A pod bound to the plugin node using claim `claim`.
async fn create_pod(client: &Client, name: &str, claim: &str) -> Pod {
    let pod = Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: Some(NODE.into()),
            containers: vec![Container {
                name: "main".into(),
                image: Some("busybox".into()),
                ..Container::default()
            }],
            resource_claims: Some(vec![PodResourceClaim {
                name: "gpu".into(),
                source: Some(ClaimSource {
                    resource_claim_name: Some(claim.into()),
                    resource_claim_template_name: None,
                }),
            }]),
            ..PodSpec::default()
        }),
        status: None,
    };
    Api::<Pod>::default_namespaced(client.clone())
        .create(&PostParams::default(), &pod)
        .await
        .unwrap()
}

/// Writes the claim's allocation (one handle with `data`) and reserves it for `pod`, as the
/// driver and the scheduler would.
async fn allocate(client: &Client, claim: &ResourceClaim, data: String, pod: &Pod) {
    let api: Api<ResourceClaim> = Api::default_namespaced(client.clone());
    let name = claim.metadata.name.clone().unwrap();
    let mut current = api.get(&name).await.unwrap();
    current.status = Some(ResourceClaimStatus {
        driver_name: Some(DRIVER.into()),
        allocation: Some(AllocationResult {
            available_on_nodes: None,
            resource_handles: Some(vec![ResourceHandle {
                driver_name: Some(DRIVER.into()),
                data: Some(data),
                structured_data: None,
            }]),
            shareable: Some(false),
        }),
        reserved_for: Some(vec![ResourceClaimConsumerReference {
            api_group: None,
            resource: "pods".into(),
            name: pod.metadata.name.clone().unwrap(),
            uid: pod.metadata.uid.clone().unwrap(),
        }]),
        deallocation_requested: None,
    });
    api.replace_status(
        &name,
        &PostParams::default(),
        serde_json::to_vec(&current).unwrap(),
    )
    .await
    .unwrap();
}

fn handle_for(claim: &ResourceClaim, devices: &[&str]) -> String {
    HandleData {
        node: NODE.into(),
        devices: devices.iter().map(|&d| d.to_owned()).collect(),
        sharing: HandleSharing::Exclusive,
        claim_uid: claim.metadata.uid.clone().unwrap(),
    }
    .to_json()
}

async fn pod_phase(client: &Client, name: &str) -> Option<String> {
    let pod = Api::<Pod>::default_namespaced(client.clone())
        .get_opt(name)
        .await
        .unwrap()?;
    Some(pod.status.and_then(|s| s.phase).unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_registers_and_its_inventory_becomes_the_nodes_resource_slice() {
    let mut setup = Setup::start().await;
    let client = setup.client.clone();
    let node = setup
        .cluster
        .plugins()
        .node(NODE)
        .expect("node-0 has plugins")
        .clone();
    eventually("the agent is registered", PATIENCE, || async {
        node.drivers() == [DRIVER]
    })
    .await;
    assert!(
        setup.cluster.plugins().node("node-1").is_none(),
        "a node without a kubelet directory has no plugins"
    );
    let slice = wait_for_devices(&client, &["gpu-0", "gpu-1"]).await;
    assert_eq!(slice.driver_name, DRIVER);
    let name = slice.metadata.name.clone().unwrap();
    assert!(name.starts_with(&format!("{NODE}-{DRIVER}-")), "{name}");
    let owner = &slice.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!((owner.kind.as_str(), owner.name.as_str()), ("Node", NODE));
    let instance = &slice.named_resources.as_ref().unwrap().instances[0];
    assert!(
        instance
            .attributes
            .iter()
            .flatten()
            .any(|a| a.name == "model" && a.string.as_deref() == Some("H100")),
        "{instance:?}"
    );
    // The node without a kubelet directory keeps its simulated slice.
    let simulated = slices_of_node(&client, "node-1").await;
    assert_eq!(simulated.len(), 1);
    assert_eq!(device_names(&simulated[0]), ["gpu-0", "gpu-1"]);

    write_inventory(&setup.inventory(), &["gpu-0", "gpu-1", "gpu-2"]);
    let grown = wait_for_devices(&client, &["gpu-0", "gpu-1", "gpu-2"]).await;
    assert_eq!(
        grown.metadata.name, slice.metadata.name,
        "the slice is updated in place"
    );

    setup.stop_agent().await;
    eventually("the node's slices are deleted", PATIENCE, || async {
        slices_of_node(&client, NODE).await.is_empty()
    })
    .await;
    assert!(node.drivers().is_empty());
    assert_eq!(slices_of_node(&client, "node-1").await.len(), 1);
    setup.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_runs_only_once_its_claim_is_prepared_and_is_removed_after_unprepare() {
    let setup = Setup::start().await;
    let client = setup.client.clone();
    wait_for_devices(&client, &["gpu-0", "gpu-1"]).await;

    // Allocated after the pod exists: until then the pod waits.
    let claim = create_v1alpha2_claim(&client, "gpu-claim", CLASS, Some("Immediate")).await;
    let pod = create_pod(&client, "worker", "gpu-claim").await;
    let uid = claim.metadata.uid.clone().unwrap();
    allocate(&client, &claim, handle_for(&claim, &["gpu-0"]), &pod).await;
    eventually("the pod runs", PATIENCE, || async {
        pod_phase(&client, "worker").await.as_deref() == Some("Running")
    })
    .await;
    assert!(
        setup.cdi_file(&uid).exists(),
        "the claim is prepared before the pod runs"
    );

    // A handle the agent refuses: an event, and the pod does not run.
    let bad = create_v1alpha2_claim(&client, "bad-claim", CLASS, Some("Immediate")).await;
    let bad_pod = create_pod(&client, "refused", "bad-claim").await;
    allocate(&client, &bad, "{\"not\": \"a handle\"}".into(), &bad_pod).await;
    let events = eventually(
        "a FailedPrepareDynamicResources event",
        PATIENCE,
        || async {
            let events = events_about(&client, "refused", "FailedPrepareDynamicResources").await;
            (!events.is_empty()).then_some(events)
        },
    )
    .await;
    let event = &events[0];
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(
        event.source.as_ref().and_then(|s| s.host.as_deref()),
        Some(NODE)
    );
    let message = event.message.clone().unwrap_or_default();
    assert!(
        message.contains("NodePrepareResources failed for claim default/bad-claim"),
        "{message}"
    );
    eventually("the prepare is retried", PATIENCE, || async {
        events_about(&client, "refused", "FailedPrepareDynamicResources")
            .await
            .len()
            >= 2
    })
    .await;
    assert_eq!(
        pod_phase(&client, "refused").await.as_deref(),
        Some("Pending")
    );
    assert!(!setup
        .cdi_file(bad.metadata.uid.as_deref().unwrap())
        .exists());

    // Deleting the running pod unprepares its claim before the pod is gone.
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    pods.delete("worker", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the pod is removed", PATIENCE, || async {
        let gone = pod_phase(&client, "worker").await.is_none();
        if gone {
            assert!(
                !setup.cdi_file(&uid).exists(),
                "the claim is unprepared before the pod is removed"
            );
        }
        gone
    })
    .await;
    pods.delete("refused", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the refused pod is removed", PATIENCE, || async {
        pod_phase(&client, "refused").await.is_none()
    })
    .await;
    setup.shutdown().await;
}
