//! Which DRA API the agent speaks: the `--dra-api` flag ([`DraApi`]) and the mode it resolves to
//! ([`ApiMode`]), by API discovery for `auto`: `v1` where the API server serves
//! `resource.k8s.io/v1` (Kubernetes 1.34+), else `v1alpha2` where it serves
//! `resource.k8s.io/v1alpha2` (1.30), else an error. [`choose`] is the pure decision over the
//! discovery document; [`resolve`] asks the API server.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIGroupList;

use crate::resource_v1::GROUP;

/// The `--dra-api` flag.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DraApi {
    /// Decided by API discovery (the default).
    #[default]
    Auto,
    /// Kubernetes 1.30: `v1alpha3.Node` with the controller's resource handles; the kubelet
    /// publishes the slices.
    V1alpha2,
    /// Kubernetes 1.34+: `v1.DRAPlugin` and `v1beta1.DRAPlugin`, claims read from the API
    /// server, the slice published by the agent.
    V1,
}

impl DraApi {
    /// Every value, as the flag spells it.
    pub const VALUES: [&'static str; 3] = ["auto", "v1alpha2", "v1"];

    /// The flag's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            DraApi::Auto => "auto",
            DraApi::V1alpha2 => "v1alpha2",
            DraApi::V1 => "v1",
        }
    }
}

impl fmt::Display for DraApi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A `--dra-api` value that is none of [`DraApi::VALUES`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown DRA API {0:?}: expected auto, v1alpha2 or v1")]
pub struct ParseDraApiError(String);

impl FromStr for DraApi {
    type Err = ParseDraApiError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(DraApi::Auto),
            "v1alpha2" => Ok(DraApi::V1alpha2),
            "v1" => Ok(DraApi::V1),
            other => Err(ParseDraApiError(other.to_owned())),
        }
    }
}

/// The DRA API the agent runs with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApiMode {
    /// Kubernetes 1.30 (`resource.k8s.io/v1alpha2`).
    V1alpha2,
    /// Kubernetes 1.34+ (`resource.k8s.io/v1`).
    V1,
}

impl ApiMode {
    /// The API version's name.
    pub fn as_str(self) -> &'static str {
        match self {
            ApiMode::V1alpha2 => "v1alpha2",
            ApiMode::V1 => "v1",
        }
    }
}

impl fmt::Display for ApiMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why no mode could be chosen.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModeError {
    /// The API server's group list could not be read.
    #[error("--dra-api auto: API discovery failed: {0}")]
    Discovery(#[source] Box<kube::Error>),
    /// Neither DRA API version is served.
    #[error(
        "--dra-api auto: the API server serves neither resource.k8s.io/v1 nor \
         resource.k8s.io/v1alpha2 ({served}); is dynamic resource allocation enabled?"
    )]
    NeitherServed {
        /// What it serves of the group, or that it does not serve the group.
        served: String,
    },
    /// `v1` needs the API server, and there is no client.
    #[error("--dra-api v1 needs access to the API server (no kubeconfig or in-cluster config)")]
    NoApiAccess,
}

/// The mode the discovery document `groups` calls for.
pub fn choose(groups: &APIGroupList) -> Result<ApiMode, ModeError> {
    let Some(group) = groups.groups.iter().find(|g| g.name == GROUP) else {
        return Err(ModeError::NeitherServed {
            served: format!("no {GROUP} group"),
        });
    };
    let served: Vec<&str> = group.versions.iter().map(|v| v.version.as_str()).collect();
    if served.contains(&"v1") {
        Ok(ApiMode::V1)
    } else if served.contains(&"v1alpha2") {
        Ok(ApiMode::V1alpha2)
    } else {
        Err(ModeError::NeitherServed {
            served: format!("{GROUP} versions {}", served.join(", ")),
        })
    }
}

/// The waits between the attempts at discovery: a server that answers 5xx or cannot be reached
/// for a moment at the agent's start does not stop it.
const DISCOVERY_RETRIES: [Duration; 3] = [
    Duration::from_millis(100),
    Duration::from_millis(200),
    Duration::from_millis(400),
];

/// The mode of `flag`: `auto` asks the API server through `client` (retrying a failure that may
/// pass, a few times). Without a client (no API access) `auto` is `v1alpha2`, the only mode that
/// works without one, and `v1` is an error.
pub async fn resolve(flag: DraApi, client: Option<&kube::Client>) -> Result<ApiMode, ModeError> {
    match (flag, client) {
        (DraApi::V1alpha2, _) | (DraApi::Auto, None) => Ok(ApiMode::V1alpha2),
        (DraApi::V1, Some(_)) => Ok(ApiMode::V1),
        (DraApi::V1, None) => Err(ModeError::NoApiAccess),
        (DraApi::Auto, Some(client)) => {
            let mut waits = DISCOVERY_RETRIES.iter();
            loop {
                match client.list_api_groups().await {
                    Ok(groups) => return choose(&groups),
                    Err(error) => match waits.next() {
                        Some(wait) if may_pass(&error) => {
                            tracing::warn!(%error, retry = ?wait, "API discovery failed");
                            tokio::time::sleep(*wait).await;
                        }
                        _ => return Err(ModeError::Discovery(Box::new(error))),
                    },
                }
            }
        }
    }
}

/// Whether a failed call may succeed when repeated: a server error or no answer at all, not a
/// refusal (401, 403, 404).
fn may_pass(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(response) => response.code >= 500,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{APIGroup, GroupVersionForDiscovery};

    use super::*;

    fn groups(resource_versions: Option<&[&str]>) -> APIGroupList {
        let version = |v: &str, group: &str| GroupVersionForDiscovery {
            group_version: format!("{group}/{v}"),
            version: v.to_owned(),
        };
        let mut list = vec![APIGroup {
            name: "apps".into(),
            versions: vec![version("v1", "apps")],
            ..APIGroup::default()
        }];
        if let Some(versions) = resource_versions {
            list.push(APIGroup {
                name: GROUP.into(),
                versions: versions.iter().map(|v| version(v, GROUP)).collect(),
                ..APIGroup::default()
            });
        }
        APIGroupList { groups: list }
    }

    #[test]
    fn v1_wins_where_served_and_v1alpha2_is_taken_where_it_is_the_only_one() {
        assert_eq!(choose(&groups(Some(&["v1"]))).unwrap(), ApiMode::V1);
        assert_eq!(
            choose(&groups(Some(&["v1beta1", "v1", "v1alpha2"]))).unwrap(),
            ApiMode::V1
        );
        assert_eq!(
            choose(&groups(Some(&["v1alpha2"]))).unwrap(),
            ApiMode::V1alpha2
        );
    }

    #[test]
    fn neither_version_served_is_an_error_saying_what_is() {
        let error = choose(&groups(Some(&["v1beta1", "v1beta2"]))).unwrap_err();
        assert_eq!(
            error.to_string(),
            "--dra-api auto: the API server serves neither resource.k8s.io/v1 nor \
             resource.k8s.io/v1alpha2 (resource.k8s.io versions v1beta1, v1beta2); is dynamic \
             resource allocation enabled?"
        );
        let error = choose(&groups(None)).unwrap_err();
        assert!(
            error.to_string().contains("no resource.k8s.io group"),
            "{error}"
        );
    }

    #[tokio::test]
    async fn explicit_modes_need_no_discovery_but_v1_needs_api_access() {
        assert_eq!(
            resolve(DraApi::V1alpha2, None).await.unwrap(),
            ApiMode::V1alpha2
        );
        assert_eq!(
            resolve(DraApi::Auto, None).await.unwrap(),
            ApiMode::V1alpha2
        );
        assert!(matches!(
            resolve(DraApi::V1, None).await,
            Err(ModeError::NoApiAccess)
        ));
    }

    #[tokio::test]
    async fn a_discovery_that_keeps_failing_is_an_error_naming_it() {
        // nothing listens on port 1 of loopback: every attempt is refused
        let config = kube::Config::new("http://127.0.0.1:1".parse().unwrap());
        let client = kube::Client::try_from(config).unwrap();
        let error = resolve(DraApi::Auto, Some(&client)).await.unwrap_err();
        assert!(matches!(error, ModeError::Discovery(_)), "{error}");
        assert!(
            error
                .to_string()
                .starts_with("--dra-api auto: API discovery failed: "),
            "{error}"
        );
    }

    #[test]
    fn the_flag_parses_its_three_values_and_prints_them_back() {
        for text in DraApi::VALUES {
            assert_eq!(text.parse::<DraApi>().unwrap().to_string(), text);
        }
        assert_eq!(DraApi::default(), DraApi::Auto);
        let error = "V1".parse::<DraApi>().unwrap_err();
        assert_eq!(
            error.to_string(),
            "unknown DRA API \"V1\": expected auto, v1alpha2 or v1"
        );
    }
}
