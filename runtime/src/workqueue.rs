//! The rate-limited work queue of every controller loop here: the v1alpha2 framework's, the
//! mirror's and the simulator's actors'.
//!
//! Generic over the key type. A key is queued at most once and never handed to two workers at
//! once: a key added while it is being processed is queued again when its worker calls
//! [`WorkQueue::done`]. Retries use a per-key exponential backoff combined with an overall token
//! bucket (none where `qps` is 0); the larger delay wins. [`WorkQueue::spawn_workers`] runs plain
//! reconcile loops over it. Owns only the queue; must not depend on an API client or a driver.

use crate::lock::LockExt;
use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt::Debug;
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// Retry limits of the queue.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    /// First per-key retry delay (doubles with every failure).
    pub base_delay: Duration,
    /// Largest per-key retry delay.
    pub max_delay: Duration,
    /// Overall retry rate, tokens per second; 0 for no overall limit.
    pub qps: f64,
    /// Overall burst, tokens.
    pub burst: u32,
}

impl Default for RateLimit {
    /// The client-go default: 5 ms .. 1000 s per key, 10/s with burst 100 overall.
    fn default() -> Self {
        Self {
            base_delay: Duration::from_millis(5),
            max_delay: Duration::from_secs(1000),
            qps: 10.0,
            burst: 100,
        }
    }
}

impl RateLimit {
    /// A per-key backoff from `base_delay` doubling up to `max_delay`, without an overall bucket.
    pub const fn per_key(base_delay: Duration, max_delay: Duration) -> Self {
        Self {
            base_delay,
            max_delay,
            qps: 0.0,
            burst: 0,
        }
    }

    /// The per-key backoff before retry number `failures` (1-based): `base_delay` doubling,
    /// capped at `max_delay`.
    pub fn backoff(&self, failures: u32) -> Duration {
        let exponent = i32::try_from(failures.saturating_sub(1).min(63)).unwrap_or(63);
        let backoff = self.base_delay.as_secs_f64() * 2f64.powi(exponent);
        Duration::from_secs_f64(backoff.min(self.max_delay.as_secs_f64()))
    }
}

/// What a reconcile run by [`WorkQueue::spawn_workers`] asks the queue to do with its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Nothing more to do until the next change.
    Done,
    /// Look again after this delay even without a change (a waiting point).
    After(Duration),
}

/// A deduplicating, rate-limited queue of keys. Clones share the queue.
pub struct WorkQueue<K> {
    inner: Arc<Inner<K>>,
}

impl<K> Clone for WorkQueue<K> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

struct Inner<K> {
    limit: RateLimit,
    state: Mutex<State<K>>,
    notify: Notify,
}

struct State<K> {
    queue: VecDeque<K>,
    dirty: HashSet<K>,
    processing: HashSet<K>,
    failures: HashMap<K, u32>,
    tokens: f64,
    refilled: Instant,
    shut_down: bool,
}

impl<K> WorkQueue<K>
where
    K: Clone + Eq + Hash + Send + 'static,
{
    /// An empty queue with the given retry limits.
    pub fn new(limit: RateLimit) -> Self {
        Self {
            inner: Arc::new(Inner {
                limit,
                state: Mutex::new(State {
                    queue: VecDeque::new(),
                    dirty: HashSet::new(),
                    processing: HashSet::new(),
                    failures: HashMap::new(),
                    tokens: f64::from(limit.burst),
                    refilled: Instant::now(),
                    shut_down: false,
                }),
                notify: Notify::new(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State<K>> {
        self.inner.state.lock_or_recover()
    }

    /// Queues `key` unless it is already queued. A key being processed is queued again after
    /// [`WorkQueue::done`].
    pub fn add(&self, key: &K) {
        let mut state = self.lock();
        if state.shut_down || state.dirty.contains(key) {
            return;
        }
        state.dirty.insert(key.clone());
        if !state.processing.contains(key) {
            state.queue.push_back(key.clone());
            drop(state);
            self.inner.notify.notify_one();
        }
    }

    /// Queues `key` after `delay` (must be called inside a tokio runtime when `delay` is non-zero).
    pub fn add_after(&self, key: &K, delay: Duration) {
        if delay.is_zero() {
            self.add(key);
            return;
        }
        let queue = self.clone();
        let key = key.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            queue.add(&key);
        });
    }

    /// Queues `key` after its next backoff delay.
    pub fn add_rate_limited(&self, key: &K) {
        let delay = self.next_delay(key);
        self.add_after(key, delay);
    }

    /// The delay before the next retry of `key`, counting this retry: the larger of the per-key
    /// exponential backoff and the overall token bucket's wait.
    pub fn next_delay(&self, key: &K) -> Duration {
        let limit = self.inner.limit;
        let mut state = self.lock();
        let backoff = Self::count_failure(&mut state, key, limit);

        let now = Instant::now();
        let elapsed = now.duration_since(state.refilled).as_secs_f64();
        state.refilled = now;
        state.tokens = (state.tokens + elapsed * limit.qps).min(f64::from(limit.burst)) - 1.0;
        let bucket = if state.tokens < 0.0 && limit.qps > 0.0 {
            Duration::from_secs_f64(-state.tokens / limit.qps)
        } else {
            Duration::ZERO
        };
        backoff.max(bucket)
    }

    /// Queues `key` after its per-key backoff only, without spending the overall token bucket:
    /// for a retry after a write conflict, which the watch's newer copy resolves anyway.
    pub fn add_backoff(&self, key: &K) {
        let limit = self.inner.limit;
        let delay = Self::count_failure(&mut self.lock(), key, limit);
        self.add_after(key, delay);
    }

    /// Counts one more failure of `key` and returns its exponential backoff.
    fn count_failure(state: &mut State<K>, key: &K, limit: RateLimit) -> Duration {
        let failures = state.failures.entry(key.clone()).or_insert(0);
        *failures = failures.saturating_add(1);
        limit.backoff(*failures)
    }

    /// Clears the failure count of `key` (after a successful sync or a delete).
    pub fn forget(&self, key: &K) {
        self.lock().failures.remove(key);
    }

    /// How many retries of `key` are counted.
    pub fn num_requeues(&self, key: &K) -> u32 {
        self.lock().failures.get(key).copied().unwrap_or(0)
    }

    /// Waits for the next key and marks it as being processed; `None` once the queue is shut down.
    pub async fn get(&self) -> Option<K> {
        loop {
            let notified = self.inner.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut state = self.lock();
                if state.shut_down {
                    return None;
                }
                if let Some(key) = state.queue.pop_front() {
                    state.dirty.remove(&key);
                    state.processing.insert(key.clone());
                    let more = !state.queue.is_empty();
                    drop(state);
                    if more {
                        self.inner.notify.notify_one();
                    }
                    return Some(key);
                }
            }
            notified.await;
        }
    }

    /// Marks `key` as no longer being processed, re-queuing it if it was added meanwhile.
    pub fn done(&self, key: &K) {
        let mut state = self.lock();
        state.processing.remove(key);
        if state.dirty.contains(key) && !state.shut_down {
            state.queue.push_back(key.clone());
            drop(state);
            self.inner.notify.notify_one();
        }
    }

    /// Stops handing out keys; waiting [`WorkQueue::get`] calls return `None`.
    pub fn shut_down(&self) {
        self.lock().shut_down = true;
        self.inner.notify.notify_waiters();
    }

    /// Whether [`WorkQueue::shut_down`] was called.
    pub fn is_shut_down(&self) -> bool {
        self.lock().shut_down
    }

    /// Number of keys waiting to be processed (the `workqueue_depth` metric).
    pub fn len(&self) -> usize {
        self.lock().queue.len()
    }

    /// Whether no key is waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether `key` is being processed right now.
    pub fn is_processing(&self, key: &K) -> bool {
        self.lock().processing.contains(key)
    }
}

impl<K> WorkQueue<K>
where
    K: Clone + Eq + Hash + Debug + Send + Sync + 'static,
{
    /// Runs `workers` loops that hand keys to `reconcile` until the queue is shut down. An error
    /// is logged at debug and retried with backoff; [`Next::After`] queues the key again after
    /// its delay.
    pub fn spawn_workers<F, Fut, E>(
        &self,
        workers: usize,
        name: &'static str,
        reconcile: F,
    ) -> Vec<JoinHandle<()>>
    where
        F: Fn(K) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future<Output = Result<Next, E>> + Send,
        E: std::fmt::Display + Send,
    {
        (0..workers.max(1))
            .map(|_| {
                let queue = self.clone();
                let reconcile = reconcile.clone();
                tokio::spawn(async move {
                    while let Some(key) = queue.get().await {
                        match reconcile(key.clone()).await {
                            Ok(next) => {
                                queue.forget(&key);
                                if let Next::After(delay) = next {
                                    queue.add_after(&key, delay);
                                }
                            }
                            Err(error) => {
                                tracing::debug!(actor = name, key = ?key, %error, "Reconcile failed, retrying");
                                queue.add_rate_limited(&key);
                            }
                        }
                        queue.done(&key);
                    }
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
