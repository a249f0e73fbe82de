//! Our opaque configuration as a v1 allocation carries it (`dra-ledger.io/v1alpha1`
//! `DeviceConfig` parameters), for the test binaries that write allocations the way the 1.34
//! scheduler does (`kubelet`, `crash`); each includes this file by its path.

use dra_types::resource_v1::DeviceAllocationConfiguration;

/// A `FromClaim` entry of `driver` sharing each device among up to `max` claims.
pub fn shared_config(driver: &str, max: u32) -> DeviceAllocationConfiguration {
    DeviceAllocationConfiguration::opaque(
        "FromClaim",
        &[],
        driver,
        serde_json::json!({
            "apiVersion": "dra-ledger.io/v1alpha1",
            "kind": "DeviceConfig",
            "sharing": {"mode": "Shared", "maxConsumers": max},
        }),
    )
}
