//! One kubelet batch of claims turned into preparer requests and back: the checks a claim must
//! pass before the preparer sees it, the error of a claim that fails ([`CallError`]) and the
//! answer map with exactly one entry per claim UID of the request. Pure: [`super::calls`] runs
//! the preparer on a batch, the services convert their messages to and from it.

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use tokio::task::JoinError;

use crate::prepare::{ClaimRequest, PrepareError};
use crate::v1::allocation::ClaimError;
use dra_types::kubelet::v1alpha3::Claim;

/// The largest resource handle Kubernetes stores (`ResourceHandleDataMaxSize`, 16 KiB).
pub const RESOURCE_HANDLE_MAX_BYTES: usize = 16 * 1024;

/// Which kind of call a batch is for; prepare checks more than unprepare, which must work for
/// any claim the agent may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    /// `NodePrepareResources`.
    Prepare,
    /// `NodeUnprepareResources`.
    Unprepare,
}

impl Call {
    /// The call's name in log fields and error texts: `prepare` or `unprepare`.
    pub fn as_str(self) -> &'static str {
        match self {
            Call::Prepare => "prepare",
            Call::Unprepare => "unprepare",
        }
    }
}

impl fmt::Display for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why the checks of a batch refused a claim before the preparer saw it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// The request names the claim without its UID.
    #[error("claim {namespace}/{name}: the request gives no claim UID")]
    MissingUid {
        /// The claim's namespace.
        namespace: String,
        /// The claim's name.
        name: String,
    },
    /// The request lists the UID twice with different contents.
    #[error("claim {uid}: listed more than once in one request with different contents")]
    ListedTwice {
        /// The claim UID.
        uid: String,
    },
    /// The resource handle is larger than Kubernetes stores.
    #[error(
        "claim {uid}: resource handle is {size} bytes, more than the \
         {RESOURCE_HANDLE_MAX_BYTES} Kubernetes allows"
    )]
    HandleTooLarge {
        /// The claim UID.
        uid: String,
        /// The handle's size in bytes.
        size: usize,
    },
    /// The claim was allocated with structured parameters, which the controller's handle
    /// replaces on this driver.
    #[error(
        "claim {uid}: allocated with structured parameters, which this driver does not take; \
         its resource class must not set structuredParameters"
    )]
    StructuredHandle {
        /// The claim UID.
        uid: String,
    },
}

/// Why one claim of a kubelet call failed. Its text is the claim's error in the answer, which
/// the kubelet puts in the pod's `FailedPrepareDynamicResources` event, so every variant names
/// the claim.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    /// The batch's checks refused the claim.
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// The v1 claim could not be read, or its allocation asks nothing this node prepares.
    #[error(transparent)]
    Claim(#[from] ClaimError),
    /// The preparer failed the claim.
    #[error(transparent)]
    Prepare(#[from] PrepareError),
    /// The preparer answered without an entry for the claim.
    #[error("claim {uid}: the preparer gave no answer")]
    NoAnswer {
        /// The claim UID.
        uid: String,
    },
    /// The preparer's task panicked or was cancelled before it answered.
    #[error("claim {uid}: {call} did not finish: {source}")]
    NotFinished {
        /// The claim UID.
        uid: String,
        /// The call.
        call: Call,
        /// The task's end, shared by every claim of the batch.
        #[source]
        source: Arc<JoinError>,
    },
}

/// A claim of a batch, known by its UID.
pub trait BatchClaim {
    /// The claim's UID.
    fn uid(&self) -> &str;
}

impl BatchClaim for ClaimRequest {
    fn uid(&self) -> &str {
        &self.uid
    }
}

/// What the preparer answered, one entry per claim UID, or how its task ended without an
/// answer.
pub type PreparerAnswers<R> = Result<Vec<(String, Result<R, PrepareError>)>, Arc<JoinError>>;

/// The claims of a call the preparer is to see, once per UID, and the error of every claim
/// that is answered without it.
#[derive(Debug)]
pub struct Batch<C = ClaimRequest> {
    /// The call the batch is for.
    pub call: Call,
    /// Claims for the preparer, in request order, each UID once.
    pub requests: Vec<C>,
    /// The error by claim UID of the claims refused before the preparer.
    pub refused: BTreeMap<String, CallError>,
}

impl Batch<ClaimRequest> {
    /// Checks every claim of `claims` for `call`. A UID listed twice with the same content is
    /// one claim; listed twice with different content, that UID is refused.
    pub fn new(call: Call, claims: Vec<Claim>) -> Self {
        Self::checked(
            call,
            claims.into_iter().map(|claim| {
                let refusal = check(call, &claim);
                let request = ClaimRequest {
                    uid: claim.uid,
                    namespace: claim.namespace,
                    name: claim.name,
                    resource_handle: claim.resource_handle,
                };
                (request, refusal)
            }),
        )
    }

    /// The batch for `call` of claims named only by UID, namespace and name (the v1 services'
    /// requests, whose `resource_handle` is empty): each UID once, a claim without UID refused,
    /// a UID listed twice with different names refused.
    pub fn of_requests(call: Call, requests: Vec<ClaimRequest>) -> Self {
        Self::checked(
            call,
            requests.into_iter().map(|request| {
                let refusal = missing_uid(&request.uid, &request.namespace, &request.name);
                (request, refusal)
            }),
        )
    }

    /// The batch of `claims`, each with its refusal if the checks refused it.
    fn checked(call: Call, claims: impl Iterator<Item = (ClaimRequest, Option<Refusal>)>) -> Self {
        let mut batch = Batch {
            call,
            requests: Vec::new(),
            refused: BTreeMap::new(),
        };
        let mut seen: BTreeMap<String, ClaimRequest> = BTreeMap::new();
        for (request, refusal) in claims {
            if let Some(refusal) = refusal {
                batch.refused.insert(request.uid, refusal.into());
                continue;
            }
            match seen.entry(request.uid.clone()) {
                Entry::Vacant(vacant) => {
                    vacant.insert(request.clone());
                    batch.requests.push(request);
                }
                Entry::Occupied(first) if *first.get() == request => {}
                Entry::Occupied(_) => {
                    let uid = request.uid;
                    let refusal = Refusal::ListedTwice { uid: uid.clone() };
                    batch.refused.insert(uid, refusal.into());
                }
            }
        }
        // a UID refused once is refused everywhere, also where another copy passed the checks
        batch
            .requests
            .retain(|request| !batch.refused.contains_key(&request.uid));
        batch
    }
}

impl<C: BatchClaim> Batch<C> {
    /// True when nothing is for the preparer.
    pub fn is_empty(&self) -> bool {
        self.requests.is_empty()
    }

    /// The batch with each request replaced by its entry of `results`, one per request in
    /// request order: a request whose entry is an error joins the refused claims with it.
    pub fn narrowed<D, E: Into<CallError>>(self, results: Vec<Result<D, E>>) -> Batch<D> {
        debug_assert_eq!(self.requests.len(), results.len(), "one result per request");
        let mut narrowed = Batch {
            call: self.call,
            requests: Vec::new(),
            refused: self.refused,
        };
        for (request, result) in self.requests.into_iter().zip(results) {
            match result {
                Ok(next) => narrowed.requests.push(next),
                Err(error) => {
                    narrowed
                        .refused
                        .insert(request.uid().to_owned(), error.into());
                }
            }
        }
        narrowed
    }

    /// The answer map: the refused claims' errors, then for every request the preparer's answer
    /// with `done` applied to what it gave, [`CallError::NoAnswer`] where it gave nothing, or
    /// [`CallError::NotFinished`] for every request when its task ended without an answer.
    /// Answers for UIDs not asked about are dropped.
    pub fn answer<R, T>(
        self,
        answers: PreparerAnswers<R>,
        done: impl Fn(&C, R) -> T,
    ) -> BTreeMap<String, Result<T, CallError>> {
        let (mut answers, unfinished) = match answers {
            Ok(answers) => (answers.into_iter().collect::<BTreeMap<_, _>>(), None),
            Err(error) => (BTreeMap::new(), Some(error)),
        };
        let mut out: BTreeMap<String, Result<T, CallError>> = self
            .refused
            .into_iter()
            .map(|(uid, error)| (uid, Err(error)))
            .collect();
        for request in self.requests {
            let uid = request.uid().to_owned();
            let outcome = match (answers.remove(&uid), &unfinished) {
                (Some(answer), _) => answer
                    .map(|given| done(&request, given))
                    .map_err(CallError::from),
                (None, Some(source)) => Err(CallError::NotFinished {
                    uid: uid.clone(),
                    call: self.call,
                    source: Arc::clone(source),
                }),
                (None, None) => Err(CallError::NoAnswer { uid: uid.clone() }),
            };
            out.insert(uid, outcome);
        }
        for uid in answers.keys() {
            tracing::warn!(claim.uid = %uid, "The preparer answered for a claim not in the request");
        }
        out
    }
}

/// Why `claim` cannot go to the preparer for `call`, if it cannot.
fn check(call: Call, claim: &Claim) -> Option<Refusal> {
    if let Some(refusal) = missing_uid(&claim.uid, &claim.namespace, &claim.name) {
        return Some(refusal);
    }
    if call == Call::Unprepare {
        return None;
    }
    let size = claim.resource_handle.len();
    if size > RESOURCE_HANDLE_MAX_BYTES {
        return Some(Refusal::HandleTooLarge {
            uid: claim.uid.clone(),
            size,
        });
    }
    if !claim.structured_resource_handle.is_empty() {
        return Some(Refusal::StructuredHandle {
            uid: claim.uid.clone(),
        });
    }
    None
}

/// The refusal of a claim the request gives no UID for.
fn missing_uid(uid: &str, namespace: &str, name: &str) -> Option<Refusal> {
    uid.is_empty().then(|| Refusal::MissingUid {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
    })
}

#[cfg(test)]
mod tests;
