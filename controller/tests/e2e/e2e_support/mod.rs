//! Shared fixture of the end-to-end tests (`tests/e2e/`) and the `scheduler_perf` benchmark: a
//! simulated cluster whose nodes carry hand-written device inventories, the parameter CRDs and
//! classes, pods with claim templates, the ledger-backed driver with the framework's `Controller`
//! (stoppable, so that it can be restarted on the same ledger), and the cluster-wide checks every
//! test ends with: the ledger verifies, no exclusive device is named by two allocated claims, no
//! shared device has more consumers than allowed, and the ledger holds exactly what the claims show.
//!
//! Talks to the cluster only over HTTP through `kube::Client`; the simulator is either in-process
//! ([`Env::start`]) or a child process ([`Env::connect`]).

// Each test binary uses a part of the fixture; Kubernetes kind names are prose in these docs.
#![allow(dead_code, clippy::doc_markdown)]

mod check;
mod inventory;

// Each test binary uses a part of what is re-exported here.
#[allow(unused_imports)]
pub use check::{assert_consistent, usage_per_node};
#[allow(unused_imports)]
pub use inventory::{
    add_node, count, node, req, shared, slice_of, with_devices, DeviceSpec, NodeInventory,
};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use dra_allocator::ledger::Ledger;
use dra_controller::driver::handle::{claim_allocation, ClaimAllocationState, HandleData};
use dra_controller::driver::{run_background, DriverConfig, LedgerDriver};
use dra_controller::params::{
    crd_manifests, DeviceClaimParameters, DeviceClaimParametersSpec, DeviceClassParameters,
    DeviceClassParametersSpec, RequirementSpec, API_GROUP,
};
use dra_framework::{Controller, ControllerConfig};
use dra_sim::cluster::{start_cluster, ClusterConfig, ClusterHandle};
use k8s_openapi::api::core::v1::{ClaimSource, Container, Pod, PodResourceClaim, PodSpec};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::resource::v1alpha2::{
    PodSchedulingContext, ResourceClaim, ResourceClaimParametersReference, ResourceClaimSpec,
    ResourceClaimTemplate, ResourceClaimTemplateSpec, ResourceClass,
    ResourceClassParametersReference,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{ListParams, PostParams};
use kube::{Api, Client, ResourceExt};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The driver name of every test.
pub const DRIVER: &str = "gpu.dra-ledger.io";
/// The default class (policy `Pack`, no selector).
pub const CLASS: &str = "gpu";
/// How long a test waits for the cluster to converge before it fails.
pub const WAIT: Duration = Duration::from_secs(30);

/// A simulated cluster (in-process or reached over HTTP) prepared for the driver.
pub struct Env {
    /// The in-process cluster, when [`Env::start`] made one.
    pub cluster: Option<ClusterHandle>,
    /// A client of the API server.
    pub client: Client,
    dir: tempfile::TempDir,
}

impl Env {
    /// Starts a simulated cluster with exactly `nodes` and prepares it (see [`Env::prepare`]).
    pub async fn start(nodes: &[NodeInventory]) -> Env {
        let cluster = start_cluster(ClusterConfig::default())
            .await
            .expect("cluster starts");
        let client = cluster.kube_client();
        for node in nodes {
            add_node(&client, node).await;
        }
        let mut env = Env::connect(client).await;
        env.cluster = Some(cluster);
        env
    }

    /// Starts a simulated cluster of `config` (nodes with simulated devices) and prepares it.
    pub async fn start_simulated(config: ClusterConfig) -> Env {
        let cluster = start_cluster(config).await.expect("cluster starts");
        let mut env = Env::connect(cluster.kube_client()).await;
        env.cluster = Some(cluster);
        env
    }

    /// Prepares the cluster behind `client` (its nodes already exist): the parameter CRDs, the
    /// class parameters `gpu-defaults` (policy `Pack`) and the class [`CLASS`].
    pub async fn connect(client: Client) -> Env {
        install_crds(&client).await;
        let env = Env {
            cluster: None,
            client,
            dir: tempfile::tempdir().expect("tempdir"),
        };
        env.class(CLASS, Vec::new()).await;
        env
    }

    /// Creates class `name` for our driver whose devices must meet `selector` (policy `Pack`).
    pub async fn class(&self, name: &str, selector: Vec<RequirementSpec>) {
        let params_name = format!("{name}-defaults");
        let defaults = DeviceClassParameters::new(
            &params_name,
            DeviceClassParametersSpec {
                selector,
                policy: Some("Pack".into()),
                ..DeviceClassParametersSpec::default()
            },
        );
        Api::<DeviceClassParameters>::all(self.client.clone())
            .create(&PostParams::default(), &defaults)
            .await
            .expect("class parameters created");
        let class = ResourceClass {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            driver_name: DRIVER.into(),
            parameters_ref: Some(ResourceClassParametersReference {
                api_group: Some(API_GROUP.into()),
                kind: "DeviceClassParameters".into(),
                name: params_name,
                namespace: None,
            }),
            structured_parameters: None,
            suitable_nodes: None,
        };
        Api::<ResourceClass>::all(self.client.clone())
            .create(&PostParams::default(), &class)
            .await
            .expect("class created");
    }

    /// The ledger file of this environment (in a temporary directory).
    pub fn ledger_path(&self) -> PathBuf {
        self.dir.path().join("ledger.redb")
    }

    /// Creates claim parameters `name`.
    pub async fn params(&self, name: &str, spec: DeviceClaimParametersSpec) {
        Api::<DeviceClaimParameters>::default_namespaced(self.client.clone())
            .create(
                &PostParams::default(),
                &DeviceClaimParameters::new(name, spec),
            )
            .await
            .expect("claim parameters created");
    }

    /// Creates claim template `name` of `class` with claim parameters `params`.
    pub async fn template(&self, name: &str, class: &str, params: &str) {
        let template = ResourceClaimTemplate {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            spec: ResourceClaimTemplateSpec {
                metadata: None,
                spec: claim_spec(class, params, None),
            },
        };
        Api::<ResourceClaimTemplate>::default_namespaced(self.client.clone())
            .create(&PostParams::default(), &template)
            .await
            .expect("template created");
    }

    /// Creates claim `name` of [`CLASS`] with claim parameters `params`, allocated at once.
    pub async fn immediate_claim(&self, name: &str, params: &str) {
        let claim = ResourceClaim {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            spec: claim_spec(CLASS, params, Some("Immediate")),
            status: None,
        };
        self.claims()
            .create(&PostParams::default(), &claim)
            .await
            .expect("claim created");
    }

    /// The claims of the namespace.
    pub fn claims(&self) -> Api<ResourceClaim> {
        Api::default_namespaced(self.client.clone())
    }

    /// The claim `name` once it shows our allocation, with its handle data.
    pub async fn allocated(&self, name: &str) -> (ResourceClaim, HandleData) {
        let claims = self.claims();
        testkit::eventually(&format!("claim {name} allocated"), WAIT, || async {
            let claim = claims.get_opt(name).await.ok()??;
            match claim_allocation(&claim, DRIVER) {
                Ok(ClaimAllocationState::Ours(data)) => Some((claim, data)),
                _ => None,
            }
        })
        .await
    }

    /// The name of the claim the resourceclaim controller made for the first claim of `pod`.
    pub async fn claim_of_pod(&self, pod: &str) -> String {
        let pods = Api::<Pod>::default_namespaced(self.client.clone());
        testkit::eventually("template claim created", WAIT, || async {
            let pod = pods.get(pod).await.ok()?;
            pod.status?
                .resource_claim_statuses?
                .first()?
                .resource_claim_name
                .clone()
        })
        .await
    }

    /// Creates pod `name` with one claim per `(pod claim name, template)` entry.
    pub async fn pod(&self, name: &str, claims: &[(&str, &str)]) {
        Api::<Pod>::default_namespaced(self.client.clone())
            .create(&PostParams::default(), &pod(name, claims))
            .await
            .expect("pod created");
    }

    /// Pods of the namespace by name, with their node when bound.
    pub async fn pods(&self) -> BTreeMap<String, Option<String>> {
        Api::<Pod>::default_namespaced(self.client.clone())
            .list(&ListParams::default())
            .await
            .expect("pods listed")
            .items
            .into_iter()
            .map(|p| {
                let node = p.spec.as_ref().and_then(|s| s.node_name.clone());
                (p.name_any(), node)
            })
            .collect()
    }

    /// Waits until every pod in `names` is bound; returns pod name -> node. On timeout the
    /// failure lists the pods still pending with the events about them.
    pub async fn wait_bound(&self, names: &[String]) -> BTreeMap<String, String> {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let pods = self.pods().await;
            let bound: Option<BTreeMap<_, _>> = names
                .iter()
                .map(|n| Some((n.clone(), pods.get(n)?.clone()?)))
                .collect();
            if let Some(bound) = bound {
                return bound;
            }
            if tokio::time::Instant::now() >= deadline {
                let pending: Vec<_> = names
                    .iter()
                    .filter(|n| pods.get(*n).is_none_or(Option::is_none))
                    .collect();
                let events = self.events().await;
                let contexts = self.contexts().await;
                panic!(
                    "timed out waiting for pods {pending:?} to be bound; \
                     events: {events:#?}; scheduling contexts: {contexts:#?}"
                );
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Every PodSchedulingContext of the namespace as `pod: spec: status` (JSON).
    pub async fn contexts(&self) -> Vec<String> {
        Api::<PodSchedulingContext>::default_namespaced(self.client.clone())
            .list(&ListParams::default())
            .await
            .map(|list| {
                list.items
                    .into_iter()
                    .map(|c| {
                        let spec = serde_json::to_string(&c.spec).unwrap_or_default();
                        let status = serde_json::to_string(&c.status).unwrap_or_default();
                        format!("{}: {spec}: {status}", c.name_any())
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Every event of the namespace as `object: reason: note`.
    pub async fn events(&self) -> Vec<String> {
        Api::<Event>::default_namespaced(self.client.clone())
            .list(&ListParams::default())
            .await
            .map(|list| {
                list.items
                    .into_iter()
                    .map(|e| {
                        let object = e.regarding.and_then(|r| r.name).unwrap_or_default();
                        let reason = e.reason.unwrap_or_default();
                        format!("{object}: {reason}: {}", e.note.unwrap_or_default())
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The claims of the namespace that show our allocation.
    pub async fn allocated_claims(&self) -> Vec<AllocatedClaim> {
        Api::<ResourceClaim>::default_namespaced(self.client.clone())
            .list(&ListParams::default())
            .await
            .expect("claims listed")
            .items
            .into_iter()
            .filter_map(|claim| match claim_allocation(&claim, DRIVER) {
                Ok(ClaimAllocationState::Ours(data)) => Some(AllocatedClaim::new(&claim, data)),
                _ => None,
            })
            .collect()
    }

    /// The allocated claims of pod `pod`, by pod claim name.
    pub async fn claims_of_pod(&self, pod: &str) -> BTreeMap<String, AllocatedClaim> {
        self.allocated_claims()
            .await
            .into_iter()
            .filter(|c| c.pod.as_deref() == Some(pod))
            .map(|c| (c.pod_claim.clone(), c))
            .collect()
    }

    /// The note of the newest event with `reason` about pod `pod`, if any.
    pub async fn pod_event(&self, pod: &str, reason: &str) -> Option<String> {
        self.event_note(pod, Some(reason)).await
    }

    /// The note of the newest event about the object named `name` (with `reason`, if given).
    pub async fn event_note(&self, name: &str, reason: Option<&str>) -> Option<String> {
        Api::<Event>::default_namespaced(self.client.clone())
            .list(&ListParams::default())
            .await
            .ok()?
            .items
            .into_iter()
            .rev()
            .find(|e| {
                e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
                    && reason.is_none_or(|reason| e.reason.as_deref() == Some(reason))
            })
            .map(|e| e.note.unwrap_or_default())
    }

    /// Stops the in-process cluster.
    pub async fn shutdown(self) {
        if let Some(cluster) = self.cluster {
            cluster.shutdown().await;
        }
    }
}

/// An allocated claim as the cluster shows it.
#[derive(Clone, Debug)]
pub struct AllocatedClaim {
    /// Claim name.
    pub name: String,
    /// Claim UID.
    pub uid: String,
    /// The pod that owns it (claims made from templates).
    pub pod: Option<String>,
    /// The pod claim name it was made for (annotation of the resourceclaim controller).
    pub pod_claim: String,
    /// The parsed handle data.
    pub data: HandleData,
}

impl AllocatedClaim {
    fn new(claim: &ResourceClaim, data: HandleData) -> Self {
        AllocatedClaim {
            name: claim.name_any(),
            uid: claim.uid().unwrap_or_default(),
            pod: claim
                .owner_references()
                .iter()
                .find(|o| o.kind == "Pod")
                .map(|o| o.name.clone()),
            pod_claim: claim
                .annotations()
                .get(dra_sim::actors::POD_CLAIM_NAME_ANNOTATION)
                .cloned()
                .unwrap_or_default(),
            data,
        }
    }
}
/// A claim spec of `class` with claim parameters `params` and allocation `mode` (`None`: when
/// a pod needs it).
fn claim_spec(class: &str, params: &str, mode: Option<&str>) -> ResourceClaimSpec {
    ResourceClaimSpec {
        resource_class_name: class.into(),
        allocation_mode: mode.map(Into::into),
        parameters_ref: Some(ResourceClaimParametersReference {
            api_group: Some(API_GROUP.into()),
            kind: "DeviceClaimParameters".into(),
            name: params.into(),
        }),
    }
}

/// The pod object `name` with one claim per `(pod claim name, template)` entry.
pub fn pod(name: &str, claims: &[(&str, &str)]) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "main".into(),
                image: Some("busybox".into()),
                ..Container::default()
            }],
            resource_claims: Some(
                claims
                    .iter()
                    .map(|(claim, template)| PodResourceClaim {
                        name: (*claim).into(),
                        source: Some(ClaimSource {
                            resource_claim_name: None,
                            resource_claim_template_name: Some((*template).into()),
                        }),
                    })
                    .collect(),
            ),
            ..PodSpec::default()
        }),
        status: None,
    }
}

async fn install_crds(client: &Client) {
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    for doc in serde_yaml::Deserializer::from_str(&crd_manifests()) {
        let crd: CustomResourceDefinition =
            serde::Deserialize::deserialize(doc).expect("CRD parses");
        crds.create(&PostParams::default(), &crd)
            .await
            .expect("CRD created");
    }
}

/// The driver, its background tasks and the framework's controller, stoppable.
pub struct Running {
    /// The driver (and through it the ledger).
    pub driver: Arc<LedgerDriver>,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl Running {
    /// Opens the ledger at `path` and runs the controller with `workers` workers; returns once
    /// the driver is ready (inventory synced, initial reconcile done).
    pub async fn start(client: &Client, path: &Path, workers: usize) -> Running {
        let ledger = Ledger::open(path, DRIVER).expect("ledger opens");
        let config = DriverConfig {
            grace_period: Duration::from_secs(5),
            ..DriverConfig::new(DRIVER)
        };
        let controller_config = ControllerConfig {
            recheck_delay: Duration::from_millis(500),
            mutation_cache_size: 4096,
            ..ControllerConfig::default()
        };
        Running::start_with(client, ledger, config, controller_config, workers).await
    }

    /// Runs the controller over `ledger` with the given settings.
    pub async fn start_with(
        client: &Client,
        ledger: Ledger,
        config: DriverConfig,
        controller_config: ControllerConfig,
        workers: usize,
    ) -> Running {
        let driver = LedgerDriver::new(ledger, client.clone(), config);
        Running::start_driver(client, driver, controller_config, workers).await
    }

    /// Runs the controller with `driver` (built by the caller, e.g. with an observer).
    pub async fn start_driver(
        client: &Client,
        driver: LedgerDriver,
        controller_config: ControllerConfig,
        workers: usize,
    ) -> Running {
        let driver = Arc::new(driver);
        let (stop, _) = watch::channel(false);
        let stopped = |stop: &watch::Sender<bool>| {
            let mut rx = stop.subscribe();
            async move {
                let _ = rx.wait_for(|s| *s).await;
            }
        };
        let controller = Controller::new(DRIVER, driver.clone(), client.clone(), controller_config);
        let tasks = vec![
            tokio::spawn(run_background(
                driver.clone(),
                client.clone(),
                stopped(&stop),
            )),
            tokio::spawn(controller.run(workers, stopped(&stop))),
        ];
        tokio::time::timeout(WAIT, driver.readiness().wait())
            .await
            .expect("driver becomes ready");
        Running {
            driver,
            stop,
            tasks,
        }
    }

    /// The ledger.
    pub fn ledger(&self) -> &Ledger {
        self.driver.ledger()
    }

    /// Stops the controller and the background tasks and waits for them and for every ledger
    /// call in flight, so that the ledger file can be opened again at once.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        for task in self.tasks {
            task.await.expect("task ends cleanly");
        }
        self.driver.quiesce().await;
    }
}

/// Creates the object of one YAML document, as `kubectl create -f` does, under the resource
/// `plural` names for its kind: its `(kind, name)`, or why not (a document without
/// `apiVersion` is refused before any request, as kubectl refuses it).
pub async fn create_document(
    client: &Client,
    value: serde_json::Value,
    plural: impl Fn(&str) -> String,
) -> Result<(String, String), String> {
    if value.get("apiVersion").is_none() {
        return Err("Object 'apiVersion' is missing".to_owned());
    }
    let object: kube::api::DynamicObject =
        serde_json::from_value(value).map_err(|e| e.to_string())?;
    let types = object.types.clone().ok_or("Object 'kind' is missing")?;
    let (group, version) = types
        .api_version
        .split_once('/')
        .unwrap_or(("", types.api_version.as_str()));
    let resource = kube::api::ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: types.api_version.clone(),
        kind: types.kind.clone(),
        plural: plural(&types.kind),
    };
    let api: Api<kube::api::DynamicObject> = match object.metadata.namespace.as_deref() {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    let created = api
        .create(&PostParams::default(), &object)
        .await
        .map_err(|e| format!("create {} {}: {e}", types.kind, object.name_any()))?;
    Ok((types.kind, created.name_any()))
}
