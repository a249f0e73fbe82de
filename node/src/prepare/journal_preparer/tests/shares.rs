//! Prepare and unprepare of claims holding shares of a device allocated to several claims.

use super::*;

fn share(device: &str, id: &str, memory: &str, compute: &str) -> DeviceShare {
    DeviceShare {
        device: device.into(),
        share_id: id.into(),
        consumed: [
            ("memory".to_owned(), memory.to_owned()),
            ("compute".to_owned(), compute.to_owned()),
        ]
        .into(),
    }
}

fn shared(uid: &str, shares: Vec<DeviceShare>) -> AllocatedClaim {
    let devices: Vec<&str> = shares.iter().map(|s| s.device.as_str()).collect();
    let claim = allocated(uid, &devices, Sharing::Exclusive);
    AllocatedClaim { shares, ..claim }
}

fn spec_env(f: &Fixture, uid: &str) -> Option<Vec<String>> {
    let file = f.dir.path().join(format!("cdi/{DRIVER}-claim_{uid}.json"));
    let text = std::fs::read_to_string(file).ok()?;
    let spec: serde_json::Value = serde_json::from_str(&text).unwrap();
    let env = spec["devices"][0]["containerEdits"]["env"].as_array()?;
    Some(env.iter().map(|v| v.as_str().unwrap().to_owned()).collect())
}

#[test]
fn two_claims_on_one_multi_allocation_device_prepare_and_unprepare_independently() {
    let f = fixture();
    let first = shared("s1", vec![share("gpu-0", "share-a", "40Gi", "50")]);
    let second = shared("s2", vec![share("gpu-0", "share-b", "40Gi", "50")]);
    one_allocated(&f.preparer, first.clone()).expect("the first share");
    one_allocated(&f.preparer, second).expect("a second share beside the first");
    let env = spec_env(&f, "s2").unwrap();
    for wanted in [
        "DRA_LEDGER_SHARE_ID=share-b",
        "DRA_LEDGER_MEMORY_LIMIT=40Gi",
        "DRA_LEDGER_COMPUTE_SHARE=50",
        "DRA_LEDGER_DEVICES=gpu-0",
    ] {
        assert!(env.iter().any(|e| e == wanted), "{wanted} not in {env:?}");
    }
    let answers = f.preparer.unprepare(&[ClaimRequest {
        uid: "s1".into(),
        ..ClaimRequest::default()
    }]);
    assert!(answers[0].1.is_ok(), "{answers:?}");
    assert!(spec_env(&f, "s1").is_none(), "the first spec is gone");
    assert!(spec_env(&f, "s2").is_some(), "the second spec stays");
    let entries = f.preparer.entries().unwrap();
    assert_eq!(entries.keys().collect::<Vec<_>>(), ["s2"]);
    assert_eq!(entries["s2"].shares[0].share_id, "share-b");
    one_allocated(&f.preparer, first).expect("the first share again");
}

#[test]
fn shares_and_whole_holders_of_one_device_keep_each_other_out() {
    let f = fixture();
    one(&f.preparer, exclusive("whole", &["gpu-1"])).unwrap();
    let refused = one_allocated(
        &f.preparer,
        shared("s", vec![share("gpu-1", "share-a", "10Gi", "10")]),
    );
    assert!(
        matches!(&refused, Err(PrepareError::DeviceInUse { holder, .. }) if holder == "whole"),
        "{refused:?}"
    );
    one_allocated(
        &f.preparer,
        shared("s", vec![share("gpu-2", "share-a", "10Gi", "10")]),
    )
    .unwrap();
    let refused = one_allocated(&f.preparer, allocated("x", &["gpu-2"], Sharing::Exclusive));
    assert!(
        matches!(&refused, Err(PrepareError::DeviceInUse { holder, .. }) if holder == "s"),
        "{refused:?}"
    );
}

#[test]
fn a_repeated_share_answers_the_same_and_another_share_of_the_claim_is_refused() {
    let f = fixture();
    let claim = shared("s", vec![share("gpu-0", "share-a", "40Gi", "50")]);
    let ids = one_allocated(&f.preparer, claim.clone()).unwrap();
    assert_eq!(one_allocated(&f.preparer, claim).unwrap(), ids);
    let other = shared("s", vec![share("gpu-0", "share-z", "40Gi", "50")]);
    let error = one_allocated(&f.preparer, other).unwrap_err();
    assert_eq!(
        error.to_string(),
        "claim s: allocation: prepared with devices [\"gpu-0\"] (shares share-a); unprepare it \
         first"
    );
}

#[test]
fn a_restart_keeps_the_shares_and_rewrites_a_lost_spec_with_the_share_env() {
    let f = fixture();
    let claim = shared("s", vec![share("gpu-3", "share-a", "20Gi", "25")]);
    one_allocated(&f.preparer, claim.clone()).unwrap();
    let before = spec_env(&f, "s").unwrap();
    std::fs::remove_dir_all(f.dir.path().join("cdi")).unwrap();
    let Fixture { dir, preparer } = f;
    drop(preparer);
    let preparer = open(dir.path(), "boot-2");
    let report = preparer.recover().unwrap();
    assert_eq!(report.rewritten, ["s"]);
    let restarted = Fixture { dir, preparer };
    assert_eq!(spec_env(&restarted, "s").unwrap(), before);
    assert_eq!(
        one_allocated(&restarted.preparer, claim).unwrap(),
        ["gpu.dra-ledger.io/claim=s"]
    );
}
