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
use tokio_stream::wrappers::UnixListenerStream;
use tonic::{Request, Response, Status};

use super::proto::pluginregistration::registration_server::{Registration, RegistrationServer};
use super::proto::pluginregistration::{
    InfoRequest, PluginInfo, RegistrationStatus, RegistrationStatusResponse,
};
use super::{GrpcError, PluginConfig, PluginSockets, Result};

/// The plugin type of a DRA driver.
pub const PLUGIN_TYPE: &str = "DRAPlugin";

/// What `GetInfo` advertises: `1.0.0` is the entry a 1.30 kubelet accepts (it parses each entry
/// as a version and wants a 1.x); later kubelets take gRPC service names, added here when the
/// agent serves those services.
pub const SUPPORTED_VERSIONS: &[&str] = &["1.0.0"];

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
    /// reporting into `state`.
    pub fn new(
        driver_name: &str,
        sockets: &PluginSockets,
        state: Arc<watch::Sender<RegistrationState>>,
    ) -> Self {
        RegistrationService {
            info: PluginInfo {
                r#type: PLUGIN_TYPE.to_owned(),
                name: driver_name.to_owned(),
                endpoint: sockets.plugin().to_string_lossy().into_owned(),
                supported_versions: SUPPORTED_VERSIONS.iter().map(|&v| v.to_owned()).collect(),
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
            .serve_with_incoming_shutdown(UnixListenerStream::new(incoming), signal)
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
            RegistrationService::new("gpu.example.com", &sockets, Arc::new(state)),
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
    fn the_retry_delay_doubles_up_to_its_maximum() {
        let mut config = PluginConfig::new("d", "/r", "/p");
        config.retry_initial = Duration::from_secs(5);
        config.retry_max = Duration::from_secs(60);
        let delays: Vec<_> = (1..=6).map(|n| config.retry_delay(n).as_secs()).collect();
        assert_eq!(delays, [5, 10, 20, 40, 60, 60]);
        assert_eq!(config.retry_delay(u32::MAX), Duration::from_secs(60));
    }
}
