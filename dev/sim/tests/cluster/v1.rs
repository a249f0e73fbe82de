//! A 1.34 cluster (`KubernetesVersion::V1_34`): the resourceclaim controller makes and records
//! template claims, deletes those of finished pods and reserves allocated claims for pods already
//! on a node; the kubelet of a
//! node with a kubelet directory registers fake plugins by their `DRAPlugin` service names,
//! prepares a pod's claims over the chosen service before the pod runs, unprepares them after it
//! is deleted (then the controller deallocates the claim), and wipes the node's slices at start
//! and those of a driver gone for longer than the wipe delay.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use dra_sim::actors::kubelet::RUN_SECONDS_ANNOTATION;
use dra_sim::actors::plugins::PluginsConfig;
use dra_sim::actors::plugins::Service;
use dra_sim::actors::{Actors, ActorsConfig, POD_CLAIM_NAME_ANNOTATION};
use dra_sim::cluster::{add_node, start_cluster, ClusterConfig, ClusterHandle};
use dra_sim::server::{ServerConfig, SimServer};
use dra_sim::KubernetesVersion;
use dra_types::resource_v1::{
    Device, ResourceClaim, ResourceClaimSpec, ResourceClaimTemplate, ResourcePool, ResourceSlice,
    ResourceSliceSpec, DELETE_PROTECTION_FINALIZER,
};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use kube::{Api, Client};
use serde_json::{json, Value};
use testkit::eventually;

use crate::fake_plugin::{FakePlugin, Serves};
use crate::support::events_about;

const NODE: &str = "node-0";
const DRIVER: &str = "gpu.example.com";
const PATIENCE: Duration = Duration::from_secs(20);

fn plugins_config(wipe_delay: Duration) -> PluginsConfig {
    PluginsConfig {
        registry_poll: Duration::from_millis(50),
        registration_retry: Duration::from_millis(50),
        prepare_retry: Duration::from_millis(100),
        prepare_retry_max: Duration::from_millis(500),
        claim_poll: Duration::from_millis(50),
        wipe_delay,
        ..PluginsConfig::default()
    }
}

/// A two-node 1.34 cluster whose first node has a kubelet directory.
struct Setup {
    cluster: ClusterHandle,
    client: Client,
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Setup {
    async fn start(wipe_delay: Duration) -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("kubelet");
        let config = ClusterConfig {
            nodes: 2,
            devices_per_node: 2,
            kubelet_dirs: BTreeMap::from([(NODE.to_owned(), root.clone())]),
            kubernetes_version: KubernetesVersion::V1_34,
            actors: ActorsConfig {
                plugins: plugins_config(wipe_delay),
                ..ActorsConfig::default()
            },
            ..ClusterConfig::default()
        };
        let cluster = start_cluster(config).await.expect("cluster starts");
        let client = cluster.kube_client();
        Setup {
            cluster,
            client,
            _dir: dir,
            root,
        }
    }

    fn root(&self) -> &Path {
        &self.root
    }

    /// Waits until `driver` is registered on the plugin node over `service`.
    async fn wait_registered(&self, driver: &str, service: Service) {
        let node = self.cluster.plugins().node(NODE).unwrap().clone();
        eventually(
            format!("{driver} registered over {service}"),
            PATIENCE,
            || async {
                node.services()
                    .iter()
                    .any(|(d, s)| d == driver && *s == service)
            },
        )
        .await;
    }
}

fn pods(client: &Client) -> Api<DynamicObject> {
    Api::default_namespaced_with(client.clone(), &ApiResource::erase::<Pod>(&()))
}

fn claims(client: &Client) -> Api<ResourceClaim> {
    Api::default_namespaced(client.clone())
}

fn claim_spec() -> ResourceClaimSpec {
    serde_json::from_value(
        json!({"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}),
    )
    .unwrap()
}

/// Creates a pod using `entry` as its only pod claim `gpu`, on `node` if given.
async fn create_pod(
    client: &Client,
    name: &str,
    entry: Value,
    node: Option<&str>,
) -> DynamicObject {
    let mut claim = json!({"name": "gpu"});
    claim
        .as_object_mut()
        .unwrap()
        .extend(entry.as_object().unwrap().clone());
    let mut spec = json!({
        "containers": [{"name": "main", "image": "busybox", "resources": {"claims": [{"name": "gpu"}]}}],
        "resourceClaims": [claim],
    });
    if let Some(node) = node {
        spec["nodeName"] = json!(node);
    }
    let pod: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .unwrap();
    pods(client)
        .create(&PostParams::default(), &pod)
        .await
        .unwrap()
}

async fn pod(client: &Client, name: &str) -> Option<DynamicObject> {
    pods(client).get_opt(name).await.unwrap()
}

fn phase(pod: &DynamicObject) -> &str {
    pod.data["status"]["phase"].as_str().unwrap_or_default()
}

/// Creates a claim and allocates it to one device of `driver` on the plugin node with the
/// delete-protection finalizer, as the scheduler would.
async fn allocated_claim(client: &Client, name: &str, driver: &str) -> ResourceClaim {
    let api = claims(client);
    let claim = ResourceClaim {
        metadata: ObjectMeta {
            name: Some(name.into()),
            finalizers: Some(vec![DELETE_PROTECTION_FINALIZER.into()]),
            ..ObjectMeta::default()
        },
        spec: claim_spec(),
        ..ResourceClaim::default()
    };
    api.create(&PostParams::default(), &claim).await.unwrap();
    let allocation = json!({"status": {"allocation": {"devices": {"results": [
        {"request": "gpu", "driver": driver, "pool": NODE, "device": "gpu-0"}
    ]}}}});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&allocation))
        .await
        .unwrap()
}

fn both() -> Serves {
    Serves {
        v1: true,
        v1beta1: true,
    }
}

/// Creates template `gpu-template` whose claims get label `app: demo` and annotation
/// `team: ml`.
async fn create_template(client: &Client) {
    let template = ResourceClaimTemplate::new(
        "gpu-template",
        Some(ObjectMeta {
            labels: Some([("app".to_owned(), "demo".to_owned())].into()),
            annotations: Some([("team".to_owned(), "ml".to_owned())].into()),
            ..ObjectMeta::default()
        }),
        claim_spec(),
    );
    Api::<ResourceClaimTemplate>::default_namespaced(client.clone())
        .create(&PostParams::default(), &template)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_claim_is_created_owned_and_recorded_for_its_pod() {
    let setup = Setup::start(Duration::from_secs(30)).await;
    let client = setup.client.clone();
    create_template(&client).await;
    let created = create_pod(
        &client,
        "worker",
        json!({"resourceClaimTemplateName": "gpu-template"}),
        None,
    )
    .await;
    let pod_uid = created.metadata.uid.clone().unwrap();
    let claim_name = eventually("the pod's claim is recorded", PATIENCE, || async {
        let pod = pod(&client, "worker").await?;
        let status = &pod.data["status"]["resourceClaimStatuses"][0];
        (status["name"] == "gpu")
            .then(|| status["resourceClaimName"].as_str().map(str::to_owned))
            .flatten()
    })
    .await;
    assert!(claim_name.starts_with("worker-gpu-"), "{claim_name}");
    let claim = claims(&client).get(&claim_name).await.unwrap();
    assert_eq!(claim.metadata.generate_name.as_deref(), Some("worker-gpu-"));
    assert_eq!(claim.spec.devices.requests[0].name, "gpu");
    let owner = &claim.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
        ("Pod", pod_uid.as_str(), Some(true))
    );
    let annotations = claim.metadata.annotations.clone().unwrap();
    assert_eq!(annotations[POD_CLAIM_NAME_ANNOTATION], "gpu");
    assert_eq!(annotations["team"], "ml");
    assert_eq!(claim.metadata.labels.clone().unwrap()["app"], "demo");
    let all: Vec<ResourceClaim> = claims(&client)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    assert_eq!(all.len(), 1, "one claim for the pod claim");
    assert_ne!(
        phase(&pod(&client, "worker").await.unwrap()),
        "Running",
        "the claim's class does not exist: the scheduler leaves the pod pending"
    );

    // The claim goes with its pod.
    pods(&client)
        .delete("worker", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the claim is deleted with its pod", PATIENCE, || async {
        claims(&client)
            .get_opt(&claim_name)
            .await
            .unwrap()
            .is_none()
    })
    .await;
    setup.cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_template_is_an_event_and_the_claim_of_a_finished_pod_is_deleted() {
    let setup = Setup::start(Duration::from_secs(30)).await;
    let client = setup.client.clone();
    create_template(&client).await;
    // A template that does not exist is an event on the pod.
    create_pod(
        &client,
        "orphan",
        json!({"resourceClaimTemplateName": "missing"}),
        None,
    )
    .await;
    let events = eventually("a FailedResourceClaimCreation event", PATIENCE, || async {
        let events = events_about(&client, "orphan", "FailedResourceClaimCreation").await;
        (!events.is_empty()).then_some(events)
    })
    .await;
    let message = events[0].message.clone().unwrap_or_default();
    assert!(
        message.starts_with("PodResourceClaim gpu: resource claim template \"missing\""),
        "{message}"
    );

    // A pod that finished no longer needs its claim: the controller deletes it while the pod
    // is still there (node-1 has the minimal kubelet, which runs a bound pod at once and ends it
    // once its run time, set here, is over).
    create_pod(
        &client,
        "batch",
        json!({"resourceClaimTemplateName": "gpu-template"}),
        Some("node-1"),
    )
    .await;
    let patch = json!({"metadata": {"annotations": {RUN_SECONDS_ANNOTATION: "0"}}});
    pods(&client)
        .patch("batch", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let batch_claim = eventually("the finished pod's claim is recorded", PATIENCE, || async {
        let pod = pod(&client, "batch").await?;
        pod.data["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
            .as_str()
            .map(str::to_owned)
    })
    .await;
    eventually(
        "the pod succeeds and its claim is deleted",
        PATIENCE,
        || async {
            let done = pod(&client, "batch")
                .await
                .is_some_and(|p| phase(&p) == "Succeeded");
            done && claims(&client)
                .get_opt(&batch_claim)
                .await
                .unwrap()
                .is_none()
        },
    )
    .await;
    assert!(
        pod(&client, "batch").await.is_some(),
        "the pod itself stays"
    );

    setup.cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bound_pod_is_reserved_prepared_over_v1_and_its_claim_deallocated_after_it_is_gone() {
    let setup = Setup::start(Duration::from_secs(30)).await;
    let client = setup.client.clone();
    let plugin = FakePlugin::start(
        setup.root(),
        DRIVER,
        &["v1.DRAPlugin", "v1beta1.DRAPlugin"],
        both(),
    );
    setup.wait_registered(DRIVER, Service::V1).await;
    assert!(plugin.statuses().contains(&(true, String::new())));

    let claim = allocated_claim(&client, "gpu-claim", DRIVER).await;
    let claim_uid = claim.metadata.uid.clone().unwrap();
    let created = create_pod(
        &client,
        "worker",
        json!({"resourceClaimName": "gpu-claim"}),
        Some(NODE),
    )
    .await;
    let pod_uid = created.metadata.uid.clone().unwrap();
    eventually("the pod runs", PATIENCE, || async {
        pod(&client, "worker")
            .await
            .is_some_and(|p| phase(&p) == "Running")
    })
    .await;
    let reserved = claims(&client).get("gpu-claim").await.unwrap();
    assert_eq!(
        reserved
            .reserved_for()
            .iter()
            .map(|r| r.uid.as_str())
            .collect::<Vec<_>>(),
        [pod_uid.as_str()],
        "the controller reserved the claim for the bound pod"
    );
    let prepared = (
        "default".to_owned(),
        claim_uid.clone(),
        "gpu-claim".to_owned(),
    );
    let calls = plugin.calls();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(
        (calls[0].service, calls[0].method, calls[0].claims.clone()),
        ("v1", "prepare", vec![prepared.clone()])
    );

    pods(&client)
        .delete("worker", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the pod is removed", PATIENCE, || async {
        let gone = pod(&client, "worker").await.is_none();
        if gone {
            let unprepared = plugin
                .calls()
                .iter()
                .any(|c| c.method == "unprepare" && c.claims == [prepared.clone()]);
            assert!(
                unprepared,
                "the claim is unprepared before the pod is removed"
            );
        }
        gone
    })
    .await;
    let released = eventually("the claim is deallocated", PATIENCE, || async {
        let claim = claims(&client).get("gpu-claim").await.unwrap();
        (!claim.is_allocated()).then_some(claim)
    })
    .await;
    assert!(released.reserved_for().is_empty());
    let released = eventually("the finalizer is removed", PATIENCE, || async {
        let claim = claims(&client).get("gpu-claim").await.unwrap();
        (!claim.has_delete_protection()).then_some(claim)
    })
    .await;
    assert_eq!(released.metadata.uid.as_deref(), Some(claim_uid.as_str()));
    plugin.stop().await;
    setup.cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_advertising_only_v1beta1_is_called_over_v1beta1() {
    let setup = Setup::start(Duration::from_secs(30)).await;
    let client = setup.client.clone();
    let beta = FakePlugin::start(
        setup.root(),
        DRIVER,
        &["v1beta1.DRAPlugin"],
        Serves {
            v1: false,
            v1beta1: true,
        },
    );
    let old = FakePlugin::start(setup.root(), "old.example.com", &["1.0.0"], both());
    setup.wait_registered(DRIVER, Service::V1Beta1).await;
    let refusal = eventually("the 1.30-style plugin is refused", PATIENCE, || async {
        old.statuses()
            .into_iter()
            .find(|(registered, _)| !registered)
    })
    .await;
    assert!(
        refusal.1.contains(
            "none of services supported by the plugin ([\"1.0.0\"]) are supported by the kubelet"
        ),
        "{refusal:?}"
    );

    let claim = allocated_claim(&client, "gpu-claim", DRIVER).await;
    create_pod(
        &client,
        "worker",
        json!({"resourceClaimName": "gpu-claim"}),
        Some(NODE),
    )
    .await;
    eventually("the pod runs", PATIENCE, || async {
        pod(&client, "worker")
            .await
            .is_some_and(|p| phase(&p) == "Running")
    })
    .await;
    let calls = beta.calls();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!((calls[0].service, calls[0].method), ("v1beta1", "prepare"));
    assert_eq!(calls[0].claims[0].1, claim.metadata.uid.clone().unwrap());

    // A claim of a driver without a plugin on the node: the pod waits, with the kubelet's text.
    allocated_claim(&client, "old-claim", "old.example.com").await;
    create_pod(
        &client,
        "stuck",
        json!({"resourceClaimName": "old-claim"}),
        Some(NODE),
    )
    .await;
    // Until the controller reserved the claim the kubelet says so; then it names the driver.
    let expected = "Failed to prepare dynamic resources: prepare dynamic resources: DRA driver old.example.com is not registered";
    eventually(
        "a FailedPrepareDynamicResources event naming the driver",
        PATIENCE,
        || async {
            events_about(&client, "stuck", "FailedPrepareDynamicResources")
                .await
                .iter()
                .any(|e| e.message.as_deref() == Some(expected))
        },
    )
    .await;
    let messages: Vec<String> = events_about(&client, "stuck", "FailedPrepareDynamicResources")
        .await
        .into_iter()
        .filter_map(|e| e.message)
        .collect();
    let not_reserved =
        "Failed to prepare dynamic resources: prepare dynamic resources: pod stuck (";
    assert!(
        messages
            .iter()
            .all(|m| m == expected || m.starts_with(not_reserved)),
        "{messages:?}"
    );
    assert_ne!(phase(&pod(&client, "stuck").await.unwrap()), "Running");
    beta.stop().await;
    old.stop().await;
    setup.cluster.shutdown().await;
}

fn slice(node: &str, driver: &str) -> ResourceSlice {
    ResourceSlice::new(
        ObjectMeta {
            generate_name: Some(format!("{node}-{driver}-")),
            ..ObjectMeta::default()
        },
        ResourceSliceSpec {
            driver: driver.into(),
            pool: ResourcePool {
                name: node.into(),
                generation: 1,
                resource_slice_count: 1,
            },
            node_name: Some(node.into()),
            devices: vec![Device {
                name: "gpu-0".into(),
                ..Device::default()
            }],
            ..ResourceSliceSpec::default()
        },
    )
}

async fn publish(client: &Client, node: &str, driver: &str) {
    Api::<ResourceSlice>::all(client.clone())
        .create(&PostParams::default(), &slice(node, driver))
        .await
        .unwrap();
}

/// `(node, driver)` of every slice.
async fn slices(client: &Client) -> Vec<(String, String)> {
    let mut all: Vec<(String, String)> = Api::<ResourceSlice>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|s| (s.spec.node_name.unwrap_or_default(), s.spec.driver))
        .collect();
    all.sort();
    all
}

fn entry(node: &str, driver: &str) -> (String, String) {
    (node.to_owned(), driver.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_driver_gone_past_the_wipe_delay_loses_its_slices_and_one_back_in_time_keeps_them() {
    let setup = Setup::start(Duration::from_secs(3)).await;
    let client = setup.client.clone();
    let (kept, wiped) = ("kept.example.com", "wiped.example.com");
    let mut back = FakePlugin::start(setup.root(), kept, &["v1.DRAPlugin"], both());
    let mut gone = FakePlugin::start(setup.root(), wiped, &["v1.DRAPlugin"], both());
    setup.wait_registered(kept, Service::V1).await;
    setup.wait_registered(wiped, Service::V1).await;
    publish(&client, NODE, kept).await;
    publish(&client, NODE, wiped).await;
    publish(&client, "node-1", wiped).await;
    let simulated = entry("node-1", dra_sim::cluster::DEFAULT_DRIVER_NAME);
    assert_eq!(
        slices(&client).await,
        [
            entry(NODE, kept),
            entry(NODE, wiped),
            simulated.clone(),
            entry("node-1", wiped)
        ]
    );

    // The kept driver goes first and comes back at once; the wiped one goes for good.
    back.unregister();
    gone.unregister();
    back.register_again(setup.root(), kept, &["v1.DRAPlugin"]);
    eventually(
        "the gone driver's slice of the node is wiped",
        PATIENCE,
        || async { !slices(&client).await.contains(&entry(NODE, wiped)) },
    )
    .await;
    assert_eq!(
        slices(&client).await,
        [entry(NODE, kept), simulated, entry("node-1", wiped)],
        "the driver back in time keeps its slices, other nodes keep theirs"
    );
    setup.wait_registered(kept, Service::V1).await;
    back.stop().await;
    gone.stop().await;
    setup.cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kubelet_wipes_its_nodes_slices_when_it_starts() {
    let dir = tempfile::tempdir().unwrap();
    let kubelet_dirs = BTreeMap::from([(NODE.to_owned(), dir.path().join("kubelet"))]);
    let config = ClusterConfig {
        nodes: 2,
        devices_per_node: 2,
        kubelet_dirs: kubelet_dirs.clone(),
        kubernetes_version: KubernetesVersion::V1_34,
        ..ClusterConfig::default()
    };
    let server = SimServer::start(ServerConfig {
        kubernetes_version: KubernetesVersion::V1_34,
        ..ServerConfig::default()
    })
    .await
    .unwrap();
    let client = server.kube_client().unwrap();
    for index in 0..config.nodes {
        add_node(&client, &config, index).await.unwrap();
    }
    // Left over from a kubelet that ran before.
    publish(&client, NODE, DRIVER).await;
    publish(&client, NODE, "other.example.com").await;
    let simulated = entry("node-1", dra_sim::cluster::DEFAULT_DRIVER_NAME);
    assert_eq!(slices(&client).await.len(), 3);

    let actors_config = ActorsConfig {
        kubernetes_version: KubernetesVersion::V1_34,
        plugins: plugins_config(Duration::from_secs(30)),
        ..ActorsConfig::default()
    };
    let actors = Actors::start_with_plugins(client.clone(), &actors_config, &kubelet_dirs)
        .await
        .unwrap();
    eventually("the node's slices are wiped", PATIENCE, || async {
        slices(&client).await == [simulated.clone()]
    })
    .await;
    actors.shutdown().await;
    server.shutdown().await;
}
