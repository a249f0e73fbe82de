//! The timeline of every pod, from watches of pods, claims and scheduling contexts: created (by
//! the benchmark), its claims made (resourceclaim controller), its scheduling context published
//! (scheduler), all its claims allocated (driver) and bound (scheduler). On 1.34 there is no
//! scheduling context and the scheduler allocates: the claims are watched in
//! `resource.k8s.io/v1`.
//!
//! Observes only; the instants are those at which the watch events arrive here.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dra_node::modern::types as v1;
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1alpha2::{PodSchedulingContext, ResourceClaim};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client, ResourceExt};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// When each step of one pod was seen.
#[derive(Clone, Debug, Default)]
pub struct PodTimes {
    /// Just before the create request.
    pub created: Option<Instant>,
    /// Its first claim seen.
    pub claims_made: Option<Instant>,
    /// Its scheduling context seen.
    pub context: Option<Instant>,
    /// Claims seen allocated.
    allocated: HashSet<String>,
    /// The last of its claims seen allocated.
    pub allocated_at: Option<Instant>,
    /// Seen with a node.
    pub bound: Option<Instant>,
}

/// The timelines of all pods, filled by watch tasks.
pub struct Tracker {
    pods: Mutex<HashMap<String, PodTimes>>,
    claims_per_pod: usize,
    bound: watch::Sender<usize>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl Tracker {
    /// Starts watching pods, claims and contexts of the default namespace; on `structured`
    /// (1.34) pods and `resource.k8s.io/v1` claims.
    pub fn start(client: &Client, claims_per_pod: usize, structured: bool) -> Arc<Tracker> {
        let tracker = Arc::new(Tracker {
            pods: Mutex::new(HashMap::new()),
            claims_per_pod,
            bound: watch::channel(0).0,
            tasks: Mutex::new(Vec::new()),
        });
        let pods = Api::<Pod>::default_namespaced(client.clone());
        let mut tasks = vec![spawn_watch(
            watch_objects(pods),
            tracker.clone(),
            Tracker::on_pod,
        )];
        if structured {
            let claims = Api::<v1::ResourceClaim>::default_namespaced(client.clone());
            tasks.push(spawn_watch(
                watch_objects(claims),
                tracker.clone(),
                Tracker::on_v1_claim,
            ));
        } else {
            let claims = Api::<ResourceClaim>::default_namespaced(client.clone());
            let contexts = Api::<PodSchedulingContext>::default_namespaced(client.clone());
            tasks.push(spawn_watch(
                watch_objects(claims),
                tracker.clone(),
                Tracker::on_claim,
            ));
            tasks.push(spawn_watch(
                watch_objects(contexts),
                tracker.clone(),
                Tracker::on_context,
            ));
        }
        *tracker.tasks.lock().expect("tracker lock") = tasks;
        tracker
    }

    /// Notes that pod `name` is about to be created.
    pub fn created(&self, name: &str) {
        self.with(name, |t| t.created = Some(Instant::now()));
    }

    /// Waits until `count` pods were seen bound, at most `timeout`; returns the number seen.
    pub async fn wait_bound(&self, count: usize, timeout: Duration) -> usize {
        let mut rx = self.bound.subscribe();
        let _ = tokio::time::timeout(timeout, rx.wait_for(|n| *n >= count)).await;
        let seen = *rx.borrow();
        seen
    }

    /// The timelines of the pods whose name starts with `prefix`.
    pub fn timelines(&self, prefix: &str) -> Vec<PodTimes> {
        self.pods
            .lock()
            .expect("tracker lock")
            .iter()
            .filter(|(name, _)| name.starts_with(prefix))
            .map(|(_, times)| times.clone())
            .collect()
    }

    /// Stops the watches.
    pub fn stop(&self) {
        for task in self.tasks.lock().expect("tracker lock").drain(..) {
            task.abort();
        }
    }

    fn with(&self, pod: &str, change: impl FnOnce(&mut PodTimes)) {
        let mut pods = self.pods.lock().expect("tracker lock");
        change(pods.entry(pod.to_owned()).or_default());
    }

    fn on_pod(&self, pod: &Pod) {
        if pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_ref())
            .is_none()
        {
            return;
        }
        let mut newly = false;
        self.with(&pod.name_any(), |t| {
            if t.bound.is_none() {
                t.bound = Some(Instant::now());
                newly = true;
            }
        });
        if newly {
            self.bound.send_modify(|n| *n += 1);
        }
    }

    fn on_claim(&self, claim: &ResourceClaim) {
        let allocated = claim
            .status
            .as_ref()
            .is_some_and(|s| s.allocation.is_some());
        self.on_claim_of_pod(claim, allocated);
    }

    fn on_v1_claim(&self, claim: &v1::ResourceClaim) {
        let allocated = claim
            .status
            .as_ref()
            .is_some_and(|s| s.allocation.is_some());
        self.on_claim_of_pod(claim, allocated);
    }

    fn on_claim_of_pod(&self, claim: &impl ResourceExt, allocated: bool) {
        let Some(owner) = claim.owner_references().iter().find(|o| o.kind == "Pod") else {
            return;
        };
        let per_pod = self.claims_per_pod;
        self.with(&owner.name, |t| {
            let now = Instant::now();
            t.claims_made.get_or_insert(now);
            if allocated && t.allocated.insert(claim.name_any()) && t.allocated.len() == per_pod {
                t.allocated_at = Some(now);
            }
        });
    }

    fn on_context(&self, context: &PodSchedulingContext) {
        self.with(&context.name_any(), |t| {
            t.context.get_or_insert_with(Instant::now);
        });
    }
}

fn watch_objects<K>(api: Api<K>) -> impl Stream<Item = K> + Send
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
    K::DynamicType: Default,
{
    watcher(api, watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .filter_map(|object| async move { object.ok() })
}

fn spawn_watch<K: Send + 'static>(
    stream: impl Stream<Item = K> + Send + 'static,
    tracker: Arc<Tracker>,
    handle: fn(&Tracker, &K),
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(object) = stream.next().await {
            handle(&tracker, &object);
        }
    })
}
