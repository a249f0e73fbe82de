//! `dra-node`: the node agent, the kubelet DRA plugin that turns an allocation written by the
//! controller into CDI devices a container gets.
//!
//! - [`device`]: a device of this node as discovery reports it (attributes, device nodes, the
//!   environment its CDI edits add), the type every other module speaks;
//! - [`discovery`]: where the inventory comes from (`sysfs`, `file:PATH`, `nvml`);
//! - [`journal`]: the prepare journal in redb, keyed by claim UID, with its schema version;
//! - [`cdi`]: the CDI spec of one claim, written atomically, and the listing of ours;
//! - [`prepare`]: prepare and unprepare of a batch of claims (handle checks, journal, CDI), and
//!   the recovery of half-done entries at start;
//! - [`grpc`]: the kubelet's gRPC services (registration, `v1alpha3.Node`) over Unix sockets;
//! - [`gc`]: which prepared claims the API server shows stale;
//! - [`admin`] and [`metrics`]: the admin HTTP server and the `dra_ledger_node_` metrics;
//! - [`agent`]: all of it composed into the running agent of `dra-ledger node`;
//! - [`local`]: agents for the nodes of a simulated cluster, in one process (demo, tests);
//! - [`modern`]: the `resource.k8s.io/v1` objects of Kubernetes 1.34+ and the node's
//!   `ResourceSlice` built from its inventory.
//!
//! The agent depends on the allocator's model and handle format only: never on the controller,
//! the admin API crate or the simulator.

pub mod admin;
pub mod agent;
pub mod cdi;
pub mod device;
pub mod discovery;
pub mod gc;
pub mod grpc;
pub mod journal;
pub mod local;
pub mod metrics;
pub mod modern;
pub mod prepare;
