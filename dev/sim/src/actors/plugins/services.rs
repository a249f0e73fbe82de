//! What a Kubernetes 1.34 kubelet accepts when a DRA plugin registers: the plugin type, the
//! endpoint to dial, and the gRPC service to call, chosen from `supported_versions` read as
//! service names (`<package>.<service>`): the first entry of the plugin's list that the kubelet
//! supports among `v1.DRAPlugin` and `v1beta1.DRAPlugin`. Several plugins (instances) of one
//! driver may register, each at its own endpoint. The texts are those the plugin manager sends
//! back through `NotifyRegistrationStatus`.
//!
//! Pure decisions, no I/O.

use std::fmt;
use std::path::{Path, PathBuf};

use dra_types::kubelet::pluginregistration::PluginInfo;

use super::error::{ServiceError, V1Refusal};
use super::validation::dra_endpoint;

/// A `DRAPlugin` gRPC service of the kubelet plugin API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    /// `k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin`, registered as `v1.DRAPlugin`.
    V1,
    /// `k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin`, registered as `v1beta1.DRAPlugin`.
    V1Beta1,
}

impl Service {
    /// The services the 1.34 kubelet supports, most recent first.
    pub(crate) const SUPPORTED: [Service; 2] = [Service::V1, Service::V1Beta1];

    /// The name a plugin lists in `supported_versions`.
    pub fn name(self) -> &'static str {
        match self {
            Service::V1 => "v1.DRAPlugin",
            Service::V1Beta1 => "v1beta1.DRAPlugin",
        }
    }
}

impl fmt::Display for Service {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The service the kubelet uses for a plugin listing `supported`: the first entry it supports.
pub(crate) fn choose_service(supported: &[String]) -> Result<Service, ServiceError> {
    if supported.is_empty() {
        return Err(ServiceError::Empty);
    }
    supported
        .iter()
        .find_map(|entry| Service::SUPPORTED.into_iter().find(|s| s.name() == entry))
        .ok_or_else(|| ServiceError::NoneSupported {
            plugin: supported.to_vec(),
        })
}

/// A plugin instance the kubelet accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Accepted {
    /// The driver name.
    pub name: String,
    /// The socket of the plugin's `DRAPlugin` service.
    pub endpoint: PathBuf,
    /// The service to call.
    pub service: Service,
}

/// The 1.34 kubelet's verdict on a plugin's `GetInfo` answer at `socket`. `registered` are the
/// endpoints of the driver's instances already registered. `Err` is the error reported back
/// through `NotifyRegistrationStatus`.
pub(crate) fn accept(
    socket: &Path,
    info: &PluginInfo,
    registered: &[PathBuf],
) -> Result<Accepted, V1Refusal> {
    let Some(endpoint) = dra_endpoint(socket, info) else {
        return Err(V1Refusal::PluginType {
            kind: info.r#type.clone(),
            socket: socket.to_owned(),
        });
    };
    let (name, supported) = (&info.name, &info.supported_versions);
    let service = match choose_service(supported) {
        Ok(service) => service,
        Err(source) => {
            return Err(V1Refusal::Services {
                name: name.to_owned(),
                endpoint,
                source,
            })
        }
    };
    if registered.contains(&endpoint) {
        return Err(V1Refusal::EndpointTaken {
            name: name.to_owned(),
            endpoint,
        });
    }
    Ok(Accepted {
        name: name.to_owned(),
        endpoint,
        service,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actors::plugins::validation::DRA_PLUGIN_TYPE;
    use crate::actors::plugins::{list, plugin};

    #[test]
    fn the_first_supported_entry_of_the_plugins_list_wins() {
        let both = list(&["v1.DRAPlugin", "v1beta1.DRAPlugin"]);
        assert_eq!(choose_service(&both), Ok(Service::V1));
        let beta_first = list(&["v1beta1.DRAPlugin", "v1.DRAPlugin"]);
        assert_eq!(choose_service(&beta_first), Ok(Service::V1Beta1));
        let with_unknown = list(&["1.0.0", "v1alpha1.DRAResourceHealth", "v1beta1.DRAPlugin"]);
        assert_eq!(choose_service(&with_unknown), Ok(Service::V1Beta1));
    }

    #[test]
    fn a_list_without_a_supported_service_is_refused() {
        let error = choose_service(&list(&["1.0.0", "v1alpha3"]))
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            r#"none of services supported by the plugin (["1.0.0" "v1alpha3"]) are supported by the kubelet (["v1.DRAPlugin" "v1beta1.DRAPlugin"])"#
        );
        assert_eq!(
            choose_service(&[]).unwrap_err().to_string(),
            "empty list of supported gRPC services (aka supported versions)"
        );
    }

    #[test]
    fn registration_checks_the_type_the_services_and_the_endpoint() {
        let socket = Path::new("/k/plugins_registry/d-reg.sock");
        let services = list(&["v1.DRAPlugin"]);
        let csi = accept(socket, &plugin("CSIPlugin", "d", "", &services), &[])
            .unwrap_err()
            .to_string();
        assert_eq!(
            csi,
            "RegisterPlugin error -- no handler registered for plugin type: CSIPlugin at socket /k/plugins_registry/d-reg.sock"
        );
        let ok = accept(socket, &plugin(DRA_PLUGIN_TYPE, "d", "", &services), &[]).unwrap();
        assert_eq!(ok.endpoint, socket);
        assert_eq!(ok.service, Service::V1);
        let endpoint = "/k/plugins/d/dra.sock";
        let old = accept(
            socket,
            &plugin(DRA_PLUGIN_TYPE, "d", endpoint, &list(&["1.0.0"])),
            &[],
        );
        assert!(
            old.unwrap_err().to_string().starts_with(
                "RegisterPlugin error -- plugin validation failed with err: invalid supported gRPC versions of DRA driver plugin d at endpoint /k/plugins/d/dra.sock: none of services"
            )
        );
        let taken = accept(
            socket,
            &plugin(DRA_PLUGIN_TYPE, "d", endpoint, &services),
            &[PathBuf::from(endpoint)],
        );
        assert_eq!(
            taken.unwrap_err().to_string(),
            "RegisterPlugin error -- plugin registration failed with err: endpoint /k/plugins/d/dra.sock already registered for DRA driver plugin d"
        );
        let second = accept(
            socket,
            &plugin(DRA_PLUGIN_TYPE, "d", "/k/plugins/d/dra-2.sock", &services),
            &[PathBuf::from(endpoint)],
        );
        assert!(second.is_ok(), "a second instance at its own endpoint");
    }
}
