//! Crash test of the agent's prepare path with a real process (`cargo test -p dra-node
//! --features failpoints --test crash`): a child preparing and unpreparing batches of exclusive
//! and shared claims through `JournalPreparer` is killed with SIGKILL, half the time after a
//! random moment and half the time frozen at one of the prepare path's failpoints, and after
//! every kill the journal and CDI directory, recovered as at the agent's start, must hold
//! everything the child acknowledged and nothing half done ([`checks`]).
//!
//! A plain binary (`harness = false`): run with `--crash-child ROOT GENERATION SEED` it is the
//! child ([`child`]), otherwise the parent ([`kill_loop`]). `DRA_NODE_CRASH_KILLS` sets the
//! number of kills (default 24), `DRA_NODE_CRASH_SEED` repeats a run's random choices.

// A failed step fails the test loudly; this binary is no libtest test, so the workspace's
// allowance for unwrap in tests does not reach it.
#![allow(clippy::unwrap_used, missing_docs)]

mod acks;
mod checks;
mod child;
mod child_process;
mod kill_loop;
mod setup;

use std::path::Path;

/// The test's name, for `--list` and name filters as libtest takes them.
const NAME: &str = "crash_kill_loop";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some(child_process::CHILD_ARG) {
        let number = |i: usize| args[i].parse::<u64>().unwrap();
        child::run(Path::new(&args[1]), number(2), number(3));
    }
    if args.iter().any(|a| a == "--list") {
        println!("{NAME}: test");
        return;
    }
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    if args.iter().any(|a| a == "--ignored")
        || !(filters.is_empty() || filters.iter().any(|f| NAME.contains(f.as_str())))
    {
        println!("{NAME}: filtered out");
        return;
    }
    kill_loop::run();
    println!("test {NAME} ... ok");
}
