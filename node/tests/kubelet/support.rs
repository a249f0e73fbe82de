//! The tests' side: a fake preparer, an agent serving the plugin sockets in a temporary
//! directory, and a client that talks to them as the 1.30 kubelet does.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dra_allocator::model::AttributeValue;
use dra_node::device::{Inventory, NodeDevice};
use dra_node::grpc::versions::highest_supported_version;
use dra_node::grpc::{
    GrpcError, Plugin, PluginConfig, PluginSockets, RegistrationState, PLUGIN_TYPE,
};
use dra_node::prepare::{AllocatedClaim, ClaimPreparer, ClaimRequest, PrepareError};
use dra_types::kubelet::pluginregistration::registration_client::RegistrationClient;
use dra_types::kubelet::pluginregistration::{InfoRequest, PluginInfo, RegistrationStatus};
use dra_types::kubelet::v1alpha3::node_client::NodeClient;
use dra_types::kubelet::v1alpha3::{
    Claim, NodeListAndWatchResourcesRequest, NodeListAndWatchResourcesResponse,
    NodePrepareResourceResponse, NodePrepareResourcesRequest, NodeUnprepareResourceResponse,
    NodeUnprepareResourcesRequest,
};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tonic::transport::Channel;
use tonic::Streaming;

pub const DRIVER: &str = "gpu.example.com";
/// How long a test waits for something the agent does in the background.
pub const PATIENCE: Duration = Duration::from_secs(10);

/// A preparer that knows devices `gpu-0` and `gpu-1`: a handle is `{"devices": [...]}`; each
/// prepared claim gets the CDI ID `gpu.example.com/claim=<uid>`. A claim UID starting with
/// `stuck` cannot be unprepared.
#[derive(Debug, Default)]
pub struct FakePreparer {
    pub prepared: Mutex<BTreeMap<String, Vec<String>>>,
    pub calls: Mutex<Vec<Vec<ClaimRequest>>>,
}

impl FakePreparer {
    pub fn calls(&self) -> Vec<Vec<ClaimRequest>> {
        self.calls.lock().unwrap().clone()
    }

    /// The UIDs of every claim of every call, in call order.
    pub fn seen_uids(&self) -> Vec<String> {
        self.calls().concat().into_iter().map(|c| c.uid).collect()
    }

    fn prepare_one(&self, claim: &ClaimRequest) -> Result<Vec<String>, PrepareError> {
        let handle = |reason: &str| PrepareError::Handle {
            uid: claim.uid.clone(),
            reason: reason.to_owned(),
        };
        let value: serde_json::Value =
            serde_json::from_str(&claim.resource_handle).map_err(|_| handle("not JSON"))?;
        let devices = value["devices"]
            .as_array()
            .ok_or_else(|| handle("no devices"))?;
        let devices: Vec<String> = devices
            .iter()
            .filter_map(|d| d.as_str().map(str::to_owned))
            .collect();
        if let Some(unknown) = devices
            .iter()
            .find(|d| !["gpu-0", "gpu-1"].contains(&d.as_str()))
        {
            return Err(PrepareError::UnknownDevice {
                uid: claim.uid.clone(),
                device: unknown.clone(),
            });
        }
        self.prepared
            .lock()
            .unwrap()
            .insert(claim.uid.clone(), devices);
        Ok(vec![format!("{DRIVER}/claim={}", claim.uid)])
    }
}

impl ClaimPreparer for FakePreparer {
    fn prepare(&self, claims: &[ClaimRequest]) -> Vec<(String, Result<Vec<String>, PrepareError>)> {
        self.calls.lock().unwrap().push(claims.to_vec());
        claims
            .iter()
            .map(|c| (c.uid.clone(), self.prepare_one(c)))
            .collect()
    }

    fn prepare_allocated(
        &self,
        claims: &[AllocatedClaim],
    ) -> Vec<(String, Result<Vec<String>, PrepareError>)> {
        claims
            .iter()
            .map(|c| {
                let answer = Err(PrepareError::Allocation {
                    uid: c.uid.clone(),
                    reason: "the 1.30 tests prepare by handle only".into(),
                });
                (c.uid.clone(), answer)
            })
            .collect()
    }

    fn unprepare(&self, claims: &[ClaimRequest]) -> Vec<(String, Result<(), PrepareError>)> {
        self.calls.lock().unwrap().push(claims.to_vec());
        claims
            .iter()
            .map(|c| {
                if c.uid.starts_with("stuck") {
                    let source = std::io::Error::new(
                        std::io::ErrorKind::PermissionDenied,
                        "read-only file system",
                    );
                    return (
                        c.uid.clone(),
                        Err(PrepareError::Cdi {
                            uid: c.uid.clone(),
                            source,
                        }),
                    );
                }
                self.prepared.lock().unwrap().remove(&c.uid);
                (c.uid.clone(), Ok(()))
            })
            .collect()
    }
}

/// A device with a few attributes of different kinds.
pub fn gpu(name: &str, numa: i64) -> NodeDevice {
    let attributes = [
        ("vendor", AttributeValue::String("nvidia".into())),
        ("numa", AttributeValue::Int(numa)),
        ("memory", AttributeValue::Quantity("80Gi".parse().unwrap())),
        (
            "driverVersion",
            AttributeValue::Version("550.54.15".parse().unwrap()),
        ),
        ("mig", AttributeValue::Bool(false)),
    ];
    NodeDevice {
        name: name.to_owned(),
        attributes: attributes
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect(),
        ..NodeDevice::default()
    }
}

pub fn inventory(devices: impl IntoIterator<Item = NodeDevice>) -> Inventory {
    devices.into_iter().map(|d| (d.name.clone(), d)).collect()
}

/// A claim of the kubelet's request.
pub fn claim(uid: &str, handle: &str) -> Claim {
    Claim {
        namespace: "default".into(),
        uid: uid.into(),
        name: format!("claim-{uid}"),
        resource_handle: handle.into(),
        structured_resource_handle: Vec::new(),
    }
}

/// The next message of a resource stream, which comes within [`PATIENCE`].
pub async fn next_message(
    stream: &mut Streaming<NodeListAndWatchResourcesResponse>,
) -> NodeListAndWatchResourcesResponse {
    let next = tokio::time::timeout(PATIENCE, stream.message()).await;
    next.expect("a message in time")
        .unwrap()
        .expect("the stream is open")
}

/// What a `v1alpha3.Node` prepare of `claims` answers, by claim UID.
pub async fn prepare(
    node: &mut NodeClient<Channel>,
    claims: Vec<Claim>,
) -> HashMap<String, NodePrepareResourceResponse> {
    let request = NodePrepareResourcesRequest { claims };
    let answer = node.node_prepare_resources(request).await;
    answer.unwrap().into_inner().claims
}

/// What a `v1alpha3.Node` unprepare of `claims` answers, by claim UID.
pub async fn unprepare(
    node: &mut NodeClient<Channel>,
    claims: Vec<Claim>,
) -> HashMap<String, NodeUnprepareResourceResponse> {
    let request = NodeUnprepareResourcesRequest { claims };
    let answer = node.node_unprepare_resources(request).await;
    answer.unwrap().into_inner().claims
}

/// The agent's plugin, served from a temporary kubelet directory.
pub struct Agent {
    pub dir: tempfile::TempDir,
    pub sockets: PluginSockets,
    pub preparer: Arc<FakePreparer>,
    pub inventory: watch::Sender<Inventory>,
    pub registration: watch::Receiver<RegistrationState>,
    shutdown: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), GrpcError>>,
}

/// The registry and plugins directories of a kubelet under `root`.
pub fn config(root: &Path) -> PluginConfig {
    let mut config = PluginConfig::new(DRIVER, root.join("plugins_registry"), root.join("plugins"));
    config.retry_initial = Duration::from_millis(50);
    config.retry_max = Duration::from_millis(200);
    config
}

impl Agent {
    pub fn start() -> Agent {
        let dir = tempfile::tempdir().unwrap();
        let config = config(dir.path());
        Agent::start_in(dir, config)
    }

    pub fn start_in(dir: tempfile::TempDir, config: PluginConfig) -> Agent {
        let plugin = Plugin::bind(config).unwrap();
        let sockets = plugin.sockets().clone();
        let registration = plugin.registration();
        let preparer = Arc::new(FakePreparer::default());
        let (inventory, inventory_rx) =
            watch::channel(inventory([gpu("gpu-0", 0), gpu("gpu-1", 1)]));
        let (shutdown, shutdown_rx) = oneshot::channel();
        let task = tokio::spawn(plugin.serve(Arc::clone(&preparer), inventory_rx, async {
            let _ = shutdown_rx.await;
        }));
        Agent {
            dir,
            sockets,
            preparer,
            inventory,
            registration,
            shutdown: Some(shutdown),
            task,
        }
    }

    pub async fn node(&self) -> NodeClient<Channel> {
        NodeClient::new(connect(self.sockets.plugin()).await)
    }

    /// What a prepare of `claims` through the agent's `v1alpha3.Node` answers, by claim UID.
    pub async fn prepare(
        &self,
        claims: Vec<Claim>,
    ) -> HashMap<String, NodePrepareResourceResponse> {
        prepare(&mut self.node().await, claims).await
    }

    /// What an unprepare of `claims` answers, by claim UID.
    pub async fn unprepare(
        &self,
        claims: Vec<Claim>,
    ) -> HashMap<String, NodeUnprepareResourceResponse> {
        unprepare(&mut self.node().await, claims).await
    }

    /// The resource stream, opened as the kubelet opens it.
    pub async fn resource_stream(&self) -> Streaming<NodeListAndWatchResourcesResponse> {
        let mut node = self.node().await;
        let request = NodeListAndWatchResourcesRequest {};
        let stream = node.node_list_and_watch_resources(request).await;
        stream.unwrap().into_inner()
    }

    pub async fn registration_client(&self) -> RegistrationClient<Channel> {
        RegistrationClient::new(connect(self.sockets.registration()).await)
    }

    /// Stops the agent and returns what `serve` returned.
    pub async fn stop(&mut self) -> Result<(), GrpcError> {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        tokio::time::timeout(PATIENCE, &mut self.task)
            .await
            .expect("the agent stops")
            .unwrap()
    }
}

/// A gRPC channel over the Unix socket at `path`, connected as the simulated kubelet connects.
pub async fn connect(path: &Path) -> Channel {
    dra_sim::actors::plugins::connect(path).await.unwrap()
}

/// What a 1.30 kubelet does with a new registration socket: `GetInfo`, the checks of its DRA
/// handler (type, versions), then `NotifyRegistrationStatus` with the outcome. Returns the
/// plugin's info, or the error it reported to the plugin.
pub async fn register_as_kubelet_130(registration: &Path) -> Result<PluginInfo, String> {
    let mut client = RegistrationClient::new(connect(registration).await);
    let info = client.get_info(InfoRequest {}).await.unwrap().into_inner();
    let verdict = if info.r#type == PLUGIN_TYPE {
        highest_supported_version(&info.supported_versions)
            .map(|_| ())
            .map_err(|e| format!("validation failed for DRA plugin {:?}: {e}", info.name))
    } else {
        Err(format!(
            "no handler registered for plugin type: {}",
            info.r#type
        ))
    };
    let status = RegistrationStatus {
        plugin_registered: verdict.is_ok(),
        error: verdict.clone().err().unwrap_or_default(),
    };
    client.notify_registration_status(status).await.unwrap();
    verdict.map(|()| info)
}
