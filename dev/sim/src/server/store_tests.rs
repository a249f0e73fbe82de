//! Unit tests of the store: resourceVersion discipline, history window and watch subscription.

use serde_json::json;

use super::*;
use crate::KubernetesVersion;

fn store(limit: usize) -> Store {
    Store::new(
        Registry::with_builtins_of(KubernetesVersion::default()),
        limit,
    )
}

fn cm(name: &str, data: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "ns"}, "data": {"k": data}})
}

fn rv_of(v: &Value) -> u64 {
    v["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

fn put(s: &Store, name: &str, data: &str) -> Written {
    let new = cm(name, data);
    s.modify(
        "/configmaps",
        "ns",
        name,
        StatusError::no_route,
        move |_| Ok(Change::Put(new)),
    )
    .unwrap()
}

#[test]
fn writes_bump_the_global_version_and_no_op_writes_do_not() {
    let s = store(100);
    let a = s
        .create("/configmaps", "ns", "a", "", "configmaps", cm("a", "1"))
        .unwrap();
    let b = s
        .create("/configmaps", "ns", "b", "", "configmaps", cm("b", "1"))
        .unwrap();
    assert_eq!(rv_of(&b), rv_of(&a) + 1);
    let changed = put(&s, "a", "2");
    assert!(matches!(changed, Written::Stored(_)));
    assert_eq!(rv_of(changed.object()), rv_of(&b) + 1);
    assert!(matches!(put(&s, "a", "2"), Written::Unchanged(_)));
    assert_eq!(s.current_rv(), rv_of(changed.object()));
    let dup = s.create("/configmaps", "ns", "a", "", "configmaps", cm("a", "1"));
    assert!(matches!(dup, Err(StatusError::AlreadyExists { .. })));
}

#[test]
fn removal_event_carries_the_deletion_revision() {
    let s = store(100);
    s.create("/configmaps", "ns", "a", "", "configmaps", cm("a", "1"))
        .unwrap();
    let before = s.current_rv();
    let removed = s
        .modify("/configmaps", "ns", "a", StatusError::no_route, |_| {
            Ok(Change::Remove)
        })
        .unwrap();
    assert!(matches!(removed, Written::Removed(_)));
    assert_eq!(rv_of(removed.object()), before + 1);
    assert!(s.get("/configmaps", "ns", "a").is_none());
}

#[test]
fn subscription_replays_retained_events_in_order_and_expires_older_versions() {
    let s = store(3);
    let first = s
        .create("/configmaps", "ns", "a", "", "configmaps", cm("a", "0"))
        .unwrap();
    for i in 1..=4 {
        put(&s, "a", &i.to_string());
    }
    // Five events, three retained: versions first+2..=first+4.
    let base = rv_of(&first);
    assert!(matches!(
        s.subscribe("/configmaps", Some(base)),
        Err(StatusError::Gone(_))
    ));
    let sub = s.subscribe("/configmaps", Some(base + 2)).unwrap();
    let rvs: Vec<u64> = sub.replay.iter().map(|e| e.rv).collect();
    assert_eq!(rvs, vec![base + 3, base + 4]);
    assert_eq!(sub.rv, s.current_rv());
    s.compact();
    assert!(matches!(
        s.subscribe("/configmaps", Some(base + 3)),
        Err(StatusError::Gone(_))
    ));
    assert!(s
        .subscribe("/configmaps", Some(s.current_rv()))
        .unwrap()
        .replay
        .is_empty());
}

#[test]
fn list_pages_resume_after_a_key_within_a_namespace() {
    let s = store(100);
    for name in ["a", "b", "c"] {
        s.create("/configmaps", "ns", name, "", "configmaps", cm(name, "1"))
            .unwrap();
    }
    let mut other = cm("z", "1");
    other["metadata"]["namespace"] = json!("other");
    s.create("/configmaps", "other", "z", "", "configmaps", other)
        .unwrap();
    let (items, _) = s.list(
        "/configmaps",
        Some("ns"),
        Some(&("ns".to_string(), "a".to_string())),
    );
    let names: Vec<&str> = items
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["b", "c"]);
    assert_eq!(s.list("/configmaps", None, None).0.len(), 4);
}

fn names_and_data(items: &[Arc<Value>]) -> Vec<(String, String)> {
    items
        .iter()
        .map(|o| {
            (
                o["metadata"]["name"].as_str().unwrap().to_owned(),
                o["data"]["k"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn pages_at_an_older_revision_undo_later_changes_key_by_key() {
    let s = store(100);
    for name in ["a", "b", "c"] {
        s.create("/configmaps", "ns", name, "", "configmaps", cm(name, "1"))
            .unwrap();
    }
    let then = s.current_rv();
    // After `then`: b changes twice, c goes, aa and d arrive, and another namespace changes.
    put(&s, "b", "2");
    put(&s, "b", "3");
    s.modify("/configmaps", "ns", "c", StatusError::no_route, |_| {
        Ok(Change::Remove)
    })
    .unwrap();
    for name in ["aa", "d"] {
        s.create("/configmaps", "ns", name, "", "configmaps", cm(name, "9"))
            .unwrap();
    }
    let all = |_: &Value| true;
    let at_then = |after| PageRange {
        namespace: Some("ns"),
        after,
        rv: Some(then),
        count_rest: true,
    };
    let first = s
        .list_page("/configmaps", at_then(None), Some(2), all)
        .unwrap();
    assert_eq!(
        names_and_data(&first.items),
        [("a".into(), "1".into()), ("b".into(), "1".into())]
    );
    assert_eq!((first.rest, first.rv), (1, then));
    let b = ("ns".to_string(), "b".to_string());
    let second = s
        .list_page("/configmaps", at_then(Some(&b)), Some(2), all)
        .unwrap();
    assert_eq!(names_and_data(&second.items), [("c".into(), "1".into())]);
    assert_eq!(second.rest, 0);

    let now = s
        .list_page("/configmaps", PageRange::default(), None, all)
        .unwrap();
    assert_eq!(
        names_and_data(&now.items),
        [
            ("a".into(), "1".into()),
            ("aa".into(), "9".into()),
            ("b".into(), "3".into()),
            ("d".into(), "9".into())
        ]
    );
    assert_eq!((now.rest, now.rv), (0, s.current_rv()));
    // The filter applies to the page and to the count of the rest.
    let not_a = |o: &Value| o["metadata"]["name"] != "a";
    let filtered = s
        .list_page("/configmaps", at_then(None), Some(1), not_a)
        .unwrap();
    assert_eq!(names_and_data(&filtered.items), [("b".into(), "1".into())]);
    assert_eq!(filtered.rest, 1);
}

#[test]
fn a_page_older_than_the_retained_history_is_none() {
    let s = store(2);
    s.create("/configmaps", "ns", "a", "", "configmaps", cm("a", "1"))
        .unwrap();
    let then = s.current_rv();
    for data in ["2", "3", "4"] {
        put(&s, "a", data);
    }
    let range = PageRange {
        rv: Some(then),
        ..PageRange::default()
    };
    assert!(s.list_page("/configmaps", range, None, |_| true).is_none());
}

#[test]
fn only_recent_events_keep_their_encoding() {
    let s = store(ENCODINGS_KEPT * 2);
    let start = s.current_rv();
    s.create("/configmaps", "ns", "a", "", "configmaps", cm("a", "0"))
        .unwrap();
    let encodes = std::cell::Cell::new(0);
    let encode = |object: &Value| {
        encodes.set(encodes.get() + 1);
        Bytes::from(serde_json::to_vec(object).unwrap())
    };
    let first = s.subscribe("/configmaps", Some(start)).unwrap().replay;
    let oldest = &first[0];
    let bytes = oldest.encoded(encode);
    assert_eq!(oldest.encoded(encode), bytes, "reused, not encoded again");
    assert_eq!(encodes.get(), 1);
    for i in 1..ENCODINGS_KEPT {
        put(&s, "a", &i.to_string());
    }
    oldest.encoded(encode);
    assert_eq!(encodes.get(), 1, "still among the recent events");
    put(&s, "a", "one more");
    assert_eq!(oldest.encoded(encode), bytes);
    assert_eq!(
        encodes.get(),
        2,
        "no longer recent: its encoding was dropped"
    );
}
