//! `dra-runtime`: the controller runtime every loop of the workspace shares, defined once: the
//! v1alpha2 framework, the v1 mirror, the node agent and the simulator's actors.
//!
//! - [`workqueue`]: the deduplicating, rate-limited work queue and its worker loops;
//! - [`informer`]: a watch feeding a reflector store and a change handler;
//! - [`events`]: posting `events.k8s.io/v1` events about objects;
//! - [`lock`]: the one policy for poisoned locks;
//! - [`process`]: the stop signals, the shutdown grace and the duration grammar of every command.
//!
//! Owns no DRA semantics and depends on no other crate of the workspace.

pub mod events;
pub mod informer;
pub mod lock;
pub mod process;
pub mod workqueue;
