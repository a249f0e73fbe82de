//! The built `dra-ledger` binary as a user runs it: its commands and flags, `demo`, `run` against
//! `dra-ledger sim`, leader election between processes, admin answers from the leader across
//! replicas, the ledger tools and bad ledger files, the node agent (also killed and started
//! again), the admin command, the device page in headless Chromium, the admin token's absence
//! from logs, schemathesis against the admin API, and the dashboards and alert rules
//! (statically and against a real Prometheus).

// Test code unwraps: a failed step should fail the test loudly.
#![allow(clippy::unwrap_used)]

mod cli_support;
mod dashboards_support;

mod admin;
mod admin_history;
mod basics;
mod dashboards_health_rules;
mod dashboards_idle_rules;
mod dashboards_prometheus;
mod dashboards_static;
mod demo;
mod leader;
mod ledger;
mod ledger_files;
mod node;
mod node_restart;
mod page;
mod replicas;
mod run;
mod schemathesis;
mod token_logging;
