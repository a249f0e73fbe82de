//! The v1 tests' side: the simulator's API server playing Kubernetes 1.34 with two ready
//! nodes, the real agent (`dra_node::agent`, API discovery choosing `v1`) in a temporary
//! directory for `node-0`, a client that registers and calls it as a 1.34 kubelet does, and
//! claims allocated as the 1.34 scheduler writes them (`status.allocation.devices`).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use dra_node::agent::{AgentConfig, AgentError, ApiAccess, HealthConfig};
use dra_node::cdi::CdiDir;
use dra_node::discovery::{DeviceSource, DiscoveryRoots};
use dra_node::grpc::versions::service_chosen_by_134_kubelet;
use dra_node::grpc::{PluginSockets, PLUGIN_TYPE};
use dra_sim::cluster::{add_node, ClusterConfig};
use dra_sim::server::{ServerConfig, SimServer, SimServerHandle};
use dra_sim::KubernetesVersion;
use dra_types::api_mode::DraApi;
use dra_types::kubelet::k8s::io::kubelet::pkg::apis::dra::{v1, v1beta1};
use dra_types::kubelet::pluginregistration::registration_client::RegistrationClient;
use dra_types::kubelet::pluginregistration::{InfoRequest, PluginInfo, RegistrationStatus};
use dra_types::resource_v1::{
    DeviceAllocationConfiguration, DeviceAllocationResult, DeviceRequest,
    DeviceRequestAllocationResult, ExactDeviceRequest, ResourceClaim, ResourceSlice,
};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::Api;
use testkit::eventually::eventually;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::transport::Channel;

use crate::support::{connect, DRIVER, PATIENCE};

/// The node the agent runs for.
pub const NODE: &str = "node-0";
/// Another node of the cluster.
pub const OTHER_NODE: &str = "node-1";

/// The API server (at 1.34 unless a test says otherwise) with `node-0` and `node-1`.
pub struct Cluster134 {
    pub server: SimServerHandle,
    pub client: kube::Client,
}

impl Cluster134 {
    pub async fn start() -> Cluster134 {
        Self::start_at(KubernetesVersion::V1_34).await
    }

    pub async fn start_at(version: KubernetesVersion) -> Cluster134 {
        let server = SimServer::start(ServerConfig {
            kubernetes_version: version,
            ..ServerConfig::default()
        })
        .await
        .unwrap();
        let client = server.kube_client().unwrap();
        let config = ClusterConfig {
            nodes: 2,
            devices_per_node: 0,
            kubernetes_version: version,
            ..ClusterConfig::default()
        };
        for index in 0..2 {
            add_node(&client, &config, index).await.unwrap();
        }
        Cluster134 { server, client }
    }

    pub fn claims(&self) -> Api<ResourceClaim> {
        Api::namespaced(self.client.clone(), "default")
    }

    pub fn slices(&self) -> Api<ResourceSlice> {
        Api::all(self.client.clone())
    }

    /// The slices of our driver on `node`.
    pub async fn slices_of(&self, node: &str) -> Vec<ResourceSlice> {
        let selector = format!("spec.nodeName={node},spec.driver={DRIVER}");
        self.slices()
            .list(&ListParams::default().fields(&selector))
            .await
            .unwrap()
            .items
    }

    /// Creates claim `name` with one request per distinct request of `results` and writes the
    /// allocation into its status as the scheduler does; returns the claim as stored.
    pub async fn allocate(
        &self,
        name: &str,
        results: &[(&str, &str, &str, &str)],
        config: Vec<DeviceAllocationConfiguration>,
    ) -> ResourceClaim {
        let mut requests: Vec<&str> = results.iter().map(|r| r.0).collect();
        requests.dedup();
        let mut claim = ResourceClaim::new("default", name, "");
        claim.metadata.uid = None;
        claim.spec.devices.requests = requests
            .iter()
            .map(|r| DeviceRequest {
                name: (*r).to_owned(),
                exactly: Some(ExactDeviceRequest {
                    device_class_name: DRIVER.to_owned(),
                    ..ExactDeviceRequest::default()
                }),
                ..DeviceRequest::default()
            })
            .collect();
        let created = self
            .claims()
            .create(&PostParams::default(), &claim)
            .await
            .unwrap();
        let devices = DeviceAllocationResult {
            results: results
                .iter()
                .map(|(request, driver, pool, device)| {
                    DeviceRequestAllocationResult::new(request, driver, pool, device)
                })
                .collect(),
            config,
        };
        let status = serde_json::json!({"status": {"allocation": {"devices": devices}}});
        self.claims()
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .unwrap();
        let stored = self.claims().get(name).await.unwrap();
        assert_eq!(stored.metadata.uid, created.metadata.uid);
        stored
    }

    /// Claim `name` allocated `device` of this node for its request `gpu`, without
    /// configuration.
    pub async fn allocate_here(&self, name: &str, device: &str) -> ResourceClaim {
        self.allocate(name, &[("gpu", DRIVER, NODE, device)], Vec::new())
            .await
    }

    pub async fn delete_claim(&self, name: &str) {
        self.claims()
            .delete(name, &DeleteParams::default())
            .await
            .unwrap();
    }
}

/// The one slice of ours on `node-0` once it satisfies `done`.
pub async fn slice_when(
    cluster: &Cluster134,
    what: &str,
    done: impl Fn(&ResourceSlice) -> bool,
) -> ResourceSlice {
    eventually(what, SLICE_PATIENCE, || async {
        let slices = cluster.slices_of(NODE).await;
        match slices.as_slice() {
            [slice] if done(slice) => Some(slice.clone()),
            _ => None,
        }
    })
    .await
}

/// The UID of `claim`.
pub fn uid(claim: &ResourceClaim) -> String {
    claim.metadata.uid.clone().unwrap()
}

/// The kubelet's `Claim` of `claim` for the v1 service.
pub fn v1_claim(claim: &ResourceClaim) -> v1::Claim {
    v1::Claim {
        namespace: claim.metadata.namespace.clone().unwrap(),
        uid: uid(claim),
        name: claim.metadata.name.clone().unwrap(),
    }
}

/// The same for the v1beta1 service.
pub fn v1beta1_claim(claim: &ResourceClaim) -> v1beta1::Claim {
    let v1 = v1_claim(claim);
    v1beta1::Claim {
        namespace: v1.namespace,
        uid: v1.uid,
        name: v1.name,
    }
}

/// An inventory file of `devices` (each with a model and 80Gi of memory).
pub fn write_inventory(path: &Path, devices: &[&str]) {
    let mut text = String::from("devices:\n");
    for device in devices {
        text.push_str("  - name: ");
        text.push_str(device);
        text.push_str("\n    attributes: {model: H100, memory: {quantity: 80Gi}}\n");
    }
    std::fs::write(path, text).unwrap();
}

/// Settings of one agent start.
pub struct AgentSettings {
    pub devices: DeviceSource,
    pub roots: DiscoveryRoots,
    pub gc_interval: Duration,
    pub inventory_interval: Duration,
    pub dra_api: DraApi,
    pub health: HealthConfig,
}

impl AgentSettings {
    /// A file inventory at `path`, discovery choosing the API, collection only after an hour.
    pub fn file(path: &Path) -> AgentSettings {
        AgentSettings {
            devices: DeviceSource::File(path.to_owned()),
            roots: DiscoveryRoots::default(),
            gc_interval: Duration::from_secs(3600),
            inventory_interval: Duration::from_millis(100),
            health: HealthConfig {
                settle: Duration::from_millis(100),
                ..HealthConfig::default()
            },
            dra_api: DraApi::Auto,
        }
    }
}

/// The configuration of `node-0`'s agent with its directories under `root`.
pub fn agent_config(root: &Path, settings: AgentSettings) -> AgentConfig {
    AgentConfig {
        node_name: NODE.into(),
        driver_name: DRIVER.into(),
        registry_dir: root.join("plugins_registry"),
        plugins_dir: root.join("plugins"),
        cdi_dir: root.join("cdi"),
        state_dir: root.join("state"),
        devices: settings.devices,
        roots: settings.roots,
        gc_interval: settings.gc_interval,
        inventory_interval: settings.inventory_interval,
        listen: "127.0.0.1:0".parse().unwrap(),
        health: settings.health,
    }
}

/// The agent of `node-0`, run in this process.
pub struct V1Agent {
    pub sockets: PluginSockets,
    pub cdi: CdiDir,
    pub admin: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), AgentError>>,
}

impl V1Agent {
    /// Starts the agent with its directories under `root` and waits for its registration socket.
    pub async fn start(cluster: &Cluster134, root: &Path, settings: AgentSettings) -> V1Agent {
        let dra_api = settings.dra_api;
        let config = agent_config(root, settings);
        let sockets =
            PluginSockets::new(DRIVER, &config.registry_dir, &config.plugins_dir).unwrap();
        let cdi = CdiDir::new(&config.cdi_dir, DRIVER);
        let listener = tokio::net::TcpListener::bind(config.listen).await.unwrap();
        let admin = listener.local_addr().unwrap();
        let access = ApiAccess {
            client: Some(cluster.client.clone()),
            dra_api,
        };
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(dra_node::agent::run_on_with_api(
            listener,
            config,
            access,
            async {
                let _ = stopped.await;
            },
        ));
        let registration = sockets.registration().to_owned();
        eventually("the agent's registration socket", PATIENCE, || {
            let exists = registration.exists();
            async move { exists }
        })
        .await;
        V1Agent {
            sockets,
            cdi,
            admin,
            stop: Some(stop),
            task,
        }
    }

    pub async fn v1(&self) -> v1::dra_plugin_client::DraPluginClient<Channel> {
        v1::dra_plugin_client::DraPluginClient::new(connect(self.sockets.plugin()).await)
    }

    pub async fn v1beta1(&self) -> v1beta1::dra_plugin_client::DraPluginClient<Channel> {
        v1beta1::dra_plugin_client::DraPluginClient::new(connect(self.sockets.plugin()).await)
    }

    /// What a `v1.DRAPlugin` prepare of `claims` answers, by claim UID.
    pub async fn prepare(
        &self,
        claims: &[&ResourceClaim],
    ) -> HashMap<String, v1::NodePrepareResourceResponse> {
        let claims = claims.iter().map(|claim| v1_claim(claim)).collect();
        let request = v1::NodePrepareResourcesRequest { claims };
        let answer = self.v1().await.node_prepare_resources(request).await;
        answer.unwrap().into_inner().claims
    }

    /// What a `v1.DRAPlugin` unprepare of `claims` answers, by claim UID.
    pub async fn unprepare(
        &self,
        claims: &[&ResourceClaim],
    ) -> HashMap<String, v1::NodeUnprepareResourceResponse> {
        let claims = claims.iter().map(|claim| v1_claim(claim)).collect();
        let request = v1::NodeUnprepareResourcesRequest { claims };
        let answer = self.v1().await.node_unprepare_resources(request).await;
        answer.unwrap().into_inner().claims
    }

    /// Stops the agent and returns what it returned.
    pub async fn stop(&mut self) -> Result<(), AgentError> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        tokio::time::timeout(PATIENCE, &mut self.task)
            .await
            .expect("the agent stops")
            .unwrap()
    }

    /// The status and body of `GET path` on the admin server.
    pub async fn admin_get(&self, path: &str) -> (u16, serde_json::Value) {
        let addr = self.admin.to_string();
        let path = path.to_owned();
        let (status, body) =
            tokio::task::spawn_blocking(move || testkit::process::http_get(&addr, &path))
                .await
                .unwrap();
        (status, serde_json::from_str(&body).unwrap_or_default())
    }
}

/// What a 1.34 kubelet does with a new registration socket: `GetInfo`, the type check, the
/// choice of the first service of the plugin's list it knows, then `NotifyRegistrationStatus`.
/// Returns the plugin's info and the chosen service, or the error reported to the plugin.
pub async fn register_as_kubelet_134(
    registration: &Path,
) -> Result<(PluginInfo, &'static str), String> {
    let mut client = RegistrationClient::new(connect(registration).await);
    let info = client.get_info(InfoRequest {}).await.unwrap().into_inner();
    let verdict = if info.r#type == PLUGIN_TYPE {
        service_chosen_by_134_kubelet(&info.supported_versions).map_err(|e| {
            format!(
                "invalid supported gRPC versions of DRA driver plugin {}: {e}",
                info.name
            )
        })
    } else {
        Err(format!("unknown plugin type {}", info.r#type))
    };
    let status = RegistrationStatus {
        plugin_registered: verdict.is_ok(),
        error: verdict.clone().err().unwrap_or_default(),
    };
    client.notify_registration_status(status).await.unwrap();
    verdict.map(|service| (info, service))
}

/// How long a change of the slice may take to show.
pub const SLICE_PATIENCE: Duration = Duration::from_secs(20);
