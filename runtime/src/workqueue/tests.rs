//! The work queue: deduplication, one worker per key, backoff growth, the token bucket and the
//! worker loops.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::timeout;

use super::*;

fn queue() -> WorkQueue<String> {
    WorkQueue::new(RateLimit::default())
}

/// The key of claim `default/<name>`.
fn key(name: &str) -> String {
    format!("default/{name}")
}

#[tokio::test]
async fn key_added_twice_is_queued_once() {
    let q = queue();
    q.add(&key("a"));
    q.add(&key("a"));
    q.add(&key("b"));
    assert_eq!(q.len(), 2);
    assert_eq!(q.get().await, Some(key("a")));
    assert_eq!(q.get().await, Some(key("b")));
    assert!(q.is_empty());
}

#[tokio::test]
async fn key_readded_while_processing_waits_for_done() {
    let q = queue();
    q.add(&key("k"));
    let taken = q.get().await.unwrap();
    assert!(q.is_processing(&taken));
    q.add(&key("k"));
    q.add(&key("k"));
    // A second worker must not get the key while the first one still processes it.
    assert!(timeout(Duration::from_millis(50), q.get()).await.is_err());
    q.done(&taken);
    assert_eq!(q.get().await, Some(key("k")));
    q.done(&key("k"));
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
    q.add(&key("k"));
    let got = timeout(Duration::from_secs(1), waiter)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got, Some(key("k")));
}

#[test]
fn backoff_doubles_per_failure_and_is_capped() {
    let q = WorkQueue::new(RateLimit {
        base_delay: Duration::from_millis(5),
        max_delay: Duration::from_millis(100),
        qps: 1000.0,
        burst: 1000,
    });
    let delays: Vec<u128> = (0..7)
        .map(|_| q.next_delay(&key("k")).as_millis())
        .collect();
    assert_eq!(delays, vec![5, 10, 20, 40, 80, 100, 100]);
    assert_eq!(q.num_requeues(&key("k")), 7);
    // Other keys have their own backoff.
    assert_eq!(q.next_delay(&key("other")).as_millis(), 5);
}

#[test]
fn forget_resets_backoff() {
    let q = queue();
    q.next_delay(&key("k"));
    q.next_delay(&key("k"));
    q.forget(&key("k"));
    assert_eq!(q.num_requeues(&key("k")), 0);
    assert_eq!(q.next_delay(&key("k")), Duration::from_millis(5));
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
        assert_eq!(
            q.next_delay(&key(&format!("k{i}"))),
            Duration::from_millis(1)
        );
    }
    let delay = q.next_delay(&key("k3"));
    assert!(
        delay >= Duration::from_millis(90) && delay <= Duration::from_millis(100),
        "{delay:?}"
    );
    let delay = q.next_delay(&key("k4"));
    assert!(delay >= Duration::from_millis(190), "{delay:?}");
}

#[tokio::test]
async fn add_after_queues_later() {
    let q = queue();
    q.add_after(&key("k"), Duration::from_millis(30));
    assert!(q.is_empty());
    let got = timeout(Duration::from_secs(1), q.get()).await.unwrap();
    assert_eq!(got, Some(key("k")));
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
    q.add(&key("k"));
    assert_eq!(q.get().await, None);
}

#[test]
fn a_per_key_limit_has_no_overall_bucket() {
    let q = WorkQueue::new(RateLimit::per_key(
        Duration::from_millis(5),
        Duration::from_secs(5),
    ));
    for i in 0..1000 {
        assert_eq!(
            q.next_delay(&key(&format!("k{i}"))),
            Duration::from_millis(5)
        );
    }
    let delays: Vec<u128> = (0..3)
        .map(|_| q.next_delay(&key("k0")).as_millis())
        .collect();
    assert_eq!(delays, vec![10, 20, 40]);
    assert_eq!(
        RateLimit::per_key(Duration::from_millis(5), Duration::from_secs(5)).backoff(100),
        Duration::from_secs(5)
    );
}

#[tokio::test]
async fn workers_retry_a_failed_key_and_look_again_after_a_waiting_point() {
    let q = WorkQueue::new(RateLimit::per_key(
        Duration::from_millis(1),
        Duration::from_millis(10),
    ));
    let calls = Arc::new(AtomicU32::new(0));
    let workers = {
        let calls = Arc::clone(&calls);
        q.spawn_workers(2, "test", move |_key: String| {
            let calls = Arc::clone(&calls);
            async move {
                match calls.fetch_add(1, Ordering::SeqCst) {
                    0 => Err("first call fails"),
                    1 => Ok(Next::After(Duration::from_millis(5))),
                    _ => Ok(Next::Done),
                }
            }
        })
    };
    q.add(&key("k"));
    timeout(Duration::from_secs(2), async {
        while calls.load(Ordering::SeqCst) < 3 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert_eq!(
        calls.load(Ordering::SeqCst),
        3,
        "Done asks for nothing more"
    );
    assert_eq!(
        q.num_requeues(&key("k")),
        0,
        "a success forgets the failures"
    );
    q.shut_down();
    for worker in workers {
        timeout(Duration::from_secs(1), worker)
            .await
            .unwrap()
            .unwrap();
    }
}
