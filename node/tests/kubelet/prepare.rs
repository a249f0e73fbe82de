//! Prepare and unprepare batches: one answer per claim UID, errors inside the answer.

use dra_node::grpc::batch::RESOURCE_HANDLE_MAX_BYTES;
use dra_types::kubelet::v1alpha3::{NodePrepareResourcesRequest, NodeUnprepareResourcesRequest};

use crate::support::{claim, Agent, DRIVER};

const GPU0: &str = r#"{"devices": ["gpu-0"]}"#;
const GPU1: &str = r#"{"devices": ["gpu-1"]}"#;

#[tokio::test]
async fn a_batch_answers_every_claim_with_its_cdi_devices_or_its_own_error() {
    let mut agent = Agent::start();
    let mut node = agent.node().await;
    let request = NodePrepareResourcesRequest {
        claims: vec![
            claim("uid-a", GPU0),
            claim("uid-garbage", "\u{0}not json at all"),
            claim("uid-b", GPU1),
            claim("uid-elsewhere", r#"{"devices": ["gpu-7"]}"#),
        ],
    };
    let answer = node
        .node_prepare_resources(request)
        .await
        .unwrap()
        .into_inner()
        .claims;
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
    let mut node = agent.node().await;
    let prepared = node
        .node_prepare_resources(NodePrepareResourcesRequest::default())
        .await
        .unwrap();
    assert!(prepared.into_inner().claims.is_empty());
    let unprepared = node
        .node_unprepare_resources(NodeUnprepareResourcesRequest::default())
        .await
        .unwrap();
    assert!(unprepared.into_inner().claims.is_empty());
    assert!(agent.preparer.calls().is_empty());
    agent.stop().await.unwrap();
}

#[tokio::test]
async fn an_oversized_handle_fails_that_claim_only_and_never_reaches_the_preparer() {
    let mut agent = Agent::start();
    let mut node = agent.node().await;
    let oversized = format!(
        r#"{{"devices": ["gpu-1"], "pad": "{}"}}"#,
        "x".repeat(RESOURCE_HANDLE_MAX_BYTES)
    );
    let request = NodePrepareResourcesRequest {
        claims: vec![claim("uid-big", &oversized), claim("uid-a", GPU0)],
    };
    let answer = node
        .node_prepare_resources(request)
        .await
        .unwrap()
        .into_inner()
        .claims;
    assert!(
        answer["uid-big"].error.contains("more than the 16384"),
        "{:?}",
        answer["uid-big"]
    );
    assert_eq!(answer["uid-a"].error, "");
    let seen: Vec<_> = agent
        .preparer
        .calls()
        .concat()
        .into_iter()
        .map(|c| c.uid)
        .collect();
    assert_eq!(seen, ["uid-a"]);
    agent.stop().await.unwrap();
}

#[tokio::test]
async fn a_claim_listed_twice_is_prepared_once_and_answered_once() {
    let mut agent = Agent::start();
    let mut node = agent.node().await;
    let request = NodePrepareResourcesRequest {
        claims: vec![
            claim("uid-a", GPU0),
            claim("uid-a", GPU0),
            claim("uid-c", GPU0),
            claim("uid-c", GPU1),
        ],
    };
    let answer = node
        .node_prepare_resources(request)
        .await
        .unwrap()
        .into_inner()
        .claims;
    assert_eq!(answer.len(), 2);
    assert_eq!(answer["uid-a"].error, "");
    assert!(
        answer["uid-c"].error.contains("more than once"),
        "{:?}",
        answer["uid-c"]
    );
    let seen: Vec<_> = agent
        .preparer
        .calls()
        .concat()
        .into_iter()
        .map(|c| c.uid)
        .collect();
    assert_eq!(seen, ["uid-a"]);
    agent.stop().await.unwrap();
}

#[tokio::test]
async fn the_preparer_sees_the_claims_namespace_name_and_handle() {
    let mut agent = Agent::start();
    let mut node = agent.node().await;
    let request = NodePrepareResourcesRequest {
        claims: vec![claim("uid-a", GPU0)],
    };
    node.node_prepare_resources(request).await.unwrap();
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
    let mut node = agent.node().await;
    let request = NodePrepareResourcesRequest {
        claims: vec![claim("uid-a", GPU0)],
    };
    node.node_prepare_resources(request).await.unwrap();
    let request = NodeUnprepareResourcesRequest {
        claims: vec![
            claim("uid-a", GPU0),
            claim("uid-never-seen", ""),
            claim("stuck-1", ""),
        ],
    };
    let answer = node
        .node_unprepare_resources(request)
        .await
        .unwrap()
        .into_inner()
        .claims;
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
