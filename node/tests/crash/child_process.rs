//! One child: this test binary started again with `--crash-child`, its stdout and stderr in one
//! pipe (read line by line by `testkit::process::Lines`, so a failure shows the child's panic next
//! to its reports), killed with SIGKILL either a random time after it reported ready or once it
//! reported freezing at its armed failpoint.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use testkit::process::{KillOnDrop, Lines};

use crate::paths::Api;

/// The argument that selects the child role.
pub const CHILD_ARG: &str = "--crash-child";

/// How long a child may take to recover and report ready, or to reach its failpoint, on a
/// loaded machine. Only a stuck or dead child takes that long.
const PATIENCE: Duration = Duration::from_secs(120);

/// How a child is stopped.
pub enum Kill {
    /// SIGKILL once it has worked this long after its ready report.
    After(Duration),
    /// SIGKILL once it froze at this armed failpoint (`name@N`).
    AtFailpoint(String),
}

/// What a killed child left behind.
pub struct Killed {
    /// Every line it printed.
    pub lines: Vec<String>,
    /// The failpoint it froze at, for a kill at one.
    pub failpoint: Option<String>,
}

/// Starts child number `generation` over `root` preparing through `api`, kills it as `kill`
/// says and returns its output.
pub fn run_and_kill(root: &Path, generation: u64, seed: u64, api: Api, kill: &Kill) -> Killed {
    let (reader, writer) = std::io::pipe().unwrap();
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .arg(CHILD_ARG)
        .arg(root)
        .arg(generation.to_string())
        .arg(seed.to_string())
        .arg(api.arg())
        .env_remove(dra_allocator::failpoint::ENV)
        .stdin(Stdio::null())
        .stdout(writer.try_clone().unwrap())
        .stderr(writer);
    if let Kill::AtFailpoint(spec) = kill {
        command.env(dra_allocator::failpoint::ENV, spec);
    }
    let mut child = KillOnDrop(command.spawn().unwrap());
    // The parent's copies of the pipe's write end go, so the reader sees the end at the kill.
    drop(command);
    let mut output = Lines::new(reader);
    output.wait_for(PATIENCE, |line| (line == crate::acks::READY).then_some(()));
    let failpoint = match kill {
        Kill::After(time) => {
            std::thread::sleep(*time);
            None
        }
        Kill::AtFailpoint(_) => Some(output.wait_for(PATIENCE, |line| {
            let rest = line.strip_prefix("FAILPOINT ")?;
            rest.split_whitespace().next().map(str::to_owned)
        })),
    };
    if let Some(status) = child.try_wait().unwrap() {
        output.drain();
        panic!(
            "the child ended by itself ({status}) before its kill:\n{}",
            output.text()
        );
    }
    child.kill().unwrap();
    child.wait().unwrap();
    output.drain();
    Killed {
        lines: output.seen,
        failpoint,
    }
}
