//! The `pluginregistration.Registration` service on the registration socket, the state the
//! kubelet reports through it, and the retry of a refused registration.
//!
//! The kubelet drives registration: its plugin watcher sees the socket appear, calls `GetInfo`,
//! validates the answer and calls `NotifyRegistrationStatus`. A plugin cannot ask again; to make
//! the kubelet try again after a refusal, the registration socket is removed and created anew
//! after a backoff, which the plugin watcher sees as a new plugin.

use std::sync::Arc;

use tokio::net::UnixListener;
use tokio::sync::watch;
use tonic::{Request, Response, Status};

use super::{GrpcError, PluginConfig, PluginSockets, Result};
use dra_types::kubelet::pluginregistration::registration_server::{
    Registration, RegistrationServer,
};
use dra_types::kubelet::pluginregistration::{
    InfoRequest, PluginInfo, RegistrationStatus, RegistrationStatusResponse,
};

/// The plugin type of a DRA driver.
pub const PLUGIN_TYPE: &str = "DRAPlugin";

/// The `supported_versions` entry of the 1.30 `v1alpha3.Node` service: a 1.30 kubelet parses
/// every entry as a version, skips those that do not parse and wants a 1.x
/// ([`super::versions::highest_supported_version`]).
pub const V1ALPHA3_VERSION: &str = "1.0.0";
/// The entry of the `k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin` service (the kubelet's
/// `v1.DRAPluginService`).
pub const V1_SERVICE: &str = "v1.DRAPlugin";
/// The entry of the `...dra.v1beta1.DRAPlugin` service (`v1beta1.DRAPluginService`).
pub const V1BETA1_SERVICE: &str = "v1beta1.DRAPlugin";

/// The entry of the `v1alpha1.DRAResourceHealth` service: a kubelet whose `ResourceHealthStatus`
/// gate is on opens the health stream of a plugin that lists it.
pub const HEALTH_SERVICE: &str = "v1alpha1.DRAResourceHealth";

/// What `GetInfo` advertises when only the 1.30 service is served.
pub const SUPPORTED_VERSIONS: &[&str] = &[V1ALPHA3_VERSION];

/// What `GetInfo` advertises for the services served: [`V1ALPHA3_VERSION`] for the 1.30
/// service, then the v1 service names, v1 before v1beta1. A 1.34 kubelet takes the first
/// entry it knows as a service name ([`super::versions::service_chosen_by_134_kubelet`]), so it
/// passes over `1.0.0` and picks v1 (a kubelet that knows v1beta1 but not v1 picks v1beta1);
/// a 1.30 kubelet skips the service names, which are no versions, and takes `1.0.0`. The health
/// service, where served, comes last: a kubelet chooses its `DRAPlugin` service among the
/// others and opens the health stream because the entry is there.
pub fn supported_versions(v1alpha2: bool, v1: bool, health: bool) -> Vec<&'static str> {
    let mut versions = Vec::new();
    if v1alpha2 {
        versions.push(V1ALPHA3_VERSION);
    }
    if v1 {
        versions.extend([V1_SERVICE, V1BETA1_SERVICE]);
    }
    if health {
        versions.push(HEALTH_SERVICE);
    }
    versions
}

/// Whether the kubelet registered the plugin.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RegistrationState {
    /// The socket is up and the kubelet has not reported yet.
    Waiting,
    /// The kubelet registered the plugin.
    Registered,
    /// The kubelet refused the plugin, with its reason.
    Refused(String),
}

impl RegistrationState {
    /// True once the kubelet registered the plugin (what `/readyz` waits for).
    pub fn is_registered(&self) -> bool {
        matches!(self, RegistrationState::Registered)
    }
}

/// The registration service: answers `GetInfo` and records `NotifyRegistrationStatus`.
#[derive(Debug)]
pub struct RegistrationService {
    info: PluginInfo,
    state: Arc<watch::Sender<RegistrationState>>,
}

impl RegistrationService {
    /// The service of `driver_name` pointing the kubelet at the plugin socket of `sockets`,
    /// advertising `supported_versions`, reporting into `state`.
    pub fn new(
        driver_name: &str,
        sockets: &PluginSockets,
        supported_versions: &[&str],
        state: Arc<watch::Sender<RegistrationState>>,
    ) -> Self {
        RegistrationService {
            info: PluginInfo {
                r#type: PLUGIN_TYPE.to_owned(),
                name: driver_name.to_owned(),
                endpoint: sockets.plugin().to_string_lossy().into_owned(),
                supported_versions: supported_versions.iter().map(|&v| v.to_owned()).collect(),
            },
            state,
        }
    }
}

#[tonic::async_trait]
impl Registration for RegistrationService {
    async fn get_info(
        &self,
        _request: Request<InfoRequest>,
    ) -> Result<Response<PluginInfo>, Status> {
        tracing::debug!(driver = %self.info.name, "The kubelet asked for the plugin's info");
        Ok(Response::new(self.info.clone()))
    }

    async fn notify_registration_status(
        &self,
        request: Request<RegistrationStatus>,
    ) -> Result<Response<RegistrationStatusResponse>, Status> {
        let status = request.into_inner();
        let driver = &self.info.name;
        let state = if status.plugin_registered {
            tracing::info!(%driver, "The kubelet registered the plugin");
            RegistrationState::Registered
        } else {
            tracing::warn!(%driver, error = %status.error, "The kubelet refused the plugin's registration");
            RegistrationState::Refused(status.error)
        };
        self.state.send_replace(state);
        Ok(Response::new(RegistrationStatusResponse {}))
    }
}

/// Serves `service` on the registration socket until `stop`; after each refusal that the
/// kubelet does not turn into a registration within the backoff, removes the socket and binds
/// it again. The socket is removed as soon as `stop` fires.
pub(crate) async fn serve(
    service: RegistrationService,
    config: &PluginConfig,
    sockets: &PluginSockets,
    first: std::os::unix::net::UnixListener,
    stop: watch::Receiver<bool>,
) -> Result<()> {
    let service = Arc::new(service);
    let mut std_listener = first;
    let mut refusals = 0u32;
    loop {
        let incoming =
            UnixListener::from_std(std_listener).map_err(|source| GrpcError::SocketBind {
                path: sockets.registration().to_owned(),
                source,
            })?;
        let mut states = service.state.subscribe();
        let signal = async {
            tokio::select! {
                () = super::stopped(stop.clone()) => {}
                () = refused_past_backoff(&mut states, config, &mut refusals) => {}
            }
            if let Err(error) = sockets.remove_registration() {
                tracing::warn!(%error, "Failed to remove the registration socket");
            }
        };
        tonic::transport::Server::builder()
            .add_service(RegistrationServer::from_arc(Arc::clone(&service)))
            .serve_with_incoming_shutdown(super::authority::incoming(incoming), signal)
            .await
            .map_err(|source| GrpcError::Serve {
                path: sockets.registration().to_owned(),
                source,
            })?;
        if *stop.borrow() {
            return Ok(());
        }
        std_listener = sockets.bind_registration()?;
        tracing::info!(
            driver = %service.info.name,
            refusals,
            "Created the registration socket again so that the kubelet retries"
        );
        service.state.send_replace(RegistrationState::Waiting);
    }
}

/// Completes when the kubelet refused the plugin and did not register it within the backoff
/// that follows; a registration in between resets the count of refusals.
async fn refused_past_backoff(
    states: &mut watch::Receiver<RegistrationState>,
    config: &PluginConfig,
    refusals: &mut u32,
) {
    loop {
        // a watch guard must not live across an await: take what is needed and let it go
        let refused = states
            .wait_for(|state| matches!(state, RegistrationState::Refused(_)))
            .await
            .is_ok();
        if !refused {
            return std::future::pending().await;
        }
        *refusals = refusals.saturating_add(1);
        let delay = config.retry_delay(*refusals);
        tracing::debug!(?delay, "Waiting before the registration is offered again");
        let registered = async {
            states
                .wait_for(RegistrationState::is_registered)
                .await
                .is_ok()
        };
        tokio::select! {
            () = tokio::time::sleep(delay) => return,
            registered = registered => {
                if !registered {
                    return std::future::pending().await;
                }
                *refusals = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use std::time::Duration;

    fn service() -> (RegistrationService, watch::Receiver<RegistrationState>) {
        let sockets =
            PluginSockets::new("gpu.example.com", Path::new("/reg"), Path::new("/plugins"))
                .unwrap();
        let (state, rx) = watch::channel(RegistrationState::Waiting);
        (
            RegistrationService::new(
                "gpu.example.com",
                &sockets,
                SUPPORTED_VERSIONS,
                Arc::new(state),
            ),
            rx,
        )
    }

    #[tokio::test]
    async fn get_info_names_the_driver_and_its_plugin_socket() {
        let (service, _) = service();
        let info = service
            .get_info(Request::new(InfoRequest {}))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(info.r#type, "DRAPlugin");
        assert_eq!(info.name, "gpu.example.com");
        assert_eq!(info.endpoint, "/plugins/gpu.example.com/plugin.sock");
        assert_eq!(info.supported_versions, ["1.0.0"]);
    }

    #[tokio::test]
    async fn a_refusal_is_recorded_with_the_kubelets_reason_and_a_registration_replaces_it() {
        let (service, rx) = service();
        let refusal = RegistrationStatus {
            plugin_registered: false,
            error: "version".into(),
        };
        service
            .notify_registration_status(Request::new(refusal))
            .await
            .unwrap();
        assert_eq!(*rx.borrow(), RegistrationState::Refused("version".into()));
        let ok = RegistrationStatus {
            plugin_registered: true,
            error: String::new(),
        };
        service
            .notify_registration_status(Request::new(ok))
            .await
            .unwrap();
        assert!(rx.borrow().is_registered());
    }

    #[test]
    fn the_advertised_versions_make_each_kubelet_pick_its_service() {
        use super::super::versions::{highest_supported_version, service_chosen_by_134_kubelet};
        assert_eq!(supported_versions(true, false, false), ["1.0.0"]);
        assert_eq!(
            supported_versions(false, true, false),
            ["v1.DRAPlugin", "v1beta1.DRAPlugin"]
        );
        let with_health = supported_versions(false, true, true);
        assert_eq!(
            with_health,
            [
                "v1.DRAPlugin",
                "v1beta1.DRAPlugin",
                "v1alpha1.DRAResourceHealth"
            ]
        );
        assert_eq!(
            service_chosen_by_134_kubelet(&with_health),
            Ok("v1.DRAPlugin")
        );
        let both = supported_versions(true, true, false);
        assert_eq!(both, ["1.0.0", "v1.DRAPlugin", "v1beta1.DRAPlugin"]);
        assert_eq!(service_chosen_by_134_kubelet(&both), Ok("v1.DRAPlugin"));
        assert_eq!(
            highest_supported_version(&both).unwrap().to_string(),
            "1.0.0"
        );
        let v1 = supported_versions(false, true, false);
        assert_eq!(service_chosen_by_134_kubelet(&v1), Ok("v1.DRAPlugin"));
        assert!(highest_supported_version(&v1).is_err());
        assert!(service_chosen_by_134_kubelet(&supported_versions(true, false, false)).is_err());
    }

    #[test]
    fn the_retry_delay_doubles_up_to_its_maximum() {
        let mut config = PluginConfig::new("d", "/r", "/p");
        config.retry_initial = Duration::from_secs(5);
        config.retry_max = Duration::from_secs(60);
        let delays: Vec<_> = (1..=6).map(|n| config.retry_delay(n).as_secs()).collect();
        assert_eq!(delays, [5, 10, 20, 40, 60, 60]);
        assert_eq!(config.retry_delay(u32::MAX), Duration::from_secs(60));
    }
}
