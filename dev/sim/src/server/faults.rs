//! Seeded, reproducible fault injection: write conflicts (409), internal errors (500) on writes
//! and on reads, slow writes and forced watch disconnects.
//!
//! The same seed and the same sequence of requests give the same faults: each write draws exactly
//! two numbers, each read (get or list) and each watch one, from a `ChaCha8` generator. No HTTP
//! or store dependencies.

use dra_runtime::lock::LockExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Fault rates; all rates are probabilities in `[0, 1]`. The default injects nothing.
#[derive(Debug, Clone, PartialEq)]
pub struct Faults {
    /// Seed of the generator (reset whenever the config is set).
    pub seed: u64,
    /// Probability that a write (POST/PUT/PATCH/DELETE) answers 409 Conflict without applying.
    pub write_conflict_rate: f64,
    /// Probability that a write answers 500 `InternalError` without applying.
    pub write_error_rate: f64,
    /// Probability that a write is delayed by `write_delay` before it is applied.
    pub write_delay_rate: f64,
    /// Delay of slow writes (the shortest, when `write_delay_max` is longer).
    pub write_delay: Duration,
    /// Longest delay of slow writes; delays are spread evenly between `write_delay` and this.
    /// Not longer than `write_delay`: every slow write waits exactly `write_delay`.
    pub write_delay_max: Duration,
    /// Probability that a get or list (not a watch) answers 500 `InternalError`.
    pub read_error_rate: f64,
    /// If set, every watch stream ends after a random time in `[0, max]`.
    pub watch_max_lifetime: Option<Duration>,
}

impl Default for Faults {
    fn default() -> Self {
        Self {
            seed: 0,
            write_conflict_rate: 0.0,
            write_error_rate: 0.0,
            write_delay_rate: 0.0,
            write_delay: Duration::from_millis(50),
            write_delay_max: Duration::ZERO,
            read_error_rate: 0.0,
            watch_max_lifetime: None,
        }
    }
}

/// Why a [`Faults`] configuration is refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum FaultsError {
    /// A rate is not a probability.
    #[error("fault {what} rate {rate} is not in [0, 1]")]
    RateOutOfRange {
        /// Which rate (`conflict`, `error`, `delay`, `read error`).
        what: &'static str,
        /// Its value.
        rate: f64,
    },
    /// Conflicts and errors together are more likely than certain.
    #[error("fault conflict rate {conflict} and error rate {error} add up to more than 1")]
    WriteRatesAboveOne {
        /// The conflict rate.
        conflict: f64,
        /// The error rate.
        error: f64,
    },
}

impl Faults {
    /// No faults.
    pub fn none() -> Self {
        Self::default()
    }

    /// A config with the given seed and no faults yet.
    pub fn seeded(seed: u64) -> Self {
        Self {
            seed,
            ..Self::default()
        }
    }

    /// Sets the write conflict rate.
    #[must_use]
    pub fn conflicts(mut self, rate: f64) -> Self {
        self.write_conflict_rate = rate;
        self
    }

    /// Sets the internal error rate.
    #[must_use]
    pub fn errors(mut self, rate: f64) -> Self {
        self.write_error_rate = rate;
        self
    }

    /// Sets slow writes.
    #[must_use]
    pub fn delays(mut self, rate: f64, delay: Duration) -> Self {
        self.write_delay_rate = rate;
        self.write_delay = delay;
        self.write_delay_max = Duration::ZERO;
        self
    }

    /// Sets slow writes whose delays are spread evenly over `[min, max]`.
    #[must_use]
    pub fn delays_between(mut self, rate: f64, min: Duration, max: Duration) -> Self {
        self.write_delay_rate = rate;
        self.write_delay = min;
        self.write_delay_max = max;
        self
    }

    /// Sets the internal error rate of gets and lists.
    #[must_use]
    pub fn read_errors(mut self, rate: f64) -> Self {
        self.read_error_rate = rate;
        self
    }

    /// Checks that every rate is a probability and that conflicts and errors together are one
    /// at most.
    pub fn validate(&self) -> Result<(), FaultsError> {
        let rates = [
            ("conflict", self.write_conflict_rate),
            ("error", self.write_error_rate),
            ("delay", self.write_delay_rate),
            ("read error", self.read_error_rate),
        ];
        for (what, rate) in rates {
            if !(0.0..=1.0).contains(&rate) {
                return Err(FaultsError::RateOutOfRange { what, rate });
            }
        }
        if self.write_conflict_rate + self.write_error_rate > 1.0 {
            return Err(FaultsError::WriteRatesAboveOne {
                conflict: self.write_conflict_rate,
                error: self.write_error_rate,
            });
        }
        Ok(())
    }

    /// Ends watches after a random time up to `max`.
    #[must_use]
    pub fn watch_disconnects(mut self, max: Duration) -> Self {
        self.watch_max_lifetime = Some(max);
        self
    }
}

/// What to do with one write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WriteFault {
    /// Proceed normally.
    None,
    /// Proceed after the delay.
    Delay(Duration),
    /// Answer 409 Conflict.
    Conflict,
    /// Answer 500 `InternalError`.
    Error,
}

/// Counters of injected faults.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultStats {
    /// Injected conflicts.
    pub conflicts: u64,
    /// Injected internal errors.
    pub errors: u64,
    /// Delayed writes.
    pub delays: u64,
    /// Watches ended by a fault (timer or on demand).
    pub watch_disconnects: u64,
    /// Gets and lists answered with an injected internal error.
    pub read_errors: u64,
}

/// The injector shared by the handlers.
#[derive(Debug)]
pub(crate) struct FaultInjector {
    state: Mutex<(Faults, ChaCha8Rng)>,
    conflicts: AtomicU64,
    errors: AtomicU64,
    delays: AtomicU64,
    disconnects: AtomicU64,
    read_errors: AtomicU64,
}

impl FaultInjector {
    /// An injector with the given config.
    pub fn new(faults: Faults) -> Self {
        let rng = ChaCha8Rng::seed_from_u64(faults.seed);
        Self {
            state: Mutex::new((faults, rng)),
            conflicts: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            delays: AtomicU64::new(0),
            disconnects: AtomicU64::new(0),
            read_errors: AtomicU64::new(0),
        }
    }

    /// Replaces the config and reseeds the generator.
    pub fn set(&self, faults: Faults) {
        let mut st = self.state.lock_or_recover();
        st.1 = ChaCha8Rng::seed_from_u64(faults.seed);
        st.0 = faults;
    }

    /// The current config.
    pub fn get(&self) -> Faults {
        self.state.lock_or_recover().0.clone()
    }

    /// Decides the fault of the next write.
    pub fn next_write(&self) -> WriteFault {
        let mut st = self.state.lock_or_recover();
        let (faults, rng) = &mut *st;
        let outcome: f64 = rng.random();
        let slow: f64 = rng.random();
        if outcome < faults.write_conflict_rate {
            self.conflicts.fetch_add(1, Ordering::Relaxed);
            WriteFault::Conflict
        } else if outcome < faults.write_conflict_rate + faults.write_error_rate {
            self.errors.fetch_add(1, Ordering::Relaxed);
            WriteFault::Error
        } else if slow < faults.write_delay_rate {
            self.delays.fetch_add(1, Ordering::Relaxed);
            // Where `slow` falls below the rate spreads the delay without another draw.
            let spread = faults.write_delay_max.saturating_sub(faults.write_delay);
            let fraction = slow / faults.write_delay_rate;
            WriteFault::Delay(faults.write_delay + spread.mul_f64(fraction))
        } else {
            WriteFault::None
        }
    }

    /// Decides whether the next get or list fails with an internal error.
    pub fn next_read_fails(&self) -> bool {
        let mut st = self.state.lock_or_recover();
        let (faults, rng) = &mut *st;
        let draw: f64 = rng.random();
        let fails = draw < faults.read_error_rate;
        if fails {
            self.read_errors.fetch_add(1, Ordering::Relaxed);
        }
        fails
    }

    /// Decides how long the next watch may live (`None`: until the client or timeout ends it).
    pub fn next_watch_lifetime(&self) -> Option<Duration> {
        let mut st = self.state.lock_or_recover();
        let (faults, rng) = &mut *st;
        let max = faults.watch_max_lifetime?;
        let fraction: f64 = rng.random();
        Some(max.mul_f64(fraction))
    }

    /// Records a watch ended by a fault.
    pub fn record_disconnect(&self) {
        self.disconnects.fetch_add(1, Ordering::Relaxed);
    }

    /// Counters so far.
    pub fn stats(&self) -> FaultStats {
        FaultStats {
            conflicts: self.conflicts.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
            delays: self.delays.load(Ordering::Relaxed),
            watch_disconnects: self.disconnects.load(Ordering::Relaxed),
            read_errors: self.read_errors.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sequence(faults: &Faults, n: usize) -> Vec<WriteFault> {
        let inj = FaultInjector::new(faults.clone());
        (0..n).map(|_| inj.next_write()).collect()
    }

    #[test]
    fn same_seed_gives_same_fault_sequence() {
        let f = Faults::seeded(7)
            .conflicts(0.2)
            .errors(0.1)
            .delays(0.2, Duration::from_millis(1));
        let a = sequence(&f, 200);
        assert_eq!(a, sequence(&f, 200));
        assert!(a.contains(&WriteFault::Conflict) && a.contains(&WriteFault::Error));
        assert_ne!(a, sequence(&Faults { seed: 8, ..f }, 200));
    }

    #[test]
    fn spread_delays_stay_between_their_bounds_and_vary() {
        let (min, max) = (Duration::from_millis(100), Duration::from_millis(200));
        let delays: Vec<Duration> = sequence(&Faults::seeded(3).delays_between(0.5, min, max), 400)
            .into_iter()
            .filter_map(|w| match w {
                WriteFault::Delay(d) => Some(d),
                _ => None,
            })
            .collect();
        assert!(delays.len() > 100, "{}", delays.len());
        assert!(delays.iter().all(|d| (min..=max).contains(d)), "{delays:?}");
        let shortest = delays.iter().min().unwrap();
        let longest = delays.iter().max().unwrap();
        assert!(
            longest.saturating_sub(*shortest) > Duration::from_millis(50),
            "{delays:?}"
        );
    }

    #[test]
    fn read_errors_follow_their_rate() {
        let inj = FaultInjector::new(Faults::seeded(9).read_errors(0.25));
        let failed = (0..1000).filter(|_| inj.next_read_fails()).count();
        assert!((150..350).contains(&failed), "{failed}");
        assert_eq!(inj.stats().read_errors, failed as u64);
        let none = FaultInjector::new(Faults::seeded(9));
        assert!(!(0..100).any(|_| none.next_read_fails()));
    }

    #[test]
    fn rates_outside_zero_to_one_are_refused() {
        assert!(Faults::seeded(1)
            .conflicts(0.1)
            .errors(0.05)
            .validate()
            .is_ok());
        assert!(Faults::seeded(1).conflicts(1.5).validate().is_err());
        assert!(Faults::seeded(1).read_errors(-0.1).validate().is_err());
        assert!(Faults::seeded(1)
            .conflicts(0.6)
            .errors(0.6)
            .validate()
            .is_err());
        assert!(Faults::seeded(1)
            .delays(f64::NAN, Duration::ZERO)
            .validate()
            .is_err());
    }

    #[test]
    fn default_config_injects_nothing() {
        assert!(sequence(&Faults::none(), 100)
            .iter()
            .all(|w| *w == WriteFault::None));
    }
}
