//! Deletion: finalizers, preconditions, propagation policies, graceful pod deletion, namespaces.

use std::time::Duration;

use crate::api_support::{api_error, config_map, create, pod, start};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions, WatchEvent, WatchParams};
use serde_json::json;

#[tokio::test]
async fn object_with_finalizer_stays_until_the_finalizer_is_removed() {
    let (server, client) = start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    let mut cm = config_map("f", &[]);
    cm.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    let created = create(&cms, &cm).await;
    let rv = created.metadata.resource_version.clone().unwrap();
    let mut events = cms
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();

    let deleted = cms.delete("f", &DeleteParams::default()).await.unwrap();
    let kept = deleted
        .left()
        .expect("object is returned while finalizers remain");
    assert!(kept.metadata.deletion_timestamp.is_some());
    assert!(cms
        .get("f")
        .await
        .unwrap()
        .metadata
        .deletion_timestamp
        .is_some());

    let adding = json!({"metadata": {"finalizers": ["example.com/hold", "example.com/new"]}});
    let err = cms
        .patch("f", &PatchParams::default(), &Patch::Merge(&adding))
        .await
        .unwrap_err();
    assert_eq!(api_error(&err), (422, "Invalid".into()));

    let clear = json!({"metadata": {"finalizers": null}});
    cms.patch("f", &PatchParams::default(), &Patch::Merge(&clear))
        .await
        .unwrap();
    assert_eq!(api_error(&cms.get("f").await.unwrap_err()).0, 404);

    let mut kinds = Vec::new();
    while kinds.len() < 2 {
        match tokio::time::timeout(Duration::from_secs(5), events.try_next())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
        {
            WatchEvent::Modified(_) => kinds.push("MODIFIED"),
            WatchEvent::Deleted(_) => kinds.push("DELETED"),
            _ => {}
        }
    }
    assert_eq!(kinds, vec!["MODIFIED", "DELETED"]);
    server.shutdown().await;
}

#[tokio::test]
async fn delete_preconditions_are_checked() {
    let (server, client) = start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    let created = create(&cms, &config_map("p", &[])).await;
    let wrong_uid = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some("other".into()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    assert_eq!(
        api_error(&cms.delete("p", &wrong_uid).await.unwrap_err()),
        (409, "Conflict".into())
    );
    let wrong_rv = DeleteParams {
        preconditions: Some(Preconditions {
            uid: None,
            resource_version: Some("1".into()),
        }),
        ..DeleteParams::default()
    };
    assert_eq!(
        api_error(&cms.delete("p", &wrong_rv).await.unwrap_err()),
        (409, "Conflict".into())
    );
    let right = DeleteParams {
        preconditions: Some(Preconditions {
            uid: created.metadata.uid.clone(),
            resource_version: created.metadata.resource_version,
        }),
        ..DeleteParams::default()
    };
    let status = cms
        .delete("p", &right)
        .await
        .unwrap()
        .right()
        .expect("a Status for an immediate delete");
    assert_eq!(
        status.status,
        Some(kube::core::response::StatusSummary::Success)
    );
    server.shutdown().await;
}

#[tokio::test]
async fn foreground_deletion_adds_its_finalizer() {
    let (server, client) = start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    create(&cms, &config_map("fg", &[])).await;
    cms.delete("fg", &DeleteParams::foreground()).await.unwrap();
    let kept = cms.get("fg").await.unwrap();
    assert_eq!(
        kept.metadata.finalizers.unwrap(),
        vec!["foregroundDeletion"]
    );
    assert!(kept.metadata.deletion_timestamp.is_some());
    server.shutdown().await;
}

#[tokio::test]
async fn bound_pod_is_deleted_gracefully_and_unbound_pod_at_once() {
    let (server, client) = start().await;
    let pods: Api<Pod> = Api::default_namespaced(client);
    create(&pods, &pod("unbound")).await;
    pods.delete("unbound", &DeleteParams::default())
        .await
        .unwrap();
    assert_eq!(api_error(&pods.get("unbound").await.unwrap_err()).0, 404);

    let mut bound = pod("bound");
    bound.spec.as_mut().unwrap().node_name = Some("n1".into());
    create(&pods, &bound).await;
    pods.delete("bound", &DeleteParams::default())
        .await
        .unwrap();
    let terminating = pods.get("bound").await.unwrap();
    assert_eq!(terminating.metadata.deletion_grace_period_seconds, Some(30));
    pods.delete(
        "bound",
        &DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(api_error(&pods.get("bound").await.unwrap_err()).0, 404);
    server.shutdown().await;
}

#[tokio::test]
async fn deleted_namespace_terminates_and_takes_its_content() {
    let (server, client) = start().await;
    let nss: Api<Namespace> = Api::all(client.clone());
    create(
        &nss,
        &serde_json::from_value(json!({"metadata": {"name": "gone"}})).unwrap(),
    )
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "gone");
    create(&cms, &config_map("a", &[])).await;
    nss.delete("gone", &DeleteParams::default()).await.unwrap();
    let err = cms
        .create(&kube::api::PostParams::default(), &config_map("b", &[]))
        .await
        .unwrap_err();
    assert!(matches!(api_error(&err).0, 403 | 404), "{err:?}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while nss.get_opt("gone").await.unwrap().is_some() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "namespace not removed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(server
        .store()
        .list("", "configmaps", Some("gone"))
        .is_empty());
    server.shutdown().await;
}

#[tokio::test]
async fn delete_collection_removes_only_selected_objects() {
    let (server, client) = start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    create(&cms, &config_map("a", &[("app", "x")])).await;
    create(&cms, &config_map("b", &[("app", "x")])).await;
    create(&cms, &config_map("c", &[("app", "y")])).await;
    let lp = kube::api::ListParams::default().labels("app=x");
    cms.delete_collection(&DeleteParams::default(), &lp)
        .await
        .unwrap();
    let left: Vec<_> = cms
        .list(&kube::api::ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|c| c.metadata.name.unwrap())
        .collect();
    assert_eq!(left, vec!["c"]);
    server.shutdown().await;
}

#[tokio::test]
async fn system_namespaces_cannot_be_deleted() {
    let (server, client) = start().await;
    let nss: Api<Namespace> = Api::all(client);
    let err = nss
        .delete("default", &DeleteParams::default())
        .await
        .unwrap_err();
    assert_eq!(api_error(&err), (403, "Forbidden".into()));
    server.shutdown().await;
}
