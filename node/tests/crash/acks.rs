//! The child's reports over stdout and what the parent learns from them. One line per completed
//! call, each ending in ` .` so that a line cut short by the kill is never taken for a report:
//!
//! - `READY .`: recovery is done and the workload starts;
//! - `P <uid> <device,...> <cdi-id,...> .`: a prepare returned these CDI IDs for the claim;
//! - `u <uid> .`: an unprepare of the claim is about to be asked for;
//! - `U <uid> .`: that unprepare returned success.

use std::collections::{BTreeMap, BTreeSet};

/// The line the child prints once it is ready.
pub const READY: &str = "READY .";

/// The report of a prepare of claim `uid`.
pub fn prepared(uid: &str, devices: &[String], cdi_ids: &[String]) -> String {
    format!("P {uid} {} {} .", devices.join(","), cdi_ids.join(","))
}

/// The report of an unprepare of claim `uid` about to be asked for.
pub fn unpreparing(uid: &str) -> String {
    format!("u {uid} .")
}

/// The report of a returned unprepare of claim `uid`.
pub fn unprepared(uid: &str) -> String {
    format!("U {uid} .")
}

/// What a claim was acknowledged with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held {
    /// Its devices.
    pub devices: Vec<String>,
    /// Its CDI IDs.
    pub cdi_ids: Vec<String>,
}

/// Everything the children acknowledged, over all kills.
#[derive(Debug, Default)]
pub struct Acknowledged {
    /// Prepared and not since asked to unprepare: must be present after recovery.
    pub held: BTreeMap<String, Held>,
    /// Unprepared: must be gone after recovery, for good.
    pub gone: BTreeSet<String>,
    /// Every claim acknowledged prepared at least once.
    pub claims: BTreeSet<String>,
    /// Prepare reports (repeats included).
    pub prepares: usize,
    /// Unprepare reports.
    pub unprepares: usize,
}

fn list(text: &str) -> Vec<String> {
    text.split(',').map(str::to_owned).collect()
}

impl Acknowledged {
    /// Takes one line of a child's output; lines that are no report are skipped.
    pub fn take(&mut self, line: &str) {
        let Some(body) = line.strip_suffix(" .") else {
            return;
        };
        match body.split(' ').collect::<Vec<_>>().as_slice() {
            ["P", uid, devices, ids] => {
                let held = Held {
                    devices: list(devices),
                    cdi_ids: list(ids),
                };
                self.held.insert((*uid).to_owned(), held);
                self.claims.insert((*uid).to_owned());
                self.prepares += 1;
            }
            ["u", uid] => {
                self.held.remove(*uid);
            }
            ["U", uid] => {
                self.held.remove(*uid);
                self.gone.insert((*uid).to_owned());
                self.unprepares += 1;
            }
            _ => {}
        }
    }
}
