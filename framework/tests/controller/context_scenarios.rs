//! Upstream scenarios 23-31 (PodSchedulingContexts): the sync of one `schedulingCtx:` key with
//! the scripted driver, asserting the stored claim and context, the driver calls and the result.

use crate::support::{claim_checked_on, failed_event, unversioned, unversioned_context, Harness};
use dra_framework::testing::fixtures::{
    claim, class, context, nodes, pod, ClaimFixture, ContextFixture, PodFixture, CLAIM, NODE,
    OTHER_NODE, POD, POD_CLAIM, POD_UID,
};
use dra_framework::testing::DriverCall;
use dra_framework::SyncOutcome;
use k8s_openapi::api::resource::v1alpha2::PodSchedulingContext;

#[tokio::test]
async fn pod_without_claims_is_rechecked_periodically() {
    let h = Harness::new()
        .with_pod(pod())
        .with_context(context().selected(NODE));
    assert_eq!(h.sync_context().await.unwrap(), SyncOutcome::Periodic);
    assert!(h.driver.calls().is_empty());
    assert_eq!(h.context_writes(), 0);
}

#[tokio::test]
async fn immediate_claim_of_pod_is_ignored() {
    let h = Harness::new()
        .with_class(class())
        .with_claim(claim().immediate())
        .with_pod(pod().with_claim(POD_CLAIM, CLAIM))
        .with_context(context().selected(NODE).potential(&[NODE, OTHER_NODE]));
    assert_eq!(h.sync_context().await.unwrap(), SyncOutcome::Periodic);
    assert!(h.driver.calls().is_empty());
    assert_eq!(h.context_writes(), 0);
    assert_eq!(h.claim_writes(), 0);
}

#[tokio::test]
async fn context_without_nodes_is_done() {
    let h = Harness::delayed_pod().with_context(context());
    assert_eq!(h.sync_context().await.unwrap(), SyncOutcome::Done);
    assert!(h.driver.calls().is_empty());
    assert_eq!(h.context_writes(), 0);
}

#[tokio::test]
async fn potential_nodes_get_unsuitable_report() {
    let h = Harness::delayed_pod().with_context(context().potential(&[NODE, OTHER_NODE]));
    h.driver.set_unsuitable(POD_CLAIM, &[OTHER_NODE]);
    assert_eq!(h.sync_context().await.unwrap(), SyncOutcome::Periodic);
    assert_eq!(
        h.stored_context(),
        unversioned_context(
            context()
                .potential(&[NODE, OTHER_NODE])
                .with_status_entry(POD_CLAIM, &[OTHER_NODE])
        )
    );
    assert!(h.driver.allocate_calls().is_empty());
    assert_eq!(h.stored_claim(CLAIM), unversioned(claim().delayed()));
}

#[tokio::test]
async fn missing_class_fails_the_pod_claim() {
    let h = Harness::new()
        .with_claim(claim().delayed())
        .with_pod(pod().with_claim(POD_CLAIM, CLAIM))
        .with_context(context().selected(NODE).potential(&[NODE, OTHER_NODE]));
    let err = h.sync_context().await.unwrap_err();
    let message = r#"pod claim my-pod-claim: resourceclass.resource.k8s.io "mock-class" not found"#;
    assert_eq!(err.to_string(), message);
    assert_eq!(
        h.events(),
        vec![failed_event("PodSchedulingContext", message)]
    );
    assert_eq!(h.context_writes(), 0);
}

#[tokio::test]
async fn selected_node_gets_allocation_reserved_for_pod() {
    let h = Harness::selected_node_fits();
    assert_eq!(h.sync_context().await.unwrap(), SyncOutcome::Periodic);
    assert_eq!(
        h.driver.allocate_calls(),
        vec![DriverCall::Allocate {
            claims: vec![CLAIM.into()],
            selected_node: Some(NODE.into()),
            parameters: vec![("class:mock-class".into(), "claim:claim".into())],
        }]
    );
    assert_eq!(
        h.stored_claim(CLAIM),
        unversioned(
            claim()
                .delayed()
                .with_finalizer()
                .allocated(h.driver.allocation_for(Some(NODE)))
                .reserved_for(POD, POD_UID)
        )
    );
    // Upstream's scenario also writes the report ([worker-2]) here. With every claim allocated
    // none is pending and the scheduler reads no entry, so the write is left out.
    assert_eq!(h.context_writes(), 0);
    assert_eq!(
        h.stored_context(),
        unversioned_context(context().selected(NODE).potential(&[NODE, OTHER_NODE]))
    );
}

#[tokio::test]
async fn unsuitable_selected_node_is_not_allocated() {
    let h = Harness::delayed_pod().with_context(context().selected(NODE).potential(&[NODE]));
    h.driver.set_unsuitable(POD_CLAIM, &[NODE]);
    assert_eq!(h.sync_context().await.unwrap(), SyncOutcome::Periodic);
    assert!(h.driver.allocate_calls().is_empty());
    assert_eq!(h.stored_claim(CLAIM), unversioned(claim().delayed()));
    assert_eq!(
        h.stored_context(),
        unversioned_context(
            context()
                .selected(NODE)
                .potential(&[NODE])
                .with_status_entry(POD_CLAIM, &[NODE])
        )
    );
}

/// The context of [`Harness::truncation`] as written with `reported` unsuitable.
fn truncated_report(reported: &[String]) -> PodSchedulingContext {
    unversioned_context(
        context()
            .selected(NODE)
            .potential(&nodes(128))
            .with_status_entry(POD_CLAIM, reported),
    )
}

#[tokio::test]
async fn long_unsuitable_list_drops_first_node() {
    let mut unsuitable = nodes(128);
    unsuitable.push(NODE.into());
    let h = Harness::truncation(&unsuitable);
    assert_eq!(h.sync_context().await.unwrap(), SyncOutcome::Periodic);
    // The selected node is a candidate although it is not a potential node.
    let mut candidates = nodes(128);
    candidates.push(NODE.into());
    assert_eq!(h.unsuitable_calls(), vec![claim_checked_on(&candidates)]);
    assert!(h.driver.allocate_calls().is_empty());
    assert_eq!(h.stored_context(), truncated_report(&unsuitable[1..]));
}

#[tokio::test]
async fn long_unsuitable_list_starting_with_selected_node_drops_last_node() {
    let mut unsuitable = vec![NODE.to_owned()];
    unsuitable.extend(nodes(128));
    let h = Harness::truncation(&unsuitable);
    assert_eq!(h.sync_context().await.unwrap(), SyncOutcome::Periodic);
    assert!(h.driver.allocate_calls().is_empty());
    assert_eq!(h.stored_context(), truncated_report(&unsuitable[..128]));
}
