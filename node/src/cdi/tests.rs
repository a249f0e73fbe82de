use std::path::PathBuf;

use super::*;
use crate::device::DeviceShare;
use dra_allocator::model::AttributeValue;

const DRIVER: &str = "gpu.dra-ledger.io";

fn gpu(name: &str, nodes: &[&str]) -> NodeDevice {
    NodeDevice {
        name: name.into(),
        device_nodes: nodes.iter().map(PathBuf::from).collect(),
        env: [("NVIDIA_VISIBLE_DEVICES".to_owned(), format!("GPU-{name}"))].into(),
        ..NodeDevice::default()
    }
}

/// The CDI 1.1.0 JSON schema (`schema.json` with its `defs.json`), from the reference files
/// beside the repository; `None` (a skip, a failure under CI) without them.
fn cdi_schema() -> Option<jsonschema::Validator> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/reference/protos");
    let (Ok(schema), Ok(defs)) = (
        std::fs::read_to_string(dir.join("cdi-schema.json")),
        std::fs::read_to_string(dir.join("cdi-schema-defs.json")),
    ) else {
        assert!(
            std::env::var("CI").is_err(),
            "the CDI 1.1.0 schema files are required under CI in {}",
            dir.display()
        );
        eprintln!("SKIPPED: no CDI schema files in {}", dir.display());
        return None;
    };
    let schema: Value = serde_json::from_str(&schema).unwrap();
    let defs: Value = serde_json::from_str(&defs).unwrap();
    let defs = jsonschema::Resource::from_contents(defs).unwrap();
    Some(
        jsonschema::options()
            .with_resource("json-schema:///defs.json", defs)
            .build(&schema)
            .unwrap(),
    )
}

fn assert_valid(validator: &jsonschema::Validator, spec: &Value) {
    let errors: Vec<String> = validator.iter_errors(spec).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:?} in {spec:#}");
}

#[test]
fn every_written_spec_validates_against_the_cdi_1_1_0_schema() {
    let Some(validator) = cdi_schema() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let cdi = CdiDir::new(dir.path(), DRIVER);
    let with_nodes = [
        gpu("gpu-0", &["/dev/nvidia0", "/dev/nvidiactl"]),
        gpu("gpu-1", &["/dev/nvidia1"]),
    ];
    let without_nodes = [gpu("gpu-2", &[])];
    for (uid, devices) in [("u1", &with_nodes[..]), ("u2", &without_nodes[..])] {
        let refs: Vec<&NodeDevice> = devices.iter().collect();
        cdi.write(uid, &cdi.spec(uid, &refs, &[])).unwrap();
        let written: Value =
            serde_json::from_str(&std::fs::read_to_string(cdi.file(uid)).unwrap()).unwrap();
        assert_valid(&validator, &written);
    }
    let not_cdi = json!({"cdiVersion": "0.3.0", "kind": DRIVER, "devices": "none"});
    assert!(
        !validator.is_valid(&not_cdi),
        "the schema check must be able to fail"
    );
}

#[test]
fn the_spec_names_the_claim_its_devices_and_the_lowest_version_it_needs() {
    let cdi = CdiDir::new("/run/cdi", DRIVER);
    let devices = [gpu("gpu-0", &["/dev/nvidia0"]), gpu("gpu-3", &[])];
    let refs: Vec<&NodeDevice> = devices.iter().collect();
    let spec = cdi.spec("uid-1", &refs, &[]);
    assert_eq!(spec["kind"], "gpu.dra-ledger.io/claim");
    assert_eq!(spec["cdiVersion"], HOST_PATH_VERSION);
    assert_eq!(spec["devices"][0]["name"], "uid-1");
    let env: Vec<&str> = spec["devices"][0]["containerEdits"]["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(env.contains(&"DRA_LEDGER_CLAIM_UID=uid-1"), "{env:?}");
    assert!(env.contains(&"DRA_LEDGER_DEVICES=gpu-0,gpu-3"), "{env:?}");
    assert_eq!(
        spec["devices"][0]["containerEdits"]["deviceNodes"][0]["hostPath"],
        "/dev/nvidia0"
    );
    assert_eq!(cdi.device_id("uid-1"), "gpu.dra-ledger.io/claim=uid-1");
    assert_eq!(
        cdi.file("uid-1"),
        PathBuf::from("/run/cdi/gpu.dra-ledger.io-claim_uid-1.json")
    );
    let bare = cdi.spec("uid-2", &[&devices[1]], &[]);
    assert_eq!(bare["cdiVersion"], BASE_VERSION);
}

#[test]
fn listing_and_removal_touch_only_our_files() {
    let dir = tempfile::tempdir().unwrap();
    let cdi = CdiDir::new(dir.path(), DRIVER);
    let device = gpu("gpu-0", &[]);
    cdi.write("a", &cdi.spec("a", &[&device], &[])).unwrap();
    cdi.write("b", &cdi.spec("b", &[&device], &[])).unwrap();
    std::fs::write(dir.path().join("nvidia.com-gpu.json"), "{}").unwrap();
    std::fs::write(dir.path().join("other.io-claim_x.json"), "{}").unwrap();
    std::fs::write(
        dir.path().join(".gpu.dra-ledger.io-claim_c.json.tmp"),
        "{half",
    )
    .unwrap();
    assert_eq!(cdi.list().unwrap(), ["a", "b", "c"]);
    cdi.remove("a").unwrap();
    cdi.remove("a").unwrap();
    cdi.remove_all_of("c").unwrap();
    assert_eq!(cdi.list().unwrap(), ["b"]);
    assert!(dir.path().join("nvidia.com-gpu.json").exists());
    assert!(dir.path().join("other.io-claim_x.json").exists());
    assert!(CdiDir::new(dir.path().join("absent"), DRIVER)
        .list()
        .unwrap()
        .is_empty());
}

fn env_of(spec: &Value) -> Vec<&str> {
    spec["devices"][0]["containerEdits"]["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect()
}

#[test]
fn a_mig_partition_is_visible_by_its_own_uuid_and_several_gpus_are_all_visible() {
    let cdi = CdiDir::new("/run/cdi", DRIVER);
    let mut partition = gpu("gpu-0-mig-1g-3", &[]);
    partition.attributes.insert(
        "uuid".into(),
        AttributeValue::String("MIG-2b3c4d5e-0000-1111-2222-333344445555".into()),
    );
    let spec = cdi.spec("u1", &[&partition], &[]);
    assert!(
        env_of(&spec).contains(&"NVIDIA_VISIBLE_DEVICES=MIG-2b3c4d5e-0000-1111-2222-333344445555")
    );
    let pair = [gpu("gpu-0", &[]), gpu("gpu-1", &[])];
    let spec = cdi.spec("u2", &[&pair[0], &pair[1]], &[]);
    assert!(
        env_of(&spec).contains(&"NVIDIA_VISIBLE_DEVICES=GPU-gpu-0,GPU-gpu-1"),
        "{spec:#}"
    );
}

#[test]
fn a_share_sets_its_id_and_the_memory_and_compute_it_consumes() {
    let cdi = CdiDir::new("/run/cdi", DRIVER);
    let device = gpu("gpu-2", &[]);
    let share = DeviceShare {
        device: "gpu-2".into(),
        share_id: "4d9f".into(),
        consumed: [
            ("memory".to_owned(), "40Gi".to_owned()),
            ("compute".to_owned(), "50".to_owned()),
        ]
        .into(),
    };
    let spec = cdi.spec("u1", &[&device], std::slice::from_ref(&share));
    let env = env_of(&spec);
    for wanted in [
        "DRA_LEDGER_SHARE_ID=4d9f",
        "DRA_LEDGER_MEMORY_LIMIT=40Gi",
        "DRA_LEDGER_COMPUTE_SHARE=50",
        "NVIDIA_VISIBLE_DEVICES=GPU-gpu-2",
    ] {
        assert!(env.contains(&wanted), "{wanted} not in {env:?}");
    }
    let whole = cdi.spec("u2", &[&device], &[]);
    assert!(
        !env_of(&whole)
            .iter()
            .any(|e| e.starts_with("DRA_LEDGER_SHARE_ID")),
        "a whole device has no share"
    );
    if let Some(validator) = cdi_schema() {
        assert_valid(&validator, &spec);
    }
}
