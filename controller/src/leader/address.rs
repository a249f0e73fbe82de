//! Where the leader's admin API is: a URL template with the Lease holder's identity in it, so
//! that a standby can forward admin requests to the leader. The default is the pod's DNS name
//! under the StatefulSet's headless Service (`deploy/base/service-peers.yaml`):
//! [`DEFAULT_LEADER_URL_TEMPLATE`].
//!
//! Placeholders: `{identity}` (the holder's identity as the Lease has it), `{pod}` (the identity
//! up to its first `_`: the pod name, since the default identity is the pod name, `_` and a
//! per-process suffix, and a pod name has no `_`), `{namespace}` (the Lease's namespace) and
//! `{port}` (this replica's admin port). Pure: no I/O, no Kubernetes types.

use std::fmt;
use std::str::FromStr;

use http::Uri;

/// The default: the leader pod's name under the headless Service `dra-ledger-peers`, on the
/// admin port this replica listens on.
pub const DEFAULT_LEADER_URL_TEMPLATE: &str =
    "http://{pod}.dra-ledger-peers.{namespace}.svc:{port}";

/// The placeholders a template may use.
const PLACEHOLDERS: [&str; 4] = ["identity", "pod", "namespace", "port"];

/// Why a template, or the admin URL of one replica, is refused.
#[derive(Debug, thiserror::Error)]
pub enum LeaderUrlError {
    /// A `{` without its `}`.
    #[error("unclosed {{ in {template}")]
    Unclosed {
        /// The template.
        template: String,
    },
    /// A `}` without its `{`.
    #[error("unopened }} in {template}")]
    Unopened {
        /// The template.
        template: String,
    },
    /// A placeholder other than `{identity}`, `{pod}`, `{namespace}` and `{port}`.
    #[error(
        "unknown placeholder {{{name}}} in {template} (known: {{identity}}, {{pod}}, {{namespace}}, {{port}})"
    )]
    UnknownPlaceholder {
        /// The placeholder's name.
        name: String,
        /// The template.
        template: String,
    },
    /// The text does not parse as a URL.
    #[error("{text} is not a URL: {source}")]
    NotUrl {
        /// The text.
        text: String,
        /// Why.
        source: http::uri::InvalidUri,
    },
    /// A URL, but not `http://` with a host.
    #[error("{text} is not an http://HOST[:PORT] URL")]
    NotHttp {
        /// The URL.
        text: String,
    },
    /// A URL with a query.
    #[error("{text} has a query")]
    Query {
        /// The URL.
        text: String,
    },
    /// The identity or the namespace has characters that could change the URL.
    #[error("the identity {identity:?} cannot be part of a URL (letters, digits and .-_: only)")]
    UnsafeIdentity {
        /// The holder's identity.
        identity: String,
    },
}

/// A checked `--leader-url-template`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderUrlTemplate(String);

impl Default for LeaderUrlTemplate {
    fn default() -> Self {
        LeaderUrlTemplate(DEFAULT_LEADER_URL_TEMPLATE.to_owned())
    }
}

impl fmt::Display for LeaderUrlTemplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Whether `text` may stand in a URL for a placeholder: letters, digits and `.-_:` only, so
/// that no identity written in the Lease can add a path, a user or another host.
fn is_url_safe(text: &str) -> bool {
    !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':'))
}

/// Every `{name}` of `template` with its value, or the first unknown or unclosed one.
fn substitute(template: &str, value: impl Fn(&str) -> String) -> Result<String, LeaderUrlError> {
    let mut out = String::with_capacity(template.len() + 32);
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let close = after.find('}').ok_or_else(|| LeaderUrlError::Unclosed {
            template: template.to_owned(),
        })?;
        let name = &after[..close];
        if !PLACEHOLDERS.contains(&name) {
            return Err(LeaderUrlError::UnknownPlaceholder {
                name: name.to_owned(),
                template: template.to_owned(),
            });
        }
        out.push_str(&value(name));
        rest = &after[close + 1..];
    }
    if rest.contains('}') {
        return Err(LeaderUrlError::Unopened {
            template: template.to_owned(),
        });
    }
    out.push_str(rest);
    Ok(out)
}

/// `text` as an `http://` URL with a host, or why it is not one.
fn http_url(text: &str) -> Result<Uri, LeaderUrlError> {
    let uri: Uri = text.parse().map_err(|source| LeaderUrlError::NotUrl {
        text: text.to_owned(),
        source,
    })?;
    if uri.scheme_str() != Some("http") || uri.host().is_none_or(str::is_empty) {
        return Err(LeaderUrlError::NotHttp {
            text: text.to_owned(),
        });
    }
    if uri.query().is_some() {
        return Err(LeaderUrlError::Query {
            text: text.to_owned(),
        });
    }
    Ok(uri)
}

impl FromStr for LeaderUrlTemplate {
    type Err = LeaderUrlError;

    fn from_str(template: &str) -> Result<Self, Self::Err> {
        let sample = substitute(template, |name| match name {
            "port" => "8080".to_owned(),
            "namespace" => "dra-ledger".to_owned(),
            _ => "dra-ledger-0".to_owned(),
        })?;
        http_url(&sample)?;
        Ok(LeaderUrlTemplate(template.to_owned()))
    }
}

impl LeaderUrlTemplate {
    /// The admin URL of the replica `identity` holding the Lease in `namespace`, when this
    /// replica listens on `port`; an error says why `identity` has none.
    pub fn url_of(
        &self,
        identity: &str,
        namespace: &str,
        port: u16,
    ) -> Result<Uri, LeaderUrlError> {
        if !is_url_safe(identity) || !is_url_safe(namespace) {
            return Err(LeaderUrlError::UnsafeIdentity {
                identity: identity.to_owned(),
            });
        }
        let pod = identity.split('_').next().unwrap_or(identity);
        let url = substitute(&self.0, |name| match name {
            "identity" => identity.to_owned(),
            "pod" => pod.to_owned(),
            "namespace" => namespace.to_owned(),
            _ => port.to_string(),
        })?;
        http_url(&url)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_names_the_pod_under_the_headless_service_without_the_process_suffix() {
        let template = LeaderUrlTemplate::default();
        let url = template
            .url_of("dra-ledger-1_3fa9c2d1", "dra-ledger", 8080)
            .unwrap();
        assert_eq!(
            url.to_string(),
            "http://dra-ledger-1.dra-ledger-peers.dra-ledger.svc:8080/"
        );
        assert_eq!(
            template
                .url_of("dra-ledger-0", "ops", 9090)
                .unwrap()
                .to_string(),
            "http://dra-ledger-0.dra-ledger-peers.ops.svc:9090/"
        );
    }

    #[test]
    fn identity_can_be_the_address_itself() {
        let template: LeaderUrlTemplate = "http://{identity}".parse().unwrap();
        assert_eq!(
            template
                .url_of("127.0.0.1:41234", "default", 1)
                .unwrap()
                .to_string(),
            "http://127.0.0.1:41234/"
        );
    }

    #[test]
    fn identities_that_would_change_the_url_have_no_address() {
        let template = LeaderUrlTemplate::default();
        for identity in ["evil.example/x", "user@evil", "a?b", "", "a b"] {
            let error = template
                .url_of(identity, "ns", 8080)
                .unwrap_err()
                .to_string();
            assert!(
                error.contains("cannot be part of a URL"),
                "{identity}: {error}"
            );
        }
    }

    #[test]
    fn bad_templates_are_refused_with_the_reason() {
        for (template, reason) in [
            ("http://{host}:8080", "unknown placeholder {host}"),
            ("http://{pod:8080", "unclosed {"),
            ("http://pod}:8080", "unopened }"),
            ("https://{pod}:8080", "not an http://"),
            ("{pod}:8080", "not an http://"),
            ("http://{pod}:8080/?x=1", "has a query"),
        ] {
            let error = template
                .parse::<LeaderUrlTemplate>()
                .unwrap_err()
                .to_string();
            assert!(error.contains(reason), "{template}: {error}");
        }
    }
}
