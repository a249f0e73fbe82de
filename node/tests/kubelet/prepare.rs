//! Prepare and unprepare batches: one answer per claim UID, errors inside the answer.

use crate::support::{claim, Agent, DRIVER};
use dra_node::grpc::batch::RESOURCE_HANDLE_MAX_BYTES;

const GPU0: &str = r#"{"devices": ["gpu-0"]}"#;
const GPU1: &str = r#"{"devices": ["gpu-1"]}"#;

#[tokio::test]
async fn a_batch_answers_every_claim_with_its_cdi_devices_or_its_own_error() {
    let mut agent = Agent::start();
    let answer = agent
        .prepare(vec![
            claim("uid-a", GPU0),
            claim("uid-garbage", "\u{0}not json at all"),
            claim("uid-b", GPU1),
            claim("uid-elsewhere", r#"{"devices": ["gpu-7"]}"#),
        ])
        .await;
    assert_eq!(answer.len(), 4);
    assert_eq!(
        answer["uid-a"].cdi_devices,
        [format!("{DRIVER}/claim=uid-a")]
    );
    assert_eq!(answer["uid-a"].error, "");
    assert_eq!(
        answer["uid-b"].cdi_devices,
        [format!("{DRIVER}/claim=uid-b")]
    );
    assert_eq!(
        answer["uid-garbage"].error,
        "claim uid-garbage: resource handle: not JSON"
    );
    assert!(answer["uid-garbage"].cdi_devices.is_empty());
    assert_eq!(
        answer["uid-elsewhere"].error,
        "claim uid-elsewhere: device gpu-7 is not on this node"
    );
    agent.stop().await.unwrap();
}

#[tokio::test]
async fn an_empty_batch_answers_an_empty_map_without_calling_the_preparer() {
    let mut agent = Agent::start();
    assert!(agent.prepare(Vec::new()).await.is_empty());
    assert!(agent.unprepare(Vec::new()).await.is_empty());
    assert!(agent.preparer.calls().is_empty());
    agent.stop().await.unwrap();
}

#[tokio::test]
async fn an_oversized_handle_fails_that_claim_only_and_never_reaches_the_preparer() {
    let mut agent = Agent::start();
    let oversized = format!(
        r#"{{"devices": ["gpu-1"], "pad": "{}"}}"#,
        "x".repeat(RESOURCE_HANDLE_MAX_BYTES)
    );
    let answer = agent
        .prepare(vec![claim("uid-big", &oversized), claim("uid-a", GPU0)])
        .await;
    assert!(
        answer["uid-big"].error.contains("more than the 16384"),
        "{:?}",
        answer["uid-big"]
    );
    assert_eq!(answer["uid-a"].error, "");
    assert_eq!(agent.preparer.seen_uids(), ["uid-a"]);
    agent.stop().await.unwrap();
}

#[tokio::test]
async fn a_claim_listed_twice_is_prepared_once_and_answered_once() {
    let mut agent = Agent::start();
    let answer = agent
        .prepare(vec![
            claim("uid-a", GPU0),
            claim("uid-a", GPU0),
            claim("uid-c", GPU0),
            claim("uid-c", GPU1),
        ])
        .await;
    assert_eq!(answer.len(), 2);
    assert_eq!(answer["uid-a"].error, "");
    assert!(
        answer["uid-c"].error.contains("more than once"),
        "{:?}",
        answer["uid-c"]
    );
    assert_eq!(agent.preparer.seen_uids(), ["uid-a"]);
    agent.stop().await.unwrap();
}

#[tokio::test]
async fn the_preparer_sees_the_claims_namespace_name_and_handle() {
    let mut agent = Agent::start();
    agent.prepare(vec![claim("uid-a", GPU0)]).await;
    let calls = agent.preparer.calls();
    assert_eq!(calls.len(), 1);
    let seen = &calls[0][0];
    assert_eq!(
        (seen.namespace.as_str(), seen.name.as_str()),
        ("default", "claim-uid-a")
    );
    assert_eq!(seen.resource_handle, GPU0);
    agent.stop().await.unwrap();
}

#[tokio::test]
async fn unprepare_answers_unknown_claims_with_success_and_keeps_errors_with_their_claim() {
    let mut agent = Agent::start();
    agent.prepare(vec![claim("uid-a", GPU0)]).await;
    let answer = agent
        .unprepare(vec![
            claim("uid-a", GPU0),
            claim("uid-never-seen", ""),
            claim("stuck-1", ""),
        ])
        .await;
    assert_eq!(answer.len(), 3);
    assert_eq!(answer["uid-a"].error, "");
    assert_eq!(answer["uid-never-seen"].error, "");
    assert_eq!(
        answer["stuck-1"].error,
        "claim stuck-1: CDI spec: read-only file system"
    );
    assert!(agent.preparer.prepared.lock().unwrap().is_empty());
    agent.stop().await.unwrap();
}
