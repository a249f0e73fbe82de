//! LIST: paging with limit/continue, label and field selectors, cluster-wide lists.

use crate::api_support::{api_error, config_map, create, pod, start};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube::api::{Api, ListParams};
use serde_json::json;

#[tokio::test]
async fn paging_returns_every_object_exactly_once() {
    let (server, client) = start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    for i in 0..23 {
        create(&cms, &config_map(&format!("cm-{i:02}"), &[])).await;
    }
    let mut names = Vec::new();
    let mut token: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut lp = ListParams::default().limit(5);
        if let Some(t) = &token {
            lp = lp.continue_token(t);
        }
        let page = cms.list(&lp).await.unwrap();
        assert!(page.items.len() <= 5);
        pages += 1;
        names.extend(page.items.into_iter().map(|c| c.metadata.name.unwrap()));
        match page.metadata.continue_.filter(|t| !t.is_empty()) {
            Some(t) => {
                assert!(page.metadata.remaining_item_count.unwrap() > 0);
                token = Some(t);
            }
            None => break,
        }
    }
    assert_eq!(pages, 5);
    let expected: Vec<String> = (0..23).map(|i| format!("cm-{i:02}")).collect();
    assert_eq!(names, expected);
    server.shutdown().await;
}

#[tokio::test]
async fn too_old_continue_token_is_gone() {
    let (server, client) = start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    for i in 0..4 {
        create(&cms, &config_map(&format!("c{i}"), &[])).await;
    }
    let page = cms.list(&ListParams::default().limit(2)).await.unwrap();
    let token = page.metadata.continue_.unwrap();
    create(&cms, &config_map("later", &[])).await;
    server.compact_history();
    let err = cms
        .list(&ListParams::default().limit(2).continue_token(&token))
        .await
        .unwrap_err();
    assert_eq!(api_error(&err), (410, "Expired".into()));
    server.shutdown().await;
}

#[tokio::test]
async fn label_selectors_follow_kubernetes_operators() {
    let (server, client) = start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    create(
        &cms,
        &config_map("web", &[("app", "web"), ("tier", "front")]),
    )
    .await;
    create(&cms, &config_map("db", &[("app", "db")])).await;
    create(&cms, &config_map("bare", &[])).await;
    let names = |sel: &'static str| {
        let cms = cms.clone();
        async move {
            let list = cms.list(&ListParams::default().labels(sel)).await.unwrap();
            list.items
                .into_iter()
                .map(|c| c.metadata.name.unwrap())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(names("app=web").await, vec!["web"]);
    assert_eq!(names("app==db").await, vec!["db"]);
    assert_eq!(names("app!=web").await, vec!["bare", "db"]);
    assert_eq!(names("app in (web,db)").await, vec!["db", "web"]);
    assert_eq!(names("app notin (web)").await, vec!["bare", "db"]);
    assert_eq!(names("tier").await, vec!["web"]);
    assert_eq!(names("!app").await, vec!["bare"]);
    let err = cms
        .list(&ListParams::default().labels("app in web"))
        .await
        .unwrap_err();
    assert_eq!(api_error(&err).0, 400);
    server.shutdown().await;
}

#[tokio::test]
async fn field_selectors_and_cluster_wide_lists() {
    let (server, client) = start().await;
    let nss: Api<Namespace> = Api::all(client.clone());
    create(
        &nss,
        &serde_json::from_value(json!({"metadata": {"name": "other"}})).unwrap(),
    )
    .await;
    for (ns, name, node) in [
        ("default", "a", "n1"),
        ("default", "b", "n2"),
        ("other", "c", "n1"),
    ] {
        let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
        let mut p = pod(name);
        p.spec.as_mut().unwrap().node_name = Some(node.into());
        create(&pods, &p).await;
    }
    let all: Api<Pod> = Api::all(client.clone());
    let on_n1 = all
        .list(&ListParams::default().fields("spec.nodeName=n1"))
        .await
        .unwrap();
    let mut names: Vec<_> = on_n1
        .items
        .iter()
        .map(|p| p.metadata.name.clone().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, vec!["a", "c"]);
    assert_eq!(
        all.list(&ListParams::default()).await.unwrap().items.len(),
        3
    );
    let by_name = all
        .list(&ListParams::default().fields("metadata.name=b,metadata.namespace=default"))
        .await
        .unwrap();
    assert_eq!(by_name.items.len(), 1);
    let err = all
        .list(&ListParams::default().fields("spec.unknown=x"))
        .await
        .unwrap_err();
    assert_eq!(api_error(&err), (400, "BadRequest".into()));
    server.shutdown().await;
}

#[tokio::test]
async fn metadata_only_lists_and_gets_return_partial_objects() {
    let (server, client) = start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    create(&cms, &config_map("m1", &[("app", "x")])).await;
    create(&cms, &config_map("m2", &[])).await;
    let list = cms
        .list_metadata(&ListParams::default().labels("app=x"))
        .await
        .unwrap();
    let names: Vec<_> = list
        .items
        .iter()
        .map(|m| m.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, vec!["m1"]);
    assert_eq!(
        list.items[0].types.as_ref().unwrap().kind,
        "PartialObjectMetadata"
    );
    let one = cms.get_metadata("m2").await.unwrap();
    assert!(one.metadata.uid.is_some());
    server.shutdown().await;
}
