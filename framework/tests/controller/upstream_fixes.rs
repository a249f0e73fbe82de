//! The improvements over the upstream Go library, k8s.io/dynamic-resource-allocation: the mutation
//! caches, pods watched, class changes re-queuing claims, status patches that keep other drivers'
//! entries, truncated lists not rewritten, the report written when allocation fails (naming the
//! selected node, so that the scheduler moves on), the selected node always checked, allocated
//! claims never checked, nodes reported unsuitable before checked again instead of forgotten,
//! a status patch that lost a race retried without an event, a pod's context woken when its
//! claim arrives after it, the driver told once a deallocated claim no longer shows its
//! allocation, and an allocation freed at once when its claim is gone before the status write.

use crate::support::{
    claim_checked_on, failed_event, unversioned, unversioned_context, CachesExt, Harness,
};
use dra_framework::testing::fixtures::{
    allocation, claim, class, context, nodes, pod, ClaimFixture, ClassFixture, ContextFixture,
    PodFixture, CLAIM, NAMESPACE, NODE, OTHER_CLASS, OTHER_NODE, POD, POD_CLAIM,
};
use dra_framework::testing::{DriverCall, Operation};
use dra_framework::{KubeCallErrorKind, QueueKey, SyncOutcome};

#[tokio::test]
async fn stale_watched_copy_does_not_trigger_second_allocation() {
    let h = Harness::new()
        .with_class(class())
        .with_claim(claim().immediate());
    assert_eq!(h.sync_claim(CLAIM).await.unwrap(), SyncOutcome::Done);
    // The watch has not delivered our writes yet: the cache still holds the unallocated claim.
    assert!(h.caches.claim_is_unallocated(CLAIM));
    assert_eq!(h.sync_claim(CLAIM).await.unwrap(), SyncOutcome::Done);
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
        vec![
            QueueKey::claim(NAMESPACE, "b"),
            QueueKey::claim(NAMESPACE, CLAIM)
        ]
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
    assert_eq!(h.controller.sync(&key).await.unwrap(), SyncOutcome::Done);
    assert_eq!(h.driver.allocate_calls().len(), 1);
}

#[tokio::test]
async fn unallocated_claim_of_a_pod_requeues_the_pods_scheduling_context() {
    // The context may have been synced before the claim reached the cache.
    let h = Harness::delayed_pod().with_context(context().potential(&[NODE]));
    h.controller
        .claim_changed(&claim().delayed().owned_by_pod());
    assert_eq!(h.controller.queue().len(), 2, "the claim and the context");
    assert_eq!(
        h.controller.queue().get().await,
        Some(QueueKey::claim(NAMESPACE, CLAIM))
    );
    assert_eq!(
        h.controller.queue().get().await,
        Some(QueueKey::scheduling_context(NAMESPACE, POD))
    );
    let allocated = claim()
        .delayed()
        .owned_by_pod()
        .allocated(dra_framework::testing::fixtures::allocation());
    let h = Harness::delayed_pod().with_context(context().potential(&[NODE]));
    h.controller.claim_changed(&allocated);
    assert!(
        h.controller.queue().is_empty(),
        "an allocated claim wakes nothing: its sync would end at once"
    );
    for work in [
        allocated.clone().deleted().with_finalizer(),
        allocated.deallocation_requested(),
    ] {
        h.controller.claim_changed(&work);
        assert_eq!(
            h.controller.queue().get().await,
            Some(QueueKey::claim(NAMESPACE, CLAIM)),
            "an allocated claim with work queues itself"
        );
        h.controller
            .queue()
            .done(&QueueKey::claim(NAMESPACE, CLAIM));
    }
    assert!(h.controller.queue().is_empty(), "nor its context");
}

#[tokio::test]
async fn pod_change_requeues_its_scheduling_context() {
    let h = Harness::delayed_pod();
    h.controller.pod_changed(&pod());
    assert!(h.controller.queue().is_empty(), "no context yet");
    let h = h.with_context(context().potential(&[NODE]));
    h.controller.pod_changed(&pod());
    assert_eq!(
        h.controller.queue().get().await,
        Some(QueueKey::scheduling_context(NAMESPACE, POD))
    );
}

#[tokio::test]
async fn context_waits_for_pod_in_cache() {
    let h = Harness::new()
        .with_class(class())
        .with_claim(claim().delayed())
        .with_context(context().potential(&[NODE]));
    assert_eq!(h.sync_context().await.unwrap(), SyncOutcome::Done);
    assert!(h.driver.calls().is_empty());
}

#[tokio::test]
async fn other_drivers_status_entry_survives_our_update() {
    let h = Harness::delayed_pod().with_context(
        context()
            .potential(&[NODE, OTHER_NODE])
            .with_status_entry("gpu-of-other-driver", &["node-x"])
            .with_status_entry(POD_CLAIM, &[NODE]),
    );
    h.driver.set_unsuitable(POD_CLAIM, &[OTHER_NODE]);
    assert_eq!(h.sync_context().await.unwrap(), SyncOutcome::Periodic);
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
    let h = Harness::delayed_pod().with_context(context().potential(&[NODE, OTHER_NODE]));
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
    assert_eq!(h.context_requeues(), 1);
    // Once the watch delivers the newer copy, the next sync succeeds and keeps their entry.
    h.refresh_caches(CLAIM);
    assert_eq!(h.sync_context().await.unwrap(), SyncOutcome::Periodic);
    let entries = h.stored_context().status.unwrap().resource_claims.unwrap();
    assert_eq!(entries.len(), 2);
}

#[tokio::test]
async fn truncated_list_is_not_rewritten_on_recheck() {
    let mut unsuitable = nodes(128);
    unsuitable.push(NODE.into());
    let h = Harness::truncation(&unsuitable);
    assert_eq!(h.sync_context().await.unwrap(), SyncOutcome::Periodic);
    assert_eq!(h.context_writes(), 1);
    h.refresh_caches(CLAIM);
    assert_eq!(h.sync_context().await.unwrap(), SyncOutcome::Periodic);
    assert_eq!(h.sync_context().await.unwrap(), SyncOutcome::Periodic);
    assert_eq!(h.context_writes(), 1);
}

#[tokio::test]
async fn failed_allocation_is_reported_with_the_selected_node_unsuitable() {
    let h = Harness::selected_node_fits();
    h.driver.fail_allocate(CLAIM, "fake error");
    let err = h.sync_context().await.unwrap_err();
    assert_eq!(err.to_string(), "claim claim: fake error");
    assert_eq!(
        h.stored_context(),
        unversioned_context(
            context()
                .selected(NODE)
                .potential(&[NODE, OTHER_NODE])
                .with_status_entry(POD_CLAIM, &[OTHER_NODE, NODE])
        )
    );
    assert_eq!(
        h.stored_claim(CLAIM),
        unversioned(claim().delayed().with_finalizer())
    );
}

#[tokio::test]
async fn selected_node_outside_potential_nodes_is_checked() {
    let h = Harness::delayed_pod().with_context(context().selected(NODE).potential(&[OTHER_NODE]));
    h.driver.set_unsuitable(POD_CLAIM, &[NODE]);
    assert_eq!(h.sync_context().await.unwrap(), SyncOutcome::Periodic);
    assert_eq!(
        h.unsuitable_calls(),
        vec![claim_checked_on(&[OTHER_NODE, NODE])]
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
                .allocated(dra_framework::testing::fixtures::allocation()),
        )
        .with_pod(
            pod()
                .with_claim(POD_CLAIM, CLAIM)
                .with_claim("second", "done"),
        )
        .with_context(context().potential(&[NODE]));
    assert_eq!(h.sync_context().await.unwrap(), SyncOutcome::Periodic);
    assert_eq!(h.unsuitable_calls(), vec![claim_checked_on(&[NODE])]);
}

#[tokio::test]
async fn own_status_patch_is_seen_before_the_watch_catches_up() {
    let h = Harness::delayed_pod().with_context(context().potential(&[NODE, OTHER_NODE]));
    h.driver.set_unsuitable(POD_CLAIM, &[OTHER_NODE]);
    assert_eq!(h.sync_context().await.unwrap(), SyncOutcome::Periodic);
    // The cache still holds the context without status; the next report must not conflict.
    h.driver.set_unsuitable(POD_CLAIM, &[NODE, OTHER_NODE]);
    assert_eq!(h.sync_context().await.unwrap(), SyncOutcome::Periodic);
    assert_eq!(h.context_writes(), 2);
    assert!(h.events().is_empty(), "{:?}", h.events());
    assert_eq!(
        h.stored_context(),
        unversioned_context(
            context()
                .potential(&[NODE, OTHER_NODE])
                .with_status_entry(POD_CLAIM, &[NODE, OTHER_NODE])
        )
    );
}

#[tokio::test]
async fn node_reported_before_is_checked_again_and_stays_reported_while_unsuitable() {
    // The scheduler dropped OTHER_NODE from the potential nodes after our report.
    let h = Harness::delayed_pod().with_context(
        context()
            .potential(&[NODE])
            .with_status_entry(POD_CLAIM, &[OTHER_NODE]),
    );
    h.driver.set_unsuitable(POD_CLAIM, &[OTHER_NODE]);
    assert_eq!(h.sync_context().await.unwrap(), SyncOutcome::Periodic);
    assert_eq!(
        h.unsuitable_calls(),
        vec![claim_checked_on(&[NODE, OTHER_NODE])]
    );
    assert_eq!(h.context_writes(), 0, "the report stands");
}

#[tokio::test]
async fn node_reported_before_is_dropped_from_the_report_once_suitable() {
    let h = Harness::delayed_pod().with_context(
        context()
            .potential(&[NODE])
            .with_status_entry(POD_CLAIM, &[OTHER_NODE]),
    );
    assert_eq!(h.sync_context().await.unwrap(), SyncOutcome::Periodic);
    assert_eq!(
        h.stored_context(),
        unversioned_context(
            context()
                .potential(&[NODE])
                .with_status_entry(POD_CLAIM, &[] as &[&str])
        )
    );
}

/// The next status patch of the context finds it deleted (404), as after the scheduler's
/// `PostBind`.
fn context_gone_on_next_patch(h: &Harness) {
    h.api.fail_next(
        Operation::PatchContextStatus,
        KubeCallErrorKind::NotFound,
        "podschedulingcontexts \"pod\" not found",
    );
}

#[tokio::test]
async fn no_report_is_written_once_every_claim_is_allocated() {
    let h = Harness::selected_node_fits();
    // Upstream writes the report after the allocation, most often to a context the scheduler
    // has already deleted (PostBind, once the claim is allocated). A write would meet this.
    context_gone_on_next_patch(&h);
    assert_eq!(h.sync_context().await.unwrap(), SyncOutcome::Periodic);
    assert_eq!(h.context_writes(), 0);
    assert!(h.events().is_empty(), "{:?}", h.events());
    assert!(
        h.stored_claim(CLAIM).status.unwrap().allocation.is_some(),
        "the allocation stands"
    );
}

#[tokio::test]
async fn report_to_a_deleted_context_after_a_failed_allocation_is_done_without_event() {
    let h = Harness::selected_node_fits();
    h.driver.fail_allocate(CLAIM, "node filled up");
    context_gone_on_next_patch(&h);
    assert_eq!(h.sync_context().await.unwrap(), SyncOutcome::Done);
    assert!(h.events().is_empty(), "{:?}", h.events());
    assert_eq!(h.context_requeues(), 0, "not retried");
}

#[tokio::test]
async fn status_patch_that_loses_a_race_posts_no_event() {
    let h = Harness::delayed_pod().with_context(context().potential(&[NODE, OTHER_NODE]));
    let mut newer = context().potential(&[NODE]);
    newer.metadata.resource_version = Some("2".into());
    h.api.insert_context(newer);
    h.driver.set_unsuitable(POD_CLAIM, &[OTHER_NODE]);
    assert!(h.sync_context().await.unwrap_err().is_stale_copy());
    assert!(h.events().is_empty(), "{:?}", h.events());
    assert_eq!(
        h.context_requeues(),
        1,
        "retried with the key's own backoff"
    );
}

#[tokio::test]
async fn driver_is_told_once_the_status_write_removing_the_allocation_returned() {
    let h = deleted_claim(true);
    h.api.fail_next(
        Operation::UpdateClaimStatus,
        KubeCallErrorKind::Conflict,
        "conflict",
    );
    assert!(h.sync_claim(CLAIM).await.is_err());
    assert!(
        h.driver.published_deallocations().is_empty(),
        "not told while the claim still shows the allocation"
    );
    assert_eq!(h.sync_claim(CLAIM).await.unwrap(), SyncOutcome::Done);
    assert_eq!(
        h.driver.published_deallocations(),
        [format!("{CLAIM} unallocated")]
    );
}

#[tokio::test]
async fn failed_deallocate_does_not_tell_the_driver_it_was_published() {
    let h = deleted_claim(true);
    h.driver.set_deallocate_error(Some("fake error"));
    assert!(h.sync_claim(CLAIM).await.is_err());
    assert!(h.driver.published_deallocations().is_empty());
}

/// An immediate claim being deleted, with our finalizer, allocated or not.
fn deleted_claim(allocated: bool) -> Harness {
    let mut deleted = claim().immediate().deleted().with_finalizer();
    if allocated {
        deleted = deleted.allocated(allocation());
    }
    Harness::new().with_class(class()).with_claim(deleted)
}

/// [`deleted_claim`] whose next write of `op` finds it gone (404), as when the watch delivers an
/// older copy after an earlier pass removed the finalizer.
fn claim_gone_at(op: Operation, allocated: bool) -> Harness {
    let h = deleted_claim(allocated);
    h.api.fail_next(
        op,
        KubeCallErrorKind::NotFound,
        "resourceclaims.resource.k8s.io \"claim\" not found",
    );
    h
}

#[tokio::test]
async fn claim_gone_before_its_finalizer_is_removed_is_released_without_error() {
    let h = claim_gone_at(Operation::UpdateClaim, false);
    assert_eq!(h.sync_claim(CLAIM).await.unwrap(), SyncOutcome::Done);
    assert!(h.events().is_empty(), "{:?}", h.events());
}

#[tokio::test]
async fn claim_gone_before_its_allocation_is_cleared_is_released_and_the_driver_told() {
    let h = claim_gone_at(Operation::UpdateClaimStatus, true);
    assert_eq!(h.sync_claim(CLAIM).await.unwrap(), SyncOutcome::Done);
    assert_eq!(
        h.driver.published_deallocations(),
        [format!("{CLAIM} allocated")],
        "told with the copy it had: nothing shows the allocation any more"
    );
}

#[tokio::test]
async fn other_failures_of_the_release_writes_stay_errors() {
    let h = deleted_claim(false);
    h.api.fail_next(
        Operation::UpdateClaim,
        KubeCallErrorKind::Other,
        "connection refused",
    );
    assert!(matches!(
        h.sync_claim(CLAIM).await,
        Err(dra_framework::Error::RemoveFinalizer(_))
    ));
}

#[tokio::test]
async fn a_release_write_that_meets_a_newer_copy_is_retried_without_event() {
    let h = deleted_claim(true);
    h.api.fail_next(
        Operation::UpdateClaimStatus,
        KubeCallErrorKind::Conflict,
        "the object has been modified",
    );
    let err = h.sync_claim(CLAIM).await.unwrap_err();
    assert!(err.is_passing(), "{err}");
    assert!(h.events().is_empty(), "{:?}", h.events());
    assert_eq!(h.claim_requeues(CLAIM), 1);
    h.driver.set_deallocate_error(Some("device busy"));
    assert!(h.sync_claim(CLAIM).await.is_err());
    assert_eq!(
        h.events().len(),
        1,
        "a real failure still posts its event: {:?}",
        h.events()
    );
}

/// An immediate claim with our finalizer whose allocation's status write fails with `kind`.
fn allocation_write_fails(kind: KubeCallErrorKind) -> Harness {
    let h = Harness::new()
        .with_class(class())
        .with_claim(claim().immediate().with_finalizer());
    h.api
        .fail_next(Operation::UpdateClaimStatus, kind, "failed write");
    h
}

fn deallocate_calls(h: &Harness) -> usize {
    h.driver
        .calls()
        .iter()
        .filter(|c| matches!(c, DriverCall::Deallocate { claim } if claim == CLAIM))
        .count()
}

#[tokio::test]
async fn claim_gone_at_its_allocations_status_write_is_freed_at_once() {
    let h = allocation_write_fails(KubeCallErrorKind::NotFound);
    assert!(h.sync_claim(CLAIM).await.is_err());
    assert_eq!(h.driver.allocate_calls().len(), 1);
    assert_eq!(
        deallocate_calls(&h),
        1,
        "the allocation of a claim that is gone can never be published: {:?}",
        h.driver.calls()
    );
}

#[tokio::test]
async fn allocation_whose_status_write_fails_otherwise_is_kept_for_the_retry() {
    for kind in [KubeCallErrorKind::Conflict, KubeCallErrorKind::Other] {
        let h = allocation_write_fails(kind);
        assert!(h.sync_claim(CLAIM).await.is_err());
        assert_eq!(h.driver.allocate_calls().len(), 1);
        assert_eq!(deallocate_calls(&h), 0, "{kind:?}: {:?}", h.driver.calls());
    }
}
