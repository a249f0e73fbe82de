//! The inventory flags of a simulated cluster, one definition for every command that starts
//! one (`dra-sim`, `dra-ledger sim` and `dra-ledger demo` flatten [`InventoryArgs`]): the
//! driver name and the devices' models, memory and NUMA nodes.
//!
//! A command that wants other defaults changes them where it flattens the flags (clap's
//! `mut_arg`); the flags, their grammar and their checks stay here. Only argument handling: the
//! inventory itself comes from `cluster::inventory`.

use std::str::FromStr;

use super::super::{ClusterConfig, DEFAULT_DRIVER_NAME};

/// The flags that describe a simulated node's devices and their driver.
#[derive(Debug, Clone, clap::Args)]
pub struct InventoryArgs {
    /// DRA driver name of the devices: in the resource slices, the classes and (with node
    /// agents) the agents' sockets and handles.
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

    /// NUMA nodes per node; devices are split evenly across them (`numa` attribute). `auto`:
    /// 2 when a node has an even number of devices, at least 4, else 1.
    #[arg(long, default_value = "2", value_name = "N|auto")]
    pub numa_nodes: NumaNodes,
}

/// How many NUMA nodes a simulated node has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumaNodes {
    /// This many.
    Count(usize),
    /// 2 when a node has an even number of devices, at least 4, else 1: room for pairs of
    /// devices on one NUMA node.
    Auto,
}

impl NumaNodes {
    /// The count for nodes of `devices_per_node` devices.
    pub fn count(self, devices_per_node: usize) -> usize {
        match self {
            NumaNodes::Count(count) => count,
            NumaNodes::Auto if devices_per_node >= 4 && devices_per_node.is_multiple_of(2) => 2,
            NumaNodes::Auto => 1,
        }
    }
}

/// A `--numa-nodes` value that is neither a count nor `auto`.
#[derive(Debug, thiserror::Error)]
#[error("{0:?} is neither a number of NUMA nodes nor auto")]
pub struct NumaNodesError(String);

impl FromStr for NumaNodes {
    type Err = NumaNodesError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text == "auto" {
            return Ok(NumaNodes::Auto);
        }
        text.parse()
            .map(NumaNodes::Count)
            .map_err(|_| NumaNodesError(text.to_owned()))
    }
}

impl InventoryArgs {
    /// Writes the driver name and the inventory into `config`, whose `devices_per_node` is set
    /// already; `ClusterConfig::validate` checks them.
    pub fn apply(&self, config: &mut ClusterConfig) {
        config.driver_name.clone_from(&self.driver_name);
        config.models.clone_from(&self.models);
        config.memory.clone_from(&self.memory);
        config.numa_nodes = self.numa_nodes.count(config.devices_per_node);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numa_nodes_are_a_count_or_auto_which_pairs_devices_where_it_can() {
        assert_eq!("3".parse::<NumaNodes>().unwrap(), NumaNodes::Count(3));
        assert_eq!("auto".parse::<NumaNodes>().unwrap(), NumaNodes::Auto);
        let error = "two".parse::<NumaNodes>().unwrap_err().to_string();
        assert!(error.contains("\"two\""), "{error}");
        let counts: Vec<usize> = [1, 2, 3, 4, 6, 7, 8]
            .iter()
            .map(|&devices| NumaNodes::Auto.count(devices))
            .collect();
        assert_eq!(counts, [1, 1, 1, 2, 2, 1, 2]);
        assert_eq!(NumaNodes::Count(3).count(8), 3);
    }
}
