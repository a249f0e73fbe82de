//! The device-taint eviction controller of kube-controller-manager (1.35+, while
//! `DRADeviceTaints` is on; `pkg/controller/devicetainteviction`): a pod using, through an
//! allocated claim reserved for it, a device with a `NoExecute` taint (the device's own or a
//! `DeviceTaintRule`'s) that its allocation result does not tolerate is deleted: at once, or
//! `tolerationSeconds` after the taint's `timeAdded`. Before the delete it posts the Normal event
//! `DeviceTaintManagerEviction` `Marking for deletion` and adds the pod condition
//! `DisruptionTarget` (reason `DeletionByDeviceTaintManager`); a waiting eviction whose taint
//! goes away (or becomes tolerated) is cancelled with `Cancelling deletion`. Where rules count,
//! each rule's status gets the `EvictionInProgress` condition.
//!
//! The decisions are pure (`plan`); this module keeps the waiting evictions and does the I/O
//! (`io`), only through `kube::Client`, driven by the shared informers.

mod io;
pub mod plan;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Utc;
use dra_runtime::informer::Change;
use dra_runtime::lock::LockExt;
use dra_runtime::workqueue::{Next, WorkQueue};
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::Client;

use super::device_taints::rules::{RuleVersion, TaintSource};
use super::error::Result;
use super::scheduling::bound_node;
use super::{ObjectKey, ACTOR_BACKOFF};
use dra_types::resource_v1::{
    DeviceTaintRule, ResourceClaim, ResourceSlice, EFFECT_NONE, NO_EXECUTE,
};
use plan::{pod_eviction, Eviction, PublishedTaints, View};

/// The component that posts the events and the field manager of the rule status.
pub const COMPONENT: &str = "device-taint-eviction-controller";

/// The controller.
pub struct TaintEviction {
    client: Client,
    pods: Store<Pod>,
    claims: Store<ResourceClaim>,
    slices: Store<ResourceSlice>,
    taints: TaintSource,
    rule_version: Option<RuleVersion>,
    rule_status_period: Duration,
    /// The published taints, rebuilt after a slice change.
    published: Mutex<Option<Arc<PublishedTaints>>>,
    /// Slices (by name) with a `NoExecute` taint: only their changes can change an eviction.
    evicting_slices: Mutex<HashSet<String>>,
    /// Evictions waiting for their time, by pod.
    waiting: Mutex<HashMap<ObjectKey, Eviction>>,
    /// Pods evicted per rule UID since the start.
    evicted: Mutex<HashMap<String, u64>>,
    /// Pods that may need eviction.
    pub queue: WorkQueue<ObjectKey>,
    /// Rules (by name) whose status may need an update.
    pub rule_queue: WorkQueue<String>,
}

impl TaintEviction {
    /// A controller reading the given stores; `rule_version` is where rule status is written.
    pub fn new(
        client: Client,
        (pods, claims, slices): (Store<Pod>, Store<ResourceClaim>, Store<ResourceSlice>),
        taints: TaintSource,
        rule_version: Option<RuleVersion>,
        rule_status_period: Duration,
    ) -> Self {
        Self {
            client,
            pods,
            claims,
            slices,
            taints,
            rule_version,
            rule_status_period,
            published: Mutex::new(None),
            evicting_slices: Mutex::new(HashSet::new()),
            waiting: Mutex::new(HashMap::new()),
            evicted: Mutex::new(HashMap::new()),
            queue: WorkQueue::new(ACTOR_BACKOFF),
            rule_queue: WorkQueue::new(ACTOR_BACKOFF),
        }
    }

    /// Queues every pod bound to a node.
    fn queue_bound(&self) {
        for pod in self.pods.state() {
            if bound_node(&pod).is_some() {
                self.queue.add(&ObjectKey::of(&pod.metadata));
            }
        }
    }

    /// A pod changed: a bound one is looked at; a deleted one's waiting eviction is dropped.
    pub fn on_pod(&self, change: &Change<'_, Pod>) {
        match change {
            Change::Applied(pod) if bound_node(pod).is_some() => {
                self.queue.add(&ObjectKey::of(&pod.metadata));
            }
            Change::Applied(_) => {}
            Change::Deleted(pod) => {
                self.waiting
                    .lock_or_recover()
                    .remove(&ObjectKey::of(&pod.metadata));
            }
            Change::Resynced => self.queue_bound(),
        }
    }

    /// A claim changed: the pods it is reserved for are looked at.
    pub fn on_claim(&self, change: &Change<'_, ResourceClaim>) {
        match change {
            Change::Applied(claim) | Change::Deleted(claim) => {
                let namespace = claim.metadata.namespace.as_deref().unwrap_or_default();
                for consumer in claim.reserved_for() {
                    if consumer.resource == "pods" {
                        self.queue.add(&ObjectKey::new(namespace, &consumer.name));
                    }
                }
            }
            Change::Resynced => self.queue_bound(),
        }
    }

    /// A slice changed: where a `NoExecute` taint came or went, every bound pod is looked at.
    pub fn on_slice(&self, change: &Change<'_, ResourceSlice>) {
        *self.published.lock_or_recover() = None;
        let evicting = |slice: &ResourceSlice| {
            slice
                .spec
                .devices
                .iter()
                .any(|d| d.taints.iter().any(|t| t.effect == NO_EXECUTE))
        };
        let changed = match change {
            Change::Applied(slice) => {
                let name = slice.metadata.name.clone().unwrap_or_default();
                let mut slices = self.evicting_slices.lock_or_recover();
                let had = slices.contains(&name);
                if evicting(slice) {
                    slices.insert(name);
                } else {
                    slices.remove(&name);
                }
                had || evicting(slice)
            }
            Change::Deleted(slice) => {
                let name = slice.metadata.name.as_deref().unwrap_or_default();
                self.evicting_slices.lock_or_recover().remove(name)
            }
            Change::Resynced => {
                let slices = self.slices.state();
                let names = slices.iter().filter(|s| evicting(s));
                *self.evicting_slices.lock_or_recover() = names
                    .map(|s| s.metadata.name.clone().unwrap_or_default())
                    .collect();
                true
            }
        };
        if changed {
            self.queue_bound();
        }
    }

    /// A rule changed: every bound pod is looked at (rule changes are rare, as upstream's
    /// brute-force re-evaluation assumes) and the rule's status.
    pub fn on_rule(&self, change: &Change<'_, DeviceTaintRule>) {
        match change {
            Change::Applied(rule) => {
                self.rule_queue
                    .add(&rule.metadata.name.clone().unwrap_or_default());
            }
            Change::Deleted(rule) => {
                let uid = rule.metadata.uid.as_deref().unwrap_or_default();
                self.evicted.lock_or_recover().remove(uid);
            }
            Change::Resynced => {}
        }
        self.queue_bound();
    }

    fn published(&self) -> Arc<PublishedTaints> {
        let mut cached = self.published.lock_or_recover();
        Arc::clone(
            cached.get_or_insert_with(|| Arc::new(PublishedTaints::of(&self.slices.state()))),
        )
    }

    fn eviction_of(&self, pod: &Pod, rules: &[Arc<DeviceTaintRule>]) -> Option<Eviction> {
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let claim = |name: &str| self.claims.get(&ObjectRef::new(name).within(&namespace));
        let published = self.published();
        pod_eviction(
            pod,
            &View {
                claim: &claim,
                published: &published,
                rules,
                now: Utc::now(),
            },
        )
    }

    /// One look at a pod: evict it now, wait for its time, or cancel its waiting eviction.
    pub async fn sync_pod(&self, key: ObjectKey) -> Result<Next> {
        let pod = self
            .pods
            .get(&ObjectRef::new(&key.name).within(&key.namespace));
        let rules = self.taints.rules_now().unwrap_or_default();
        let eviction = pod.as_deref().and_then(|pod| self.eviction_of(pod, &rules));
        let (Some(pod), Some(eviction)) = (pod, eviction) else {
            let cancelled = self.waiting.lock_or_recover().remove(&key);
            if let (Some(cancelled), Some(pod)) = (
                cancelled,
                self.pods
                    .get(&ObjectRef::new(&key.name).within(&key.namespace)),
            ) {
                tracing::debug!(pod = %key, ?cancelled, "Eviction cancelled");
                io::cancelled(&self.client, &pod).await;
                self.queue_rules(&cancelled);
            }
            return Ok(Next::Done);
        };
        self.queue_rules(&eviction);
        let wait = eviction.when - Utc::now();
        if let Ok(wait) = wait.to_std().map(|w| w.max(Duration::from_millis(1))) {
            if eviction.when > Utc::now() {
                self.waiting.lock_or_recover().insert(key, eviction);
                return Ok(Next::After(wait));
            }
        }
        self.waiting.lock_or_recover().remove(&key);
        if io::evict(&self.client, &key, &pod).await? {
            tracing::debug!(pod = %key, ?eviction, "Evicted pod");
            let mut evicted = self.evicted.lock_or_recover();
            for rule in &eviction.rules {
                *evicted.entry(rule.clone()).or_default() += 1;
            }
            // As upstream, the status is looked at again only after a period: at once it
            // would race with the pod informer, which has not seen the deletion yet.
            self.queue_rules_after(&eviction, self.rule_status_period);
        }
        Ok(Next::Done)
    }

    fn queue_rules(&self, eviction: &Eviction) {
        self.queue_rules_after(eviction, Duration::ZERO);
    }

    fn queue_rules_after(&self, eviction: &Eviction, delay: Duration) {
        if self.rule_version.is_none() {
            return;
        }
        let rules = self.taints.rules_now().unwrap_or_default();
        for rule in rules.iter().filter(|r| {
            r.metadata
                .uid
                .as_ref()
                .is_some_and(|uid| eviction.rules.contains(uid))
        }) {
            let name = rule.metadata.name.clone().unwrap_or_default();
            if delay.is_zero() {
                self.rule_queue.add(&name);
            } else {
                self.rule_queue.add_after(&name, delay);
            }
        }
    }

    /// The `EvictionInProgress` condition of a rule, written when it changed; while pods wait,
    /// at most once per status period.
    pub async fn sync_rule(&self, name: String) -> Result<Next> {
        let Some(version) = self.rule_version else {
            return Ok(Next::Done);
        };
        let Some(rules) = self.taints.rules.as_ref() else {
            return Ok(Next::Done);
        };
        let Some(rule) = rules.get(&ObjectRef::new(&name)) else {
            return Ok(Next::Done);
        };
        let counts = self.rule_counts(&rule);
        let condition = plan::rule_condition(&rule.spec.taint.effect, &counts);
        io::write_rule_condition(
            &self.client,
            version,
            &rule,
            &condition,
            self.rule_status_period,
        )
        .await
    }

    fn rule_counts(&self, rule: &DeviceTaintRule) -> plan::RuleCounts {
        let uid = rule.metadata.uid.clone().unwrap_or_default();
        let mut rules = self.taints.rules_now().unwrap_or_default();
        if rule.spec.taint.effect == EFFECT_NONE {
            // As upstream, a `None` rule reports what it would do with `NoExecute`.
            let mut simulated = rule.clone();
            NO_EXECUTE.clone_into(&mut simulated.spec.taint.effect);
            rules.retain(|r| r.metadata.uid.as_deref() != Some(&uid));
            rules.push(Arc::new(simulated));
        }
        let mut pending = 0;
        let mut namespaces = HashSet::new();
        for pod in self.pods.state() {
            let reasons = self.eviction_of(&pod, &rules);
            if reasons.is_some_and(|e| e.rules.contains(&uid)) {
                pending += 1;
                namespaces.insert(pod.metadata.namespace.clone().unwrap_or_default());
            }
        }
        let devices = if rule.spec.taint.effect == EFFECT_NONE {
            plan::selected_devices(rule, &self.published(), &self.claims.state())
        } else {
            (0, 0)
        };
        plan::RuleCounts {
            pending: (pending, namespaces.len()),
            evicted: self
                .evicted
                .lock_or_recover()
                .get(&uid)
                .copied()
                .unwrap_or(0),
            devices,
        }
    }
}
