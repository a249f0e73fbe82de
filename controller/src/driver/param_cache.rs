//! Watch-backed copies of the parameter objects (`DeviceClassParameters`, `DeviceClaimParameters`)
//! for [`super::KubeCluster`], so that a scheduling-context sync does not cost two GETs per
//! pending claim. A miss (the watch has not delivered the object yet, or it does not exist) falls
//! back to a live GET, so a claim created right after its parameters is never refused.
//!
//! The watches start on first use (inside the runtime) and stop when the cache is dropped. Must
//! not contain allocation decisions.

use std::fmt::Debug;

use futures::StreamExt;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::OnceCell;
use tokio::task::AbortHandle;

use crate::params::{DeviceClaimParameters, DeviceClassParameters};

struct Stores {
    classes: Store<DeviceClassParameters>,
    claims: Store<DeviceClaimParameters>,
    watches: Vec<AbortHandle>,
}

/// The cached parameter objects of a cluster.
pub(super) struct ParamCache {
    client: Client,
    stores: OnceCell<Stores>,
}

fn spawn_reflector<K>(api: Api<K>) -> (Store<K>, AbortHandle)
where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
{
    let (store, writer) = reflector::store();
    let stream = reflector::reflector(writer, watcher(api, watcher::Config::default()))
        .default_backoff()
        .for_each(|_| async {});
    (store, tokio::spawn(stream).abort_handle())
}

impl ParamCache {
    pub(super) fn new(client: Client) -> Self {
        ParamCache {
            client,
            stores: OnceCell::new(),
        }
    }

    async fn stores(&self) -> &Stores {
        self.stores
            .get_or_init(|| async {
                let (classes, a) = spawn_reflector(Api::all(self.client.clone()));
                let (claims, b) = spawn_reflector(Api::all(self.client.clone()));
                Stores {
                    classes,
                    claims,
                    watches: vec![a, b],
                }
            })
            .await
    }

    /// The watched copy of class parameters `name`, if the watch has it.
    pub(super) async fn class(&self, name: &str) -> Option<DeviceClassParameters> {
        let stores = self.stores().await;
        stores
            .classes
            .get(&ObjectRef::new(name))
            .map(|o| (*o).clone())
    }

    /// The watched copy of claim parameters `namespace/name`, if the watch has it.
    pub(super) async fn claim(&self, namespace: &str, name: &str) -> Option<DeviceClaimParameters> {
        let stores = self.stores().await;
        stores
            .claims
            .get(&ObjectRef::new(name).within(namespace))
            .map(|o| (*o).clone())
    }
}

impl Drop for ParamCache {
    fn drop(&mut self) {
        if let Some(stores) = self.stores.get() {
            for watch in &stores.watches {
                watch.abort();
            }
        }
    }
}
