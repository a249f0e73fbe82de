//! The `--devices` flag and [`DeviceSource::discover`] dispatching to each source.

use std::path::PathBuf;

use dra_node::discovery::gpu_sharing::GpuSharing;
use dra_node::discovery::{DeviceSource, DeviceSourceParse, DiscoveryError};

use crate::fake_sysfs::*;

#[test]
fn flag_values_parse_to_their_sources_and_print_back() {
    for (text, source) in [
        ("sysfs", DeviceSource::Sysfs),
        ("nvml", DeviceSource::Nvml(GpuSharing::None)),
        (
            "file:/etc/dra-ledger/devices.yaml",
            DeviceSource::File(PathBuf::from("/etc/dra-ledger/devices.yaml")),
        ),
        (
            "file:relative.json",
            DeviceSource::File(PathBuf::from("relative.json")),
        ),
    ] {
        assert_eq!(text.parse::<DeviceSource>(), Ok(source.clone()), "{text}");
        assert_eq!(source.to_string(), text);
    }
}

#[test]
fn unknown_sources_and_a_file_without_path_are_refused_clearly() {
    assert_eq!(
        "file:".parse::<DeviceSource>(),
        Err(DeviceSourceParse::EmptyFilePath)
    );
    let error = "Sysfs".parse::<DeviceSource>().unwrap_err();
    assert_eq!(
        error.to_string(),
        "unknown device source \"Sysfs\": expected `sysfs`, `file:PATH` or `nvml`"
    );
    assert!("".parse::<DeviceSource>().is_err());
    assert!("file".parse::<DeviceSource>().is_err());
}

#[test]
fn discover_reads_the_source_it_names() {
    let tree = FakeSysfs::new();
    tree.gpu(NVIDIA, 0x2330).numa(0);
    assert_eq!(
        DeviceSource::Sysfs.discover(&tree.roots()).unwrap().len(),
        1
    );
    let file =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/discovery/fixtures/inventory.yaml");
    assert_eq!(
        DeviceSource::File(file)
            .discover(&tree.roots())
            .unwrap()
            .len(),
        2
    );
}

#[cfg(not(feature = "nvml"))]
#[test]
fn nvml_source_without_the_feature_says_it_is_not_built() {
    let error = DeviceSource::Nvml(GpuSharing::None)
        .discover(&FakeSysfs::new().roots())
        .unwrap_err();
    assert!(matches!(error, DiscoveryError::NvmlNotBuilt), "{error:?}");
}

#[cfg(feature = "nvml")]
#[test]
fn nvml_source_without_the_library_is_an_nvml_error() {
    // No NVIDIA driver on the machines the tests run on; where there is one this test is moot.
    if std::path::Path::new("/dev/nvidiactl").exists() {
        return;
    }
    let error = DeviceSource::Nvml(GpuSharing::None)
        .discover(&FakeSysfs::new().roots())
        .unwrap_err();
    assert!(
        matches!(error, DiscoveryError::Nvml { call: "init", .. }),
        "{error:?}"
    );
}
