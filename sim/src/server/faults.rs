//! Seeded, reproducible fault injection: write conflicts (409), internal errors (500), slow writes
//! and forced watch disconnects.
//!
//! The same seed and the same sequence of requests give the same faults: each write draws exactly two
//! numbers and each watch one, from a `ChaCha8` generator. No HTTP or store dependencies.

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
    /// Delay of slow writes.
    pub write_delay: Duration,
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
            watch_max_lifetime: None,
        }
    }
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
        self
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
pub enum WriteFault {
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
}

/// The injector shared by the handlers.
#[derive(Debug)]
pub struct FaultInjector {
    state: Mutex<(Faults, ChaCha8Rng)>,
    conflicts: AtomicU64,
    errors: AtomicU64,
    delays: AtomicU64,
    disconnects: AtomicU64,
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
        }
    }

    /// Replaces the config and reseeds the generator.
    pub fn set(&self, faults: Faults) {
        let mut st = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        st.1 = ChaCha8Rng::seed_from_u64(faults.seed);
        st.0 = faults;
    }

    /// The current config.
    pub fn get(&self) -> Faults {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .0
            .clone()
    }

    /// Decides the fault of the next write.
    pub fn next_write(&self) -> WriteFault {
        let mut st = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
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
            WriteFault::Delay(faults.write_delay)
        } else {
            WriteFault::None
        }
    }

    /// Decides how long the next watch may live (`None`: until the client or timeout ends it).
    pub fn next_watch_lifetime(&self) -> Option<Duration> {
        let mut st = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
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
    fn default_config_injects_nothing() {
        assert!(sequence(&Faults::none(), 100)
            .iter()
            .all(|w| *w == WriteFault::None));
    }
}
