//! Informers: a watcher feeding a reflector store and calling a change handler after each change
//! is in the store, for controller loops that queue keys from their own handlers (the
//! simulator's actors).
//!
//! Owns no Kubernetes semantics beyond the watch; must not depend on any controller.

use std::fmt::Debug;
use std::hash::Hash;

use futures::StreamExt;
use kube::runtime::reflector::{self, store::Writer};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// One change an informer reports to its handler.
#[derive(Debug)]
pub enum Change<'a, K> {
    /// The object was created or modified (or listed during a resync).
    Applied(&'a K),
    /// The object was deleted; the value is its last known state.
    Deleted(&'a K),
    /// A (re)list finished: objects deleted while the watch was down got no `Deleted` change.
    Resynced,
}

/// Starts a watcher on `api` that keeps `writer`'s store up to date and calls `handler` after each
/// change has been applied to the store. Ends when `shutdown` turns true.
pub fn spawn_informer<K, F>(
    api: Api<K>,
    writer: Writer<K>,
    handler: F,
    shutdown: watch::Receiver<bool>,
) -> JoinHandle<()>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
    F: Fn(Change<'_, K>) + Send + 'static,
{
    spawn_informer_as(api, writer, handler, shutdown)
}

/// [`spawn_informer`] for a watch whose objects are decoded as `S` and stored as `K`: the
/// informer of a kind whose wire shape differs from the type the actors share.
pub fn spawn_informer_as<S, K, F>(
    api: Api<S>,
    writer: Writer<K>,
    handler: F,
    mut shutdown: watch::Receiver<bool>,
) -> JoinHandle<()>
where
    S: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    S::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
    K: Resource + Clone + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
    S: Into<K>,
    F: Fn(Change<'_, K>) + Send + 'static,
{
    tokio::spawn(async move {
        let events = watcher::watcher(api, watcher::Config::default())
            .map(|event| event.map(convert_event::<S, K>))
            .default_backoff();
        let stream = reflector::reflector(writer, events);
        let mut stream = std::pin::pin!(stream);
        loop {
            tokio::select! {
                _ = shutdown.changed() => break,
                next = stream.next() => match next {
                    None => break,
                    Some(Ok(Event::Apply(obj) | Event::InitApply(obj))) => handler(Change::Applied(&obj)),
                    Some(Ok(Event::Delete(obj))) => handler(Change::Deleted(&obj)),
                    Some(Ok(Event::InitDone)) => handler(Change::Resynced),
                    Some(Ok(Event::Init)) => {}
                    Some(Err(error)) => tracing::debug!(%error, "Watch failed, retrying"),
                },
            }
        }
    })
}

fn convert_event<S: Into<K>, K>(event: Event<S>) -> Event<K> {
    match event {
        Event::Apply(obj) => Event::Apply(obj.into()),
        Event::Delete(obj) => Event::Delete(obj.into()),
        Event::Init => Event::Init,
        Event::InitApply(obj) => Event::InitApply(obj.into()),
        Event::InitDone => Event::InitDone,
    }
}
