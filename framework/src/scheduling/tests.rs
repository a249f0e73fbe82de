use super::*;
use crate::testing::fixtures::{context, nodes, ContextFixture};

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_owned()).collect()
}

fn entry(name: &str, nodes: &[&str]) -> ClaimStatusEntry {
    ClaimStatusEntry {
        name: name.to_owned(),
        unsuitable_nodes: names(nodes),
    }
}

fn apply(ctx: &PodSchedulingContext, patch: &Patch) -> PodSchedulingContext {
    let mut value = serde_json::to_value(ctx).unwrap();
    json_patch::patch(&mut value, patch).unwrap();
    serde_json::from_value(value).unwrap()
}

fn status_entries(ctx: &PodSchedulingContext) -> Vec<(String, Vec<String>)> {
    ctx.status
        .as_ref()
        .and_then(|s| s.resource_claims.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|e| (e.name.unwrap(), e.unsuitable_nodes.unwrap_or_default()))
        .collect()
}

#[test]
fn short_lists_are_not_truncated() {
    let list = nodes(128);
    assert_eq!(truncate_nodes(list.clone(), Some("node-0")), list);
}

#[test]
fn long_list_drops_first_when_first_is_not_selected() {
    let mut list = nodes(128);
    list.push("worker".to_owned());
    let out = truncate_nodes(list.clone(), Some("worker"));
    assert_eq!(out.len(), NODE_LIST_MAX_SIZE);
    assert_eq!(out, list[1..].to_vec());
    assert_eq!(out.last().map(String::as_str), Some("worker"));
}

#[test]
fn long_list_drops_last_when_first_is_selected() {
    let mut list = vec!["worker".to_owned()];
    list.extend(nodes(128));
    let out = truncate_nodes(list.clone(), Some("worker"));
    assert_eq!(out, list[..128].to_vec());
    assert_eq!(out[0], "worker");
}

#[test]
fn patch_creates_status_when_absent() {
    let ctx = context();
    let patch = status_patch(&ctx, &[entry("a", &["n1"])]).unwrap();
    let out = apply(&ctx, &patch);
    assert_eq!(status_entries(&out), vec![("a".into(), names(&["n1"]))]);
}

#[test]
fn patch_touches_only_our_entries() {
    let ctx = context()
        .with_status_entry("theirs", &["x"])
        .with_status_entry("ours", &["old"]);
    let patch = status_patch(&ctx, &[entry("ours", &["new"]), entry("added", &[])]).unwrap();
    let text = serde_json::to_string(&patch).unwrap();
    assert!(
        !text.contains("theirs"),
        "patch mentions another entry: {text}"
    );
    let out = apply(&ctx, &patch);
    assert_eq!(
        status_entries(&out),
        vec![
            ("theirs".into(), names(&["x"])),
            ("ours".into(), names(&["new"])),
            ("added".into(), vec![]),
        ]
    );
}

#[test]
fn unchanged_entries_produce_no_patch() {
    let ctx = context().with_status_entry("ours", &["n1", "n2"]);
    assert!(status_patch(&ctx, &[entry("ours", &["n1", "n2"])]).is_none());
}

#[test]
fn patch_fails_on_a_newer_copy() {
    let ctx = context().with_status_entry("ours", &["old"]);
    let patch = status_patch(&ctx, &[entry("ours", &["new"])]).unwrap();
    let mut newer = ctx.clone();
    newer.metadata.resource_version = Some("2".into());
    let mut value = serde_json::to_value(&newer).unwrap();
    let err = json_patch::patch(&mut value, &patch).unwrap_err();
    assert!(matches!(err.kind, json_patch::PatchErrorKind::TestFailed));
}
