//! Rules beyond the upstream scenarios: pod claims from templates, ownership, classes of other
//! drivers, parameter and driver failures, write failures, reservedFor and deletion of reserved
//! claims.

use crate::support::{failed_event, unversioned, Harness};
use dra_framework::testing::fixtures::{
    claim, class, context, pod, ClaimFixture, ClassFixture, ContextFixture, PodFixture, CLAIM,
    NODE, OTHER_CLASS, POD, POD_CLAIM, POD_UID,
};
use dra_framework::testing::Operation;
use dra_framework::{ControllerConfig, KubeCallErrorKind, SyncOutcome};

#[tokio::test]
async fn context_not_controlled_by_pod_is_ignored() {
    let mut ctx = context().potential(&[NODE]);
    ctx.metadata.owner_references = None;
    let h = Harness::delayed_pod().with_context(ctx);
    assert_eq!(h.sync_context().await.unwrap(), SyncOutcome::Done);
    assert!(h.driver.calls().is_empty());
}

#[tokio::test]
async fn pod_claims_are_allocated_together_and_failures_joined() {
    let h = Harness::new()
        .with_class(class())
        .with_claim(claim().named("a").delayed())
        .with_claim(claim().named("b").delayed())
        .with_claim(claim().named("c").delayed())
        .with_pod(
            pod()
                .with_claim("pa", "a")
                .with_claim("pb", "b")
                .with_claim("pc", "c"),
        )
        .with_context(context().selected(NODE).potential(&[NODE]));
    h.driver.fail_allocate("b", "no device");
    h.driver.fail_allocate("c", "no numa");
    let err = h.sync_context().await.unwrap_err();
    assert_eq!(err.to_string(), "claim b: no device\nclaim c: no numa");
    assert_eq!(h.driver.allocate_calls().len(), 1, "one batch for the pod");
    let a = h.stored_claim("a");
    assert!(a.status.unwrap().allocation.is_some());
    let entries = h.stored_context().status.unwrap().resource_claims.unwrap();
    assert_eq!(entries.len(), 3, "an entry for every pending claim");
}

#[tokio::test]
async fn template_claim_not_created_yet_is_retried_quietly() {
    let h = Harness::new()
        .with_class(class())
        .with_pod(pod().with_template_claim(POD_CLAIM, None))
        .with_context(context().potential(&[NODE]));
    let err = h.sync_context().await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "pod claim my-pod-claim: ResourceClaim not created yet"
    );
    assert!(err.is_passing());
    assert!(h.events().is_empty(), "{:?}", h.events());
    assert_eq!(
        h.context_requeues(),
        1,
        "retried with the key's own backoff"
    );
}

#[tokio::test]
async fn template_claim_must_be_owned_by_pod() {
    let h = Harness::new()
        .with_class(class())
        .with_claim(claim().named("pod-my-pod-claim-x").delayed())
        .with_pod(pod().with_template_claim(POD_CLAIM, Some("pod-my-pod-claim-x")))
        .with_context(context().selected(NODE).potential(&[NODE]));
    let err = h.sync_context().await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "pod claim my-pod-claim: ResourceClaim pod-my-pod-claim-x was not created for pod pod (pod is not owner)"
    );
    assert!(h.driver.allocate_calls().is_empty());
}

#[tokio::test]
async fn template_claim_owned_by_pod_is_allocated() {
    let h = Harness::new()
        .with_class(class())
        .with_claim(claim().named("pod-my-pod-claim-x").delayed().owned_by_pod())
        .with_pod(pod().with_template_claim(POD_CLAIM, Some("pod-my-pod-claim-x")))
        .with_context(context().selected(NODE).potential(&[NODE]));
    assert_eq!(h.sync_context().await.unwrap(), SyncOutcome::Periodic);
    let stored = h.stored_claim("pod-my-pod-claim-x");
    let status = stored.status.unwrap();
    assert!(status.allocation.is_some());
    assert_eq!(status.reserved_for.unwrap()[0].uid, POD_UID);
}

#[tokio::test]
async fn claim_parameter_failure_on_pod_path_is_reported_on_claim_and_context() {
    let h = Harness::delayed_pod().with_context(context().potential(&[NODE]));
    h.driver
        .set_claim_parameters_error(Some("count 0 out of range"));
    let err = h.sync_context().await.unwrap_err();
    let message = "pod claim my-pod-claim: claim parameters <none>: count 0 out of range";
    assert_eq!(err.to_string(), message);
    assert_eq!(
        h.events(),
        vec![
            failed_event("ResourceClaim", "count 0 out of range"),
            failed_event("PodSchedulingContext", message),
        ]
    );
}

#[tokio::test]
async fn driver_returning_nothing_is_an_error() {
    let h = Harness::new()
        .with_class(class())
        .with_claim(claim().immediate());
    h.driver.set_allocate_nothing(true);
    let err = h.sync_claim(CLAIM).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "allocate: allocating claim: missing allocation from driver"
    );
}

#[tokio::test]
async fn finalizer_failure_skips_driver_allocate() {
    let h = Harness::new()
        .with_class(class())
        .with_claim(claim().immediate());
    h.api.fail_next(
        Operation::UpdateClaim,
        KubeCallErrorKind::Conflict,
        "conflict",
    );
    let err = h.sync_claim(CLAIM).await.unwrap_err();
    assert_eq!(err.to_string(), "allocate: add finalizer: conflict");
    assert!(h.driver.allocate_calls().is_empty());
    assert_eq!(h.stored_claim(CLAIM), unversioned(claim().immediate()));
}

#[tokio::test]
async fn allocation_status_write_failure_is_reported() {
    let h = Harness::new()
        .with_class(class())
        .with_claim(claim().immediate());
    h.api.fail_next(
        Operation::UpdateClaimStatus,
        KubeCallErrorKind::Other,
        "timeout",
    );
    let err = h.sync_claim(CLAIM).await.unwrap_err();
    assert_eq!(err.to_string(), "allocate: add allocation: timeout");
    // The finalizer stays, so a later Deallocate can free what the driver reserved.
    assert_eq!(
        h.stored_claim(CLAIM),
        unversioned(claim().immediate().with_finalizer())
    );
}

#[tokio::test]
async fn reserved_claim_is_not_deallocated_even_when_deleted() {
    let c = claim()
        .delayed()
        .with_finalizer()
        .allocated(dra_framework::testing::fixtures::allocation())
        .reserved_for(POD, POD_UID)
        .deleted();
    let h = Harness::new().with_class(class()).with_claim(c.clone());
    assert_eq!(h.sync_claim(CLAIM).await.unwrap(), SyncOutcome::Done);
    assert!(h.driver.calls().is_empty());
    assert_eq!(h.stored_claim(CLAIM), unversioned(c));
}

#[tokio::test]
async fn reserved_for_is_not_set_when_disabled() {
    let h = Harness::with_config(ControllerConfig {
        set_reserved_for: false,
        ..ControllerConfig::default()
    })
    .with_class(class())
    .with_claim(claim().delayed())
    .with_pod(pod().with_claim(POD_CLAIM, CLAIM))
    .with_context(context().selected(NODE).potential(&[NODE]));
    assert_eq!(h.sync_context().await.unwrap(), SyncOutcome::Periodic);
    let status = h.stored_claim(CLAIM).status.unwrap();
    assert!(status.allocation.is_some());
    assert!(status.reserved_for.is_none());
}

#[tokio::test]
async fn claim_of_class_of_another_driver_is_skipped_in_pod() {
    let h = Harness::new()
        .with_class(class().named(OTHER_CLASS).of_driver("other-driver"))
        .with_class(class())
        .with_claim(claim().delayed().in_class(OTHER_CLASS))
        .with_pod(pod().with_claim(POD_CLAIM, CLAIM))
        .with_context(context().selected(NODE).potential(&[NODE]));
    assert_eq!(h.sync_context().await.unwrap(), SyncOutcome::Periodic);
    assert!(h.driver.calls().is_empty());
    assert_eq!(h.context_writes(), 0);
}
