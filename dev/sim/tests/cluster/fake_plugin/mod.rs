//! A fake 1.34 DRA kubelet plugin: a registration socket in the kubelet's registry directory
//! answering `GetInfo` with the service names it is told to advertise, and a service socket
//! serving `v1.DRAPlugin` and/or `v1beta1.DRAPlugin`. Every prepare and unprepare call is
//! recorded with the service it came over and answered with success; every registration status
//! the kubelet sends is recorded.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use dra_types::kubelet::k8s::io::kubelet::pkg::apis::dra::{v1, v1beta1};
use dra_types::kubelet::pluginregistration::registration_server::{
    Registration, RegistrationServer,
};
use dra_types::kubelet::pluginregistration::{
    InfoRequest, PluginInfo, RegistrationStatus, RegistrationStatusResponse,
};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::{Request, Response, Status};

/// One call the plugin received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// `v1` or `v1beta1`.
    pub service: &'static str,
    /// `prepare` or `unprepare`.
    pub method: &'static str,
    /// `(namespace, uid, name)` of each claim, in request order.
    pub claims: Vec<(String, String, String)>,
}

#[derive(Default)]
struct Record {
    calls: Mutex<Vec<Call>>,
    statuses: Mutex<Vec<(bool, String)>>,
}

impl Record {
    /// Records a call and answers each of its claims with success.
    fn answer<R: Default>(
        &self,
        service: &'static str,
        method: &'static str,
        claims: Vec<(String, String, String)>,
    ) -> HashMap<String, R> {
        let answers = claims
            .iter()
            .map(|(_, uid, _)| (uid.clone(), R::default()))
            .collect();
        self.calls.lock().unwrap().push(Call {
            service,
            method,
            claims,
        });
        answers
    }
}

struct Reg {
    info: PluginInfo,
    record: Arc<Record>,
}

#[tonic::async_trait]
impl Registration for Reg {
    async fn get_info(&self, _: Request<InfoRequest>) -> Result<Response<PluginInfo>, Status> {
        Ok(Response::new(self.info.clone()))
    }

    async fn notify_registration_status(
        &self,
        request: Request<RegistrationStatus>,
    ) -> Result<Response<RegistrationStatusResponse>, Status> {
        let status = request.into_inner();
        self.record
            .statuses
            .lock()
            .unwrap()
            .push((status.plugin_registered, status.error));
        Ok(Response::new(RegistrationStatusResponse {}))
    }
}

/// A `DRAPlugin` server of the gRPC package `$api` (`v1` or `v1beta1`) named `$server`: every
/// call is recorded under the package's name and every claim answered with success.
macro_rules! recording_service {
    ($server:ident, $api:ident) => {
        struct $server(Arc<Record>);

        #[tonic::async_trait]
        impl $api::dra_plugin_server::DraPlugin for $server {
            async fn node_prepare_resources(
                &self,
                request: Request<$api::NodePrepareResourcesRequest>,
            ) -> Result<Response<$api::NodePrepareResourcesResponse>, Status> {
                let claims = claim_triples!(request);
                Ok(Response::new($api::NodePrepareResourcesResponse {
                    claims: self.0.answer(stringify!($api), "prepare", claims),
                }))
            }

            async fn node_unprepare_resources(
                &self,
                request: Request<$api::NodeUnprepareResourcesRequest>,
            ) -> Result<Response<$api::NodeUnprepareResourcesResponse>, Status> {
                let claims = claim_triples!(request);
                Ok(Response::new($api::NodeUnprepareResourcesResponse {
                    claims: self.0.answer(stringify!($api), "unprepare", claims),
                }))
            }
        }
    };
}

/// `(namespace, uid, name)` of each claim of a request, in request order.
macro_rules! claim_triples {
    ($request:expr) => {
        $request
            .into_inner()
            .claims
            .into_iter()
            .map(|c| (c.namespace, c.uid, c.name))
            .collect()
    };
}

recording_service!(V1, v1);
recording_service!(V1Beta1, v1beta1);

/// Which services the plugin serves on its service socket.
#[derive(Debug, Clone, Copy)]
pub struct Serves {
    /// `v1.DRAPlugin`.
    pub v1: bool,
    /// `v1beta1.DRAPlugin`.
    pub v1beta1: bool,
}

/// Incoming connections of a Unix listener, as tonic takes them.
fn incoming(listener: UnixListener) -> impl futures::Stream<Item = std::io::Result<UnixStream>> {
    futures::stream::unfold(listener, |listener| async move {
        let next = listener.accept().await.map(|(stream, _)| stream);
        Some((next, listener))
    })
}

/// What the plugin of `driver` answers to `GetInfo`.
fn plugin_info(driver: &str, advertised: &[&str], service: &Path) -> PluginInfo {
    PluginInfo {
        r#type: "DRAPlugin".into(),
        name: driver.into(),
        endpoint: service.display().to_string(),
        supported_versions: advertised.iter().map(|&s| s.to_owned()).collect(),
    }
}

/// A running fake plugin of one driver.
pub struct FakePlugin {
    registration: PathBuf,
    record: Arc<Record>,
    stop_registration: Option<oneshot::Sender<()>>,
    stop_service: Option<oneshot::Sender<()>>,
    tasks: Vec<JoinHandle<()>>,
}

impl FakePlugin {
    /// Starts the plugin of `driver` under kubelet root `root`: service socket
    /// `plugins/<driver>/dra.sock`, registration socket `plugins_registry/<driver>-reg.sock`
    /// advertising `advertised`.
    pub fn start(root: &Path, driver: &str, advertised: &[&str], serves: Serves) -> FakePlugin {
        let record = Arc::new(Record::default());
        let service_dir = root.join("plugins").join(driver);
        std::fs::create_dir_all(&service_dir).unwrap();
        let service = service_dir.join("dra.sock");
        let _ = std::fs::remove_file(&service);
        let listener = UnixListener::bind(&service).unwrap();
        let (stop_service, stopped) = oneshot::channel::<()>();
        let mut router = tonic::transport::Server::builder().add_optional_service(
            serves
                .v1
                .then(|| v1::dra_plugin_server::DraPluginServer::new(V1(Arc::clone(&record)))),
        );
        if serves.v1beta1 {
            router = router.add_service(v1beta1::dra_plugin_server::DraPluginServer::new(V1Beta1(
                Arc::clone(&record),
            )));
        }
        let service_task = tokio::spawn(async move {
            router
                .serve_with_incoming_shutdown(incoming(listener), async {
                    let _ = stopped.await;
                })
                .await
                .unwrap();
        });
        let info = plugin_info(driver, advertised, &service);
        let mut plugin = FakePlugin {
            registration: root
                .join("plugins_registry")
                .join(format!("{driver}-reg.sock")),
            record,
            stop_registration: None,
            stop_service: Some(stop_service),
            tasks: vec![service_task],
        };
        plugin.register(info);
        plugin
    }

    fn register(&mut self, info: PluginInfo) {
        let _ = std::fs::remove_file(&self.registration);
        let listener = UnixListener::bind(&self.registration).unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let reg = RegistrationServer::new(Reg {
            info,
            record: Arc::clone(&self.record),
        });
        self.tasks.push(tokio::spawn(async move {
            tonic::transport::Server::builder()
                .add_service(reg)
                .serve_with_incoming_shutdown(incoming(listener), async {
                    let _ = stopped.await;
                })
                .await
                .unwrap();
        }));
        self.stop_registration = Some(stop);
    }

    /// Removes the registration socket (the service keeps running), as a plugin going away does.
    pub fn unregister(&mut self) {
        if let Some(stop) = self.stop_registration.take() {
            let _ = stop.send(());
        }
        let _ = std::fs::remove_file(&self.registration);
    }

    /// Opens the registration socket again with the same info.
    pub fn register_again(&mut self, root: &Path, driver: &str, advertised: &[&str]) {
        let service = root.join("plugins").join(driver).join("dra.sock");
        self.register(plugin_info(driver, advertised, &service));
    }

    /// The calls received so far.
    pub fn calls(&self) -> Vec<Call> {
        self.record.calls.lock().unwrap().clone()
    }

    /// The registration statuses received so far: `(registered, error)`.
    pub fn statuses(&self) -> Vec<(bool, String)> {
        self.record.statuses.lock().unwrap().clone()
    }

    /// Stops both servers and removes the registration socket.
    pub async fn stop(mut self) {
        self.unregister();
        if let Some(stop) = self.stop_service.take() {
            let _ = stop.send(());
        }
        for task in self.tasks.drain(..) {
            let _ = task.await;
        }
    }
}
