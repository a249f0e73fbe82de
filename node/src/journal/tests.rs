use super::*;

fn entry(state: EntryState) -> Entry {
    Entry {
        state,
        namespace: "default".into(),
        name: "c1".into(),
        devices: vec!["gpu-0".into()],
        sharing: EntrySharing::Exclusive,
        cdi_ids: vec!["gpu.dra-ledger.io/claim=u1".into()],
        boot_id: "boot-1".into(),
        shares: Vec::new(),
    }
}

#[test]
fn entries_survive_a_reopen_and_removals_are_gone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.redb");
    let journal = Journal::open(&path, "gpu.dra-ledger.io").unwrap();
    let started = entry(EntryState::PrepareStarted);
    journal
        .apply(&[("u1", &started), ("u2", &started)], &[])
        .unwrap();
    let prepared = entry(EntryState::Prepared);
    journal.apply(&[("u1", &prepared)], &["u2"]).unwrap();
    drop(journal);
    let journal = Journal::open(&path, "gpu.dra-ledger.io").unwrap();
    let entries = journal.entries().unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries["u1"], prepared);
}

#[test]
fn a_newer_schema_or_another_drivers_file_is_refused_and_left_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.redb");
    drop(Journal::open(&path, "gpu.dra-ledger.io").unwrap());
    let err = Journal::open(&path, "other.example.com").unwrap_err();
    assert!(matches!(err, JournalError::OtherDriver { .. }), "{err}");
    {
        let db = Database::create(&path).unwrap();
        let txn = db.begin_write().unwrap();
        txn.open_table(META)
            .unwrap()
            .insert(VERSION_KEY, (SCHEMA_VERSION + 1).to_be_bytes().as_slice())
            .unwrap();
        txn.commit().unwrap();
    }
    let before = std::fs::read(&path).unwrap();
    let err = Journal::open(&path, "gpu.dra-ledger.io").unwrap_err();
    assert!(
        matches!(err, JournalError::NewerSchema { found, .. } if found == SCHEMA_VERSION + 1),
        "{err}"
    );
    assert!(err.to_string().contains("left unchanged"));
    assert!(std::fs::read(&path).unwrap() == before, "the file changed");
}

#[test]
fn a_journal_stays_at_version_1_until_it_holds_an_admin_access_entry() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.redb");
    let prepared = entry(EntryState::Prepared);
    {
        let journal = Journal::open(&path, "gpu.dra-ledger.io").unwrap();
        journal.apply(&[("u1", &prepared)], &[]).unwrap();
    }
    assert_eq!(dra_migrations::inspect(&path).unwrap().schema_version, 1);
    let journal = Journal::open(&path, "gpu.dra-ledger.io").unwrap();
    assert_eq!(dra_migrations::inspect(&path).unwrap().schema_version, 1);
    assert_eq!(journal.entries().unwrap()["u1"], prepared);
    let admin = Entry {
        sharing: EntrySharing::AdminAccess,
        ..prepared.clone()
    };
    journal.apply(&[("u2", &admin)], &[]).unwrap();
    drop(journal);
    let info = dra_migrations::inspect(&path).unwrap();
    assert_eq!(info.schema_version, ADMIN_ACCESS_VERSION);
    let journal = Journal::open(&path, "gpu.dra-ledger.io").unwrap();
    assert_eq!(journal.entries().unwrap()["u2"], admin);
}

#[test]
fn a_file_that_is_not_a_journal_is_a_clear_error_and_left_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.redb");
    std::fs::write(&path, b"not a redb file at all, just text").unwrap();
    let err = Journal::open(&path, "gpu.dra-ledger.io").unwrap_err();
    assert!(matches!(err, JournalError::Inspect { .. }), "{err}");
    assert!(err.to_string().contains("journal.redb"));
    assert!(std::fs::read(&path).unwrap() == b"not a redb file at all, just text");
}

fn share(device: &str, id: &str, memory: &str) -> DeviceShare {
    DeviceShare {
        device: device.into(),
        share_id: id.into(),
        consumed: [("memory".to_owned(), memory.to_owned())].into(),
    }
}

fn shared(device: &str, id: &str, memory: &str) -> Entry {
    Entry {
        devices: vec![device.into()],
        shares: vec![share(device, id, memory)],
        ..entry(EntryState::Prepared)
    }
}

#[test]
fn shares_of_two_claims_on_one_device_are_kept_and_removed_apart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.redb");
    let journal = Journal::open(&path, "gpu.dra-ledger.io").unwrap();
    let first = shared("gpu-0", "s-1", "40Gi");
    let second = shared("gpu-0", "s-2", "40Gi");
    journal.apply(&[("u1", &first)], &[]).unwrap();
    journal.apply(&[("u2", &second)], &[]).unwrap();
    drop(journal);
    let journal = Journal::open(&path, "gpu.dra-ledger.io").unwrap();
    let entries = journal.entries().unwrap();
    assert_eq!(entries["u1"], first);
    assert_eq!(entries["u2"], second);
    journal.apply(&[], &["u1"]).unwrap();
    let entries = journal.entries().unwrap();
    assert!(!entries.contains_key("u1"));
    assert_eq!(entries["u2"], second);
    let unpreparing = Entry {
        state: EntryState::UnprepareStarted,
        ..second.clone()
    };
    journal.apply(&[("u2", &unpreparing)], &[]).unwrap();
    assert_eq!(journal.entries().unwrap()["u2"], unpreparing);
}

#[test]
fn a_claim_with_two_shares_keeps_both_in_device_order() {
    let dir = tempfile::tempdir().unwrap();
    let journal = Journal::open(dir.path().join("journal.redb"), "gpu.dra-ledger.io").unwrap();
    let both = Entry {
        devices: vec!["gpu-1".into(), "gpu-0".into()],
        shares: vec![share("gpu-1", "z", "10Gi"), share("gpu-0", "a", "20Gi")],
        ..entry(EntryState::Prepared)
    };
    journal.apply(&[("u1", &both)], &[]).unwrap();
    assert_eq!(journal.entries().unwrap()["u1"], both);
}

#[test]
fn a_journal_moves_to_version_3_with_its_first_share_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.redb");
    {
        let journal = Journal::open(&path, "gpu.dra-ledger.io").unwrap();
        journal
            .apply(&[("u1", &entry(EntryState::Prepared))], &["u0"])
            .unwrap();
    }
    assert_eq!(dra_migrations::inspect(&path).unwrap().schema_version, 1);
    {
        let journal = Journal::open(&path, "gpu.dra-ledger.io").unwrap();
        journal
            .apply(&[("u2", &shared("gpu-1", "s-1", "40Gi"))], &[])
            .unwrap();
        journal.apply(&[], &["u2"]).unwrap();
    }
    assert_eq!(
        dra_migrations::inspect(&path).unwrap().schema_version,
        SHARES_VERSION
    );
    let journal = Journal::open(&path, "gpu.dra-ledger.io").unwrap();
    let entries = journal.entries().unwrap();
    assert_eq!(entries.len(), 1);
    assert!(entries["u1"].shares.is_empty());
}
