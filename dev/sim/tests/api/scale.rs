//! Load: many pods written concurrently while several watchers follow; every watcher sees every
//! pod and lists stay consistent. `API_SCALE_PODS` raises the count (default 400).

use std::time::{Duration, Instant};

use crate::api_support::{pod, start};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writes_fan_out_to_every_watcher() {
    let n: usize = std::env::var("API_SCALE_PODS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(400);
    let (server, client) = start().await;
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let start_rv = server.store().resource_version().to_string();
    let mut watchers = Vec::new();
    for _ in 0..5 {
        let stream = pods
            .watch(&WatchParams::default().timeout(290), &start_rv)
            .await
            .unwrap();
        watchers.push(tokio::spawn(async move {
            let mut stream = stream.boxed();
            let mut seen = 0;
            while seen < n {
                if let WatchEvent::Added(_) = stream.try_next().await.unwrap().unwrap() {
                    seen += 1;
                }
            }
            seen
        }));
    }
    let t = Instant::now();
    let writers: Vec<_> = (0..8)
        .map(|w| {
            let pods = pods.clone();
            tokio::spawn(async move {
                for i in (w..n).step_by(8) {
                    pods.create(&PostParams::default(), &pod(&format!("p-{i:05}")))
                        .await
                        .unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.await.unwrap();
    }
    let write_time = t.elapsed();
    for w in watchers {
        let seen = tokio::time::timeout(Duration::from_secs(60), w)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(seen, n);
    }
    let t = Instant::now();
    let listed = pods.list(&ListParams::default()).await.unwrap();
    assert_eq!(listed.items.len(), n);
    eprintln!(
        "{n} pods: writes {write_time:?}, fan-out done {:?}, list {:?}",
        t.elapsed() + write_time,
        t.elapsed()
    );
    server.shutdown().await;
}
