use super::*;

fn owner(uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: "v1".into(),
        kind: "Pod".into(),
        name: format!("pod-{uid}"),
        uid: uid.into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

#[test]
fn object_without_owners_is_kept() {
    assert_eq!(verdict(&[], &|_| false), Verdict::Keep);
}

#[test]
fn dependent_of_gone_owner_is_deleted() {
    assert_eq!(verdict(&[owner("a")], &|_| false), Verdict::Delete);
}

#[test]
fn dependent_with_a_remaining_owner_only_loses_the_gone_reference() {
    let owners = [owner("a"), owner("b")];
    assert_eq!(
        verdict(&owners, &|o| o.uid == "b"),
        Verdict::DropOwners(vec!["a".into()])
    );
}

#[test]
fn dependent_with_all_owners_present_is_kept() {
    let owners = [owner("a"), owner("b")];
    assert_eq!(verdict(&owners, &|_| true), Verdict::Keep);
}

#[tokio::test]
async fn deleted_owner_queues_its_dependents_again() {
    let gc = GarbageCollector::new(test_client(), Vec::new());
    let pod = meta("pod-uid", "p", None);
    let claim = meta("claim-uid", "c", Some("pod-uid"));
    gc.observe(0, &Change::Applied(&pod));
    assert!(
        gc.queue.is_empty(),
        "an object without owners needs no examination"
    );
    gc.observe(1, &Change::Applied(&claim));
    let examined = gc.queue.get().await.unwrap();
    assert_eq!(examined, "claim-uid");
    gc.queue.done(&examined);
    assert!(gc.queue.is_empty());
    gc.observe(0, &Change::Deleted(&pod));
    assert_eq!(
        gc.queue.get().await.unwrap(),
        "claim-uid",
        "the owner's deletion re-examines its dependent"
    );
}

#[tokio::test]
async fn dependent_of_known_owners_is_settled_without_reading_the_server() {
    // The client reaches nothing: a read of the server would fail the sync.
    let gc = GarbageCollector::new(test_client(), crate::actors::wiring::v1alpha2_gc_kinds());
    let pod = meta("pod-uid", "p", None);
    let claim = meta("claim-uid", "c", Some("pod-uid"));
    gc.observe(0, &Change::Applied(&pod));
    gc.observe(2, &Change::Applied(&claim));
    assert!(matches!(gc.sync("claim-uid".into()).await, Ok(Next::Done)));

    let orphan = meta("orphan-uid", "o", Some("unknown-uid"));
    gc.observe(2, &Change::Applied(&orphan));
    assert!(
        gc.sync("orphan-uid".into()).await.is_err(),
        "an owner the graph does not know is looked up on the server"
    );
}

/// The metadata of an object `name` with `uid`, owned by the pod `owner_uid` if given.
fn meta(uid: &str, name: &str, owner_uid: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        uid: Some(uid.into()),
        name: Some(name.into()),
        owner_references: owner_uid.map(|o| vec![owner(o)]),
        ..ObjectMeta::default()
    }
}

fn test_client() -> Client {
    let config = kube::Config::new("http://127.0.0.1:9".parse().expect("static url"));
    Client::try_from(config).expect("client from static config")
}
