//! Two claims sharing one device (`allowMultipleAllocations`, one share each), with SIGKILL
//! between their prepares: the child prepares `share-1` (share `share-a` of `gpu-0`) and then
//! `share-2` (share `share-b` of the same device) through the `v1.DRAPlugin` service, and is
//! killed once after the first prepare was answered and before the second began, and once frozen
//! at each failpoint of the second prepare. After every kill the directory is recovered and
//! checked as the kill loop checks it ([`crate::checks`]), and the restarted agent must answer
//! the second prepare with its share ID, answer the first one again unchanged, and unprepare
//! either claim leaving the other's CDI spec, with its share's environment, in place.

use std::path::Path;

use dra_node::prepare::ClaimRequest;
use dra_types::kubelet::k8s::io::kubelet::pkg::apis::dra::v1;
use dra_types::resource_v1::{
    DeviceAllocationResult, DeviceRequestAllocationResult, ResourceClaim,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::acks::{self, Acknowledged};
use crate::checks::{self, Foreign};
use crate::child_process::{self, Kill};
use crate::paths::{Api, Path as PreparePath};
use crate::setup::{self, DRIVER, NODE};

/// The device both claims share.
const DEVICE: &str = "gpu-0";
/// The two claims: UID and share ID.
const CLAIMS: [(&str, &str); 2] = [("share-1", "share-a"), ("share-2", "share-b")];
/// The test's own failpoint: the child froze after the first prepare was answered.
const BETWEEN: &str = "crash_between_share_prepares";
/// Where the child is killed: between the prepares, and at each step of the second one.
const KILLS: [&str; 5] = [
    "crash_between_share_prepares@1",
    "node_after_prepare_started@2",
    "node_cdi_before_rename@2",
    "node_after_cdi_write@2",
    "node_after_prepared@2",
];

/// The claim `uid` as the 1.36 scheduler allocates it: share `share` of [`DEVICE`], consuming
/// half of its memory and compute.
fn shared_claim(uid: &str, share: &str) -> ResourceClaim {
    let mut result = DeviceRequestAllocationResult::new("gpu", DRIVER, NODE, DEVICE);
    result.share_id = Some(share.to_owned());
    result.consumed_capacity = [
        ("memory".to_owned(), Quantity("40Gi".into())),
        ("compute".to_owned(), Quantity("50".into())),
    ]
    .into();
    ResourceClaim::new("crash", &format!("claim-{uid}"), uid).allocated(DeviceAllocationResult {
        results: vec![result],
        config: Vec::new(),
    })
}

/// Prepares claim `at` of [`CLAIMS`] through `path`; its answer.
fn prepare(path: &PreparePath, at: usize) -> v1::NodePrepareResourceResponse {
    let (uid, share) = CLAIMS[at];
    let mut answers = path.prepare_v1(&[shared_claim(uid, share)]);
    answers.remove(uid).unwrap()
}

/// The child: prepares both claims, reporting each, and freezes in between at [`BETWEEN`]
/// where armed; then waits for its kill.
pub fn child(root: &Path) -> ! {
    let preparer = setup::open(root);
    preparer.recover().unwrap();
    let path = PreparePath::new(Api::V1, preparer);
    println!("{}", acks::READY);
    for (at, (uid, _)) in CLAIMS.iter().enumerate() {
        let answer = prepare(&path, at);
        assert_eq!(answer.error, "", "prepare of {uid}");
        let ids = answer.devices[0].cdi_device_ids.clone();
        println!("{}", acks::prepared(uid, &[DEVICE.to_owned()], &ids));
        if at == 0 {
            dra_allocator::failpoint::hit(BETWEEN);
        }
    }
    loop {
        std::thread::park();
    }
}

/// The environment of claim `uid`'s CDI spec under `root`, `None` without one.
fn spec_env(root: &Path, uid: &str) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(setup::cdi_dir(root).file(uid)).ok()?;
    let spec: serde_json::Value = serde_json::from_str(&text).unwrap();
    let env = spec["devices"][0]["containerEdits"]["env"].as_array()?;
    Some(env.iter().map(|e| e.as_str().unwrap().to_owned()).collect())
}

/// Asserts that claim `at`'s spec exists with its share's environment.
fn assert_spec(root: &Path, kill: &str, at: usize) {
    let (uid, share) = CLAIMS[at];
    let env = spec_env(root, uid).unwrap_or_else(|| panic!("{kill}: no CDI spec of {uid}"));
    for wanted in [
        format!("DRA_LEDGER_SHARE_ID={share}"),
        "DRA_LEDGER_MEMORY_LIMIT=40Gi".to_owned(),
        "DRA_LEDGER_COMPUTE_SHARE=50".to_owned(),
    ] {
        assert!(
            env.contains(&wanted),
            "{kill}: {wanted} not in {uid}'s spec: {env:?}"
        );
    }
}

fn unprepare(path: &PreparePath, kill: &str, at: usize) {
    let request = ClaimRequest {
        uid: CLAIMS[at].0.to_owned(),
        ..ClaimRequest::default()
    };
    for (uid, answer) in path.unprepare(&[request]) {
        answer.unwrap_or_else(|e| panic!("{kill}: unprepare of {uid}: {e}"));
    }
}

/// What the restarted agent must do after `kill`: both claims prepared (the first answered as
/// before), then each unprepared without touching the other.
fn restarted(root: &Path, kill: &str, first_ids: &[String]) {
    let path = PreparePath::new(Api::V1, setup::open(root));
    let second = prepare(&path, 1);
    assert_eq!(
        second.error, "",
        "{kill}: the second prepare after the restart"
    );
    assert_eq!(
        second.devices[0].share_id.as_deref(),
        Some(CLAIMS[1].1),
        "{kill}"
    );
    let first = prepare(&path, 0);
    assert_eq!(
        first.devices[0].cdi_device_ids, first_ids,
        "{kill}: the first again"
    );
    assert_spec(root, kill, 0);
    assert_spec(root, kill, 1);
    unprepare(&path, kill, 0);
    assert!(
        spec_env(root, CLAIMS[0].0).is_none(),
        "{kill}: the first spec stays"
    );
    assert_spec(root, kill, 1);
    assert_eq!(
        prepare(&path, 0).error,
        "",
        "{kill}: the first prepared again"
    );
    unprepare(&path, kill, 1);
    assert!(
        spec_env(root, CLAIMS[1].0).is_none(),
        "{kill}: the second spec stays"
    );
    assert_spec(root, kill, 0);
}

/// The parent: one fresh directory per kill of [`KILLS`].
pub fn run() {
    for (number, spec) in KILLS.iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        setup::create(root);
        let foreign = Foreign::place(root);
        let how = Kill::AtFailpoint((*spec).to_owned());
        let killed = child_process::run_and_kill(root, number as u64, 0, Api::V1Shares, &how);
        let mut acks = Acknowledged::default();
        for line in &killed.lines {
            acks.take(line);
        }
        let kill = format!("kill at {spec}");
        let first = acks
            .held
            .get(CLAIMS[0].0)
            .unwrap_or_else(|| panic!("{kill}: the first prepare was not answered"))
            .clone();
        checks::recover_and_check(root, &kill, &acks, &foreign);
        assert_spec(root, &kill, 0);
        restarted(root, &kill, &first.cdi_ids);
        println!("{kill}: both shares prepared and unprepared apart after the restart");
    }
}
