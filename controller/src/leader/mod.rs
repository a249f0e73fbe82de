//! Leader election on a `coordination.k8s.io/v1` Lease, so that of several replicas (a
//! StatefulSet with 2) exactly one allocates, and fencing, so that a replica that lost the lease
//! stops writing before another can have taken it.
//!
//! - [`decide`]: the pure decision (create, acquire, wait) from the Lease as read;
//! - `elector`: the campaign and renewal loop against the API server;
//! - `fence`: the deadline after the last successful renewal, asked by the ledger's commit
//!   guard and by the Kubernetes client layer of every write;
//! - [`address`]: the admin URL of the replica holding the Lease, from its identity, where a
//!   standby forwards admin requests.
//!
//! Timing follows client-go's defaults: lease 15 s, renew deadline 10 s, retry 2 s. A holder
//! writes only until `renew_deadline` after it SENT its last successful renewal; a candidate
//! takes an unreleased lease only `lease_duration` after it last SAW the lease change, so between
//! the old leader's last write and the new leader's first there are at least
//! `lease_duration - renew_deadline` (5 s) for writes in flight to land. Must not depend on the
//! framework or the driver.

pub mod address;
pub mod decide;
mod elector;
mod fence;

use std::time::Duration;

pub use address::{LeaderUrlError, LeaderUrlTemplate, DEFAULT_LEADER_URL_TEMPLATE};
pub use elector::Elector;
pub use fence::{Fence, FenceLayer, Fenced};

/// Where and how to campaign.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderConfig {
    /// Name of the Lease.
    pub lease_name: String,
    /// Namespace of the Lease.
    pub namespace: String,
    /// This candidate's identity (the pod name in a StatefulSet).
    pub identity: String,
    /// How long a lease that is not renewed stays valid for the other candidates.
    pub lease_duration: Duration,
    /// How long the holder keeps writing without a successful renewal.
    pub renew_deadline: Duration,
    /// Time between attempts to acquire or renew.
    pub retry_period: Duration,
}

/// Why a [`LeaderConfig`] is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LeaderConfigError {
    /// The lease name, namespace or identity is empty.
    #[error("lease name, namespace and identity must not be empty")]
    EmptyName,
    /// The renew deadline is not shorter than the lease duration.
    #[error("the renew deadline ({renew_deadline:?}) must be shorter than the lease duration ({lease_duration:?})")]
    RenewDeadline {
        /// The renew deadline.
        renew_deadline: Duration,
        /// The lease duration.
        lease_duration: Duration,
    },
    /// The retry period is zero or not shorter than the renew deadline.
    #[error("the retry period ({retry_period:?}) must be positive and shorter than the renew deadline ({renew_deadline:?})")]
    RetryPeriod {
        /// The retry period.
        retry_period: Duration,
        /// The renew deadline.
        renew_deadline: Duration,
    },
}

impl LeaderConfig {
    /// client-go's timings for `lease_name` in `namespace` as `identity`.
    pub fn new(
        lease_name: impl Into<String>,
        namespace: impl Into<String>,
        identity: impl Into<String>,
    ) -> Self {
        LeaderConfig {
            lease_name: lease_name.into(),
            namespace: namespace.into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }

    /// Checks names and that `retry_period < renew_deadline < lease_duration`.
    pub fn validate(&self) -> Result<(), LeaderConfigError> {
        if self.lease_name.is_empty() || self.namespace.is_empty() || self.identity.is_empty() {
            return Err(LeaderConfigError::EmptyName);
        }
        if self.renew_deadline >= self.lease_duration {
            return Err(LeaderConfigError::RenewDeadline {
                renew_deadline: self.renew_deadline,
                lease_duration: self.lease_duration,
            });
        }
        if self.retry_period.is_zero() || self.retry_period >= self.renew_deadline {
            return Err(LeaderConfigError::RetryPeriod {
                retry_period: self.retry_period,
                renew_deadline: self.renew_deadline,
            });
        }
        Ok(())
    }
}

/// Where this process stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// Campaigning; `holder` is the current leader when known.
    Standby {
        /// The identity holding the lease.
        holder: Option<String>,
    },
    /// Holding the lease.
    Leader {
        /// The identity the lease was taken from after it expired, if any.
        previous: Option<String>,
        /// Whether the lease was taken from another identity or from nobody (a released or
        /// new lease), rather than continued from this identity's previous process: then
        /// another leader may have acted since this replica's ledger was last written.
        takeover: bool,
        /// The Lease's `leaseTransitions` as this replica took it: the leadership term, which
        /// grows with every change of holder.
        transitions: i32,
    },
    /// The lease was lost; nothing may be written any more and the process should exit.
    Lost {
        /// Why.
        reason: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_client_go_and_validate() {
        let config = LeaderConfig::new("gpu.dra-ledger.io", "dra-ledger", "dra-ledger-0");
        assert_eq!(config.lease_duration, Duration::from_secs(15));
        assert!(config.validate().is_ok());
    }

    #[test]
    fn inconsistent_timings_are_refused_with_both_values() {
        let mut config = LeaderConfig::new("l", "ns", "id");
        config.renew_deadline = Duration::from_secs(20);
        let error = config.validate().unwrap_err().to_string();
        assert!(error.contains("20s") && error.contains("15s"), "{error}");
        let mut config = LeaderConfig::new("l", "ns", "id");
        config.retry_period = Duration::from_secs(10);
        assert!(config
            .validate()
            .unwrap_err()
            .to_string()
            .contains("retry period"));
        assert!(LeaderConfig::new("l", "ns", "").validate().is_err());
    }
}
