//! Behaviour beyond the upstream scenarios: the mutation cache, the improvements of protocol
//! reference section 6, the pod-claim rules and write failures.

mod framework_support;

use dra_controller::framework::testing::fixtures::{
    claim, class, context, nodes, pod, ClaimFixture, ClassFixture, ContextFixture, PodFixture,
    CLAIM, NAMESPACE, NODE, OTHER_CLASS, OTHER_NODE, POD, POD_CLAIM, POD_UID,
};
use dra_controller::framework::testing::{DriverCall, Operation};
use dra_controller::framework::{
    claim_key, scheduling_context_key, ApiErrorKind, ControllerConfig, SyncOutcome,
};
use framework_support::{failed_event, unversioned, unversioned_context, CachesExt, Harness};

fn unsuitable_calls(h: &Harness) -> Vec<DriverCall> {
    h.driver
        .calls()
        .into_iter()
        .filter(|c| matches!(c, DriverCall::UnsuitableNodes { .. }))
        .collect()
}

fn delayed_pod_harness() -> Harness {
    Harness::new()
        .with_class(class())
        .with_claim(claim().delayed())
        .with_pod(pod().with_claim(POD_CLAIM, CLAIM))
}

#[tokio::test]
async fn stale_watched_copy_does_not_trigger_second_allocation() {
    let h = Harness::new()
        .with_class(class())
        .with_claim(claim().immediate());
    assert_eq!(h.sync_claim(CLAIM).await, Ok(SyncOutcome::Done));
    // The watch has not delivered our writes yet: the cache still holds the unallocated claim.
    assert!(h.caches.claim_is_unallocated(CLAIM));
    assert_eq!(h.sync_claim(CLAIM).await, Ok(SyncOutcome::Done));
    assert_eq!(h.driver.allocate_calls().len(), 1);
    assert!(h.events().is_empty(), "no conflict: {:?}", h.events());
}

#[tokio::test]
async fn class_change_requeues_claims_of_that_class_only() {
    let h = Harness::new()
        .with_claim(claim().immediate())
        .with_claim(claim().named("b").immediate())
        .with_claim(claim().named("c").immediate().in_class(OTHER_CLASS));
    h.controller.class_changed(&class());
    assert_eq!(h.controller.queue().len(), 2);
    h.controller
        .class_changed(&class().named(OTHER_CLASS).of_driver("other-driver"));
    assert_eq!(h.controller.queue().len(), 2);
    let mut keys = vec![
        h.controller.queue().get().await.unwrap(),
        h.controller.queue().get().await.unwrap(),
    ];
    keys.sort();
    assert_eq!(
        keys,
        vec![claim_key(NAMESPACE, "b"), claim_key(NAMESPACE, CLAIM)]
    );
}

#[tokio::test]
async fn fixed_class_parameters_are_used_after_class_change() {
    let h = Harness::new()
        .with_class(class())
        .with_claim(claim().immediate());
    h.driver.set_class_parameters_error(Some("bad selector"));
    let err = h.sync_claim(CLAIM).await.unwrap_err();
    assert_eq!(err.to_string(), "class parameters <none>: bad selector");
    // The class gets an event as well as the claim.
    assert_eq!(
        h.events(),
        vec![
            failed_event("ResourceClass", "bad selector"),
            failed_event("ResourceClaim", "class parameters <none>: bad selector"),
        ]
    );
    h.driver.set_class_parameters_error(None);
    h.controller.class_changed(&class());
    let key = h.controller.queue().get().await.unwrap();
    assert_eq!(h.controller.sync(&key).await, Ok(SyncOutcome::Done));
    assert_eq!(h.driver.allocate_calls().len(), 1);
}

#[tokio::test]
async fn pod_change_requeues_its_scheduling_context() {
    let h = delayed_pod_harness();
    h.controller.pod_changed(&pod());
    assert!(h.controller.queue().is_empty(), "no context yet");
    let h = h.with_context(context().potential(&[NODE]));
    h.controller.pod_changed(&pod());
    assert_eq!(
        h.controller.queue().get().await,
        Some(scheduling_context_key(NAMESPACE, POD))
    );
}

#[tokio::test]
async fn context_waits_for_pod_in_cache() {
    let h = Harness::new()
        .with_class(class())
        .with_claim(claim().delayed())
        .with_context(context().potential(&[NODE]));
    assert_eq!(h.sync_context().await, Ok(SyncOutcome::Done));
    assert!(h.driver.calls().is_empty());
}

#[tokio::test]
async fn context_not_controlled_by_pod_is_ignored() {
    let mut ctx = context().potential(&[NODE]);
    ctx.metadata.owner_references = None;
    let h = delayed_pod_harness().with_context(ctx);
    assert_eq!(h.sync_context().await, Ok(SyncOutcome::Done));
    assert!(h.driver.calls().is_empty());
}

#[tokio::test]
async fn other_drivers_status_entry_survives_our_update() {
    let h = delayed_pod_harness().with_context(
        context()
            .potential(&[NODE, OTHER_NODE])
            .with_status_entry("gpu-of-other-driver", &["node-x"])
            .with_status_entry(POD_CLAIM, &[NODE]),
    );
    h.driver.set_unsuitable(POD_CLAIM, &[OTHER_NODE]);
    assert_eq!(h.sync_context().await, Ok(SyncOutcome::Periodic));
    assert_eq!(
        h.stored_context(),
        unversioned_context(
            context()
                .potential(&[NODE, OTHER_NODE])
                .with_status_entry("gpu-of-other-driver", &["node-x"])
                .with_status_entry(POD_CLAIM, &[OTHER_NODE])
        )
    );
}

#[tokio::test]
async fn status_update_on_changed_context_conflicts_and_retries() {
    let h = delayed_pod_harness().with_context(context().potential(&[NODE, OTHER_NODE]));
    // Another driver wrote its entry after our cache copy was taken.
    let mut newer = context()
        .potential(&[NODE, OTHER_NODE])
        .with_status_entry("theirs", &[NODE]);
    newer.metadata.resource_version = Some("2".into());
    h.api.insert_context(newer.clone());
    h.driver.set_unsuitable(POD_CLAIM, &[OTHER_NODE]);
    let err = h.sync_context().await.unwrap_err();
    assert!(
        err.to_string()
            .starts_with("update unsuitable node status: "),
        "{err}"
    );
    assert_eq!(h.stored_context(), unversioned_context(newer));
    assert_eq!(
        h.controller
            .queue()
            .num_requeues(&scheduling_context_key(NAMESPACE, POD)),
        1
    );
    // Once the watch delivers the newer copy, the next sync succeeds and keeps their entry.
    h.refresh_caches(CLAIM);
    assert_eq!(h.sync_context().await, Ok(SyncOutcome::Periodic));
    let entries = h.stored_context().status.unwrap().resource_claims.unwrap();
    assert_eq!(entries.len(), 2);
}

#[tokio::test]
async fn truncated_list_is_not_rewritten_on_recheck() {
    let mut unsuitable = nodes(128);
    unsuitable.push(NODE.into());
    let list: Vec<&str> = unsuitable.iter().map(String::as_str).collect();
    let h = delayed_pod_harness().with_context(context().selected(NODE).potential(&nodes(128)));
    h.driver.set_unsuitable(POD_CLAIM, &list);
    assert_eq!(h.sync_context().await, Ok(SyncOutcome::Periodic));
    assert_eq!(h.context_writes(), 1);
    h.refresh_caches(CLAIM);
    assert_eq!(h.sync_context().await, Ok(SyncOutcome::Periodic));
    assert_eq!(h.sync_context().await, Ok(SyncOutcome::Periodic));
    assert_eq!(h.context_writes(), 1);
}

#[tokio::test]
async fn unsuitable_report_is_written_when_allocation_fails() {
    let h =
        delayed_pod_harness().with_context(context().selected(NODE).potential(&[NODE, OTHER_NODE]));
    h.driver.set_unsuitable(POD_CLAIM, &[OTHER_NODE]);
    h.driver.fail_allocate(CLAIM, "fake error");
    let err = h.sync_context().await.unwrap_err();
    assert_eq!(err.to_string(), "claim claim: fake error");
    assert_eq!(
        h.stored_context(),
        unversioned_context(
            context()
                .selected(NODE)
                .potential(&[NODE, OTHER_NODE])
                .with_status_entry(POD_CLAIM, &[OTHER_NODE])
        )
    );
    assert_eq!(
        h.stored_claim(CLAIM),
        unversioned(claim().delayed().with_finalizer())
    );
}

#[tokio::test]
async fn selected_node_outside_potential_nodes_is_checked() {
    let h = delayed_pod_harness().with_context(context().selected(NODE).potential(&[OTHER_NODE]));
    h.driver.set_unsuitable(POD_CLAIM, &[NODE]);
    assert_eq!(h.sync_context().await, Ok(SyncOutcome::Periodic));
    assert_eq!(
        unsuitable_calls(&h),
        vec![DriverCall::UnsuitableNodes {
            pod: POD.into(),
            claims: vec![CLAIM.into()],
            potential_nodes: vec![OTHER_NODE.into(), NODE.into()],
        }]
    );
    assert!(h.driver.allocate_calls().is_empty());
}

#[tokio::test]
async fn allocated_claims_are_not_checked_for_unsuitable_nodes() {
    let h = Harness::new()
        .with_class(class())
        .with_claim(claim().delayed())
        .with_claim(
            claim()
                .named("done")
                .delayed()
                .with_finalizer()
                .allocated(dra_controller::framework::testing::fixtures::allocation()),
        )
        .with_pod(
            pod()
                .with_claim(POD_CLAIM, CLAIM)
                .with_claim("second", "done"),
        )
        .with_context(context().potential(&[NODE]));
    assert_eq!(h.sync_context().await, Ok(SyncOutcome::Periodic));
    assert_eq!(
        unsuitable_calls(&h),
        vec![DriverCall::UnsuitableNodes {
            pod: POD.into(),
            claims: vec![CLAIM.into()],
            potential_nodes: vec![NODE.into()],
        }]
    );
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
async fn template_claim_not_created_yet_is_an_error() {
    let h = Harness::new()
        .with_class(class())
        .with_pod(pod().with_template_claim(POD_CLAIM, None))
        .with_context(context().potential(&[NODE]));
    let err = h.sync_context().await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "pod claim my-pod-claim: ResourceClaim not created yet"
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
    assert_eq!(h.sync_context().await, Ok(SyncOutcome::Periodic));
    let stored = h.stored_claim("pod-my-pod-claim-x");
    let status = stored.status.unwrap();
    assert!(status.allocation.is_some());
    assert_eq!(status.reserved_for.unwrap()[0].uid, POD_UID);
}

#[tokio::test]
async fn claim_parameter_failure_on_pod_path_is_reported_on_claim_and_context() {
    let h = delayed_pod_harness().with_context(context().potential(&[NODE]));
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
    h.api
        .fail_next(Operation::UpdateClaim, ApiErrorKind::Conflict, "conflict");
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
    h.api
        .fail_next(Operation::UpdateClaimStatus, ApiErrorKind::Other, "timeout");
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
        .allocated(dra_controller::framework::testing::fixtures::allocation())
        .reserved_for(POD, POD_UID)
        .deleted();
    let h = Harness::new().with_class(class()).with_claim(c.clone());
    assert_eq!(h.sync_claim(CLAIM).await, Ok(SyncOutcome::Done));
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
    assert_eq!(h.sync_context().await, Ok(SyncOutcome::Periodic));
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
    assert_eq!(h.sync_context().await, Ok(SyncOutcome::Periodic));
    assert!(h.driver.calls().is_empty());
    assert_eq!(h.context_writes(), 0);
}
