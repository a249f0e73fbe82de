//! The small controller runtime the actors share: informers (a watcher feeding a reflector store
//! and a change handler) and a deduplicating work queue with per-key exclusivity and backoff.
//!
//! Owns no Kubernetes semantics; it must not depend on any actor module.

use dra_framework::sync::LockExt;
use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt::Debug;
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use kube::runtime::reflector::{self, store::Writer};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;

/// One change an informer reports to its handler.
#[derive(Debug)]
pub enum Change<'a, K> {
    /// The object was created or modified (or listed during a resync).
    Applied(&'a K),
    /// The object was deleted; the value is its last known state.
    Deleted(&'a K),
    /// A (re)list finished: objects deleted while the watch was down got no `Deleted` change.
    Resynced,
}

/// Starts a watcher on `api` that keeps `writer`'s store up to date and calls `handler` after each
/// change has been applied to the store. Ends when `shutdown` turns true.
pub fn spawn_informer<K, F>(
    api: Api<K>,
    writer: Writer<K>,
    handler: F,
    mut shutdown: watch::Receiver<bool>,
) -> JoinHandle<()>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
    F: Fn(Change<'_, K>) + Send + 'static,
{
    tokio::spawn(async move {
        let stream = reflector::reflector(
            writer,
            watcher::watcher(api, watcher::Config::default()).default_backoff(),
        );
        let mut stream = std::pin::pin!(stream);
        loop {
            tokio::select! {
                _ = shutdown.changed() => break,
                next = stream.next() => match next {
                    None => break,
                    Some(Ok(Event::Apply(obj) | Event::InitApply(obj))) => handler(Change::Applied(&obj)),
                    Some(Ok(Event::Delete(obj))) => handler(Change::Deleted(&obj)),
                    Some(Ok(Event::InitDone)) => handler(Change::Resynced),
                    Some(Ok(Event::Init)) => {}
                    Some(Err(error)) => tracing::debug!(%error, "watch failed, retrying"),
                },
            }
        }
    })
}

/// [`spawn_informer`] for a watch whose objects are decoded as `S` and stored as `K`: the
/// informer of a kind whose wire shape differs from the type the actors share.
pub fn spawn_informer_as<S, K, F>(
    api: Api<S>,
    writer: Writer<K>,
    handler: F,
    mut shutdown: watch::Receiver<bool>,
) -> JoinHandle<()>
where
    S: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    S::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
    K: Resource + Clone + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
    S: Into<K>,
    F: Fn(Change<'_, K>) + Send + 'static,
{
    tokio::spawn(async move {
        let events = watcher::watcher(api, watcher::Config::default())
            .map(|event| event.map(convert_event::<S, K>))
            .default_backoff();
        let stream = reflector::reflector(writer, events);
        let mut stream = std::pin::pin!(stream);
        loop {
            tokio::select! {
                _ = shutdown.changed() => break,
                next = stream.next() => match next {
                    None => break,
                    Some(Ok(Event::Apply(obj) | Event::InitApply(obj))) => handler(Change::Applied(&obj)),
                    Some(Ok(Event::Delete(obj))) => handler(Change::Deleted(&obj)),
                    Some(Ok(Event::InitDone)) => handler(Change::Resynced),
                    Some(Ok(Event::Init)) => {}
                    Some(Err(error)) => tracing::debug!(%error, "watch failed, retrying"),
                },
            }
        }
    })
}

fn convert_event<S: Into<K>, K>(event: Event<S>) -> Event<K> {
    match event {
        Event::Apply(obj) => Event::Apply(obj.into()),
        Event::Delete(obj) => Event::Delete(obj.into()),
        Event::Init => Event::Init,
        Event::InitApply(obj) => Event::InitApply(obj.into()),
        Event::InitDone => Event::InitDone,
    }
}

/// What a reconcile asks the queue to do with its key afterwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Nothing more to do until the next change.
    Done,
    /// Look again after this delay even without a change (a waiting point).
    After(Duration),
}

#[derive(Debug)]
struct State<T> {
    queue: VecDeque<T>,
    dirty: HashSet<T>,
    processing: HashSet<T>,
    failures: HashMap<T, u32>,
    closed: bool,
}

/// A work queue in the client-go style: a key waits at most once, is never handed to two workers at
/// once, and a key added while it is processed is handed out again once the worker is done.
#[derive(Debug)]
pub struct WorkQueue<T> {
    state: Mutex<State<T>>,
    ready: Notify,
}

/// Shortest and longest delay of the per-key failure backoff.
const BACKOFF_BASE: Duration = Duration::from_millis(5);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

impl<T: Clone + Eq + Hash + Send + Sync + Debug + 'static> WorkQueue<T> {
    /// An empty open queue.
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(State {
                queue: VecDeque::new(),
                dirty: HashSet::new(),
                processing: HashSet::new(),
                failures: HashMap::new(),
                closed: false,
            }),
            ready: Notify::new(),
        })
    }

    /// Queues `key` unless it is already waiting.
    pub fn add(&self, key: T) {
        let mut state = self.state.lock_or_recover();
        if state.closed || !state.dirty.insert(key.clone()) {
            return;
        }
        if !state.processing.contains(&key) {
            state.queue.push_back(key);
            drop(state);
            self.ready.notify_one();
        }
    }

    /// Queues `key` after `delay`.
    pub fn add_after(self: &Arc<Self>, key: T, delay: Duration) {
        let queue = Arc::clone(self);
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            queue.add(key);
        });
    }

    /// Queues `key` after its failure backoff (5 ms doubling up to 5 s) and counts the failure.
    pub fn add_rate_limited(self: &Arc<Self>, key: T) {
        let failures = {
            let mut state = self.state.lock_or_recover();
            let count = state.failures.entry(key.clone()).or_insert(0);
            *count = count.saturating_add(1);
            *count
        };
        self.add_after(key, backoff_delay(failures));
    }

    /// Forgets the failure count of `key`.
    pub fn forget(&self, key: &T) {
        self.state.lock_or_recover().failures.remove(key);
    }

    /// Number of keys waiting to be handed out.
    pub fn len(&self) -> usize {
        self.state.lock_or_recover().queue.len()
    }

    /// Whether no key is waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stops handing out keys; waiting workers return `None`.
    pub fn close(&self) {
        self.state.lock_or_recover().closed = true;
        self.ready.notify_waiters();
    }

    /// The next key to process, or `None` once the queue is closed.
    pub async fn next(&self) -> Option<T> {
        loop {
            let notified = self.ready.notified();
            {
                let mut state = self.state.lock_or_recover();
                if state.closed {
                    return None;
                }
                if let Some(key) = state.queue.pop_front() {
                    state.dirty.remove(&key);
                    state.processing.insert(key.clone());
                    if !state.queue.is_empty() {
                        self.ready.notify_one();
                    }
                    return Some(key);
                }
            }
            notified.await;
        }
    }

    /// Marks `key` processed; if it was added meanwhile it is queued again.
    pub fn done(&self, key: &T) {
        let mut state = self.state.lock_or_recover();
        state.processing.remove(key);
        if state.dirty.contains(key) && !state.closed {
            state.queue.push_back(key.clone());
            drop(state);
            self.ready.notify_one();
        }
    }

    /// Runs `workers` loops that hand keys to `reconcile` until the queue closes. Errors are logged
    /// and retried with backoff; `Next::After` re-queues the key after its delay.
    pub fn spawn_workers<F, Fut, E>(
        self: &Arc<Self>,
        workers: usize,
        name: &'static str,
        reconcile: F,
    ) -> Vec<JoinHandle<()>>
    where
        F: Fn(T) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future<Output = Result<Next, E>> + Send,
        E: std::fmt::Display + Send,
    {
        (0..workers.max(1))
            .map(|_| {
                let queue = Arc::clone(self);
                let reconcile = reconcile.clone();
                tokio::spawn(async move {
                    while let Some(key) = queue.next().await {
                        match reconcile(key.clone()).await {
                            Ok(next) => {
                                queue.forget(&key);
                                if let Next::After(delay) = next {
                                    queue.add_after(key.clone(), delay);
                                }
                            }
                            Err(error) => {
                                tracing::debug!(actor = name, key = ?key, %error, "reconcile failed, retrying");
                                queue.add_rate_limited(key.clone());
                            }
                        }
                        queue.done(&key);
                    }
                })
            })
            .collect()
    }
}

/// The delay before retry number `failures` (1-based): 5 ms doubling, capped at 5 s.
pub fn backoff_delay(failures: u32) -> Duration {
    let exponent = failures.saturating_sub(1).min(20);
    BACKOFF_BASE.saturating_mul(1 << exponent).min(BACKOFF_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn key_added_twice_is_handed_out_once() {
        let queue = WorkQueue::new();
        queue.add("a");
        queue.add("a");
        queue.add("b");
        assert_eq!(queue.len(), 2);
        assert_eq!(queue.next().await, Some("a"));
        assert_eq!(queue.next().await, Some("b"));
        assert!(queue.is_empty());
    }

    #[tokio::test]
    async fn key_added_while_processing_returns_after_done() {
        let queue = WorkQueue::new();
        queue.add("a");
        let key = queue.next().await.unwrap();
        queue.add("a");
        assert!(
            queue.is_empty(),
            "a key in progress must not be handed to a second worker"
        );
        queue.done(&key);
        assert_eq!(queue.next().await, Some("a"));
    }

    #[tokio::test]
    async fn closed_queue_releases_waiting_worker() {
        let queue: Arc<WorkQueue<&str>> = WorkQueue::new();
        let waiter = {
            let queue = Arc::clone(&queue);
            tokio::spawn(async move { queue.next().await })
        };
        tokio::task::yield_now().await;
        queue.close();
        assert_eq!(waiter.await.unwrap(), None);
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        assert_eq!(backoff_delay(1), Duration::from_millis(5));
        assert_eq!(backoff_delay(2), Duration::from_millis(10));
        assert_eq!(backoff_delay(4), Duration::from_millis(40));
        assert_eq!(backoff_delay(100), BACKOFF_MAX);
    }
}
