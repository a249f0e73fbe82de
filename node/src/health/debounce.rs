//! Debouncing of health changes, so that a flapping device does not produce a slice write (and a
//! pod status update) per flap: a device turns Unhealthy or Unknown at once, the first time a
//! source says so; it turns Healthy again only once every source has said so for `settle`
//! without a break. A device whose reason or message changes while it stays unhealthy gets the
//! new ones and keeps its `since`.
//!
//! Pure: the caller passes the time (a monotonic instant for the settle time, the wall clock for
//! `since`), so the tests run on a fake clock.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::chrono::{DateTime, Utc};

use super::{DeviceHealth, HealthMap, HealthState, Observation, Observations};

/// A change of a device's state, as the agent logs and counts it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HealthChange {
    /// The device.
    pub device: String,
    /// The state before.
    pub from: HealthState,
    /// The health now.
    pub to: DeviceHealth,
}

/// The published health and the devices on their way back to Healthy.
#[derive(Clone, Debug)]
pub struct Debouncer {
    settle: Duration,
    current: HealthMap,
    /// Devices not healthy whose sources have all said Healthy since this instant.
    recovering: BTreeMap<String, Instant>,
}

impl Debouncer {
    /// A debouncer that lets a device turn Healthy after `settle` of healthy observations.
    pub fn new(settle: Duration) -> Self {
        Debouncer {
            settle,
            current: HealthMap::new(),
            recovering: BTreeMap::new(),
        }
    }

    /// The health published now.
    pub fn current(&self) -> &HealthMap {
        &self.current
    }

    /// One round: the devices `names` (the inventory; others are forgotten) with what the
    /// sources `observed` (a device without an observation is healthy), at `now` and `wall`.
    /// Returns the state changes, in name order.
    pub fn apply<'a>(
        &mut self,
        names: impl IntoIterator<Item = &'a String>,
        observed: &Observations,
        now: Instant,
        wall: DateTime<Utc>,
    ) -> Vec<HealthChange> {
        let healthy = Observation {
            state: HealthState::Healthy,
            reason: None,
            message: None,
        };
        let names: Vec<&String> = names.into_iter().collect();
        self.current.retain(|name, _| names.contains(&name));
        self.recovering.retain(|name, _| names.contains(&name));
        let mut changes = Vec::new();
        for name in names {
            let observation = observed.get(name).unwrap_or(&healthy);
            let Some(current) = self.current.get_mut(name) else {
                let health = health_of(observation, wall);
                if health.state != HealthState::Healthy {
                    changes.push(HealthChange {
                        device: name.clone(),
                        from: HealthState::Healthy,
                        to: health.clone(),
                    });
                }
                self.current.insert(name.clone(), health);
                continue;
            };
            if observation.state == HealthState::Healthy {
                if current.state == HealthState::Healthy {
                    continue;
                }
                let start = *self.recovering.entry(name.clone()).or_insert(now);
                if now.saturating_duration_since(start) >= self.settle {
                    self.recovering.remove(name);
                    let from = current.state;
                    *current = DeviceHealth::healthy(wall);
                    changes.push(HealthChange {
                        device: name.clone(),
                        from,
                        to: current.clone(),
                    });
                }
                continue;
            }
            self.recovering.remove(name);
            if current.state == observation.state {
                current.reason = observation.reason;
                current.message.clone_from(&observation.message);
                continue;
            }
            let from = current.state;
            *current = health_of(observation, wall);
            changes.push(HealthChange {
                device: name.clone(),
                from,
                to: current.clone(),
            });
        }
        changes
    }
}

fn health_of(observation: &Observation, since: DateTime<Utc>) -> DeviceHealth {
    DeviceHealth {
        state: observation.state,
        reason: observation.reason,
        message: observation.message.clone(),
        since,
    }
}

#[cfg(test)]
mod tests {
    use super::super::Reason;
    use super::*;
    use k8s_openapi::chrono::TimeDelta;

    /// A fake clock: the instant and the wall time move together.
    struct Clock {
        start: Instant,
        wall: DateTime<Utc>,
        elapsed: Duration,
    }

    impl Clock {
        fn new() -> Self {
            Clock {
                start: Instant::now(),
                wall: DateTime::<Utc>::from_timestamp(1_800_000_000, 0).unwrap(),
                elapsed: Duration::ZERO,
            }
        }

        fn advance(&mut self, by: Duration) {
            self.elapsed += by;
        }

        fn now(&self) -> (Instant, DateTime<Utc>) {
            (
                self.start + self.elapsed,
                self.wall + TimeDelta::from_std(self.elapsed).unwrap(),
            )
        }
    }

    fn names() -> Vec<String> {
        vec!["gpu-0".to_owned(), "gpu-1".to_owned()]
    }

    fn marked(message: &str) -> Observations {
        Observations::from([(
            "gpu-0".to_owned(),
            Observation::unhealthy(Reason::Marked, message),
        )])
    }

    fn round(d: &mut Debouncer, clock: &Clock, observed: &Observations) -> Vec<HealthChange> {
        let (now, wall) = clock.now();
        d.apply(&names(), observed, now, wall)
    }

    #[test]
    fn a_device_turns_unhealthy_at_once_and_healthy_only_after_the_settle_time() {
        let mut clock = Clock::new();
        let mut d = Debouncer::new(Duration::from_secs(60));
        assert!(round(&mut d, &clock, &Observations::new()).is_empty());
        clock.advance(Duration::from_secs(5));
        let changes = round(&mut d, &clock, &marked("bad fan"));
        let unhealthy_at = clock.now().1;
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].from, HealthState::Healthy);
        assert_eq!(changes[0].to.state, HealthState::Unhealthy);
        assert_eq!(changes[0].to.since, unhealthy_at);
        assert_eq!(d.current()["gpu-1"].state, HealthState::Healthy);

        clock.advance(Duration::from_secs(30));
        assert!(
            round(&mut d, &clock, &Observations::new()).is_empty(),
            "the first healthy observation starts the settle time"
        );
        clock.advance(Duration::from_secs(59));
        assert!(
            round(&mut d, &clock, &Observations::new()).is_empty(),
            "59 s of healthy observations are not enough"
        );
        assert!(d.current()["gpu-0"].is_unhealthy());
        clock.advance(Duration::from_secs(1));
        let changes = round(&mut d, &clock, &Observations::new());
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].from, HealthState::Unhealthy);
        assert_eq!(d.current()["gpu-0"], DeviceHealth::healthy(clock.now().1));
    }

    #[test]
    fn a_flapping_device_changes_once_and_keeps_its_since() {
        let mut clock = Clock::new();
        let mut d = Debouncer::new(Duration::from_secs(60));
        round(&mut d, &clock, &Observations::new());
        let first = round(&mut d, &clock, &marked("flap"));
        assert_eq!(first.len(), 1);
        let since = first[0].to.since;
        let mut later = Vec::new();
        for _ in 0..20 {
            clock.advance(Duration::from_secs(10));
            later.extend(round(&mut d, &clock, &Observations::new()));
            clock.advance(Duration::from_secs(10));
            later.extend(round(&mut d, &clock, &marked("flap")));
        }
        assert!(later.is_empty(), "no change per flap: {later:?}");
        assert_eq!(d.current()["gpu-0"].since, since);
    }

    #[test]
    fn a_new_reason_or_message_is_taken_without_a_state_change() {
        let clock = Clock::new();
        let mut d = Debouncer::new(Duration::from_secs(60));
        round(&mut d, &clock, &marked("first"));
        let since = d.current()["gpu-0"].since;
        let aer = Observations::from([(
            "gpu-0".to_owned(),
            Observation::unhealthy(Reason::PcieAerFatal, "second"),
        )]);
        assert!(round(&mut d, &clock, &aer).is_empty());
        let now = &d.current()["gpu-0"];
        assert_eq!(now.reason, Some(Reason::PcieAerFatal));
        assert_eq!(now.message.as_deref(), Some("second"));
        assert_eq!(now.since, since);
    }

    #[test]
    fn unknown_and_unhealthy_replace_each_other_at_once_and_gone_devices_are_forgotten() {
        let mut clock = Clock::new();
        let mut d = Debouncer::new(Duration::from_secs(60));
        round(&mut d, &clock, &marked("x"));
        clock.advance(Duration::from_secs(1));
        let unknown = Observations::from([(
            "gpu-0".to_owned(),
            Observation {
                state: HealthState::Unknown,
                reason: Some(Reason::Marked),
                message: None,
            },
        )]);
        let changes = round(&mut d, &clock, &unknown);
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].from, HealthState::Unhealthy);
        assert_eq!(changes[0].to.state, HealthState::Unknown);
        let (now, wall) = clock.now();
        d.apply(&["gpu-1".to_owned()], &Observations::new(), now, wall);
        assert_eq!(d.current().keys().collect::<Vec<_>>(), ["gpu-1"]);
    }
}
