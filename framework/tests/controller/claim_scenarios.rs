//! Upstream scenarios 1-22 (claims): the sync of one `claim:` key with the scripted driver,
//! asserting the stored claim, the driver calls, the events and the sync result.

use crate::support::{failed_event, unversioned, Harness};
use dra_framework::testing::fixtures::{
    allocation, claim, class, ClaimFixture, ClassFixture, CLAIM, CLASS, OTHER_CLASS,
};
use dra_framework::testing::{DriverCall, ScriptedError};
use dra_framework::SyncOutcome;
use k8s_openapi::api::resource::v1alpha2::ResourceClaim;

#[derive(Clone, Copy)]
enum Mode {
    Immediate,
    Delayed,
}

fn claim_in(mode: Mode) -> ResourceClaim {
    match mode {
        Mode::Immediate => claim().immediate(),
        Mode::Delayed => claim().delayed(),
    }
}

fn deallocate_calls(h: &Harness) -> usize {
    h.driver
        .calls()
        .iter()
        .filter(|c| matches!(c, DriverCall::Deallocate { .. }))
        .count()
}

#[tokio::test]
async fn missing_claim_is_done() {
    let h = Harness::new();
    assert_eq!(h.sync_claim(CLAIM).await.unwrap(), SyncOutcome::Done);
    assert!(h.driver.calls().is_empty());
}

#[tokio::test]
async fn claim_of_another_driver_is_requeued_unchanged() {
    let c = claim().immediate().in_class(OTHER_CLASS);
    let h = Harness::new()
        .with_class(class().named(OTHER_CLASS).of_driver("other-driver"))
        .with_claim(c.clone());
    assert_eq!(h.sync_claim(CLAIM).await.unwrap(), SyncOutcome::Requeue);
    assert_eq!(h.stored_claim(CLAIM), unversioned(c));
    assert!(h.driver.calls().is_empty());
    assert_eq!(h.claim_writes(), 0);
}

async fn deleted_unallocated_claim_loses_finalizer(mode: Mode) {
    let h = Harness::new()
        .with_class(class())
        .with_claim(claim_in(mode).deleted().with_finalizer());
    assert_eq!(h.sync_claim(CLAIM).await.unwrap(), SyncOutcome::Done);
    assert_eq!(h.stored_claim(CLAIM), unversioned(claim_in(mode).deleted()));
    // An allocation that may be in progress is stopped first.
    assert_eq!(deallocate_calls(&h), 1);
}

#[tokio::test]
async fn immediate_deleted_claim_finalizer_is_removed() {
    deleted_unallocated_claim_loses_finalizer(Mode::Immediate).await;
}

#[tokio::test]
async fn delayed_deleted_claim_finalizer_is_removed() {
    deleted_unallocated_claim_loses_finalizer(Mode::Delayed).await;
}

async fn stop_failure_keeps_finalizer(mode: Mode) {
    let c = claim_in(mode).deleted().with_finalizer();
    let h = Harness::new().with_class(class()).with_claim(c.clone());
    h.driver.set_deallocate_error(Some("fake error"));
    let err = h.sync_claim(CLAIM).await.unwrap_err();
    assert_eq!(err.to_string(), "stop allocation: fake error");
    assert_eq!(h.stored_claim(CLAIM), unversioned(c));
    assert_eq!(
        h.events(),
        vec![failed_event("ResourceClaim", "stop allocation: fake error")]
    );
}

#[tokio::test]
async fn immediate_deleted_claim_stop_failure_keeps_finalizer() {
    stop_failure_keeps_finalizer(Mode::Immediate).await;
}

#[tokio::test]
async fn delayed_deleted_claim_stop_failure_keeps_finalizer() {
    stop_failure_keeps_finalizer(Mode::Delayed).await;
}

async fn other_drivers_finalizer_is_left_alone(mode: Mode) {
    let c = claim_in(mode)
        .deleted()
        .with_other_finalizer("other-driver/deletion-protection");
    let h = Harness::new().with_class(class()).with_claim(c.clone());
    assert_eq!(h.sync_claim(CLAIM).await.unwrap(), SyncOutcome::Done);
    assert_eq!(h.stored_claim(CLAIM), unversioned(c));
    assert!(h.driver.calls().is_empty());
    assert_eq!(h.claim_writes(), 0);
}

#[tokio::test]
async fn immediate_deleted_claim_with_other_finalizer_is_left_alone() {
    other_drivers_finalizer_is_left_alone(Mode::Immediate).await;
}

#[tokio::test]
async fn delayed_deleted_claim_with_other_finalizer_is_left_alone() {
    other_drivers_finalizer_is_left_alone(Mode::Delayed).await;
}

async fn deleted_allocated_claim_is_deallocated(mode: Mode) {
    let h = Harness::new().with_class(class()).with_claim(
        claim_in(mode)
            .deleted()
            .with_finalizer()
            .allocated(allocation()),
    );
    assert_eq!(h.sync_claim(CLAIM).await.unwrap(), SyncOutcome::Done);
    assert_eq!(h.stored_claim(CLAIM), unversioned(claim_in(mode).deleted()));
    assert_eq!(
        h.driver.calls(),
        vec![DriverCall::Deallocate {
            claim: CLAIM.into()
        }]
    );
}

#[tokio::test]
async fn immediate_deleted_allocated_claim_is_deallocated_and_released() {
    deleted_allocated_claim_is_deallocated(Mode::Immediate).await;
}

#[tokio::test]
async fn delayed_deleted_allocated_claim_is_deallocated_and_released() {
    deleted_allocated_claim_is_deallocated(Mode::Delayed).await;
}

async fn deallocate_failure_keeps_allocation(mode: Mode) {
    let c = claim_in(mode)
        .deleted()
        .with_finalizer()
        .allocated(allocation());
    let h = Harness::new().with_class(class()).with_claim(c.clone());
    h.driver.set_deallocate_error(Some("fake error"));
    let err = h.sync_claim(CLAIM).await.unwrap_err();
    assert_eq!(err.to_string(), "deallocate: fake error");
    // The driver's error is kept as the cause, not only as text.
    let cause = std::error::Error::source(&err).and_then(|e| e.downcast_ref::<ScriptedError>());
    assert_eq!(cause, Some(&ScriptedError("fake error".to_owned())));
    assert_eq!(h.stored_claim(CLAIM), unversioned(c));
    assert_eq!(
        h.events(),
        vec![failed_event("ResourceClaim", "deallocate: fake error")]
    );
}

#[tokio::test]
async fn immediate_deleted_claim_deallocate_failure_keeps_allocation() {
    deallocate_failure_keeps_allocation(Mode::Immediate).await;
}

#[tokio::test]
async fn delayed_deleted_claim_deallocate_failure_keeps_allocation() {
    deallocate_failure_keeps_allocation(Mode::Delayed).await;
}

async fn deleted_claim_without_finalizer_is_left_alone(mode: Mode) {
    let c = claim_in(mode).deleted();
    let h = Harness::new().with_class(class()).with_claim(c.clone());
    assert_eq!(h.sync_claim(CLAIM).await.unwrap(), SyncOutcome::Done);
    assert_eq!(h.stored_claim(CLAIM), unversioned(c));
    assert!(h.driver.calls().is_empty());
}

#[tokio::test]
async fn immediate_deleted_claim_without_finalizer_is_left_alone() {
    deleted_claim_without_finalizer_is_left_alone(Mode::Immediate).await;
}

#[tokio::test]
async fn delayed_deleted_claim_without_finalizer_is_left_alone() {
    deleted_claim_without_finalizer_is_left_alone(Mode::Delayed).await;
}

#[tokio::test]
async fn immediate_claim_gets_finalizer_then_allocation() {
    let h = Harness::new()
        .with_class(class().with_parameters("DeviceClassParameters", "gpu"))
        .with_claim(
            claim()
                .immediate()
                .with_parameters("DeviceClaimParameters", "one"),
        );
    assert_eq!(h.sync_claim(CLAIM).await.unwrap(), SyncOutcome::Done);
    assert_eq!(
        h.stored_claim(CLAIM),
        unversioned(
            claim()
                .immediate()
                .with_parameters("DeviceClaimParameters", "one")
                .with_finalizer()
                .allocated(allocation())
        )
    );
    assert_eq!(
        h.driver.calls(),
        vec![
            DriverCall::ClassParameters {
                class: CLASS.into()
            },
            DriverCall::ClaimParameters {
                claim: CLAIM.into(),
                class_parameters: "class:mock-class".into()
            },
            DriverCall::Allocate {
                claims: vec![CLAIM.into()],
                selected_node: None,
                parameters: vec![("class:mock-class".into(), "claim:claim".into())],
            },
        ]
    );
    // The finalizer write comes before the status write.
    let writes = h.api.writes();
    assert!(matches!(
        writes.as_slice(),
        [
            dra_framework::testing::Write::UpdateClaim(_),
            dra_framework::testing::Write::UpdateClaimStatus(_)
        ]
    ));
}

#[tokio::test]
async fn immediate_claim_with_finalizer_is_allocated_without_second_finalizer() {
    let h = Harness::new()
        .with_class(class())
        .with_claim(claim().immediate().with_finalizer());
    assert_eq!(h.sync_claim(CLAIM).await.unwrap(), SyncOutcome::Done);
    assert_eq!(
        h.stored_claim(CLAIM),
        unversioned(claim().immediate().with_finalizer().allocated(allocation()))
    );
    assert_eq!(h.claim_writes(), 1);
}

#[tokio::test]
async fn failed_immediate_allocation_keeps_finalizer_and_reports() {
    let h = Harness::new()
        .with_class(class())
        .with_claim(claim().immediate());
    h.driver.fail_allocate(CLAIM, "fake error");
    let err = h.sync_claim(CLAIM).await.unwrap_err();
    assert_eq!(err.to_string(), "allocate: fake error");
    assert_eq!(
        h.stored_claim(CLAIM),
        unversioned(claim().immediate().with_finalizer())
    );
    assert_eq!(
        h.events(),
        vec![failed_event("ResourceClaim", "allocate: fake error")]
    );
}

#[tokio::test]
async fn allocated_immediate_claim_is_left_alone() {
    let c = claim().immediate().with_finalizer().allocated(allocation());
    let h = Harness::new().with_class(class()).with_claim(c.clone());
    assert_eq!(h.sync_claim(CLAIM).await.unwrap(), SyncOutcome::Done);
    assert_eq!(h.stored_claim(CLAIM), unversioned(c));
    assert!(h.driver.calls().is_empty());
}

#[tokio::test]
async fn deallocation_request_returns_claim_to_pristine_state() {
    let h = Harness::new().with_class(class()).with_claim(
        claim()
            .immediate()
            .with_finalizer()
            .allocated(allocation())
            .deallocation_requested(),
    );
    assert_eq!(h.sync_claim(CLAIM).await.unwrap(), SyncOutcome::Done);
    assert_eq!(h.stored_claim(CLAIM), unversioned(claim().immediate()));
    // No reallocation in the same pass.
    assert!(h.driver.allocate_calls().is_empty());
}

#[tokio::test]
async fn failed_deallocation_during_reallocate_keeps_claim() {
    let c = claim()
        .immediate()
        .with_finalizer()
        .allocated(allocation())
        .deallocation_requested();
    let h = Harness::new().with_class(class()).with_claim(c.clone());
    h.driver.set_deallocate_error(Some("fake error"));
    let err = h.sync_claim(CLAIM).await.unwrap_err();
    assert_eq!(err.to_string(), "deallocate: fake error");
    assert_eq!(h.stored_claim(CLAIM), unversioned(c));
}

#[tokio::test]
async fn pending_delayed_claim_is_left_to_the_scheduling_context() {
    let c = claim().delayed();
    let h = Harness::new().with_class(class()).with_claim(c.clone());
    assert_eq!(h.sync_claim(CLAIM).await.unwrap(), SyncOutcome::Done);
    assert_eq!(h.stored_claim(CLAIM), unversioned(c));
    assert!(h.driver.calls().is_empty());
}
