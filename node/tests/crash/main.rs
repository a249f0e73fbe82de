//! Crash test of the agent's prepare path with a real process (`cargo test -p dra-node
//! --features failpoints --test crash`): a child preparing and unpreparing batches of exclusive
//! and shared claims is killed with SIGKILL, half the time after a random moment and half the
//! time frozen at one of the prepare path's failpoints, and after every kill the journal and CDI
//! directory, recovered as at the agent's start, must hold everything the child acknowledged and
//! nothing half done ([`checks`]). Two tests: `crash_kill_loop` prepares through
//! `JournalPreparer` with resource handles (Kubernetes 1.30), `crash_kill_loop_v1` through the
//! `v1.DRAPlugin` service over claims read from a claim source (1.34+), with the same kills at
//! the same failpoints ([`paths`]); `crash_two_shares_v1` kills the agent between the prepares
//! of two claims sharing one device and at each step of the second ([`shares`]).
//!
//! A plain binary (`harness = false`): run with `--crash-child ROOT GENERATION SEED API` it is
//! the child ([`child`]), otherwise the parent ([`kill_loop`]). `DRA_NODE_CRASH_KILLS` sets the
//! number of kills per test (default 24), `DRA_NODE_CRASH_SEED` repeats a run's random choices.

// A failed step fails the test loudly; this binary is no libtest test, so the workspace's
// allowance for unwrap in tests does not reach it.
#![allow(clippy::unwrap_used, missing_docs)]

mod acks;
mod checks;
mod child;
mod child_process;
mod kill_loop;
#[path = "../common/opaque.rs"]
mod opaque;
mod paths;
mod setup;
mod shares;

use std::path::Path;

use paths::Api;

/// The tests' names, for `--list` and name filters as libtest takes them, with their paths.
const TESTS: [(&str, Api); 3] = [
    ("crash_kill_loop", Api::Handles),
    ("crash_kill_loop_v1", Api::V1),
    ("crash_two_shares_v1", Api::V1Shares),
];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some(child_process::CHILD_ARG) {
        let number = |i: usize| args[i].parse::<u64>().unwrap();
        if Api::from_arg(&args[4]) == Api::V1Shares {
            shares::child(Path::new(&args[1]));
        }
        child::run(
            Path::new(&args[1]),
            number(2),
            number(3),
            Api::from_arg(&args[4]),
        );
    }
    if args.iter().any(|a| a == "--list") {
        for (name, _) in TESTS {
            println!("{name}: test");
        }
        return;
    }
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let exact = args.iter().any(|a| a == "--exact");
    for (name, api) in TESTS {
        let chosen = filters.is_empty()
            || filters.iter().any(|f| {
                if exact {
                    name == f.as_str()
                } else {
                    name.contains(f.as_str())
                }
            });
        if args.iter().any(|a| a == "--ignored") || !chosen {
            println!("{name}: filtered out");
            continue;
        }
        match api {
            Api::V1Shares => shares::run(),
            Api::Handles | Api::V1 => kill_loop::run(api),
        }
        println!("test {name} ... ok");
    }
}
