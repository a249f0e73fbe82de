//! `dra-node`: the node agent, the kubelet DRA plugin that turns an allocation (the controller's
//! resource handle on Kubernetes 1.30, the scheduler's allocation result on 1.34+) into CDI
//! devices a container gets.
//!
//! - [`device`]: a device of this node as discovery reports it (attributes, device nodes, the
//!   environment its CDI edits add), the type every other module speaks;
//! - [`discovery`]: where the inventory comes from (`sysfs`, `file:PATH`, `nvml`);
//! - [`journal`]: the prepare journal in redb, keyed by claim UID, with its schema version;
//! - [`cdi`]: the CDI spec of one claim, written atomically, and the listing of ours;
//! - [`prepare`]: prepare and unprepare of a batch of claims (handle checks, journal, CDI), and
//!   the recovery of half-done entries at start;
//! - [`grpc`]: the kubelet's gRPC services (registration, the 1.30 `v1alpha3.Node`, the 1.34+
//!   `v1.DRAPlugin` and `v1beta1.DRAPlugin`, the three on one prepare and unprepare path) over
//!   Unix sockets;
//! - [`health`]: the devices' health: its sources (`file`, `sysfs` AER, NVML events), their
//!   debouncing and the health published per device;
//! - [`gc`]: which prepared claims the API server shows stale (v1alpha2 or v1 claims);
//! - [`admin`] and [`metrics`]: the admin HTTP server and the `dra_ledger_node_` metrics;
//! - [`agent`]: all of it composed into the running agent of `dra-ledger node`;
//! - [`check`]: the inventory and health watch of a device source alone (`dra-ledger node
//!   check`);
//! - `local` (only with the `demo` feature): agents for the nodes of a simulated cluster, in
//!   one process (`dra-ledger demo`, the end-to-end tests); not in a product build;
//! - [`v1`]: the `v1` generation (Kubernetes 1.34+, `resource.k8s.io/v1`): the claims read
//!   from the API server and what their allocations ask of this node, our opaque configuration
//!   and the node's `ResourceSlice` the agent publishes.
//!
//! The agent depends on the allocator's model and handle format and on `dra-types` (the DRA API)
//! only: never on the controller, the admin API crate or the simulator.

pub mod admin;
pub mod agent;
pub mod cdi;
pub mod check;
pub mod device;
pub mod discovery;
pub mod gc;
pub mod grpc;
pub mod health;
pub mod journal;
#[cfg(feature = "demo")]
pub mod local;
pub mod metrics;
pub mod prepare;
pub mod v1;
