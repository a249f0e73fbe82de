//! The one poller of the tests: call a check until it reports a value (or `true`), or panic
//! naming what was awaited once the timeout has passed.

use std::fmt::Display;
use std::future::Future;
use std::time::{Duration, Instant};

/// How often a check is repeated unless a test says otherwise.
pub const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// What a check returns: `bool` (held or not) or `Option<T>` (a value once reached).
pub trait Reached {
    /// The value handed back once the condition holds.
    type Value;
    /// `Some` once the condition holds.
    fn reached(self) -> Option<Self::Value>;
}

impl Reached for bool {
    type Value = ();
    fn reached(self) -> Option<()> {
        self.then_some(())
    }
}

impl<T> Reached for Option<T> {
    type Value = T;
    fn reached(self) -> Option<T> {
        self
    }
}

/// Awaits `check` every [`POLL_INTERVAL`] until it holds and returns its value; panics with
/// "timed out waiting for {what}" after `timeout`.
pub async fn eventually<F, Fut, R>(what: impl Display, timeout: Duration, check: F) -> R::Value
where
    F: FnMut() -> Fut,
    Fut: Future<Output = R>,
    R: Reached,
{
    eventually_every(what, timeout, POLL_INTERVAL, check).await
}

/// [`eventually`] with the interval between two checks given.
pub async fn eventually_every<F, Fut, R>(
    what: impl Display,
    timeout: Duration,
    interval: Duration,
    mut check: F,
) -> R::Value
where
    F: FnMut() -> Fut,
    Fut: Future<Output = R>,
    R: Reached,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = check().await.reached() {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what} ({timeout:?})"
        );
        tokio::time::sleep(interval).await;
    }
}

/// [`eventually_every`] for a check that blocks the thread (no async runtime).
pub fn eventually_blocking<R: Reached>(
    what: impl Display,
    timeout: Duration,
    interval: Duration,
    mut check: impl FnMut() -> R,
) -> R::Value {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().reached() {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what} ({timeout:?})"
        );
        std::thread::sleep(interval);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[tokio::test]
    async fn returns_the_value_of_the_first_check_that_holds() {
        let calls = AtomicU32::new(0);
        let value = eventually("the third call", Duration::from_secs(5), || async {
            let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
            (n == 3).then_some(n * 10)
        })
        .await;
        assert_eq!(value, 30);
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }

    #[test]
    #[should_panic(expected = "timed out waiting for nothing")]
    fn panics_naming_what_was_awaited_after_the_timeout() {
        eventually_blocking(
            "nothing",
            Duration::from_millis(30),
            Duration::from_millis(5),
            || false,
        );
    }
}
