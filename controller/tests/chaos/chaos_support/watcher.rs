//! A watch of every ResourceClaim, run from the test process for the whole run. After every
//! event it checks, over all claims currently allocated by our driver, that no exclusive device
//! is named twice and no shared device has more claims than `maxConsumers` allows; a violation is
//! recorded with the claims involved. It also counts the allocations it saw (claim UIDs that
//! showed our allocation) and the relists (a dropped watch starts over with a full listing).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::resource::v1alpha2::ResourceClaim;
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client, ResourceExt};
use tokio::task::JoinHandle;

use super::checks::{allocated, device_problems, ClusterClaim};

/// How many violations are kept in full (all are counted).
const KEPT_VIOLATIONS: usize = 50;

/// What the watch saw so far.
#[derive(Debug, Default, Clone)]
pub struct Observed {
    /// Events handled.
    pub events: u64,
    /// Complete listings (the first and one per restarted watch).
    pub relists: u64,
    /// Violations counted.
    pub violations: u64,
    /// The first violations, each with the claims involved.
    pub first_violations: Vec<String>,
    /// Claim UIDs seen allocated by our driver.
    pub allocated_uids: BTreeSet<String>,
    /// Claims allocated now.
    pub allocated_now: usize,
}

/// The running watch.
pub struct ClaimWatcher {
    observed: Arc<Mutex<Observed>>,
    task: JoinHandle<()>,
}

impl ClaimWatcher {
    /// Starts watching every ResourceClaim behind `client`.
    pub fn start(client: &Client) -> ClaimWatcher {
        let observed = Arc::new(Mutex::new(Observed::default()));
        let task = tokio::spawn(watch(client.clone(), observed.clone()));
        ClaimWatcher { observed, task }
    }

    /// A copy of what was seen so far.
    pub fn observed(&self) -> Observed {
        self.observed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Stops the watch; returns what it saw.
    pub fn stop(self) -> Observed {
        self.task.abort();
        self.observed()
    }
}

async fn watch(client: Client, observed: Arc<Mutex<Observed>>) {
    let api = Api::<ResourceClaim>::all(client);
    let stream = watcher(api, watcher::Config::default()).default_backoff();
    tokio::pin!(stream);
    let mut current: BTreeMap<String, ClusterClaim> = BTreeMap::new();
    let mut listing: Option<BTreeMap<String, ClusterClaim>> = None;
    while let Some(event) = stream.next().await {
        let check = match event {
            Ok(watcher::Event::Init) => {
                listing = Some(BTreeMap::new());
                false
            }
            Ok(watcher::Event::InitApply(claim)) => {
                if let (Some(list), Some(held)) = (listing.as_mut(), parse(&claim, &observed)) {
                    list.insert(held.uid.clone(), held);
                }
                false
            }
            Ok(watcher::Event::InitDone) => {
                current = listing.take().unwrap_or_default();
                lock(&observed).relists += 1;
                true
            }
            Ok(watcher::Event::Apply(claim)) => {
                let uid = claim.uid().unwrap_or_default();
                match parse(&claim, &observed) {
                    Some(held) => current.insert(uid, held),
                    None => current.remove(&uid),
                };
                true
            }
            Ok(watcher::Event::Delete(claim)) => {
                current.remove(&claim.uid().unwrap_or_default());
                true
            }
            Err(_) => false,
        };
        if !check {
            continue;
        }
        let problems = device_problems(current.values());
        let mut seen = lock(&observed);
        seen.events += 1;
        seen.allocated_now = current.len();
        seen.allocated_uids.extend(current.keys().cloned());
        for problem in problems {
            seen.violations += 1;
            if seen.first_violations.len() < KEPT_VIOLATIONS {
                seen.first_violations.push(problem);
            }
        }
    }
}

fn lock(observed: &Mutex<Observed>) -> std::sync::MutexGuard<'_, Observed> {
    observed
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The claim when it shows our allocation; unparseable handle data is a violation.
fn parse(claim: &ResourceClaim, observed: &Mutex<Observed>) -> Option<ClusterClaim> {
    match allocated(claim) {
        Ok(held) => held,
        Err(problem) => {
            let mut seen = lock(observed);
            seen.violations += 1;
            if seen.first_violations.len() < KEPT_VIOLATIONS {
                seen.first_violations.push(problem);
            }
            None
        }
    }
}
