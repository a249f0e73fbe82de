//! The error type of the control-plane actors.
//!
//! Owns only error classification; must not depend on any actor module but for the error types
//! of the plugins' error module.

use super::plugins::error::CallError;

/// What failed inside an actor.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ActorError {
    /// A request to the API server failed.
    #[error("{action}: {source}")]
    Api {
        /// What the actor was doing, e.g. `bind pod default/p`.
        action: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// An object could not be encoded for a write.
    #[error("encode {what}: {source}")]
    Encode {
        /// What was being encoded.
        what: &'static str,
        /// The encoder error.
        #[source]
        source: serde_json::Error,
    },
    /// A write kept conflicting with concurrent writers.
    #[error("{action}: still conflicting after {attempts} attempts")]
    Conflicts {
        /// What the actor was doing.
        action: String,
        /// How many attempts were made.
        attempts: u32,
    },
    /// An object referenced by another one does not exist (yet).
    #[error("{what} not found")]
    Missing {
        /// The missing object, e.g. `resourceclaimtemplate default/gpu`.
        what: String,
    },
    /// A controller cannot finish a sync for a reason of its own (the text is upstream's).
    #[error("{0}")]
    Sync(String),
    /// The claims of a pod could not be unprepared by its node's DRA plugins.
    #[error("unprepare claims of pod {pod}: {source}")]
    Unprepare {
        /// `namespace/name` of the pod.
        pod: String,
        /// The failed call.
        #[source]
        source: CallError,
    },
    /// An informer ended before its first list.
    #[error("actor runtime: informer stopped before its first list")]
    InformerStopped,
    /// A kubelet directory could not be created.
    #[error("kubelet directory {}: {source}", dir.display())]
    KubeletDir {
        /// The directory.
        dir: std::path::PathBuf,
        /// The file system's error.
        #[source]
        source: std::io::Error,
    },
    /// The kubelets' plugin watcher could not watch the registry directories.
    #[error("plugin watcher: {source}")]
    PluginWatcher {
        /// The file system's error.
        #[source]
        source: std::io::Error,
    },
}

/// Result alias of the actors.
pub(crate) type Result<T, E = ActorError> = std::result::Result<T, E>;

impl ActorError {
    /// Wraps a client error with what the actor was doing.
    pub(crate) fn api(action: impl Into<String>, source: kube::Error) -> Self {
        Self::Api {
            action: action.into(),
            source,
        }
    }
}

/// The HTTP status code of an API error response, if the error is one.
pub(crate) fn status_code(error: &kube::Error) -> Option<u16> {
    match error {
        kube::Error::Api(response) => Some(response.code),
        _ => None,
    }
}

/// Whether the error says the object does not exist.
pub(crate) fn is_not_found(error: &kube::Error) -> bool {
    status_code(error) == Some(404)
}

/// Whether the error is a resourceVersion conflict or an existing name (HTTP 409).
pub(crate) fn is_conflict(error: &kube::Error) -> bool {
    status_code(error) == Some(409)
}

/// Whether retrying the same request later may succeed: 409, 429, 5xx and transport errors.
pub(crate) fn is_transient(error: &kube::Error) -> bool {
    match status_code(error) {
        Some(code) => code == 409 || code == 429 || code >= 500,
        None => !matches!(
            error,
            kube::Error::SerdeError(_) | kube::Error::BuildRequest(_)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::ErrorResponse;

    fn api_error(code: u16) -> kube::Error {
        kube::Error::Api(ErrorResponse {
            status: "Failure".into(),
            message: String::new(),
            reason: String::new(),
            code,
        })
    }

    #[test]
    fn conflicts_and_server_errors_are_transient_but_bad_requests_are_not() {
        assert!(is_transient(&api_error(409)));
        assert!(is_transient(&api_error(500)));
        assert!(is_transient(&api_error(503)));
        assert!(is_transient(&api_error(429)));
        assert!(!is_transient(&api_error(400)));
        assert!(!is_transient(&api_error(404)));
        assert!(is_not_found(&api_error(404)));
        assert!(is_conflict(&api_error(409)));
    }
}
