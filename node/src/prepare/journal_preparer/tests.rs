use std::sync::{Arc, RwLock};

use super::*;
use dra_allocator::model::{AttributeValue, Sharing};
use std::collections::BTreeMap;

mod shares;

pub(super) const DRIVER: &str = "gpu.dra-ledger.io";
const NODE: &str = "node-a";

pub(super) struct Fixture {
    pub(super) dir: tempfile::TempDir,
    pub(super) preparer: JournalPreparer,
}

fn inventory() -> Inventory {
    (0..4)
        .map(|i| {
            let name = format!("gpu-{i}");
            let device = NodeDevice {
                name: name.clone(),
                device_nodes: vec![format!("/dev/nvidia{i}").into()],
                ..NodeDevice::default()
            };
            (name, device)
        })
        .collect()
}

pub(super) fn open(dir: &std::path::Path, boot: &str) -> JournalPreparer {
    let journal = Journal::open(dir.join("journal.redb"), DRIVER).unwrap();
    let cdi = CdiDir::new(dir.join("cdi"), DRIVER);
    JournalPreparer::new(journal, cdi, NODE, Arc::new(RwLock::new(inventory())), boot)
}

pub(super) fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let preparer = open(dir.path(), "boot-1");
    Fixture { dir, preparer }
}

fn handle(uid: &str, node: &str, devices: &[&str], sharing: &str) -> String {
    let devices: Vec<String> = devices.iter().map(|d| format!("\"{d}\"")).collect();
    format!(
        r#"{{"node":"{node}","devices":[{}],"sharing":{sharing},"claimUID":"{uid}"}}"#,
        devices.join(",")
    )
}

const EXCLUSIVE: &str = r#"{"mode":"Exclusive"}"#;
const SHARED_2: &str = r#"{"mode":"Shared","maxConsumers":2}"#;

fn claim(uid: &str, handle: String) -> ClaimRequest {
    ClaimRequest {
        uid: uid.into(),
        namespace: "default".into(),
        name: format!("claim-{uid}"),
        resource_handle: handle,
    }
}

pub(super) fn exclusive(uid: &str, devices: &[&str]) -> ClaimRequest {
    claim(uid, handle(uid, NODE, devices, EXCLUSIVE))
}

pub(super) fn one(
    preparer: &JournalPreparer,
    request: ClaimRequest,
) -> Result<Vec<String>, PrepareError> {
    let mut answers = preparer.prepare(&[request]);
    assert_eq!(answers.len(), 1);
    answers.remove(0).1
}

#[test]
fn repeat_prepare_returns_the_same_cdi_ids_and_writes_the_spec_once() {
    let f = fixture();
    let ids = one(&f.preparer, exclusive("u1", &["gpu-0", "gpu-1"])).unwrap();
    assert_eq!(ids, ["gpu.dra-ledger.io/claim=u1"]);
    let file = f.dir.path().join("cdi/gpu.dra-ledger.io-claim_u1.json");
    let written = std::fs::read_to_string(&file).unwrap();
    assert!(
        written.contains("DRA_LEDGER_DEVICES=gpu-0,gpu-1"),
        "{written}"
    );
    assert_eq!(
        one(&f.preparer, exclusive("u1", &["gpu-0", "gpu-1"])).unwrap(),
        ids
    );
    let entries = f.preparer.entries().unwrap();
    assert_eq!(entries["u1"].state, EntryState::Prepared);
    assert_eq!(entries["u1"].boot_id, "boot-1");
}

#[test]
fn foreign_handles_fail_only_their_claim_of_the_batch() {
    let f = fixture();
    let big = claim("big", "x".repeat(MAX_HANDLE_BYTES + 1));
    let answers = f.preparer.prepare(&[
        claim("garbage", "not json".into()),
        claim(
            "elsewhere",
            handle("elsewhere", "node-b", &["gpu-0"], EXCLUSIVE),
        ),
        claim("mismatch", handle("other-uid", NODE, &["gpu-0"], EXCLUSIVE)),
        exclusive("unknown", &["gpu-9"]),
        big,
        exclusive("good", &["gpu-2"]),
    ]);
    let by_uid: BTreeMap<String, Result<Vec<String>, PrepareError>> = answers.into_iter().collect();
    assert_eq!(by_uid.len(), 6);
    let text = |uid: &str| by_uid[uid].as_ref().unwrap_err().to_string();
    assert!(
        text("garbage").contains("resource handle"),
        "{}",
        text("garbage")
    );
    assert!(
        text("elsewhere").contains("node node-b"),
        "{}",
        text("elsewhere")
    );
    assert!(
        text("mismatch").contains("other-uid"),
        "{}",
        text("mismatch")
    );
    assert!(matches!(
        by_uid["unknown"],
        Err(PrepareError::UnknownDevice { .. })
    ));
    assert!(text("big").contains("16384"), "{}", text("big"));
    assert!(by_uid["good"].is_ok());
    assert_eq!(f.preparer.entries().unwrap().len(), 1);
}

#[test]
fn an_exclusive_device_is_refused_to_a_second_claim_even_in_the_same_batch() {
    let f = fixture();
    one(&f.preparer, exclusive("a", &["gpu-0"])).unwrap();
    let err = one(&f.preparer, exclusive("b", &["gpu-0"])).unwrap_err();
    assert!(
        matches!(&err, PrepareError::DeviceInUse { holder, .. } if holder == "a"),
        "{err}"
    );
    let answers = f
        .preparer
        .prepare(&[exclusive("c", &["gpu-1"]), exclusive("d", &["gpu-1"])]);
    assert!(answers[0].1.is_ok());
    assert!(matches!(
        &answers[1].1,
        Err(PrepareError::DeviceInUse { .. })
    ));
    let shared = claim("s", handle("s", NODE, &["gpu-0"], SHARED_2));
    assert!(
        one(&f.preparer, shared).is_err(),
        "shared with an exclusive holder"
    );
}

#[test]
fn a_shared_device_takes_claims_up_to_max_consumers() {
    let f = fixture();
    let shared = |uid: &str| claim(uid, handle(uid, NODE, &["gpu-3"], SHARED_2));
    one(&f.preparer, shared("s1")).unwrap();
    one(&f.preparer, shared("s2")).unwrap();
    assert!(matches!(
        one(&f.preparer, shared("s3")),
        Err(PrepareError::DeviceInUse { .. })
    ));
    assert!(one(&f.preparer, exclusive("x", &["gpu-3"])).is_err());
}

#[test]
fn unprepare_removes_the_spec_and_entry_and_an_unknown_claim_is_success() {
    let f = fixture();
    one(&f.preparer, exclusive("u1", &["gpu-0"])).unwrap();
    let answers = f
        .preparer
        .unprepare(&[exclusive("u1", &[]), exclusive("never", &[])]);
    assert!(answers.iter().all(|(_, r)| r.is_ok()), "{answers:?}");
    assert!(f.preparer.entries().unwrap().is_empty());
    assert!(!f
        .dir
        .path()
        .join("cdi/gpu.dra-ledger.io-claim_u1.json")
        .exists());
    one(&f.preparer, exclusive("u2", &["gpu-0"])).expect("the device is free again");
}

#[test]
fn a_spec_lost_with_a_reboot_is_written_again_by_recovery_and_by_a_repeat_prepare() {
    let Fixture { dir, preparer } = fixture();
    one(&preparer, exclusive("u1", &["gpu-0"])).unwrap();
    one(&preparer, exclusive("u2", &["gpu-1"])).unwrap();
    drop(preparer);
    std::fs::remove_dir_all(dir.path().join("cdi")).unwrap();
    let preparer = open(dir.path(), "boot-2");
    let report = preparer.recover().unwrap();
    assert_eq!(report.rewritten, ["u1", "u2"]);
    std::fs::remove_file(dir.path().join("cdi/gpu.dra-ledger.io-claim_u1.json")).unwrap();
    one(&preparer, exclusive("u1", &["gpu-0"])).unwrap();
    assert!(dir
        .path()
        .join("cdi/gpu.dra-ledger.io-claim_u1.json")
        .exists());
}

#[test]
fn recovery_rolls_back_started_prepares_finishes_unprepares_and_removes_orphans() {
    let f = fixture();
    one(&f.preparer, exclusive("done", &["gpu-0"])).unwrap();
    let mut started = f.preparer.entries().unwrap()["done"].clone();
    started.state = EntryState::PrepareStarted;
    started.devices = vec!["gpu-1".into()];
    let mut leaving = started.clone();
    leaving.state = EntryState::UnprepareStarted;
    leaving.devices = vec!["gpu-2".into()];
    f.preparer
        .journal
        .apply(&[("half", &started), ("leaving", &leaving)], &[])
        .unwrap();
    let cdi = CdiDir::new(f.dir.path().join("cdi"), DRIVER);
    let device = NodeDevice::default();
    for uid in ["half", "leaving", "orphan"] {
        cdi.write(uid, &cdi.spec(uid, &[&device], &[])).unwrap();
    }
    let report = f.preparer.recover().unwrap();
    assert_eq!(report.rolled_back, ["half"]);
    assert_eq!(report.unprepared, ["leaving"]);
    assert_eq!(report.orphans_removed, ["orphan"]);
    assert_eq!(cdi.list().unwrap(), ["done"]);
    let entries = f.preparer.entries().unwrap();
    assert_eq!(entries.keys().collect::<Vec<_>>(), ["done"]);
    one(&f.preparer, exclusive("again", &["gpu-1"])).expect("the rolled back device is free");
}

pub(super) fn allocated(uid: &str, devices: &[&str], sharing: Sharing) -> AllocatedClaim {
    AllocatedClaim {
        uid: uid.into(),
        namespace: "default".into(),
        name: format!("claim-{uid}"),
        devices: devices.iter().map(|d| (*d).to_owned()).collect(),
        shares: Vec::new(),
        sharing,
        admin_access: false,
    }
}

fn admin(uid: &str, devices: &[&str]) -> AllocatedClaim {
    AllocatedClaim {
        admin_access: true,
        ..allocated(uid, devices, Sharing::Exclusive)
    }
}

pub(super) fn one_allocated(
    preparer: &JournalPreparer,
    claim: AllocatedClaim,
) -> Result<Vec<String>, PrepareError> {
    let mut answers = preparer.prepare_allocated(&[claim]);
    assert_eq!(answers.len(), 1);
    answers.remove(0).1
}

#[test]
fn an_allocated_claim_is_journaled_and_written_like_a_handle_and_repeats_alike() {
    let f = fixture();
    let ids = one_allocated(
        &f.preparer,
        allocated("m1", &["gpu-0", "gpu-1"], Sharing::Exclusive),
    )
    .unwrap();
    assert_eq!(ids, ["gpu.dra-ledger.io/claim=m1"]);
    let written =
        std::fs::read_to_string(f.dir.path().join("cdi/gpu.dra-ledger.io-claim_m1.json")).unwrap();
    assert!(
        written.contains("DRA_LEDGER_DEVICES=gpu-0,gpu-1"),
        "{written}"
    );
    let entry = &f.preparer.entries().unwrap()["m1"];
    assert_eq!(
        (entry.state, entry.sharing, entry.name.as_str()),
        (EntryState::Prepared, EntrySharing::Exclusive, "claim-m1")
    );
    let again = one_allocated(
        &f.preparer,
        allocated("m1", &["gpu-0", "gpu-1"], Sharing::Exclusive),
    );
    assert_eq!(again.unwrap(), ids);
}

#[test]
fn allocated_claims_share_the_handle_paths_device_checks() {
    let f = fixture();
    one(&f.preparer, exclusive("v1alpha2", &["gpu-0"])).unwrap();
    let taken = one_allocated(&f.preparer, allocated("m", &["gpu-0"], Sharing::Exclusive));
    assert!(
        matches!(&taken, Err(PrepareError::DeviceInUse { holder, .. }) if holder == "v1alpha2"),
        "{taken:?}"
    );
    let unknown = one_allocated(&f.preparer, allocated("u", &["gpu-9"], Sharing::Exclusive));
    assert!(
        matches!(&unknown, Err(PrepareError::UnknownDevice { device, .. }) if device == "gpu-9"),
        "{unknown:?}"
    );
    let shared = Sharing::Shared { max_consumers: 2 };
    one_allocated(&f.preparer, allocated("s1", &["gpu-3"], shared)).unwrap();
    one_allocated(&f.preparer, allocated("s2", &["gpu-3"], shared)).unwrap();
    assert!(one_allocated(&f.preparer, allocated("s3", &["gpu-3"], shared)).is_err());
}

#[test]
fn an_admin_access_claim_is_prepared_on_devices_held_by_others_and_holds_them_from_no_one() {
    let f = fixture();
    one(&f.preparer, exclusive("owner", &["gpu-0"])).unwrap();
    one_allocated(&f.preparer, admin("monitor", &["gpu-0", "gpu-1"])).expect("beside the owner");
    assert_eq!(
        f.preparer.entries().unwrap()["monitor"].sharing,
        EntrySharing::AdminAccess
    );
    // The admin claim keeps no exclusive claim from gpu-1, and a second admin claim joins it.
    one_allocated(
        &f.preparer,
        allocated("next", &["gpu-1"], Sharing::Exclusive),
    )
    .expect("gpu-1 is held by admin access only");
    one_allocated(&f.preparer, admin("audit", &["gpu-1"])).unwrap();
    // The exclusive holders still keep each other out.
    let taken = one_allocated(
        &f.preparer,
        allocated("late", &["gpu-0"], Sharing::Exclusive),
    );
    assert!(
        matches!(&taken, Err(PrepareError::DeviceInUse { holder, .. }) if holder == "owner"),
        "{taken:?}"
    );
}

#[test]
fn an_allocated_claim_prepared_with_other_devices_is_refused_naming_its_allocation() {
    let f = fixture();
    one_allocated(&f.preparer, allocated("m", &["gpu-0"], Sharing::Exclusive)).unwrap();
    let error =
        one_allocated(&f.preparer, allocated("m", &["gpu-1"], Sharing::Exclusive)).unwrap_err();
    assert!(matches!(error, PrepareError::Allocation { .. }), "{error}");
    assert_eq!(
        error.to_string(),
        "claim m: allocation: prepared with devices [\"gpu-0\"]; unprepare it first"
    );
}

#[test]
fn a_mig_partition_without_a_mig_device_is_refused_and_one_with_its_mig_uuid_is_prepared() {
    let dir = tempfile::tempdir().unwrap();
    let partition = |name: &str, uuid: Option<&str>| {
        let text = |v: &str| AttributeValue::String(v.to_owned());
        let mut attributes: BTreeMap<String, AttributeValue> = [
            ("type".to_owned(), text("mig")),
            ("parentUUID".to_owned(), text("GPU-0a1b")),
        ]
        .into();
        if let Some(uuid) = uuid {
            attributes.insert("uuid".into(), text(uuid));
        }
        let device = NodeDevice {
            name: name.into(),
            attributes,
            device_nodes: vec!["/dev/nvidia0".into()],
            ..NodeDevice::default()
        };
        (name.to_owned(), device)
    };
    let mut devices = inventory();
    devices.extend([
        partition("gpu-0-mig-1g10gb-19-0", None),
        partition("gpu-0-mig-1g10gb-19-1", Some("MIG-5c6d")),
    ]);
    let journal = Journal::open(dir.path().join("journal.redb"), DRIVER).unwrap();
    let cdi = CdiDir::new(dir.path().join("cdi"), DRIVER);
    let preparer = JournalPreparer::new(journal, cdi, NODE, Arc::new(RwLock::new(devices)), "b");
    let spec = |uid: &str| dir.path().join(format!("cdi/{DRIVER}-claim_{uid}.json"));

    let refused = one_allocated(
        &preparer,
        allocated("p", &["gpu-0-mig-1g10gb-19-0"], Sharing::Exclusive),
    );
    assert!(
        matches!(&refused, Err(PrepareError::UnconfinedPartition { device, .. })
            if device == "gpu-0-mig-1g10gb-19-0"),
        "{refused:?}"
    );
    assert!(refused.unwrap_err().to_string().contains("whole GPU"));
    assert!(!spec("p").exists(), "nothing written for the refused claim");

    one_allocated(
        &preparer,
        allocated("q", &["gpu-0-mig-1g10gb-19-1"], Sharing::Exclusive),
    )
    .expect("a partition naming its MIG device");
    let text = std::fs::read_to_string(spec("q")).unwrap();
    assert!(text.contains("NVIDIA_VISIBLE_DEVICES=MIG-5c6d"), "{text}");
}
