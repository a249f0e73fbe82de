//! One kubelet batch of claims turned into preparer requests and back: the checks a claim must
//! pass before the preparer sees it, and the answer map with exactly one entry per claim UID of
//! the request. Pure; the services around it (`v1alpha3.Node`, the `DRAPlugin`) do the
//! calls.

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;

use crate::prepare::ClaimRequest;
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

/// The claims of a batch the preparer is to see, once per UID, and the error of every claim
/// that was answered without it.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Batch {
    /// Claims for the preparer, in request order, each UID once.
    pub requests: Vec<ClaimRequest>,
    /// Error text by claim UID of the claims refused before the preparer.
    pub refused: BTreeMap<String, String>,
}

impl Batch {
    /// Checks every claim of `claims` for `call`. A UID listed twice with the same content is
    /// one claim; listed twice with different content, that UID is refused.
    pub fn new(call: Call, claims: Vec<Claim>) -> Self {
        Self::checked(claims.into_iter().map(|claim| {
            let refusal = check(call, &claim);
            let request = ClaimRequest {
                uid: claim.uid,
                namespace: claim.namespace,
                name: claim.name,
                resource_handle: claim.resource_handle,
            };
            (request, refusal)
        }))
    }

    /// The batch of claims named only by UID, namespace and name (the v1 services'
    /// requests, whose `resource_handle` is empty): each UID once, a claim without UID refused,
    /// a UID listed twice with different names refused.
    pub fn of_requests(requests: Vec<ClaimRequest>) -> Self {
        Self::checked(requests.into_iter().map(|request| {
            let refusal = missing_uid(&request.uid, &request.namespace, &request.name);
            (request, refusal)
        }))
    }

    /// The batch of `claims`, each with its refusal if the checks refused it.
    fn checked(claims: impl Iterator<Item = (ClaimRequest, Option<String>)>) -> Self {
        let mut batch = Batch::default();
        let mut seen: BTreeMap<String, ClaimRequest> = BTreeMap::new();
        for (request, refusal) in claims {
            if let Some(error) = refusal {
                batch.refused.insert(request.uid, error);
                continue;
            }
            match seen.entry(request.uid.clone()) {
                Entry::Vacant(vacant) => {
                    vacant.insert(request.clone());
                    batch.requests.push(request);
                }
                Entry::Occupied(first) if *first.get() == request => {}
                Entry::Occupied(_) => {
                    batch.refused.insert(
                        request.uid.clone(),
                        format!(
                            "claim {}: listed more than once in one request with different contents",
                            request.uid
                        ),
                    );
                }
            }
        }
        // a UID refused once is refused everywhere, also where another copy passed the checks
        batch
            .requests
            .retain(|request| !batch.refused.contains_key(&request.uid));
        batch
    }

    /// True when nothing is for the preparer.
    pub fn is_empty(&self) -> bool {
        self.requests.is_empty()
    }

    /// The answer map: the refused claims' errors, then for every request its preparer answer,
    /// or `missing` when the preparer gave none. Answers for UIDs not asked about are dropped.
    pub fn answer<T, A>(
        self,
        answers: Vec<(String, A)>,
        missing: impl Fn(&str) -> A,
        reply: impl Fn(A) -> T,
        refused: impl Fn(String) -> T,
    ) -> BTreeMap<String, T> {
        let mut answers: BTreeMap<String, A> = answers.into_iter().collect();
        let mut out: BTreeMap<String, T> = self
            .refused
            .into_iter()
            .map(|(uid, error)| (uid, refused(error)))
            .collect();
        for request in self.requests {
            let answer = answers
                .remove(&request.uid)
                .unwrap_or_else(|| missing(&request.uid));
            out.insert(request.uid, reply(answer));
        }
        for uid in answers.keys() {
            tracing::warn!(claim.uid = %uid, "The preparer answered for a claim not in the request");
        }
        out
    }
}

/// Why `claim` cannot go to the preparer for `call`, if it cannot.
fn check(call: Call, claim: &Claim) -> Option<String> {
    if let Some(error) = missing_uid(&claim.uid, &claim.namespace, &claim.name) {
        return Some(error);
    }
    if call == Call::Unprepare {
        return None;
    }
    let size = claim.resource_handle.len();
    if size > RESOURCE_HANDLE_MAX_BYTES {
        return Some(format!(
            "claim {}: resource handle is {size} bytes, more than the {RESOURCE_HANDLE_MAX_BYTES} Kubernetes allows",
            claim.uid
        ));
    }
    if !claim.structured_resource_handle.is_empty() {
        return Some(format!(
            "claim {}: allocated with structured parameters, which this driver does not take; \
             its resource class must not set structuredParameters",
            claim.uid
        ));
    }
    None
}

/// The refusal of a claim the request gives no UID for.
fn missing_uid(uid: &str, namespace: &str, name: &str) -> Option<String> {
    uid.is_empty()
        .then(|| format!("claim {namespace}/{name}: the request gives no claim UID"))
}

/// An error the kubelet can tell from success: an empty one would read as success.
pub(crate) fn nonempty(error: String) -> String {
    if error.is_empty() {
        "failed without a reason".to_owned()
    } else {
        error
    }
}

/// The answer map as the protobuf messages hold it.
pub(crate) fn to_map<T>(claims: BTreeMap<String, T>) -> std::collections::HashMap<String, T> {
    claims.into_iter().collect()
}

/// Logs each claim's outcome of `call`: done at debug, failed at warn with its error.
pub(crate) fn log_outcome<'a>(call: &str, claims: impl Iterator<Item = (&'a String, &'a str)>) {
    for (uid, error) in claims {
        if error.is_empty() {
            tracing::debug!(claim.uid = %uid, call, "Claim done");
        } else {
            tracing::warn!(claim.uid = %uid, call, %error, "Claim failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dra_types::kubelet::k8s::io::api::resource::v1alpha2::StructuredResourceHandle;

    fn claim(uid: &str, handle: &str) -> Claim {
        Claim {
            namespace: "ns".into(),
            uid: uid.into(),
            name: format!("claim-{uid}"),
            resource_handle: handle.into(),
            structured_resource_handle: Vec::new(),
        }
    }

    #[test]
    fn a_uid_listed_twice_with_the_same_content_is_one_request() {
        let batch = Batch::new(
            Call::Prepare,
            vec![claim("a", "h"), claim("b", "h"), claim("a", "h")],
        );
        let uids: Vec<_> = batch.requests.iter().map(|r| r.uid.as_str()).collect();
        assert_eq!(uids, ["a", "b"]);
        assert!(batch.refused.is_empty());
    }

    #[test]
    fn a_uid_listed_twice_with_different_handles_is_refused_and_not_prepared() {
        let batch = Batch::new(
            Call::Prepare,
            vec![claim("a", "h1"), claim("b", "h"), claim("a", "h2")],
        );
        let uids: Vec<_> = batch.requests.iter().map(|r| r.uid.as_str()).collect();
        assert_eq!(uids, ["b"]);
        assert!(
            batch.refused["a"].contains("more than once"),
            "{:?}",
            batch.refused
        );
    }

    #[test]
    fn an_oversized_handle_refuses_that_claim_for_prepare_only() {
        let big = "x".repeat(RESOURCE_HANDLE_MAX_BYTES + 1);
        let exact = "x".repeat(RESOURCE_HANDLE_MAX_BYTES);
        let batch = Batch::new(
            Call::Prepare,
            vec![claim("big", &big), claim("exact", &exact)],
        );
        assert!(
            batch.refused["big"].contains("16385 bytes"),
            "{:?}",
            batch.refused
        );
        assert_eq!(batch.requests.len(), 1);
        let unprepare = Batch::new(Call::Unprepare, vec![claim("big", &big)]);
        assert!(unprepare.refused.is_empty());
    }

    #[test]
    fn a_structured_handle_is_refused_for_prepare() {
        let mut v1 = claim("s", "");
        v1.structured_resource_handle
            .push(StructuredResourceHandle::default());
        let batch = Batch::new(Call::Prepare, vec![v1]);
        assert!(batch.refused["s"].contains("structured parameters"));
    }

    #[test]
    fn a_v1_batch_takes_each_uid_once_and_refuses_a_uid_under_two_names() {
        let request = |uid: &str, name: &str| ClaimRequest {
            uid: uid.into(),
            namespace: "ns".into(),
            name: name.into(),
            resource_handle: String::new(),
        };
        let batch = Batch::of_requests(vec![
            request("a", "one"),
            request("a", "one"),
            request("b", "two"),
            request("b", "three"),
            request("", "four"),
        ]);
        let uids: Vec<_> = batch.requests.iter().map(|r| r.uid.as_str()).collect();
        assert_eq!(uids, ["a"]);
        assert!(
            batch.refused["b"].contains("more than once"),
            "{:?}",
            batch.refused
        );
        assert_eq!(
            batch.refused[""],
            "claim ns/four: the request gives no claim UID"
        );
    }

    #[test]
    fn the_answer_has_one_entry_per_uid_and_fills_in_what_the_preparer_left_out() {
        let batch = Batch::new(
            Call::Prepare,
            vec![claim("a", "h"), claim("b", "h"), claim("", "h")],
        );
        let answers = vec![("a".to_owned(), Ok(1)), ("stranger".to_owned(), Ok(2))];
        let out = batch.answer(
            answers,
            |uid| Err(format!("no answer for {uid}")),
            |a| a,
            Err,
        );
        assert_eq!(out.len(), 3);
        assert_eq!(out["a"], Ok(1));
        assert_eq!(out["b"], Err("no answer for b".to_owned()));
        assert!(out[""].as_ref().unwrap_err().contains("no claim UID"));
    }
}
