//! The elector: campaigns for the Lease until it holds it, then renews it every `retry_period`,
//! keeping the [`Fence`] open while renewals succeed and closing it the moment the lease is lost
//! (not renewed within `renew_deadline`, or taken by another identity). On a graceful stop it
//! releases the lease so that a standby takes over at once.
//!
//! The only module of leader election that talks to the API server; decisions come from
//! [`super::decide`].

use std::future::Future;
use std::time::{Duration, Instant};

use chrono::Utc;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use kube::Client;
use tokio::sync::watch;
use tracing::{info, warn};

use super::decide::{decide, Decision, LeaseRecord, Observed};
use super::fence::Fence;
use super::{LeaderConfig, Role};

/// Campaigns for and holds one Lease.
pub struct Elector {
    api: Api<Lease>,
    config: LeaderConfig,
    fence: Fence,
    role: watch::Sender<Role>,
}

fn record_of(lease: &Lease) -> LeaseRecord {
    let spec = lease.spec.as_ref();
    LeaseRecord {
        holder: spec.and_then(|s| s.holder_identity.clone()),
        renew_time: spec
            .and_then(|s| s.renew_time.as_ref())
            .map(|t| t.0.to_rfc3339()),
        transitions: spec.and_then(|s| s.lease_transitions).unwrap_or(0),
    }
}

fn is_conflict(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 409)
}

impl Elector {
    /// An elector for `config.lease_name` in `config.namespace`, writing through `client`
    /// (which must not be fenced itself). `fence` starts closed.
    pub fn new(client: Client, config: LeaderConfig, fence: Fence) -> Self {
        fence.close();
        Elector {
            api: Api::namespaced(client, &config.namespace),
            config,
            fence,
            role: watch::Sender::new(Role::Standby { holder: None }),
        }
    }

    /// The role as it changes.
    pub fn role(&self) -> watch::Receiver<Role> {
        self.role.subscribe()
    }

    /// The spec we write when we hold the lease.
    fn our_spec(&self, transitions: i32, acquired: Option<MicroTime>) -> LeaseSpec {
        let now = MicroTime(Utc::now());
        LeaseSpec {
            holder_identity: Some(self.config.identity.clone()),
            lease_duration_seconds: Some(
                i32::try_from(self.config.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX),
            ),
            acquire_time: Some(acquired.unwrap_or_else(|| now.clone())),
            renew_time: Some(now),
            lease_transitions: Some(transitions),
        }
    }

    /// Campaigns, then holds the lease until it is lost or `release` completes. Returns the
    /// final role: [`Role::Lost`] when the lease was lost, otherwise the role at the release
    /// (after which the lease, if held, has been given up).
    pub async fn run(self, release: impl Future<Output = ()> + Send) -> Role {
        tokio::pin!(release);
        let (lease, sent) = tokio::select! {
            acquired = self.acquire() => acquired,
            () = &mut release => return self.role.borrow().clone(),
        };
        let outcome = tokio::select! {
            lost = self.hold(lease, sent) => Err(lost),
            () = &mut release => Ok(()),
        };
        self.fence.close();
        if let Err(reason) = outcome {
            warn!(lease = %self.config.lease_name, %reason, "Lost the leader lease; stopping all writes");
            let lost = Role::Lost { reason };
            self.role.send_replace(lost.clone());
            return lost;
        }
        self.give_up().await;
        self.role.borrow().clone()
    }

    /// Campaigns until the lease is ours; returns it and when the write that took it was sent.
    async fn acquire(&self) -> (Lease, Instant) {
        let name = &self.config.lease_name;
        let mut observed: Option<Observed> = None;
        loop {
            let sent = Instant::now();
            let current = match self.api.get_opt(name).await {
                Ok(current) => current,
                Err(error) => {
                    warn!(%error, lease = %name, "Cannot read the leader lease");
                    tokio::time::sleep(self.config.retry_period).await;
                    continue;
                }
            };
            let record = current.as_ref().map(record_of);
            // Held by this identity already: a restart continues its own term.
            let ours = record.as_ref().and_then(LeaseRecord::holder)
                == Some(self.config.identity.as_str());
            let decision = decide(
                record.as_ref(),
                &self.config.identity,
                self.config.lease_duration,
                &mut observed,
                sent,
            );
            let written = match decision {
                Decision::Wait { holder, expires_in } => {
                    self.stand_by(holder);
                    tokio::time::sleep(self.config.retry_period.min(expires_in)).await;
                    continue;
                }
                Decision::Create => self.create().await.map(|lease| (lease, None)),
                Decision::Acquire {
                    transitions,
                    previous,
                } => {
                    let lease = current.expect("a lease to acquire was read");
                    self.take(lease, transitions, ours)
                        .await
                        .map(|lease| (lease, previous))
                }
            };
            match written {
                Ok((lease, previous)) => {
                    self.lead(&lease, previous, !ours, sent);
                    return (lease, sent);
                }
                Err(error) => {
                    if !is_conflict(&error) {
                        warn!(%error, lease = %name, "Cannot write the leader lease");
                    }
                    tokio::time::sleep(self.config.retry_period).await;
                }
            }
        }
    }

    /// Tells that `holder` holds the lease (once, not on every look).
    fn stand_by(&self, holder: String) {
        self.role.send_if_modified(|role| {
            let standby = Role::Standby {
                holder: Some(holder),
            };
            let changed = *role != standby;
            *role = standby;
            changed
        });
    }

    /// Creates the lease, held by this identity.
    async fn create(&self) -> Result<Lease, kube::Error> {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.config.lease_name.clone()),
                namespace: Some(self.config.namespace.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(self.our_spec(0, None)),
        };
        self.api.create(&PostParams::default(), &lease).await
    }

    /// Writes `lease` as held by this identity after `transitions` changes of holder; a lease
    /// that was already `ours` keeps its acquire time.
    async fn take(
        &self,
        mut lease: Lease,
        transitions: i32,
        ours: bool,
    ) -> Result<Lease, kube::Error> {
        let kept = lease
            .spec
            .as_ref()
            .and_then(|s| s.acquire_time.clone())
            .filter(|_| ours);
        lease.spec = Some(self.our_spec(transitions, kept));
        self.api
            .replace(&self.config.lease_name, &PostParams::default(), &lease)
            .await
    }

    /// Opens the fence until the renew deadline after the write `sent` that took `lease` from
    /// `previous`, and tells that this identity leads (a `takeover` unless it continues its own
    /// term).
    fn lead(&self, lease: &Lease, previous: Option<String>, takeover: bool, sent: Instant) {
        self.fence.open_until(sent + self.config.renew_deadline);
        info!(lease = %self.config.lease_name, identity = %self.config.identity, previous = previous.as_deref().unwrap_or("-"), "Acquired the leader lease");
        let transitions = lease
            .spec
            .as_ref()
            .and_then(|s| s.lease_transitions)
            .unwrap_or(0);
        self.role.send_replace(Role::Leader {
            previous,
            takeover,
            transitions,
        });
    }

    /// Renews `lease`, taken by a write sent at `renewed`, every `retry_period`; returns why it
    /// was lost.
    async fn hold(&self, mut lease: Lease, mut renewed: Instant) -> String {
        let name = &self.config.lease_name;
        loop {
            tokio::time::sleep(self.config.retry_period).await;
            let sent = Instant::now();
            let mut next = lease.clone();
            let renew_time = MicroTime(Utc::now());
            if let Some(spec) = next.spec.as_mut() {
                spec.renew_time = Some(renew_time.clone());
            }
            // A renewal that hangs must not outlive the deadline it is meant to extend.
            let left = self.config.renew_deadline.saturating_sub(renewed.elapsed());
            let attempt =
                tokio::time::timeout(left, self.api.replace(name, &PostParams::default(), &next))
                    .await;
            match attempt {
                Ok(Ok(stored)) => {
                    lease = stored;
                    renewed = sent;
                    self.fence.open_until(sent + self.config.renew_deadline);
                    continue;
                }
                Ok(Err(error)) if is_conflict(&error) => match self.api.get_opt(name).await {
                    Ok(Some(current)) => {
                        if let Some(reason) = self.taken(&lease, &renew_time, &current) {
                            return reason;
                        }
                        lease = current;
                    }
                    Ok(None) => return "the lease was deleted".to_owned(),
                    Err(error) => warn!(%error, lease = %name, "Cannot read the leader lease"),
                },
                Ok(Err(error)) => warn!(%error, lease = %name, "Cannot renew the leader lease"),
                Err(_) => warn!(lease = %name, "Renewing the leader lease timed out"),
            }
            if renewed.elapsed() >= self.config.renew_deadline {
                return format!(
                    "not renewed within the renew deadline of {:?}",
                    self.config.renew_deadline
                );
            }
        }
    }

    /// Why the lease read after a conflicting renewal is no longer ours, if it is not: another
    /// holder, or our identity written by someone else (another process under the same
    /// identity): neither our last stored version nor the renewal we just sent.
    fn taken(&self, ours: &Lease, sent: &MicroTime, current: &Lease) -> Option<String> {
        let holder = record_of(current).holder().map(str::to_owned);
        if holder.as_deref() != Some(self.config.identity.as_str()) {
            return Some(format!(
                "the lease is now held by {}",
                holder.as_deref().unwrap_or("nobody")
            ));
        }
        let unchanged = current.metadata.resource_version == ours.metadata.resource_version;
        // The API server keeps microseconds.
        let micros = |t: &MicroTime| t.0.to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
        let our_renewal = current
            .spec
            .as_ref()
            .and_then(|s| s.renew_time.as_ref())
            .map(micros)
            == Some(micros(sent));
        (!unchanged && !our_renewal).then(|| {
            format!(
                "the lease was renewed by another process under the identity {}",
                self.config.identity
            )
        })
    }

    /// Releases the lease if we still hold it (holder cleared), so a standby need not wait for
    /// it to expire.
    async fn give_up(&self) {
        let name = &self.config.lease_name;
        if !matches!(*self.role.borrow(), Role::Leader { .. }) {
            return;
        }
        // Whether there was a lease of ours to release (a deleted or taken one needs nothing).
        let released = async {
            let Some(mut lease) = self.api.get_opt(name).await? else {
                return Ok(false);
            };
            if record_of(&lease).holder() != Some(self.config.identity.as_str()) {
                return Ok(false);
            }
            if let Some(spec) = lease.spec.as_mut() {
                spec.holder_identity = None;
                spec.lease_duration_seconds = Some(1);
                spec.renew_time = Some(MicroTime(Utc::now()));
            }
            self.api
                .replace(name, &PostParams::default(), &lease)
                .await
                .map(|_| true)
        };
        match tokio::time::timeout(Duration::from_secs(5), released).await {
            Ok(Ok(true)) => info!(lease = %name, "Released the leader lease"),
            Ok(Ok(false)) => {
                info!(lease = %name, "The leader lease is no longer ours; nothing to release");
            }
            Ok(Err(error)) => {
                warn!(%error, lease = %name, "Cannot release the leader lease; it expires by itself");
            }
            Err(_) => {
                warn!(lease = %name, "Releasing the leader lease timed out; it expires by itself");
            }
        }
        self.role.send_replace(Role::Standby { holder: None });
    }
}
