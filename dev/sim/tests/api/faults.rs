//! Fault injection: seeded and reproducible conflicts, errors and delays on writes, and forced
//! watch disconnects that clients survive.

use std::time::{Duration, Instant};

use crate::api_support::{config_map, start, start_with};
use dra_sim::server::{Faults, ServerConfig};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};

/// Outcome codes of `n` creates against a fresh server with `faults`.
async fn outcomes(faults: Faults, n: usize) -> Vec<u16> {
    let (server, client) = start_with(ServerConfig {
        faults,
        ..ServerConfig::default()
    })
    .await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    let mut out = Vec::new();
    for i in 0..n {
        match cms
            .create(&PostParams::default(), &config_map(&format!("c{i}"), &[]))
            .await
        {
            Ok(_) => out.push(201),
            Err(kube::Error::Api(e)) => out.push(e.code),
            Err(other) => panic!("{other:?}"),
        }
    }
    server.shutdown().await;
    out
}

#[tokio::test]
async fn the_same_seed_injects_the_same_faults() {
    let faults = Faults::seeded(42).conflicts(0.2).errors(0.1);
    let a = outcomes(faults.clone(), 60).await;
    assert_eq!(a, outcomes(faults.clone(), 60).await);
    assert!(
        a.contains(&409) && a.contains(&500) && a.contains(&201),
        "{a:?}"
    );
    assert_ne!(a, outcomes(Faults { seed: 43, ..faults }, 60).await);
}

#[tokio::test]
async fn injected_failures_do_not_apply_the_write() {
    let (server, client) = start().await;
    server.set_faults(Faults::seeded(1).errors(1.0));
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    let err = cms
        .create(&PostParams::default(), &config_map("x", &[]))
        .await
        .unwrap_err();
    assert!(matches!(err, kube::Error::Api(ref e) if e.code == 500));
    server.set_faults(Faults::none());
    assert!(cms.get_opt("x").await.unwrap().is_none());
    assert_eq!(server.fault_stats().errors, 1);
    server.shutdown().await;
}

#[tokio::test]
async fn slow_writes_are_delayed() {
    let (server, client) = start().await;
    server.set_faults(Faults::seeded(1).delays(1.0, Duration::from_millis(200)));
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    let t = Instant::now();
    cms.create(&PostParams::default(), &config_map("slow", &[]))
        .await
        .unwrap();
    assert!(t.elapsed() >= Duration::from_millis(200));
    cms.get("slow").await.unwrap();
    assert_eq!(server.fault_stats().delays, 1, "reads are not delayed");
    server.shutdown().await;
}

#[tokio::test]
async fn watches_end_after_their_random_lifetime() {
    let (server, client) = start().await;
    server.set_faults(Faults::seeded(5).watch_disconnects(Duration::from_millis(200)));
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    let stream = cms
        .watch(&kube::api::WatchParams::default(), "0")
        .await
        .unwrap();
    let ended = tokio::time::timeout(
        Duration::from_secs(5),
        futures::StreamExt::collect::<Vec<_>>(stream),
    )
    .await;
    assert!(ended.is_ok(), "the watch stream ended");
    assert_eq!(server.fault_stats().watch_disconnects, 1);
    server.shutdown().await;
}

#[tokio::test]
async fn injected_read_errors_fail_gets_and_lists_but_not_watches() {
    let (server, client) = start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    cms.create(&PostParams::default(), &config_map("r", &[]))
        .await
        .unwrap();
    server.set_faults(Faults::seeded(2).read_errors(1.0));
    let get = cms.get("r").await.unwrap_err();
    assert!(
        matches!(get, kube::Error::Api(ref e) if e.code == 500),
        "{get:?}"
    );
    let list = cms
        .list(&kube::api::ListParams::default())
        .await
        .unwrap_err();
    assert!(
        matches!(list, kube::Error::Api(ref e) if e.code == 500),
        "{list:?}"
    );
    let watch = cms.watch(&kube::api::WatchParams::default(), "0").await;
    assert!(
        watch.is_ok(),
        "watches are not failed by the read error rate"
    );
    cms.create(&PostParams::default(), &config_map("w", &[]))
        .await
        .expect("writes are not failed by the read error rate");
    assert_eq!(server.fault_stats().read_errors, 2);
    server.shutdown().await;
}

#[tokio::test]
async fn injected_errors_reach_every_kind_of_write() {
    use kube::api::{DeleteParams, Patch, PatchParams};
    let (server, client) = start().await;
    let claims: Api<k8s_openapi::api::resource::v1alpha2::ResourceClaim> =
        Api::default_namespaced(client);
    let stored = claims
        .create(&PostParams::default(), &crate::api_support::claim("w"))
        .await
        .unwrap();
    server.set_faults(Faults::seeded(3).errors(1.0));
    let patch = Patch::Merge(serde_json::json!({"metadata": {"labels": {"a": "b"}}}));
    let status = Patch::Merge(serde_json::json!({"status": {"driverName": "x"}}));
    let results = [
        claims
            .replace("w", &PostParams::default(), &stored)
            .await
            .map(drop),
        claims
            .replace_status(
                "w",
                &PostParams::default(),
                serde_json::to_vec(&stored).unwrap(),
            )
            .await
            .map(drop),
        claims
            .patch("w", &PatchParams::default(), &patch)
            .await
            .map(drop),
        claims
            .patch_status("w", &PatchParams::default(), &status)
            .await
            .map(drop),
        claims.delete("w", &DeleteParams::default()).await.map(drop),
    ];
    for result in &results {
        assert!(
            matches!(result, Err(kube::Error::Api(e)) if e.code == 500),
            "{result:?}"
        );
    }
    assert_eq!(server.fault_stats().errors, results.len() as u64);
    server.set_faults(Faults::none());
    let unchanged = claims.get("w").await.unwrap();
    assert_eq!(
        unchanged.metadata.resource_version,
        stored.metadata.resource_version
    );
    server.shutdown().await;
}
