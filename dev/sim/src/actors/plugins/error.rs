//! The errors of the kubelet's plugin handling, in layers: a version or service list a plugin
//! offers ([`VersionError`], [`SupportedVersionError`], [`ServiceError`]) under the refusal of a
//! registration ([`V1alpha2Refusal`], [`V1Refusal`]) under a registration that did not happen
//! ([`RegistrationError`]); a driver without a plugin ([`DriverError`]) and a claim that cannot be
//! prepared ([`ClaimError`]) or a call that failed ([`CallError`]) under a failed prepare or
//! unprepare ([`PrepareError`]).
//!
//! Every `Display` text is the kubelet's of the release that produces it, word for word: they
//! reach plugins (`NotifyRegistrationStatus`), pod events and logs. Owns only error types and how
//! Go prints what they carry; depends on no plugins module but for the values the errors name.

use std::path::PathBuf;

use tonic::{Code, Status};

use super::calls::Call;
use super::services::Service;
use super::validation::Version;
use crate::actors::claim_refs::{NameError, NotForPod};

/// A version string that is not a generic version (apimachinery's `ParseGeneric`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum VersionError {
    /// It does not start with a number.
    #[error("could not parse {text:?} as version")]
    Unparsable {
        /// The version string.
        text: String,
    },
    /// It has fewer than two numbers, or an empty one.
    #[error("illegal version string {text:?}")]
    Components {
        /// The version string.
        text: String,
    },
    /// A number does not fit.
    #[error("illegal version string {component:?}: {source}")]
    Component {
        /// The number as written.
        component: String,
        /// Why it does not parse.
        #[source]
        source: std::num::ParseIntError,
    },
}

/// No version of a plugin's list that a 1.30 kubelet supports (`HighestSupportedVersion`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SupportedVersionError {
    /// The list is empty.
    #[error("empty array for supported versions")]
    Empty,
    /// No entry is a version of major 1 or lower.
    #[error(
        "could not find a highest supported version from versions ({versions:?}) reported: {}",
        .last.as_ref().map_or_else(|| "none".to_owned(), ToString::to_string)
    )]
    NoneFound {
        /// The plugin's list.
        versions: Vec<String>,
        /// Why the last unparsable entry (in the kubelet's reverse walk) did not parse.
        #[source]
        last: Option<VersionError>,
    },
    /// The highest version is not a 1.x.
    #[error("highest supported version reported is {highest}, must be v1.x")]
    NotV1 {
        /// The highest version found.
        highest: Version,
    },
}

/// Why a 1.30 kubelet refuses a plugin.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum V1alpha2Refusal {
    /// Not a DRA plugin.
    #[error("no handler registered for plugin type: {kind} at socket {}", .socket.display())]
    PluginType {
        /// The type the plugin gave.
        kind: String,
        /// Its registration socket.
        socket: PathBuf,
    },
    /// The plugin lists no version.
    #[error(
        "validation failed for DRA plugin {name:?}: plugin returned an empty list for supported versions"
    )]
    NoVersions {
        /// The driver name.
        name: String,
    },
    /// No version the kubelet supports.
    #[error(
        "validation failed for DRA plugin {name:?}: none of the versions specified {versions:?} are supported: {source}"
    )]
    Versions {
        /// The driver name.
        name: String,
        /// The plugin's list.
        versions: Vec<String>,
        /// Why none is supported.
        #[source]
        source: SupportedVersionError,
    },
    /// A plugin of the same name with a version at least as high is registered.
    #[error(
        "validation failed for DRA plugin {name:?}: another plugin with the same name is already registered with a higher supported version: {existing}"
    )]
    HigherVersionRegistered {
        /// The driver name.
        name: String,
        /// The registered plugin's version.
        existing: Version,
    },
}

/// No `DRAPlugin` service of a plugin's list that the 1.34 kubelet supports.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ServiceError {
    /// The list is empty.
    #[error("empty list of supported gRPC services (aka supported versions)")]
    Empty,
    /// No entry is a supported service.
    #[error(
        "none of services supported by the plugin ({}) are supported by the kubelet ({})",
        go_quoted(.plugin.iter().map(String::as_str)),
        go_quoted(Service::SUPPORTED.iter().map(|s| s.name()))
    )]
    NoneSupported {
        /// The plugin's list.
        plugin: Vec<String>,
    },
}

/// Why the 1.34 kubelet refuses a plugin.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum V1Refusal {
    /// Not a DRA plugin.
    #[error(
        "RegisterPlugin error -- no handler registered for plugin type: {kind} at socket {}",
        .socket.display()
    )]
    PluginType {
        /// The type the plugin gave.
        kind: String,
        /// Its registration socket.
        socket: PathBuf,
    },
    /// No service the kubelet supports.
    #[error(
        "RegisterPlugin error -- plugin validation failed with err: invalid supported gRPC versions of DRA driver plugin {name} at endpoint {}: {source}",
        .endpoint.display()
    )]
    Services {
        /// The driver name.
        name: String,
        /// The plugin's service socket.
        endpoint: PathBuf,
        /// Why no service fits.
        #[source]
        source: ServiceError,
    },
    /// Another instance of the driver registered the same endpoint.
    #[error(
        "RegisterPlugin error -- plugin registration failed with err: endpoint {} already registered for DRA driver plugin {name}",
        .endpoint.display()
    )]
    EndpointTaken {
        /// The driver name.
        name: String,
        /// The plugin's service socket.
        endpoint: PathBuf,
    },
}

/// A registration that did not happen.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RegistrationError {
    /// The registration socket did not answer in time.
    #[error("dial {}: timed out", .socket.display())]
    DialTimeout {
        /// The registration socket.
        socket: PathBuf,
    },
    /// The registration socket could not be dialed.
    #[error("dial {}: {source}", .socket.display())]
    Dial {
        /// The registration socket.
        socket: PathBuf,
        /// The transport error.
        #[source]
        source: tonic::transport::Error,
    },
    /// `GetInfo` did not answer in time.
    #[error("GetInfo timed out")]
    GetInfoTimeout,
    /// `GetInfo` failed.
    #[error("GetInfo: {0}")]
    GetInfo(#[source] Status),
    /// The 1.30 kubelet refused the plugin.
    #[error(transparent)]
    RefusedV1alpha2(#[from] V1alpha2Refusal),
    /// The 1.34 kubelet refused the plugin.
    #[error(transparent)]
    RefusedV1(#[from] V1Refusal),
}

/// A driver a claim or call needs has no registered plugin.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DriverError {
    /// 1.34: an allocation result without a driver.
    #[error("DRA driver name is empty")]
    EmptyName,
    /// 1.34: no instance of the driver is registered.
    #[error("DRA driver {driver} is not registered")]
    NotRegistered {
        /// The driver name.
        driver: String,
    },
    /// 1.30: no plugin of the driver is registered.
    #[error("plugin name {driver} not found in the list of registered DRA plugins")]
    PluginNotFound {
        /// The driver name.
        driver: String,
    },
}

/// A claim of a pod the kubelet cannot prepare (yet).
#[derive(Debug, thiserror::Error)]
pub(crate) enum ClaimError {
    /// 1.30: a template entry whose claim is not recorded in the pod status yet.
    #[error("pod claim {entry}: resourceclaim not created yet")]
    NotCreated {
        /// The pod claim entry.
        entry: String,
    },
    /// 1.30: an entry with neither a claim nor a template name.
    #[error("pod claim {entry}: no claim source")]
    NoSource {
        /// The pod claim entry.
        entry: String,
    },
    /// 1.30: the claim does not exist.
    #[error("resourceclaim {namespace}/{name} not found")]
    NotFound {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
    },
    /// 1.30: the claim could not be read.
    #[error("get resourceclaim {name}: {source}")]
    Get {
        /// Name.
        name: String,
        /// The client error.
        #[source]
        source: Box<kube::Error>,
    },
    /// 1.30: a template claim the pod does not control.
    #[error("resourceclaim {name} was not created for the pod")]
    NotOwned {
        /// Name.
        name: String,
    },
    /// 1.30: the claim is not allocated.
    #[error("resourceclaim {namespace}/{name} is not allocated")]
    NotAllocated {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
    },
    /// 1.30: the pod is not in the claim's `reservedFor`.
    #[error("resourceclaim {namespace}/{name} is not reserved for the pod")]
    NotReserved {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
    },
    /// 1.34: the pod claim names no claim yet.
    #[error("{0}")]
    Name(NameError),
    /// 1.34: the claim could not be read.
    #[error("fetch ResourceClaim {name}: {}", api_message(.source))]
    Fetch {
        /// Name.
        name: String,
        /// The client error.
        #[source]
        source: Box<kube::Error>,
    },
    /// 1.36+: the pod could not be read for the claim of its extended resources (the simulated
    /// kubelet reads that status live).
    #[error("fetch Pod {name}: {}", api_message(.source))]
    FetchPod {
        /// Name.
        name: String,
        /// The client error.
        #[source]
        source: Box<kube::Error>,
    },
    /// 1.34: a template claim the pod does not control.
    #[error(transparent)]
    NotForPod(#[from] NotForPod),
    /// 1.34: the pod is not in the claim's `reservedFor`.
    #[error("pod {pod} ({pod_uid}) is not allowed to use ResourceClaim {claim} ({claim_uid})")]
    NotReservedForPod {
        /// The pod's name.
        pod: String,
        /// The pod's UID.
        pod_uid: String,
        /// The pod claim's claim name.
        claim: String,
        /// The claim's UID.
        claim_uid: String,
    },
    /// 1.34: the claim is not allocated.
    #[error("ResourceClaim {name}: not allocated")]
    Unallocated {
        /// Name.
        name: String,
    },
    /// 1.34: a driver of the allocation has no registered plugin.
    #[error(transparent)]
    Driver(#[from] DriverError),
    /// 1.34: the cache holds an older claim of the same name.
    #[error(
        "old ResourceClaim with same name {name} and different UID {uid} still exists (previous pod force-deleted?!)"
    )]
    Replaced {
        /// Name.
        name: String,
        /// The cached claim's UID.
        uid: String,
    },
}

/// A `NodePrepareResources` or `NodeUnprepareResources` call that failed.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The driver has no registered plugin.
    #[error(transparent)]
    Driver(#[from] DriverError),
    /// 1.30: no answer before the call's deadline.
    #[error("{call} failed: deadline exceeded")]
    Deadline {
        /// The call.
        call: Call,
    },
    /// 1.30: the call failed.
    #[error("{call} failed: {status}")]
    Status {
        /// The call.
        call: Call,
        /// The gRPC status.
        #[source]
        status: Status,
    },
    /// 1.34: the call failed or did not answer in time, as grpc-go prints it.
    #[error("{call}: {}", grpc_error(.status))]
    Rpc {
        /// The call.
        call: Call,
        /// The gRPC status.
        #[source]
        status: Status,
    },
    /// The answer has a result for a claim that was not asked for.
    #[error("{call} returned result for unknown claim UID {uid}")]
    UnknownClaim {
        /// The call.
        call: Call,
        /// The claim UID.
        uid: String,
    },
    /// 1.30: the plugin failed a claim.
    #[error("{call} failed for claim {namespace}/{name}: {error}")]
    ClaimFailed {
        /// The call.
        call: Call,
        /// The claim's namespace.
        namespace: String,
        /// The claim's name.
        name: String,
        /// The plugin's error for it.
        error: String,
    },
    /// 1.34: the plugin failed a claim.
    #[error("{call} failed for ResourceClaim {name}: {error}")]
    ResourceClaimFailed {
        /// The call.
        call: Call,
        /// The claim's name.
        name: String,
        /// The plugin's error for it.
        error: String,
    },
    /// 1.30: claims without a result.
    #[error("{call} left out {count} claims")]
    LeftOut {
        /// The call.
        call: Call,
        /// How many.
        count: usize,
    },
    /// 1.34: fewer results than claims.
    #[error("{call} skipped {count} ResourceClaims")]
    Skipped {
        /// The call.
        call: Call,
        /// How many.
        count: usize,
    },
}

/// A prepare (1.34) or unprepare of a pod's claims that failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PrepareError {
    /// A claim cannot be prepared.
    #[error(transparent)]
    Claim(#[from] ClaimError),
    /// A call to a plugin failed.
    #[error(transparent)]
    Call(#[from] CallError),
    /// Every call succeeded, yet a claim is not prepared by all its drivers.
    #[error("some claims were not prepared")]
    NotAllPrepared,
}

impl From<DriverError> for PrepareError {
    fn from(error: DriverError) -> Self {
        Self::Call(CallError::Driver(error))
    }
}

/// A list as Go's `%q` prints a `[]string`: `["a" "b"]`.
fn go_quoted<'a>(list: impl Iterator<Item = &'a str>) -> String {
    let quoted: Vec<String> = list.map(|s| format!("{s:?}")).collect();
    format!("[{}]", quoted.join(" "))
}

/// A gRPC code as Go's `codes.Code` names it.
fn go_code(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "Canceled",
        Code::Unknown => "Unknown",
        Code::InvalidArgument => "InvalidArgument",
        Code::DeadlineExceeded => "DeadlineExceeded",
        Code::NotFound => "NotFound",
        Code::AlreadyExists => "AlreadyExists",
        Code::PermissionDenied => "PermissionDenied",
        Code::ResourceExhausted => "ResourceExhausted",
        Code::FailedPrecondition => "FailedPrecondition",
        Code::Aborted => "Aborted",
        Code::OutOfRange => "OutOfRange",
        Code::Unimplemented => "Unimplemented",
        Code::Internal => "Internal",
        Code::Unavailable => "Unavailable",
        Code::DataLoss => "DataLoss",
        Code::Unauthenticated => "Unauthenticated",
    }
}

/// A gRPC status as grpc-go prints its error: `rpc error: code = C desc = D`.
pub(crate) fn grpc_error(status: &Status) -> String {
    format!(
        "rpc error: code = {} desc = {}",
        go_code(status.code()),
        status.message()
    )
}

/// The message of an API error response, else the client error.
fn api_message(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(response) => response.message.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_errors_read_as_grpc_go_prints_them() {
        assert_eq!(
            grpc_error(&Status::unavailable("connection refused")),
            "rpc error: code = Unavailable desc = connection refused"
        );
        assert_eq!(
            grpc_error(&Status::cancelled("gone")),
            "rpc error: code = Canceled desc = gone"
        );
    }
}
