//! A Kubernetes 1.30 API server subset on loopback, speaking the real REST protocol so that the
//! real `kube` client and `kubectl` work against it unchanged.
//!
//! Served: discovery (`/version`, `/api`, `/api/v1`, `/apis`, `/apis/{group}[/{version}]`);
//! core/v1 namespaces, nodes, pods (+`status`, +`binding`), the legacy `bindings` collection,
//! events, configmaps; events.k8s.io/v1 events; coordination.k8s.io/v1 leases;
//! resource.k8s.io/v1alpha2 resourceclasses, resourceclaims (+`status`), resourceclaimtemplates,
//! podschedulingcontexts (+`status`), resourceslices, resourceclaimparameters,
//! resourceclassparameters; apiextensions.k8s.io/v1 customresourcedefinitions, whose custom
//! resources are served once created.
//!
//! Behaviour worth knowing for clients (as in Kubernetes): deleting a pod that is bound to a node
//! and not terminal sets `deletionTimestamp` with a grace period and keeps the pod until a delete
//! with `gracePeriodSeconds=0` (the kubelet's job); `propagationPolicy=Foreground`/`Orphan` add the
//! `foregroundDeletion`/`orphan` finalizers (the garbage collector's job); objects with finalizers
//! stay until the finalizers are removed. Query parameters, request options, delete answers,
//! `resourceVersionMatch` and paging follow the 1.30 API server; `docs/simulator.md` lists what is
//! faithful, with the upstream source of each rule, and what is deliberately not simulated
//! (authentication, admission, server-side apply, `managedFields`, protobuf answers, aggregated
//! discovery, CRD schema validation, `metadata.generation` of built-in kinds, among others).
//! `/openapi/v2` and `/openapi/v3` publish the schemas of what is served (`openapi`).
//!
//! Module map: `store` (objects, resourceVersion, history, broadcast), `resources` (registry),
//! `route` (paths), `handlers` (verbs), `discovery`, `render` (tables, metadata), `patch`,
//! `selectors`, `validation`, `defaults`, `typed` (normalisation through k8s-openapi types),
//! `convert` (events.k8s.io/core Events), `crd`, `openapi`, `protobuf` (protobuf request bodies),
//! `faults`, `error`. The server depends on no other
//! part of this crate.

mod convert;
mod crd;
mod defaults;
mod discovery;
pub(crate) mod error;
pub mod faults;
mod handlers;
mod openapi;
mod patch;
mod protobuf;
mod render;
mod resource_v1;
pub(crate) mod resources;
mod route;
mod selectors;
pub(crate) mod store;
mod typed;
mod validation;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::{json, Value};
use tokio::task::JoinHandle;

pub use faults::{FaultStats, Faults};
pub(crate) use store::Store;

use handlers::AppState;
use resources::Registry;

/// Errors of starting, using or stopping the server.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// Binding the listen address failed.
    #[error("binding {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
    /// Building a kube client failed.
    #[error("building kube client: {0}")]
    KubeClient(#[from] kube::Error),
    /// Writing a kubeconfig failed.
    #[error("writing kubeconfig {path}: {source}")]
    WriteKubeconfig {
        /// The path.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// An in-process read could not decode an object into the asked type.
    #[error("decoding stored object: {0}")]
    Decode(#[from] serde_json::Error),
    /// The server URL did not parse as a URI.
    #[error("server url: {0}")]
    ServerUrl(#[from] http::uri::InvalidUri),
    /// `--feature-gates` or `--runtime-config` asked for what the release cannot serve.
    #[error("api selection: {0}")]
    ApiSelection(#[from] crate::ApiSelectionError),
}

/// Result alias of the server's public API.
pub type Result<T, E = ServerError> = std::result::Result<T, E>;

/// Configuration of a simulated API server.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Listen address; `127.0.0.1:0` picks a free port.
    pub addr: SocketAddr,
    /// Number of events retained for watch resumption; older resourceVersions answer 410.
    pub history_limit: usize,
    /// Interval of BOOKMARK events on watches that allow them.
    pub bookmark_interval: Duration,
    /// Watch duration when the client gives no `timeoutSeconds`.
    pub default_watch_timeout: Duration,
    /// Initial fault injection.
    pub faults: Faults,
    /// The release whose API the server serves (resources, discovery, `/version`).
    pub kubernetes_version: crate::KubernetesVersion,
    /// Feature gates and API versions switched on or off beyond the release's defaults.
    pub api: crate::ApiOverrides,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            history_limit: 100_000,
            bookmark_interval: Duration::from_secs(5),
            default_watch_timeout: Duration::from_secs(1800),
            faults: Faults::none(),
            kubernetes_version: crate::KubernetesVersion::default(),
            api: crate::ApiOverrides::default(),
        }
    }
}

/// Entry point: `SimServer::start(config)`.
#[derive(Debug)]
pub struct SimServer;

impl SimServer {
    /// Binds the address, seeds the `default`, `kube-system`, `kube-public` and `kube-node-lease`
    /// namespaces and serves until the handle is shut down.
    pub async fn start(config: ServerConfig) -> Result<SimServerHandle> {
        let listener = tokio::net::TcpListener::bind(config.addr)
            .await
            .map_err(|source| ServerError::Bind {
                addr: config.addr,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| ServerError::Bind {
            addr: config.addr,
            source,
        })?;
        let served = crate::ServedApi::new(config.kubernetes_version, &config.api)?;
        let store = Arc::new(Store::new(Registry::serving(&served), config.history_limit));
        seed_namespaces(&store);
        let (disconnect, _) = tokio::sync::watch::channel(0u64);
        let (closing, _) = tokio::sync::watch::channel(false);
        let state = Arc::new(AppState {
            store: store.clone(),
            faults: Arc::new(faults::FaultInjector::new(config.faults.clone())),
            bookmark_interval: config.bookmark_interval,
            default_watch_timeout: config.default_watch_timeout,
            disconnect,
            closing,
            addr,
        });
        let app = axum::Router::new()
            .fallback(handlers::dispatch)
            .layer(axum::extract::DefaultBodyLimit::max(64 * 1024 * 1024))
            .with_state(state.clone());
        let mut closing_rx = state.closing.subscribe();
        let router = app.clone();
        let serve = tokio::spawn(async move {
            let shutdown = async move {
                let _ = closing_rx.changed().await;
            };
            if let Err(error) = axum::serve(listener, app)
                .with_graceful_shutdown(shutdown)
                .await
            {
                tracing::error!(%error, "API server stopped with an error");
            }
        });
        let finalizer = tokio::spawn(handlers::finalize_namespaces(state.clone()));
        tracing::info!(%addr, "Simulated API server listening");
        Ok(SimServerHandle {
            state,
            router,
            tasks: vec![serve, finalizer],
        })
    }
}

fn seed_namespaces(store: &Store) {
    let now = handlers_now();
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        let obj = json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": ns,
                "uid": uuid::Uuid::new_v4().to_string(),
                "creationTimestamp": now,
                "labels": {"kubernetes.io/metadata.name": ns},
            },
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"},
        });
        // Names are fixed and the store is new, so creation cannot collide.
        let _ = store.create("/namespaces", "", ns, "", "namespaces", obj);
    }
}

fn handlers_now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// A running server.
#[derive(Debug)]
pub struct SimServerHandle {
    state: Arc<AppState>,
    /// The handlers, also served in process to the cluster's own controllers.
    router: axum::Router,
    tasks: Vec<JoinHandle<()>>,
}

impl SimServerHandle {
    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.state.addr
    }

    /// The base URL, e.g. `http://127.0.0.1:41234`.
    pub fn url(&self) -> String {
        format!("http://{}", self.state.addr)
    }

    /// A kube client for this server (plain http, no auth, default namespace `default`).
    pub fn kube_client(&self) -> Result<kube::Client> {
        let uri: http::Uri = self.url().parse()?;
        let mut config = kube::Config::new(uri);
        config.default_namespace = "default".into();
        config.read_timeout = None;
        Ok(kube::Client::try_from(config)?)
    }

    /// A kube client that hands its requests to the server's handlers in this process, without a
    /// connection: the same routing, validation, store and watches as over HTTP, without the
    /// TCP and HTTP/1 encoding. The simulated control plane's own controllers use it, as the real
    /// ones share the API server's host; every other client connects to [`Self::url`].
    pub fn in_process_client(&self) -> kube::Client {
        kube::Client::new(self.router.clone(), "default")
    }

    /// A kubeconfig (YAML) pointing at this server, for `kubectl` and `dra-ledger run`.
    pub fn kubeconfig_yaml(&self) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: dra-sim\n  cluster:\n    server: {}\ncontexts:\n- name: dra-sim\n  context:\n    cluster: dra-sim\n    user: dra-sim\n    namespace: default\ncurrent-context: dra-sim\nusers:\n- name: dra-sim\n  user: {{}}\n",
            self.url()
        )
    }

    /// Writes the kubeconfig to `path`.
    pub fn write_kubeconfig(&self, path: &Path) -> Result<()> {
        std::fs::write(path, self.kubeconfig_yaml()).map_err(|source| {
            ServerError::WriteKubeconfig {
                path: path.display().to_string(),
                source,
            }
        })
    }

    /// Replaces the fault injection config (reseeding its generator).
    pub fn set_faults(&self, faults: Faults) {
        self.state.faults.set(faults);
    }

    /// The current fault config.
    pub fn faults(&self) -> Faults {
        self.state.faults.get()
    }

    /// Counters of injected faults.
    pub fn fault_stats(&self) -> FaultStats {
        self.state.faults.stats()
    }

    /// Ends every open watch stream now (clients must re-watch).
    pub fn disconnect_watches(&self) {
        self.state.disconnect.send_modify(|n| *n += 1);
    }

    /// Drops all retained watch history: every older resourceVersion now answers 410.
    pub fn compact_history(&self) {
        self.state.store.compact();
    }

    /// Changes how many events are retained for watch resumption.
    pub fn set_history_limit(&self, limit: usize) {
        self.state.store.set_history_limit(limit);
    }

    /// In-process read access to the store (for assertions; clients under test use HTTP).
    pub fn store(&self) -> StoreReader {
        StoreReader {
            store: self.state.store.clone(),
        }
    }

    /// Stops serving: ends watches and background loops, then waits for the server task.
    pub async fn shutdown(self) {
        self.state.closing.send_replace(true);
        for task in self.tasks {
            if tokio::time::timeout(Duration::from_secs(5), task)
                .await
                .is_err()
            {
                tracing::warn!("API server task did not stop in time");
            }
        }
    }
}

/// Read-only, in-process view of the store.
#[derive(Debug, Clone)]
pub struct StoreReader {
    store: Arc<Store>,
}

impl StoreReader {
    /// The current resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.store.current_rv()
    }

    fn key(&self, group: &str, plural: &str) -> String {
        self.store
            .registry()
            .find_any_version(group, plural)
            .map_or_else(|| format!("{group}/{plural}"), |info| info.storage_key())
    }

    /// One object of `group`/`plural` (`""` group for core), in storage form (events.k8s.io
    /// Events are stored as core/v1 Events).
    pub fn get(
        &self,
        group: &str,
        plural: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Value> {
        self.store
            .get(
                &self.key(group, plural),
                namespace.unwrap_or_default(),
                name,
            )
            .map(|v| (*v).clone())
    }

    /// All objects of `group`/`plural`, optionally in one namespace, ordered by namespace and name.
    pub fn list(&self, group: &str, plural: &str, namespace: Option<&str>) -> Vec<Value> {
        self.store
            .list(&self.key(group, plural), namespace, None)
            .0
            .iter()
            .map(|v| (**v).clone())
            .collect()
    }

    /// One object decoded as a typed resource (e.g. `k8s_openapi::api::core::v1::Pod`).
    pub fn get_typed<K>(&self, namespace: Option<&str>, name: &str) -> Result<Option<K>>
    where
        K: kube::Resource<DynamicType = ()> + DeserializeOwned,
    {
        let group = K::group(&()).to_string();
        let plural = K::plural(&()).to_string();
        self.get(&group, &plural, namespace, name)
            .map(serde_json::from_value)
            .transpose()
            .map_err(ServerError::from)
    }

    /// All objects of a typed resource, optionally in one namespace.
    pub fn list_typed<K>(&self, namespace: Option<&str>) -> Result<Vec<K>>
    where
        K: kube::Resource<DynamicType = ()> + DeserializeOwned,
    {
        let group = K::group(&()).to_string();
        let plural = K::plural(&()).to_string();
        self.list(&group, &plural, namespace)
            .into_iter()
            .map(|v| serde_json::from_value(v).map_err(ServerError::from))
            .collect()
    }
}
