//! Command-line surface of a simulated cluster, shared by `dra-sim` and `dra-ledger sim`:
//! the flags (`SimArgs`) and the run loop (start, write the kubeconfig, print the URL, serve until
//! Ctrl-C or SIGTERM, stop cleanly).
//!
//! Only argument handling and process lifetime; the cluster itself comes from the parent module.

use std::net::SocketAddr;
use std::path::PathBuf;

use super::{
    start_cluster, wait_for_signal, ClusterConfig, Result, DEFAULT_DRIVER_NAME, SHUTDOWN_GRACE,
};
use crate::server::ServerConfig;

/// Flags of a simulated cluster.
#[derive(Debug, Clone, clap::Args)]
pub struct SimArgs {
    /// Address the API server listens on; port 0 picks a free port (the URL is printed).
    #[arg(long, default_value = "127.0.0.1:0", value_name = "ADDR")]
    pub listen: SocketAddr,

    /// Number of nodes to create (named node-0, node-1, ...).
    #[arg(long, default_value_t = 4, value_name = "N")]
    pub nodes: usize,

    /// Devices per node, published as one resource slice per node (0: none).
    #[arg(long, default_value_t = 8, value_name = "N")]
    pub devices_per_node: usize,

    /// DRA driver name written into the resource slices.
    #[arg(long, default_value = DEFAULT_DRIVER_NAME, value_name = "NAME")]
    pub driver_name: String,

    /// Device models (`model` attribute), cycled across nodes.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "H100",
        value_name = "MODEL,..."
    )]
    pub models: Vec<String>,

    /// Device memory sizes as quantities (`memory` attribute), cycled across nodes.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "80Gi",
        value_name = "QUANTITY,..."
    )]
    pub memory: Vec<String>,

    /// NUMA nodes per node; devices are split evenly across them (`numa` attribute).
    #[arg(long, default_value_t = 2, value_name = "N")]
    pub numa_nodes: usize,

    /// Value of the `driverVersion` version attribute of every device.
    #[arg(long, default_value = "1.0.0", value_name = "SEMVER")]
    pub driver_version: String,

    /// Also create a resource class of this name for the driver.
    #[arg(long, value_name = "NAME")]
    pub resource_class: Option<String>,

    /// Write a kubeconfig for kubectl and controllers to this path.
    #[arg(long, value_name = "PATH")]
    pub kubeconfig_out: Option<PathBuf>,
}

impl SimArgs {
    /// The cluster configuration these flags describe.
    pub fn to_config(&self) -> Result<ClusterConfig> {
        let config = ClusterConfig {
            server: ServerConfig {
                addr: self.listen,
                ..ServerConfig::default()
            },
            nodes: self.nodes,
            devices_per_node: self.devices_per_node,
            driver_name: self.driver_name.clone(),
            models: self.models.clone(),
            memory: self.memory.clone(),
            numa_nodes: self.numa_nodes,
            driver_version: self.driver_version.clone(),
            resource_class: self.resource_class.clone(),
            ..ClusterConfig::default()
        };
        config.validate()?;
        Ok(config)
    }
}

/// Runs a simulated cluster until Ctrl-C or SIGTERM: prints the API server URL on stdout and
/// writes the kubeconfig if asked.
pub async fn run(args: &SimArgs) -> Result<()> {
    let config = args.to_config()?;
    let cluster = start_cluster(config).await?;
    if let Some(path) = &args.kubeconfig_out {
        if let Err(error) = cluster.server().write_kubeconfig(path) {
            cluster.shutdown().await;
            return Err(error.into());
        }
        tracing::info!(path = %path.display(), "Wrote kubeconfig");
    }
    println!("{}", cluster.url());
    let waited = wait_for_signal().await;
    tracing::info!("Stopping the simulated cluster");
    if tokio::time::timeout(SHUTDOWN_GRACE, cluster.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("Simulated cluster did not stop in time");
    }
    waited
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        sim: SimArgs,
    }

    fn parse(args: &[&str]) -> SimArgs {
        Cli::try_parse_from(std::iter::once("dra-sim").chain(args.iter().copied()))
            .expect("arguments parse")
            .sim
    }

    #[test]
    fn defaults_describe_a_small_gpu_cluster_on_a_free_loopback_port() {
        let config = parse(&[]).to_config().unwrap();
        assert_eq!(config.server.addr.to_string(), "127.0.0.1:0");
        assert_eq!((config.nodes, config.devices_per_node), (4, 8));
        assert_eq!(config.driver_name, "gpu.dra-ledger.io");
        assert_eq!(config.models, ["H100"]);
        assert_eq!(config.memory, ["80Gi"]);
        assert_eq!(config.resource_class, None);
    }

    #[test]
    fn lists_are_comma_separated() {
        let args = parse(&[
            "--models",
            "H100,A100",
            "--memory",
            "80Gi,40Gi",
            "--listen",
            "127.0.0.1:6443",
        ]);
        let config = args.to_config().unwrap();
        assert_eq!(config.models, ["H100", "A100"]);
        assert_eq!(config.memory, ["80Gi", "40Gi"]);
        assert_eq!(config.server.addr.port(), 6443);
    }

    #[test]
    fn memory_that_is_not_a_quantity_is_rejected_with_its_value() {
        let error = parse(&["--memory", "80GB"]).to_config().unwrap_err();
        assert!(error.to_string().contains("\"80GB\""), "{error}");
    }

    #[test]
    fn zero_numa_nodes_is_rejected() {
        let error = parse(&["--numa-nodes", "0"]).to_config().unwrap_err();
        assert!(error.to_string().contains("numa"), "{error}");
    }
}
