//! The controller's run loop with workers over the fake API: concurrent syncs, one sync per key,
//! the periodic recheck, retries with backoff and a clean shutdown.

use std::time::Duration;

use crate::support::Harness;
use dra_framework::testing::fixtures::{
    claim, class, context, pod, ClaimFixture, ContextFixture, PodFixture, CLAIM, NODE, POD_CLAIM,
};
use dra_framework::testing::DriverCall;
use dra_framework::{ControllerConfig, RateLimit};
use tokio::sync::oneshot;

fn fast_config() -> ControllerConfig {
    ControllerConfig {
        recheck_delay: Duration::from_millis(40),
        rate_limit: RateLimit {
            base_delay: Duration::from_millis(5),
            max_delay: Duration::from_millis(40),
            qps: 1000.0,
            burst: 1000,
        },
        ..ControllerConfig::default()
    }
}

/// Waits up to 2 s for `done` to hold.
async fn wait_for(mut done: impl FnMut() -> bool) {
    testkit::eventually("the condition", Duration::from_secs(2), || {
        std::future::ready(done())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_sync_different_claims_concurrently() {
    let mut h = Harness::with_config(fast_config()).with_class(class());
    let names: Vec<String> = (0..6).map(|i| format!("c{i}")).collect();
    for name in &names {
        h = h.with_claim(claim().named(name).immediate());
    }
    h.driver.set_allocate_delay(Duration::from_millis(50));
    let (stop, stopped) = oneshot::channel::<()>();
    let run = tokio::spawn(h.controller.clone().run(3, async {
        let _ = stopped.await;
    }));
    for name in &names {
        h.controller.claim_changed(&claim().named(name).immediate());
    }
    wait_for(|| {
        names.iter().all(|n| {
            h.api
                .claim("default", n)
                .and_then(|c| c.status)
                .is_some_and(|s| s.allocation.is_some())
        })
    })
    .await;
    assert!(h.driver.max_concurrent_allocations() >= 2);
    assert!(h.driver.max_concurrent_allocations() <= 3);
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(2), run)
        .await
        .expect("run returns after shutdown")
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_key_is_never_synced_by_two_workers() {
    let h = Harness::with_config(fast_config())
        .with_class(class())
        .with_claim(claim().immediate());
    h.driver.set_allocate_delay(Duration::from_millis(20));
    h.driver.fail_allocate(CLAIM, "busy");
    let (stop, stopped) = oneshot::channel::<()>();
    let run = tokio::spawn(h.controller.clone().run(4, async {
        let _ = stopped.await;
    }));
    for _ in 0..30 {
        h.controller.claim_changed(&claim().immediate());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    wait_for(|| h.driver.allocate_calls().len() >= 3).await;
    assert_eq!(h.driver.max_concurrent_allocations(), 1);
    stop.send(()).unwrap();
    run.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_claim_is_retried_with_backoff() {
    let h = Harness::with_config(fast_config())
        .with_class(class())
        .with_claim(claim().immediate());
    h.driver.fail_allocate(CLAIM, "no device");
    let (stop, stopped) = oneshot::channel::<()>();
    let run = tokio::spawn(h.controller.clone().run(1, async {
        let _ = stopped.await;
    }));
    h.controller.claim_changed(&claim().immediate());
    wait_for(|| h.driver.allocate_calls().len() >= 3).await;
    assert!(h.events().len() >= 3, "a Warning event per failed sync");
    stop.send(()).unwrap();
    run.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduling_context_is_rechecked_periodically() {
    let h = Harness::with_config(fast_config())
        .with_class(class())
        .with_claim(claim().delayed())
        .with_pod(pod().with_claim(POD_CLAIM, CLAIM))
        .with_context(context().potential(&[NODE]));
    let (stop, stopped) = oneshot::channel::<()>();
    let run = tokio::spawn(h.controller.clone().run(2, async {
        let _ = stopped.await;
    }));
    h.controller.scheduling_context_changed(&context());
    let checks = || {
        h.driver
            .calls()
            .iter()
            .filter(|c| matches!(c, DriverCall::UnsuitableNodes { .. }))
            .count()
    };
    wait_for(|| checks() >= 3).await;
    stop.send(()).unwrap();
    run.await.unwrap();
}
