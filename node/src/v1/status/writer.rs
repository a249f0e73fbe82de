//! The I/O of the device status ([`super`]): [`ClaimStatusApi`], where a claim is read as JSON
//! and its status replaced, and [`StatusReporter`], the claims whose status is to be written,
//! queued by claim UID on the shared work queue, and the workers that write them.
//!
//! A claim queued again while it waits is written once, with what was asked last (prepared or
//! unprepared). Each write reads the claim, asks [`super::plan`] and writes what it says; a
//! conflict (409) reads again at once, up to three times; any other failure is logged, counted
//! in `dra_ledger_node_claim_status_writes_total{outcome="error"}` and retried with [`RETRY`]'s
//! backoff, except a write the API server refuses as invalid (400, 422), which retrying would
//! not change (logged at error). A claim gone meanwhile is done.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dra_runtime::lock::LockExt;
use dra_runtime::workqueue::{Next, RateLimit, WorkQueue};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::chrono::Utc;
use serde_json::Value;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{debug, error, warn};

use super::{plan, OurPool, Plan, Wanted};
use crate::device::Inventory;
use crate::metrics::{NodeMetrics, Outcome};
use crate::prepare::{AllocatedClaim, ClaimRequest};
use crate::v1::{is_conflict, is_not_found};

/// The backoff of a claim whose write failed: 250 ms, doubling up to a minute.
pub const RETRY: RateLimit =
    RateLimit::per_key(Duration::from_millis(250), Duration::from_secs(60));

/// Claims written at once.
const WORKERS: usize = 2;

/// Reads of one write before a conflict goes back to the queue.
const CONFLICT_ATTEMPTS: u32 = 3;

/// Where claims are read and their status written.
#[async_trait::async_trait]
pub trait ClaimStatusApi: Send + Sync + 'static {
    /// The claim `namespace/name` as the API server returns it, `None` when there is none.
    async fn claim(&self, namespace: &str, name: &str) -> kube::Result<Option<Value>>;

    /// Replaces the status of claim `namespace/name` with that of `claim` (`PUT .../status`;
    /// `claim` carries the resourceVersion it was read at, so a claim changed since is a 409).
    async fn replace_status(&self, namespace: &str, name: &str, claim: &Value) -> kube::Result<()>;
}

/// Why the device status of a claim could not be written (this time).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StatusWriteError {
    /// The claim could not be read.
    #[error("reading claim {namespace}/{name}: {source}")]
    Read {
        /// The namespace.
        namespace: String,
        /// The name.
        name: String,
        /// The client's error (boxed: it is large and rare).
        #[source]
        source: Box<kube::Error>,
    },
    /// The status could not be written.
    #[error("writing the device status of claim {namespace}/{name}: {source}")]
    Write {
        /// The namespace.
        namespace: String,
        /// The name.
        name: String,
        /// The client's error.
        #[source]
        source: Box<kube::Error>,
    },
}

/// What is asked of one claim.
#[derive(Clone, Debug)]
struct Pending {
    namespace: String,
    name: String,
    wanted: Wanted,
    /// Which request this is: the entry is dropped after its write only if no newer came.
    serial: u64,
}

struct Shared {
    api: Arc<dyn ClaimStatusApi>,
    pool: OurPool,
    inventory: watch::Receiver<Inventory>,
    metrics: Option<NodeMetrics>,
    queue: WorkQueue<String>,
    pending: Mutex<HashMap<String, Pending>>,
    serial: AtomicU64,
}

/// The claims whose device status is to be written, and the workers writing it. Clones share
/// them.
#[derive(Clone)]
pub struct StatusReporter {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for StatusReporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatusReporter")
            .field("pool", &self.shared.pool)
            .field("queued", &self.shared.queue.len())
            .finish_non_exhaustive()
    }
}

impl StatusReporter {
    /// The reporter of `driver` on node `node`, writing through `api`, the devices' data read
    /// from `inventory`, a failed claim retried after `retry`'s backoff, counted in `metrics`
    /// where given. Nothing is written before [`StatusReporter::start`].
    pub fn new(
        api: Arc<dyn ClaimStatusApi>,
        driver: &str,
        node: &str,
        inventory: watch::Receiver<Inventory>,
        retry: RateLimit,
        metrics: Option<NodeMetrics>,
    ) -> Self {
        StatusReporter {
            shared: Arc::new(Shared {
                api,
                pool: OurPool {
                    driver: driver.to_owned(),
                    node: node.to_owned(),
                },
                inventory,
                metrics,
                queue: WorkQueue::new(retry),
                pending: Mutex::new(HashMap::new()),
                serial: AtomicU64::new(0),
            }),
        }
    }

    /// Starts the workers; they stop at [`StatusReporter::shut_down`] (or when aborted).
    pub fn start(&self) -> Vec<JoinHandle<()>> {
        let shared = Arc::clone(&self.shared);
        self.shared
            .queue
            .spawn_workers(WORKERS, "claim-status", move |uid: String| {
                let shared = Arc::clone(&shared);
                async move { shared.write(&uid).await }
            })
    }

    /// Stops the workers once they finish the claim at hand; what is still queued is dropped.
    pub fn shut_down(&self) {
        self.shared.queue.shut_down();
    }

    /// Queues claim `uid` (`namespace/name`) to say `wanted` of its devices on this node.
    pub fn report(&self, uid: &str, namespace: &str, name: &str, wanted: Wanted) {
        let serial = self.shared.serial.fetch_add(1, Ordering::Relaxed);
        self.shared.pending.lock_or_recover().insert(
            uid.to_owned(),
            Pending {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                wanted,
                serial,
            },
        );
        self.shared.queue.forget(&uid.to_owned());
        self.shared.queue.add(&uid.to_owned());
    }

    /// Queues `claim`, prepared as the CDI devices `cdi_ids`: its devices Ready.
    pub fn prepared(&self, claim: &AllocatedClaim, cdi_ids: &[String]) {
        let wanted = Wanted::Ready {
            devices: claim.devices.clone(),
            cdi_ids: cdi_ids.to_vec(),
        };
        self.report(&claim.uid, &claim.namespace, &claim.name, wanted);
    }

    /// Queues `claim`, unprepared: no entry of ours.
    pub fn unprepared(&self, claim: &ClaimRequest) {
        self.report(&claim.uid, &claim.namespace, &claim.name, Wanted::Cleared);
    }

    /// Whether nothing is queued or being written.
    pub fn is_idle(&self) -> bool {
        self.shared.pending.lock_or_recover().is_empty()
    }
}

impl Shared {
    /// Writes what is asked of claim `uid`; an error sends it back to the queue.
    async fn write(&self, uid: &str) -> Result<Next, StatusWriteError> {
        let Some(pending) = self.pending.lock_or_recover().get(uid).cloned() else {
            return Ok(Next::Done);
        };
        let claim = format!("{}/{}", pending.namespace, pending.name);
        match self.try_write(uid, &pending).await {
            Ok(wrote) => {
                if wrote {
                    self.count(Outcome::Success);
                    debug!(claim.uid = %uid, claim.name = %claim, "Wrote the claim's device status");
                }
                self.settle(uid, pending.serial);
                Ok(Next::Done)
            }
            Err(error) if is_invalid(&error) => {
                self.count(Outcome::Error);
                error!(claim.uid = %uid, claim.name = %claim, %error, "The API server refused the claim's device status; not retried");
                self.settle(uid, pending.serial);
                Ok(Next::Done)
            }
            Err(error) => {
                self.count(Outcome::Error);
                warn!(claim.uid = %uid, claim.name = %claim, %error, "Failed to write the claim's device status; retrying");
                Err(error)
            }
        }
    }

    /// Reads the claim and writes what the plan says; whether it wrote.
    async fn try_write(&self, uid: &str, pending: &Pending) -> Result<bool, StatusWriteError> {
        let (namespace, name) = (pending.namespace.as_str(), pending.name.as_str());
        let mut attempt = 1;
        loop {
            let claim =
                self.api
                    .claim(namespace, name)
                    .await
                    .map_err(|source| StatusWriteError::Read {
                        namespace: namespace.to_owned(),
                        name: name.to_owned(),
                        source: Box::new(source),
                    })?;
            let now = Time(Utc::now());
            let plan = {
                let inventory = self.inventory.borrow();
                plan(
                    claim.as_ref(),
                    uid,
                    &pending.wanted,
                    &self.pool,
                    &inventory,
                    &now,
                )
            };
            let Plan::Write(claim) = plan else {
                return Ok(false);
            };
            match self.api.replace_status(namespace, name, &claim).await {
                Ok(()) => return Ok(true),
                Err(error) if is_not_found(&error) => return Ok(false),
                Err(error) if is_conflict(&error) && attempt < CONFLICT_ATTEMPTS => attempt += 1,
                Err(source) => {
                    return Err(StatusWriteError::Write {
                        namespace: namespace.to_owned(),
                        name: name.to_owned(),
                        source: Box::new(source),
                    })
                }
            }
        }
    }

    /// Drops what was asked of `uid` once written, unless something newer was asked since.
    fn settle(&self, uid: &str, serial: u64) {
        let mut pending = self.pending.lock_or_recover();
        if pending.get(uid).is_some_and(|p| p.serial == serial) {
            pending.remove(uid);
        }
    }

    fn count(&self, outcome: Outcome) {
        if let Some(metrics) = &self.metrics {
            metrics.status_written(outcome);
        }
    }
}

/// Whether the API server refused the write as invalid (400, 422): retrying would not help.
fn is_invalid(error: &StatusWriteError) -> bool {
    let StatusWriteError::Write { source, .. } = error else {
        return false;
    };
    matches!(source.as_ref(), kube::Error::Api(response) if matches!(response.code, 400 | 422))
}
