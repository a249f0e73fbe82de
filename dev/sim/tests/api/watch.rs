//! WATCH: replay from a resourceVersion, bookmarks, 410 Expired and kube-rs watcher recovery,
//! selector transitions and forced disconnects.

use std::time::Duration;

use crate::api_support::{config_map, create, start, start_with};
use dra_sim::server::ServerConfig;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, WatchEvent, WatchParams};
use kube::runtime::watcher;
use serde_json::json;
use tokio::sync::mpsc;

async fn next<S, T>(stream: &mut S) -> T
where
    S: futures::Stream<Item = Result<T, kube::Error>> + Unpin,
{
    tokio::time::timeout(Duration::from_secs(5), stream.try_next())
        .await
        .expect("event within 5s")
        .expect("stream ok")
        .expect("stream open")
}

/// A watch of `cms` with `params`, from the resourceVersion of `from`.
async fn watch_from(
    cms: &Api<ConfigMap>,
    params: &WatchParams,
    from: &ConfigMap,
) -> BoxStream<'static, kube::Result<WatchEvent<ConfigMap>>> {
    let rv = from.metadata.resource_version.clone().unwrap();
    cms.watch(params, &rv).await.unwrap().boxed()
}

fn lease(name: &str) -> Lease {
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"holderIdentity": "x"}}))
        .unwrap()
}

#[tokio::test]
async fn watch_replays_changes_after_a_resource_version() {
    let (server, client) = start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    let first = create(&cms, &config_map("a", &[])).await;
    create(&cms, &config_map("b", &[])).await;
    cms.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"x": "y"}})),
    )
    .await
    .unwrap();
    let mut stream = watch_from(&cms, &WatchParams::default(), &first).await;
    match next(&mut stream).await {
        WatchEvent::Added(c) => assert_eq!(c.metadata.name.as_deref(), Some("b")),
        other => panic!("unexpected {other:?}"),
    }
    match next(&mut stream).await {
        WatchEvent::Modified(c) => assert_eq!(c.data.unwrap()["x"], "y"),
        other => panic!("unexpected {other:?}"),
    }
    server.shutdown().await;
}

#[tokio::test]
async fn a_burst_of_changes_reaches_a_watcher_whole_and_in_order() {
    let (server, client) = start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    let first = create(&cms, &config_map("first", &[])).await;
    let mut stream = watch_from(&cms, &WatchParams::default(), &first).await;
    // Written concurrently, so that many events wait for the watcher at once and are sent
    // together.
    let names: Vec<String> = (0..300).map(|i| format!("cm-{i}")).collect();
    let objects: Vec<ConfigMap> = names.iter().map(|n| config_map(n, &[])).collect();
    futures::future::join_all(objects.iter().map(|o| create(&cms, o))).await;
    let mut seen = Vec::new();
    let mut last_rv = 0;
    while seen.len() < names.len() {
        match next(&mut stream).await {
            WatchEvent::Added(c) => {
                let rv: u64 = c.metadata.resource_version.unwrap().parse().unwrap();
                assert!(rv > last_rv, "events in resourceVersion order");
                last_rv = rv;
                seen.push(c.metadata.name.unwrap());
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    seen.sort();
    let mut expected = names;
    expected.sort();
    assert_eq!(seen, expected);
    server.shutdown().await;
}

#[tokio::test]
async fn watch_from_expired_version_gets_410_error_event() {
    let (server, client) = start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    let first = create(&cms, &config_map("a", &[])).await;
    create(&cms, &config_map("b", &[])).await;
    server.compact_history();
    let mut stream = watch_from(&cms, &WatchParams::default(), &first).await;
    match next(&mut stream).await {
        WatchEvent::Error(e) => assert_eq!((e.code, e.reason.as_str()), (410, "Expired")),
        other => panic!("expected 410, got {other:?}"),
    }
    server.shutdown().await;
}

#[tokio::test]
async fn bookmarks_carry_the_latest_resource_version() {
    let config = ServerConfig {
        bookmark_interval: Duration::from_millis(100),
        ..ServerConfig::default()
    };
    let (server, client) = start_with(config).await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let c = create(&cms, &config_map("a", &[])).await;
    let bookmarks = WatchParams {
        bookmarks: true,
        ..WatchParams::default()
    };
    let mut stream = watch_from(&cms, &bookmarks, &c).await;
    let leases: Api<Lease> = Api::default_namespaced(client);
    let l = create(&leases, &lease("unrelated")).await;
    loop {
        if let WatchEvent::Bookmark(b) = next(&mut stream).await {
            if b.metadata.resource_version == l.metadata.resource_version.clone().unwrap() {
                break;
            }
        }
    }
    server.shutdown().await;
}

#[tokio::test]
async fn label_watch_reports_objects_leaving_the_selection_as_deleted() {
    let (server, client) = start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    let c = create(&cms, &config_map("a", &[("app", "web")])).await;
    let wp = WatchParams::default().labels("app=web");
    let mut stream = watch_from(&cms, &wp, &c).await;
    cms.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "db"}}})),
    )
    .await
    .unwrap();
    assert!(matches!(next(&mut stream).await, WatchEvent::Deleted(_)));
    cms.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "web"}}})),
    )
    .await
    .unwrap();
    assert!(matches!(next(&mut stream).await, WatchEvent::Added(_)));
    server.shutdown().await;
}

/// Runs a kube-rs watcher in the background, forwarding its events.
fn spawn_watcher(api: Api<ConfigMap>) -> mpsc::UnboundedReceiver<watcher::Event<ConfigMap>> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut stream = watcher(api, watcher::Config::default()).boxed();
        while let Some(item) = stream.next().await {
            if let Ok(event) = item {
                if tx.send(event).is_err() {
                    return;
                }
            }
        }
    });
    rx
}

async fn next_event(
    rx: &mut mpsc::UnboundedReceiver<watcher::Event<ConfigMap>>,
    mut want: impl FnMut(&watcher::Event<ConfigMap>) -> bool,
) -> usize {
    let mut inits = 0;
    loop {
        let event = tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .expect("watcher event")
            .expect("watcher open");
        if matches!(event, watcher::Event::Init) {
            inits += 1;
        }
        if want(&event) {
            return inits;
        }
    }
}

fn applied(name: &'static str) -> impl FnMut(&watcher::Event<ConfigMap>) -> bool {
    move |e| matches!(e, watcher::Event::Apply(c) | watcher::Event::InitApply(c) if c.metadata.name.as_deref() == Some(name))
}

#[tokio::test]
async fn kube_watcher_relists_after_410_and_keeps_working() {
    // No bookmark may advance the watcher's version between the unrelated write and the compaction.
    let config = ServerConfig {
        bookmark_interval: Duration::from_secs(3600),
        ..ServerConfig::default()
    };
    let (server, client) = start_with(config).await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let mut rx = spawn_watcher(cms.clone());
    create(&cms, &config_map("a", &[])).await;
    next_event(&mut rx, applied("a")).await;
    // Changes of another resource move the global version past the watcher's last one.
    let leases: Api<Lease> = Api::default_namespaced(client);
    create(&leases, &lease("l1")).await;
    server.compact_history();
    server.disconnect_watches();
    let relists = next_event(&mut rx, |e| matches!(e, watcher::Event::InitDone)).await;
    assert_eq!(relists, 1, "the watcher re-listed after 410");
    create(&cms, &config_map("b", &[])).await;
    next_event(&mut rx, applied("b")).await;
    assert!(server.fault_stats().watch_disconnects >= 1);
    server.shutdown().await;
}

#[tokio::test]
async fn streaming_list_watch_sends_initial_events_then_the_end_bookmark() {
    let (server, client) = start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    create(&cms, &config_map("before", &[])).await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let api = cms.clone();
    tokio::spawn(async move {
        let mut stream = watcher(api, watcher::Config::default().streaming_lists()).boxed();
        while let Some(Ok(event)) = stream.next().await {
            if tx.send(event).is_err() {
                return;
            }
        }
    });
    let mut saw_initial = false;
    next_event(&mut rx, |e| {
        if let watcher::Event::InitApply(c) = e {
            saw_initial |= c.metadata.name.as_deref() == Some("before");
        }
        matches!(e, watcher::Event::InitDone)
    })
    .await;
    assert!(
        saw_initial,
        "the existing object arrives before the end-of-initial-events bookmark"
    );
    create(&cms, &config_map("after", &[])).await;
    next_event(&mut rx, applied("after")).await;
    server.shutdown().await;
}
