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
        batch.refused["a"].to_string().contains("more than once"),
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
        batch.refused["big"].to_string().contains("16385 bytes"),
        "{:?}",
        batch.refused
    );
    assert_eq!(
        batch.refused["big"].to_string(),
        "claim big: resource handle is 16385 bytes, more than the 16384 Kubernetes allows"
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
    assert!(batch.refused["s"]
        .to_string()
        .contains("structured parameters"));
    assert_eq!(
        batch.refused["s"].to_string(),
        "claim s: allocated with structured parameters, which this driver does not take; \
         its resource class must not set structuredParameters"
    );
}

#[test]
fn a_v1_batch_takes_each_uid_once_and_refuses_a_uid_under_two_names() {
    let request = |uid: &str, name: &str| ClaimRequest {
        uid: uid.into(),
        namespace: "ns".into(),
        name: name.into(),
        resource_handle: String::new(),
    };
    let batch = Batch::of_requests(
        Call::Prepare,
        vec![
            request("a", "one"),
            request("a", "one"),
            request("b", "two"),
            request("b", "three"),
            request("", "four"),
        ],
    );
    let uids: Vec<_> = batch.requests.iter().map(|r| r.uid.as_str()).collect();
    assert_eq!(uids, ["a"]);
    assert!(
        batch.refused["b"].to_string().contains("more than once"),
        "{:?}",
        batch.refused
    );
    assert_eq!(
        batch.refused[""].to_string(),
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
    let out = batch.answer(Ok(answers), |request, given| (request.uid.clone(), given));
    assert_eq!(out.len(), 3);
    assert_eq!(out["a"].as_ref().unwrap(), &("a".to_owned(), 1));
    assert_eq!(
        out["b"].as_ref().unwrap_err().to_string(),
        "claim b: the preparer gave no answer"
    );
    assert!(out[""]
        .as_ref()
        .unwrap_err()
        .to_string()
        .contains("no claim UID"));
}

#[tokio::test]
async fn a_preparer_that_did_not_finish_fails_every_request_with_the_reason() {
    let ended = tokio::spawn(async { panic!("disk on fire") })
        .await
        .unwrap_err();
    let batch = Batch::new(
        Call::Unprepare,
        vec![claim("a", "h"), claim("b", "h"), claim("", "h")],
    );
    let out = batch.answer(
        Err::<Vec<(String, Result<(), _>)>, _>(Arc::new(ended)),
        |_, ()| (),
    );
    for uid in ["a", "b"] {
        let error = out[uid].as_ref().unwrap_err().to_string();
        assert!(
            error.starts_with(&format!("claim {uid}: unprepare did not finish: task ")),
            "{error}"
        );
        assert!(error.contains("disk on fire"), "{error}");
    }
    assert!(matches!(
        out[""],
        Err(CallError::Refused(Refusal::MissingUid { .. }))
    ));
}

#[test]
fn a_narrowed_batch_refuses_the_requests_whose_next_step_failed() {
    let batch = Batch::new(
        Call::Prepare,
        vec![claim("a", "h"), claim("b", "h"), claim("", "h")],
    );
    let results: Vec<Result<&str, Refusal>> = vec![
        Ok("next-a"),
        Err(Refusal::StructuredHandle { uid: "b".into() }),
    ];
    let narrowed = batch.narrowed(results);
    assert_eq!(narrowed.requests, ["next-a"]);
    let refused: Vec<_> = narrowed.refused.keys().map(String::as_str).collect();
    assert_eq!(refused, ["", "b"]);
}
