//! A simulated 1.34 (or later) cluster (`resource.k8s.io/v1`) whose kubelets drive real node agents in
//! v1 mode, with the objects the tests create in their 1.34 shape: device classes, claims,
//! pods with `spec.resourceClaims`, and allocations written into claim status as the
//! kube-scheduler writes them.

use std::path::{Path, PathBuf};
use std::time::Duration;

use dra_node::local::{LocalAgents, LocalNode, LocalSettings};
use dra_sim::actors::plugins::{PluginsConfig, PLUGINS_DIR, REGISTRY_DIR};
use dra_sim::actors::ActorsConfig;
use dra_sim::cluster::{start_cluster, ClusterConfig, ClusterHandle};
use dra_sim::server::ServerConfig;
use dra_sim::{ApiOverrides, KubernetesVersion};
use dra_types::resource_v1::{DeviceClass, ResourceClaim, ResourceSlice};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{json, Value};
use testkit::eventually;

use crate::e2e_support::{create_document, DRIVER, WAIT};

/// The finalizer the kube-scheduler puts on a claim it allocates.
pub const DELETE_PROTECTION: &str = "resource.kubernetes.io/delete-protection";

/// One device of a node's inventory file.
pub struct Gpu {
    /// Device name.
    pub name: &'static str,
    /// `model` attribute.
    pub model: &'static str,
    /// `numa` attribute.
    pub numa: i64,
}

/// `count` H100 devices `gpu-0..`, split over two NUMA nodes.
pub fn h100s(count: usize) -> Vec<Gpu> {
    gpus("H100", 0, count)
}

/// `count` devices of `model` named `gpu-{first}..`, split over two NUMA nodes.
pub fn gpus(model: &'static str, first: usize, count: usize) -> Vec<Gpu> {
    const NAMES: [&str; 8] = [
        "gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-4", "gpu-5", "gpu-6", "gpu-7",
    ];
    NAMES[first..first + count]
        .iter()
        .enumerate()
        .map(|(i, name)| Gpu {
            name,
            model,
            numa: i64::try_from(i * 2 / count).unwrap(),
        })
        .collect()
}

/// The inventory file of `gpus`, each with a device file of its own under `dir` (named after
/// the node), a UUID (`GPU-<node>-<name>`) and a PCI address (`0000:3b:00.0` on).
fn inventory(dir: &Path, gpus: &[Gpu]) -> String {
    let node = dir.file_name().unwrap().to_string_lossy();
    let devices: Vec<String> = gpus
        .iter()
        .map(|gpu| {
            let file = dir.join(gpu.name);
            std::fs::write(&file, b"").unwrap();
            format!(
                "  - name: {}\n    attributes: {{model: {}, numa: {}, memory: {{quantity: 80Gi}}, uuid: {}, pciAddress: '{}'}}\n    deviceNodes: [{}]\n",
                gpu.name,
                gpu.model,
                gpu.numa,
                gpu_uuid(&node, gpu.name),
                gpu_pci_address(gpu.name),
                file.display()
            )
        })
        .collect();
    format!("devices:\n{}", devices.concat())
}

/// The UUID of device `name` of `node` in the inventory files.
pub fn gpu_uuid(node: &str, name: &str) -> String {
    format!("GPU-{node}-{name}")
}

/// The PCI address of device `name` (`gpu-N`) in the inventory files.
pub fn gpu_pci_address(name: &str) -> String {
    let index: u8 = name.trim_start_matches("gpu-").parse().unwrap();
    format!("0000:{:02x}:00.0", 0x3b + index)
}

/// `resource.k8s.io/v1` `ResourceClaimTemplate`.
fn template_resource() -> ApiResource {
    ApiResource {
        group: "resource.k8s.io".into(),
        version: "v1".into(),
        api_version: "resource.k8s.io/v1".into(),
        kind: "ResourceClaimTemplate".into(),
        plural: "resourceclaimtemplates".into(),
    }
}

/// The cluster, its agents and where each node's inventory file is.
pub struct ClusterV1 {
    /// The simulated cluster.
    pub cluster: ClusterHandle,
    /// A client of its API server.
    pub client: Client,
    /// The node agents.
    pub agents: LocalAgents,
    /// The inventory file by node.
    pub inventories: Vec<(String, PathBuf)>,
}

impl ClusterV1 {
    /// A 1.34 cluster with one node per entry of `nodes` (`node-0`, ..), each with a kubelet
    /// directory and an agent serving those devices; returns once every node's slice is there.
    pub async fn start(dir: &Path, nodes: &[Vec<Gpu>], inventory_interval: Duration) -> ClusterV1 {
        let settings = LocalSettings {
            driver_name: DRIVER.into(),
            gc_interval: Duration::from_secs(60),
            inventory_interval,
        };
        Self::start_with(dir, nodes, &settings, ClusterHandle::kube_client).await
    }

    /// [`ClusterV1::start`] playing `version` (a `v1` release).
    pub async fn start_on(version: KubernetesVersion, dir: &Path, nodes: &[Vec<Gpu>]) -> ClusterV1 {
        let settings = LocalSettings {
            driver_name: DRIVER.into(),
            gc_interval: Duration::from_secs(60),
            inventory_interval: Duration::from_secs(60),
        };
        let release = (version, ApiOverrides::default());
        Self::start_release(dir, nodes, release, &settings, ClusterHandle::kube_client).await
    }

    /// [`ClusterV1::start`] with the agents' `settings`, their client made by `agent_client`.
    pub async fn start_with(
        dir: &Path,
        nodes: &[Vec<Gpu>],
        settings: &LocalSettings,
        agent_client: impl FnOnce(&ClusterHandle) -> Client,
    ) -> ClusterV1 {
        let release = (KubernetesVersion::V1_34, ApiOverrides::default());
        Self::start_release(dir, nodes, release, settings, agent_client).await
    }

    /// [`ClusterV1::start_with`] playing `version` (a `v1` release) with the feature gates
    /// and API versions of `api`.
    pub async fn start_release(
        dir: &Path,
        nodes: &[Vec<Gpu>],
        (version, api): (KubernetesVersion, ApiOverrides),
        settings: &LocalSettings,
        agent_client: impl FnOnce(&ClusterHandle) -> Client,
    ) -> ClusterV1 {
        let mut config = ClusterConfig {
            nodes: nodes.len(),
            kubernetes_version: version,
            server: ServerConfig {
                api,
                ..ServerConfig::default()
            },
            actors: ActorsConfig {
                rule_status_period: Duration::from_secs(1),
                plugins: PluginsConfig {
                    registry_poll: Duration::from_millis(50),
                    registration_retry: Duration::from_millis(50),
                    prepare_retry: Duration::from_millis(100),
                    prepare_retry_max: Duration::from_millis(500),
                    claim_poll: Duration::from_millis(50),
                    ..PluginsConfig::default()
                },
                ..ActorsConfig::default()
            },
            ..ClusterConfig::default()
        };
        let mut locals = Vec::new();
        let mut inventories = Vec::new();
        for (i, gpus) in nodes.iter().enumerate() {
            let name = format!("node-{i}");
            let root = dir.join(&name);
            std::fs::create_dir_all(&root).unwrap();
            let inventory_path = root.join("devices.yaml");
            std::fs::write(&inventory_path, inventory(&root, gpus)).unwrap();
            let kubelet = root.join("kubelet");
            config.kubelet_dirs.insert(name.clone(), kubelet.clone());
            inventories.push((name.clone(), inventory_path.clone()));
            locals.push(LocalNode {
                name,
                registry_dir: kubelet.join(REGISTRY_DIR),
                plugins_dir: kubelet.join(PLUGINS_DIR),
                dir: root.join("agent"),
                inventory: inventory_path,
            });
        }
        let cluster = start_cluster(config).await.expect("cluster starts");
        let client = cluster.kube_client();
        let agents = LocalAgents::start(&locals, settings, Some(&agent_client(&cluster)))
            .await
            .unwrap();
        let v1 = ClusterV1 {
            cluster,
            client,
            agents,
            inventories,
        };
        eventually("every node's slice from its agent", WAIT, || async {
            v1.slices().await.len() == nodes.len()
        })
        .await;
        v1
    }

    /// Rewrites the inventory file of `node` to hold `gpus`.
    pub fn set_inventory(&self, node: &str, gpus: &[Gpu]) {
        let (_, path) = self.inventories.iter().find(|(n, _)| n == node).unwrap();
        let dir = path.parent().unwrap();
        std::fs::write(path, inventory(dir, gpus)).unwrap();
    }

    /// Replaces the inventory file of `node` with `text` at once (an agent never reads half
    /// of it).
    pub fn write_inventory(&self, node: &str, text: &str) {
        let (_, path) = self.inventories.iter().find(|(n, _)| n == node).unwrap();
        let partial = path.with_extension("partial");
        std::fs::write(&partial, text).unwrap();
        std::fs::rename(partial, path).unwrap();
    }

    /// The `env` edits of the CDI spec of claim `uid` on `node` (JSON text), once the agent
    /// wrote the file.
    pub fn cdi_env(&self, node: &str, uid: &str) -> Option<String> {
        let file = self.agents.cdi_file(node, uid)?;
        let bytes = std::fs::read(file).ok()?;
        let spec: Value = serde_json::from_slice(&bytes).ok()?;
        Some(spec["devices"][0]["containerEdits"]["env"].to_string())
    }

    /// Every `ResourceSlice` of the cluster.
    pub async fn slices(&self) -> Vec<ResourceSlice> {
        Api::<ResourceSlice>::all(self.client.clone())
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
    }

    /// Creates `DeviceClass` `name` with one CEL selector.
    pub async fn device_class(&self, name: &str, expression: &str) {
        let class: DeviceClass = serde_json::from_value(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": expression}}]},
        }))
        .unwrap();
        Api::<DeviceClass>::all(self.client.clone())
            .create(&PostParams::default(), &class)
            .await
            .unwrap();
    }

    /// Creates the `DeviceClasses` of the 1.34 overlay (`deploy/overlays/kubernetes-1.34`) and
    /// returns their names.
    pub async fn overlay_device_classes(&self) -> Vec<String> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../deploy/overlays/kubernetes-1.34/deviceclasses.yaml");
        let text = std::fs::read_to_string(&path).unwrap();
        let api = Api::<DeviceClass>::all(self.client.clone());
        let mut names = Vec::new();
        for document in serde_yaml::Deserializer::from_str(&text) {
            let class: DeviceClass = serde::Deserialize::deserialize(document).unwrap();
            let created = api.create(&PostParams::default(), &class).await.unwrap();
            names.push(created.metadata.name.unwrap());
        }
        names
    }

    /// Creates every object of `deploy/overlays/kubernetes-1.34/examples/<file>` (templates and
    /// pods) and returns their `(kind, name)`.
    pub async fn apply_overlay_example(&self, file: &str) -> Vec<(String, String)> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../deploy/overlays/kubernetes-1.34/examples")
            .join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        let mut created = Vec::new();
        for document in serde_yaml::Deserializer::from_str(&text) {
            let object: DynamicObject = serde::Deserialize::deserialize(document).unwrap();
            let types = object.types.clone().unwrap();
            let api = match types.kind.as_str() {
                "ResourceClaimTemplate" => {
                    Api::default_namespaced_with(self.client.clone(), &template_resource())
                }
                "Pod" => self.pods(),
                other => panic!("no way to apply a {other} of examples/{file}"),
            };
            let object = api.create(&PostParams::default(), &object).await.unwrap();
            created.push((types.kind, object.metadata.name.unwrap()));
        }
        created
    }

    /// Creates `ResourceClaimTemplate` `name` whose claims have `spec`.
    pub async fn template(&self, name: &str, spec: Value) {
        let resource = template_resource();
        let template: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name}, "spec": {"spec": spec},
        }))
        .unwrap();
        Api::<DynamicObject>::default_namespaced_with(self.client.clone(), &resource)
            .create(&PostParams::default(), &template)
            .await
            .unwrap();
    }

    /// Creates pod `name` for the scheduler to place (no `nodeName`), its pod claim `gpu` made
    /// from template `template`.
    pub async fn pod_from_template(&self, name: &str, template: &str) -> DynamicObject {
        let pod: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name},
            "spec": {
                "containers": [{"name": "main", "image": "busybox",
                                "resources": {"claims": [{"name": "gpu"}]}}],
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
            },
        }))
        .unwrap();
        self.pods()
            .create(&PostParams::default(), &pod)
            .await
            .unwrap()
    }

    /// The claim made for the (first) pod claim of pod `pod`, once the resourceclaim controller
    /// has recorded it in the pod's status.
    pub async fn claim_of(&self, pod: &str) -> ResourceClaim {
        let name = eventually("the pod's claim recorded in its status", WAIT, || async {
            let pod = self.pods().get(pod).await.unwrap();
            pod.data["status"]["resourceClaimStatuses"]
                .as_array()
                .and_then(|statuses| statuses.first())
                .and_then(|s| s["resourceClaimName"].as_str())
                .map(str::to_owned)
        })
        .await;
        self.claims().get(&name).await.unwrap()
    }

    /// The node pod `name` is bound to, if any.
    pub async fn node_of(&self, name: &str) -> Option<String> {
        let pod = self.pods().get(name).await.unwrap();
        pod.data["spec"]["nodeName"].as_str().map(str::to_owned)
    }

    /// Creates claim `name` with `spec` (the scheduler's finalizer is added at allocation).
    pub async fn claim(&self, name: &str, spec: Value) -> ResourceClaim {
        let claim: ResourceClaim = serde_json::from_value(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name}, "spec": spec,
        }))
        .unwrap();
        self.claims()
            .create(&PostParams::default(), &claim)
            .await
            .unwrap()
    }

    /// Claim `name` for one device of class `gpu`, used by pod `name` on `node`, allocated
    /// `device` of that node as the scheduler writes it; returns the claim once the pod runs.
    pub async fn running_pod(&self, name: &str, node: &str, device: &str) -> ResourceClaim {
        let spec = json!({"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}});
        let claim = self.claim(name, spec).await;
        let pod = self.pod(name, name, node).await;
        self.allocate(name, &[(DRIVER, node, device)], node, json!([]), &pod)
            .await;
        eventually(&format!("pod {name} running"), WAIT, || async {
            self.phase(name).await.as_deref() == Some("Running")
        })
        .await;
        claim
    }

    /// `status.devices` of claim `name`: the device status the drivers wrote.
    pub async fn device_status(&self, name: &str) -> Vec<Value> {
        let claim = self.claims().get(name).await.unwrap();
        let status = serde_json::to_value(claim.status.unwrap_or_default()).unwrap();
        status["devices"].as_array().cloned().unwrap_or_default()
    }

    /// The claims of the default namespace.
    pub fn claims(&self) -> Api<ResourceClaim> {
        Api::default_namespaced(self.client.clone())
    }

    /// Pods, read and written in their 1.34 shape.
    pub fn pods(&self) -> Api<DynamicObject> {
        Api::default_namespaced_with(self.client.clone(), &ApiResource::erase::<Pod>(&()))
    }

    /// Creates the pod `pod` (JSON, in the 1.34 shape) in the default namespace.
    pub async fn create_pod(&self, pod: Value) {
        let pod: DynamicObject = serde_json::from_value(pod).unwrap();
        self.pods()
            .create(&PostParams::default(), &pod)
            .await
            .unwrap();
    }

    /// Creates pod `name` on `node` using claim `claim` as its pod claim `gpu`.
    pub async fn pod(&self, name: &str, claim: &str, node: &str) -> DynamicObject {
        let pod: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name},
            "spec": {
                "nodeName": node,
                "containers": [{"name": "main", "image": "busybox",
                                "resources": {"claims": [{"name": "gpu"}]}}],
                "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}],
            },
        }))
        .unwrap();
        self.pods()
            .create(&PostParams::default(), &pod)
            .await
            .unwrap()
    }

    /// Allocates claim `name` as the kube-scheduler does: the delete-protection finalizer, then
    /// `status.allocation` with `results` (`(driver, node, device)`, all for request `gpu`),
    /// the node selector of `node`, `config` and `reservedFor` the pod.
    pub async fn allocate(
        &self,
        name: &str,
        results: &[(&str, &str, &str)],
        node: &str,
        config: Value,
        pod: &DynamicObject,
    ) {
        let claims = self.claims();
        let finalizer = json!({"metadata": {"finalizers": [DELETE_PROTECTION]}});
        claims
            .patch(name, &PatchParams::default(), &Patch::Merge(&finalizer))
            .await
            .unwrap();
        let results: Vec<Value> = results
            .iter()
            .map(|(driver, pool, device)| {
                json!({"request": "gpu", "driver": driver, "pool": pool, "device": device})
            })
            .collect();
        let status = json!({"status": {
            "allocation": {
                "devices": {"results": results, "config": config},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": [node]}
                ]}]},
            },
            "reservedFor": [{
                "resource": "pods",
                "name": pod.metadata.name,
                "uid": pod.metadata.uid,
            }],
        }});
        claims
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .unwrap();
    }

    /// Creates every object of the multi-document YAML `file` as `kubectl create -f` does, in
    /// order; per document its `(kind, name)`, or why it could not be created (a document
    /// without `apiVersion` or `kind` is refused before any request, as kubectl refuses it).
    pub async fn create_file(&self, file: &Path) -> Vec<Result<(String, String), String>> {
        let text = std::fs::read_to_string(file).unwrap();
        let mut outcomes = Vec::new();
        for document in serde_yaml::Deserializer::from_str(&text) {
            let value: Value = serde::Deserialize::deserialize(document).unwrap();
            if value.is_null() {
                continue;
            }
            let plural = |kind: &str| format!("{}s", kind.to_lowercase());
            outcomes.push(create_document(&self.client, value, plural).await);
        }
        outcomes
    }

    /// The phase of pod `name`, `None` once it is gone.
    pub async fn phase(&self, name: &str) -> Option<String> {
        let pod = self.pods().get_opt(name).await.unwrap()?;
        Some(
            pod.data["status"]["phase"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        )
    }

    /// The messages of the events about `object` with `reason`.
    pub async fn events(&self, object: &str, reason: &str) -> Vec<String> {
        Api::<k8s_openapi::api::core::v1::Event>::default_namespaced(self.client.clone())
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|e| e.involved_object.name.as_deref() == Some(object))
            .filter(|e| e.reason.as_deref() == Some(reason))
            .filter_map(|e| e.message)
            .collect()
    }

    /// Waits for the scheduler's `FailedScheduling` note about pod `name` of `namespace`
    /// (events.k8s.io); the note.
    pub async fn failed_scheduling(&self, namespace: &str, name: &str) -> String {
        eventually(format!("{name} is unschedulable"), WAIT, || async {
            let api: Api<k8s_openapi::api::events::v1::Event> =
                Api::namespaced(self.client.clone(), namespace);
            let events = api.list(&ListParams::default()).await.unwrap().items;
            events
                .into_iter()
                .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
                .find(|e| e.reason.as_deref() == Some("FailedScheduling"))
                .and_then(|e| e.note)
        })
        .await
    }

    /// Stops the agents, then the cluster.
    pub async fn shutdown(self) {
        self.agents.shutdown().await.unwrap();
        self.cluster.shutdown().await;
    }
}
