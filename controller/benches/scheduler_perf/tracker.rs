//! The timeline of every pod, from watches of pods, claims and scheduling contexts: created (by
//! the benchmark), its claims made (resourceclaim controller), its scheduling context published
//! (scheduler), all its claims allocated (driver) and bound (scheduler). On 1.34 there is no
//! scheduling context and the scheduler allocates: the claims are watched in
//! `resource.k8s.io/v1`.
//!
//! Observes only; the instants are those at which the watch events arrive here. Each watch
//! decodes only the fields the timeline reads (see [`slim`]), so that the benchmark's own share
//! of the CPU is small.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt};
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
    /// Starts watching pods, claims and contexts of the default namespace; on `v1`
    /// (1.34) pods and `resource.k8s.io/v1` claims.
    pub fn start(client: &Client, claims_per_pod: usize, v1: bool) -> Arc<Tracker> {
        let tracker = Arc::new(Tracker {
            pods: Mutex::new(HashMap::new()),
            claims_per_pod,
            bound: watch::channel(0).0,
            tasks: Mutex::new(Vec::new()),
        });
        // Only bound pods: one event per pod instead of one per change of it.
        let pods = Api::<slim::Pod>::default_namespaced(client.clone());
        let bound = watcher::Config::default().fields("spec.nodeName!=");
        let mut tasks = vec![spawn_watch(
            watch_objects(pods, bound),
            tracker.clone(),
            Tracker::on_pod,
        )];
        if v1 {
            let claims = Api::<slim::ClaimV1>::default_namespaced(client.clone());
            tasks.push(spawn_watch(
                watch_objects(claims, watcher::Config::default()),
                tracker.clone(),
                Tracker::on_v1_claim,
            ));
        } else {
            let claims = Api::<slim::Claim>::default_namespaced(client.clone());
            let contexts = Api::<slim::Context>::default_namespaced(client.clone());
            tasks.push(spawn_watch(
                watch_objects(claims, watcher::Config::default()),
                tracker.clone(),
                Tracker::on_claim,
            ));
            tasks.push(spawn_watch(
                watch_objects(contexts, watcher::Config::default()),
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

    fn on_pod(&self, pod: &slim::Pod) {
        if pod.spec.node_name.is_none() {
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

    fn on_claim(&self, claim: &slim::Claim) {
        self.on_claim_of_pod(claim, claim.status.allocation.is_some());
    }

    fn on_v1_claim(&self, claim: &slim::ClaimV1) {
        self.on_claim_of_pod(claim, claim.status.allocation.is_some());
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

    fn on_context(&self, context: &slim::Context) {
        self.with(&context.name_any(), |t| {
            t.context.get_or_insert_with(Instant::now);
        });
    }
}

fn watch_objects<K>(api: Api<K>, config: watcher::Config) -> impl Stream<Item = K> + Send
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
    K::DynamicType: Default,
{
    watcher(api, config)
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

/// The objects as the tracker decodes them: their metadata and the one field it reads; serde
/// skips the rest of each event.
mod slim {
    use std::borrow::Cow;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use serde::de::IgnoredAny;
    use serde::Deserialize;

    /// Implements `kube::Resource` of `$slim` as that of `$full`, whose fields it decodes.
    macro_rules! slim_of {
        ($slim:ty, $full:ty) => {
            impl kube::Resource for $slim {
                type DynamicType = ();
                type Scope = <$full as kube::Resource>::Scope;

                fn kind(dt: &()) -> Cow<'_, str> {
                    <$full as kube::Resource>::kind(dt)
                }
                fn group(dt: &()) -> Cow<'_, str> {
                    <$full as kube::Resource>::group(dt)
                }
                fn version(dt: &()) -> Cow<'_, str> {
                    <$full as kube::Resource>::version(dt)
                }
                fn api_version(dt: &()) -> Cow<'_, str> {
                    <$full as kube::Resource>::api_version(dt)
                }
                fn plural(dt: &()) -> Cow<'_, str> {
                    <$full as kube::Resource>::plural(dt)
                }
                fn meta(&self) -> &ObjectMeta {
                    &self.metadata
                }
                fn meta_mut(&mut self) -> &mut ObjectMeta {
                    &mut self.metadata
                }
            }
        };
    }

    /// A pod: whether it has a node.
    #[derive(Clone, Debug, Default, Deserialize)]
    pub struct Pod {
        #[serde(default)]
        pub metadata: ObjectMeta,
        #[serde(default)]
        pub spec: PodSpec,
    }

    #[derive(Clone, Debug, Default, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct PodSpec {
        #[serde(default)]
        pub node_name: Option<String>,
    }

    /// A claim (`resource.k8s.io/v1alpha2`): its owner and whether it is allocated.
    #[derive(Clone, Debug, Default, Deserialize)]
    pub struct Claim {
        #[serde(default)]
        pub metadata: ObjectMeta,
        #[serde(default)]
        pub status: ClaimStatus,
    }

    /// The same of a `resource.k8s.io/v1` claim.
    #[derive(Clone, Debug, Default, Deserialize)]
    pub struct ClaimV1 {
        #[serde(default)]
        pub metadata: ObjectMeta,
        #[serde(default)]
        pub status: ClaimStatus,
    }

    #[derive(Clone, Debug, Default, Deserialize)]
    pub struct ClaimStatus {
        #[serde(default)]
        pub allocation: Option<IgnoredAny>,
    }

    /// A scheduling context: its name.
    #[derive(Clone, Debug, Default, Deserialize)]
    pub struct Context {
        #[serde(default)]
        pub metadata: ObjectMeta,
    }

    slim_of!(Pod, k8s_openapi::api::core::v1::Pod);
    slim_of!(Claim, k8s_openapi::api::resource::v1alpha2::ResourceClaim);
    slim_of!(ClaimV1, dra_types::resource_v1::ResourceClaim);
    slim_of!(
        Context,
        k8s_openapi::api::resource::v1alpha2::PodSchedulingContext
    );
}
