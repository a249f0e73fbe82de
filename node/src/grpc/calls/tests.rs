use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;
use crate::prepare::{AllocatedClaim, ClaimRequest};

/// Answers every claim but `silent`, fails `bad`, panics on `panic`; counts its calls.
#[derive(Default)]
struct Scripted {
    calls: AtomicUsize,
}

impl Scripted {
    fn answer<R>(&self, claims: &[ClaimRequest], ok: impl Fn(&str) -> R) -> Answers<R> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        assert!(
            claims.iter().all(|c| c.uid != "panic"),
            "the preparer's disk is on fire"
        );
        claims
            .iter()
            .filter(|c| c.uid != "silent")
            .map(|c| {
                let answer = match c.uid.as_str() {
                    "bad" => Err(PrepareError::UnknownDevice {
                        uid: c.uid.clone(),
                        device: "gpu-9".into(),
                    }),
                    uid => Ok(ok(uid)),
                };
                (c.uid.clone(), answer)
            })
            .collect()
    }
}

type Answers<R> = Vec<(String, Result<R, PrepareError>)>;

impl ClaimPreparer for Scripted {
    fn prepare(&self, claims: &[ClaimRequest]) -> Answers<Vec<String>> {
        self.answer(claims, |uid| vec![format!("vendor/class={uid}")])
    }

    fn prepare_allocated(&self, _: &[AllocatedClaim]) -> Answers<Vec<String>> {
        unreachable!("the tests prepare requests")
    }

    fn unprepare(&self, claims: &[ClaimRequest]) -> Answers<()> {
        self.answer(claims, |_| ())
    }
}

fn request(uid: &str) -> ClaimRequest {
    ClaimRequest {
        uid: uid.into(),
        namespace: "ns".into(),
        name: format!("claim-{uid}"),
        resource_handle: String::new(),
    }
}

fn batch(call: Call, uids: &[&str]) -> Batch {
    Batch::of_requests(call, uids.iter().map(|uid| request(uid)).collect())
}

fn error<T>(outcomes: &BTreeMap<String, Outcome<T>>, uid: &str) -> String {
    outcomes[uid]
        .as_ref()
        .err()
        .map(ToString::to_string)
        .unwrap_or_default()
}

#[tokio::test]
async fn every_claim_gets_its_answer_its_error_or_the_missing_answer() {
    let preparer = Arc::new(Scripted::default());
    let batch = batch(Call::Prepare, &["good", "bad", "silent", ""]);
    let outcomes = run(&preparer, batch, Scripted::prepare, |request, ids| {
        (request.name.clone(), ids)
    })
    .await;
    assert_eq!(outcomes.len(), 4);
    let (name, ids) = outcomes["good"].as_ref().unwrap();
    assert_eq!(
        (name.as_str(), ids.as_slice()),
        ("claim-good", &["vendor/class=good".to_owned()][..])
    );
    assert_eq!(
        error(&outcomes, "bad"),
        "claim bad: device gpu-9 is not on this node"
    );
    assert_eq!(
        error(&outcomes, "silent"),
        "claim silent: the preparer gave no answer"
    );
    assert_eq!(
        error(&outcomes, ""),
        "claim ns/claim-: the request gives no claim UID"
    );
    assert_eq!(error(&outcomes, "good"), "");
}

#[tokio::test]
async fn a_preparer_that_panics_fails_each_claim_as_not_finished() {
    let preparer = Arc::new(Scripted::default());
    let batch = batch(Call::Unprepare, &["panic", "other"]);
    let outcomes = run(&preparer, batch, Scripted::unprepare, |_, ()| ()).await;
    for uid in ["panic", "other"] {
        let text = error(&outcomes, uid);
        assert!(
            text.starts_with(&format!("claim {uid}: unprepare did not finish: task ")),
            "{text}"
        );
        assert!(text.contains("the preparer's disk is on fire"), "{text}");
        let source = std::error::Error::source(outcomes[uid].as_ref().unwrap_err());
        assert!(source.is_some(), "the task's end is the cause");
    }
}

#[tokio::test]
async fn a_batch_the_checks_emptied_never_reaches_the_preparer() {
    let preparer = Arc::new(Scripted::default());
    let outcomes = run(
        &preparer,
        batch(Call::Prepare, &[""]),
        Scripted::prepare,
        |_, ids| ids,
    )
    .await;
    assert_eq!(preparer.calls.load(Ordering::SeqCst), 0);
    assert!(error(&outcomes, "").contains("no claim UID"));
    let outcomes = run(
        &preparer,
        batch(Call::Prepare, &[]),
        Scripted::prepare,
        |_, ids| ids,
    )
    .await;
    assert!(outcomes.is_empty());
    assert_eq!(preparer.calls.load(Ordering::SeqCst), 0);
}
