//! Agents in this process: one [`crate::agent`] per node of a simulated cluster, each with its
//! own directories and its admin server on a free loopback port, stopped together. The demo
//! and the end-to-end tests run their nodes' agents this way; a real node runs one agent as
//! `dra-ledger node`.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::agent::{AgentConfig, AgentError, HealthConfig};
use crate::cdi::CdiDir;
use crate::discovery::{DeviceSource, DiscoveryRoots};

/// One node's agent to start.
#[derive(Clone, Debug)]
pub struct LocalNode {
    /// The node's name.
    pub name: String,
    /// The kubelet's plugin registry directory of that node.
    pub registry_dir: PathBuf,
    /// The kubelet's plugins directory of that node.
    pub plugins_dir: PathBuf,
    /// The agent's own directory: its CDI specs go to `cdi/`, its journal to `state/`.
    pub dir: PathBuf,
    /// The inventory file (`file:` source).
    pub inventory: PathBuf,
}

/// Settings every agent shares.
#[derive(Clone, Debug)]
pub struct LocalSettings {
    /// The driver name.
    pub driver_name: String,
    /// How often garbage collection runs.
    pub gc_interval: Duration,
    /// How often the inventory is read again.
    pub inventory_interval: Duration,
}

/// What went wrong with a local agent.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LocalError {
    /// The admin server's port could not be bound.
    #[error("node agent of {node}: admin server: {source}")]
    Listen {
        /// The node.
        node: String,
        /// The socket's error.
        #[source]
        source: std::io::Error,
    },
    /// An agent failed.
    #[error("node agent of {node}: {source}")]
    Agent {
        /// The node.
        node: String,
        /// Its error.
        #[source]
        source: AgentError,
    },
    /// An agent's task panicked or was cancelled.
    #[error("node agent of {node}: {source}")]
    Task {
        /// The node.
        node: String,
        /// The join error.
        #[source]
        source: tokio::task::JoinError,
    },
}

struct Running {
    node: String,
    admin: SocketAddr,
    cdi: CdiDir,
    task: JoinHandle<Result<(), AgentError>>,
}

/// The running agents.
pub struct LocalAgents {
    agents: Vec<Running>,
    stop: watch::Sender<bool>,
}

impl std::fmt::Debug for LocalAgents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.agents.iter().map(|a| (&a.node, a.admin)))
            .finish()
    }
}

impl LocalAgents {
    /// Starts an agent for each of `nodes`; `client` reaches the API server for garbage
    /// collection. Returns once every admin server is bound (the agents start in the
    /// background; their registration follows when the kubelet finds their sockets).
    pub async fn start(
        nodes: &[LocalNode],
        settings: &LocalSettings,
        client: Option<&kube::Client>,
    ) -> Result<Self, LocalError> {
        let (stop, stopped) = watch::channel(false);
        let mut agents = Vec::new();
        for node in nodes {
            let config = AgentConfig {
                node_name: node.name.clone(),
                driver_name: settings.driver_name.clone(),
                registry_dir: node.registry_dir.clone(),
                plugins_dir: node.plugins_dir.clone(),
                cdi_dir: node.dir.join("cdi"),
                state_dir: node.dir.join("state"),
                devices: DeviceSource::File(node.inventory.clone()),
                roots: DiscoveryRoots::default(),
                gc_interval: settings.gc_interval,
                inventory_interval: settings.inventory_interval,
                listen: SocketAddr::from(([127, 0, 0, 1], 0)),
                // a simulated cluster's devices settle within one inventory interval
                health: HealthConfig {
                    settle: settings.inventory_interval,
                    ..HealthConfig::default()
                },
            };
            let listen_error = |source| LocalError::Listen {
                node: node.name.clone(),
                source,
            };
            let listener = tokio::net::TcpListener::bind(config.listen)
                .await
                .map_err(listen_error)?;
            let admin = listener.local_addr().map_err(listen_error)?;
            let cdi = CdiDir::new(&config.cdi_dir, &settings.driver_name);
            let mut stopped = stopped.clone();
            let task = tokio::spawn(crate::agent::run_on(
                listener,
                config,
                client.cloned(),
                async move {
                    let _ = stopped.wait_for(|s| *s).await;
                },
            ));
            agents.push(Running {
                node: node.name.clone(),
                admin,
                cdi,
                task,
            });
        }
        Ok(LocalAgents { agents, stop })
    }

    /// The admin address of each node's agent.
    pub fn admin_addrs(&self) -> Vec<(&str, SocketAddr)> {
        self.agents
            .iter()
            .map(|a| (a.node.as_str(), a.admin))
            .collect()
    }

    /// The CDI specs of prepared claims on every node now, as (node, claim UID).
    pub fn cdi_specs(&self) -> BTreeSet<(String, String)> {
        self.agents
            .iter()
            .flat_map(|a| {
                a.cdi
                    .list()
                    .unwrap_or_default()
                    .into_iter()
                    .map(|uid| (a.node.clone(), uid))
            })
            .collect()
    }

    /// Where the CDI spec of claim `uid` on `node` is (whether or not it exists).
    pub fn cdi_file(&self, node: &str, uid: &str) -> Option<PathBuf> {
        self.agents
            .iter()
            .find(|a| a.node == node)
            .map(|a| a.cdi.file(uid))
    }

    /// The first node whose agent stopped on its own, if any.
    pub fn stopped_node(&self) -> Option<&str> {
        self.agents
            .iter()
            .find(|a| a.task.is_finished())
            .map(|a| a.node.as_str())
    }

    /// Stops every agent (their sockets are removed) and returns the first failure.
    pub async fn shutdown(self) -> Result<(), LocalError> {
        let _ = self.stop.send(true);
        let mut first = None;
        for agent in self.agents {
            let node = agent.node;
            let failure = match agent.task.await {
                Ok(Ok(())) => None,
                Ok(Err(source)) => Some(LocalError::Agent { node, source }),
                Err(source) => Some(LocalError::Task { node, source }),
            };
            if first.is_none() {
                first = failure;
            }
        }
        first.map_or(Ok(()), Err)
    }
}
