//! The work queue: deduplication, one worker per key, backoff growth and the token bucket.

use std::time::Duration;

use dra_controller::framework::{RateLimit, WorkQueue};
use tokio::time::timeout;

fn queue() -> WorkQueue {
    WorkQueue::new(RateLimit::default())
}

#[tokio::test]
async fn key_added_twice_is_queued_once() {
    let q = queue();
    q.add("claim:default/a");
    q.add("claim:default/a");
    q.add("claim:default/b");
    assert_eq!(q.len(), 2);
    assert_eq!(q.get().await.as_deref(), Some("claim:default/a"));
    assert_eq!(q.get().await.as_deref(), Some("claim:default/b"));
    assert!(q.is_empty());
}

#[tokio::test]
async fn key_readded_while_processing_waits_for_done() {
    let q = queue();
    q.add("k");
    let key = q.get().await.unwrap();
    assert!(q.is_processing(&key));
    q.add("k");
    q.add("k");
    // A second worker must not get the key while the first one still processes it.
    assert!(timeout(Duration::from_millis(50), q.get()).await.is_err());
    q.done(&key);
    assert_eq!(q.get().await.as_deref(), Some("k"));
    q.done("k");
    assert!(q.is_empty(), "re-adds while processing collapse into one");
}

#[tokio::test]
async fn waiting_worker_is_woken_by_add() {
    let q = queue();
    let waiter = {
        let q = q.clone();
        tokio::spawn(async move { q.get().await })
    };
    tokio::time::sleep(Duration::from_millis(10)).await;
    q.add("k");
    let got = timeout(Duration::from_secs(1), waiter)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.as_deref(), Some("k"));
}

#[test]
fn backoff_doubles_per_failure_and_is_capped() {
    let q = WorkQueue::new(RateLimit {
        base_delay: Duration::from_millis(5),
        max_delay: Duration::from_millis(100),
        qps: 1000.0,
        burst: 1000,
    });
    let delays: Vec<u128> = (0..7).map(|_| q.next_delay("k").as_millis()).collect();
    assert_eq!(delays, vec![5, 10, 20, 40, 80, 100, 100]);
    assert_eq!(q.num_requeues("k"), 7);
    // Other keys have their own backoff.
    assert_eq!(q.next_delay("other").as_millis(), 5);
}

#[test]
fn forget_resets_backoff() {
    let q = queue();
    q.next_delay("k");
    q.next_delay("k");
    q.forget("k");
    assert_eq!(q.num_requeues("k"), 0);
    assert_eq!(q.next_delay("k"), Duration::from_millis(5));
}

#[test]
fn token_bucket_slows_retries_after_burst() {
    let q = WorkQueue::new(RateLimit {
        base_delay: Duration::from_millis(1),
        max_delay: Duration::from_secs(1000),
        qps: 10.0,
        burst: 3,
    });
    for i in 0..3 {
        assert_eq!(q.next_delay(&format!("k{i}")), Duration::from_millis(1));
    }
    let delay = q.next_delay("k3");
    assert!(
        delay >= Duration::from_millis(90) && delay <= Duration::from_millis(100),
        "{delay:?}"
    );
    let delay = q.next_delay("k4");
    assert!(delay >= Duration::from_millis(190), "{delay:?}");
}

#[tokio::test]
async fn add_after_queues_later() {
    let q = queue();
    q.add_after("k", Duration::from_millis(30));
    assert!(q.is_empty());
    let got = timeout(Duration::from_secs(1), q.get()).await.unwrap();
    assert_eq!(got.as_deref(), Some("k"));
}

#[tokio::test]
async fn shutdown_releases_waiting_workers_and_stops_taking_work() {
    let q = queue();
    let waiter = {
        let q = q.clone();
        tokio::spawn(async move { q.get().await })
    };
    tokio::time::sleep(Duration::from_millis(10)).await;
    q.shut_down();
    assert_eq!(
        timeout(Duration::from_secs(1), waiter)
            .await
            .unwrap()
            .unwrap(),
        None
    );
    q.add("k");
    assert_eq!(q.get().await, None);
}
