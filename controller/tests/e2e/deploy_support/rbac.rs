//! The requests a Kubernetes client sends, as RBAC sees them: a tower layer that records the
//! `(verb, apiGroup, resource[/subresource])` of every request, and the rules of a ClusterRole
//! or Role expanded into the same triples.

use std::collections::BTreeSet;
use std::fmt::{self, Write as _};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use http::{Method, Request};
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role};
use tower::{Layer, Service};

/// One permission: a verb on a resource (with its subresource, as `pods/status`) of a group
/// (`""` for the core group).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Access {
    /// The API group.
    pub group: String,
    /// `resource` or `resource/subresource`.
    pub resource: String,
    /// The RBAC verb.
    pub verb: String,
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let group = if self.group.is_empty() {
            "core"
        } else {
            &self.group
        };
        write!(f, "{} {group}/{}", self.verb, self.resource)
    }
}

/// The access a request needs, or `Err(path)` for a request outside the resource API
/// (discovery, `/version`).
pub fn access_of(method: &Method, path: &str, query: Option<&str>) -> Result<Access, String> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, rest) = match segments.as_slice() {
        ["api", _version, rest @ ..] => ("", rest),
        ["apis", group, _version, rest @ ..] => (*group, rest),
        _ => return Err(path.to_owned()),
    };
    // `namespaces/{ns}/{resource}...` is namespaced; `namespaces[/{name}]` is the Namespace itself.
    let rest = match rest {
        ["namespaces", _namespace, inner @ ..] if !inner.is_empty() => inner,
        _ => rest,
    };
    let (resource, name) = match rest {
        [resource] => ((*resource).to_owned(), None),
        [resource, name] => ((*resource).to_owned(), Some(*name)),
        [resource, name, subresource] => (format!("{resource}/{subresource}"), Some(*name)),
        _ => return Err(path.to_owned()),
    };
    let watching = query.is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"));
    let verb = match (method, name.is_some()) {
        (&Method::GET, _) if watching => "watch",
        (&Method::GET, true) => "get",
        (&Method::GET, false) => "list",
        (&Method::POST, _) => "create",
        (&Method::PUT, _) => "update",
        (&Method::PATCH, _) => "patch",
        (&Method::DELETE, true) => "delete",
        (&Method::DELETE, false) => "deletecollection",
        _ => return Err(format!("{method} {path}")),
    };
    Ok(Access {
        group: group.to_owned(),
        resource,
        verb: verb.to_owned(),
    })
}

/// What the recorder has seen: the accesses, and the requests outside the resource API.
#[derive(Debug, Default)]
pub struct Recorded {
    /// The accesses of resource requests.
    pub accesses: BTreeSet<Access>,
    /// Requests that are not resource requests.
    pub other: BTreeSet<String>,
}

/// A tower layer recording the access of every request passing through it.
#[derive(Debug, Clone, Default)]
pub struct RecordingLayer {
    recorded: Arc<Mutex<Recorded>>,
}

impl RecordingLayer {
    /// The accesses seen so far.
    pub fn accesses(&self) -> BTreeSet<Access> {
        self.recorded
            .lock()
            .expect("recorder lock")
            .accesses
            .clone()
    }

    /// The non-resource requests seen so far.
    pub fn other(&self) -> BTreeSet<String> {
        self.recorded.lock().expect("recorder lock").other.clone()
    }
}

impl<S> Layer<S> for RecordingLayer {
    type Service = Recording<S>;

    fn layer(&self, inner: S) -> Recording<S> {
        Recording {
            inner,
            recorded: self.recorded.clone(),
        }
    }
}

/// The service made by [`RecordingLayer`].
#[derive(Debug, Clone)]
pub struct Recording<S> {
    inner: S,
    recorded: Arc<Mutex<Recorded>>,
}

impl<S, B> Service<Request<B>> for Recording<S>
where
    S: Service<Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let uri = request.uri();
        let access = access_of(request.method(), uri.path(), uri.query());
        {
            let mut recorded = self.recorded.lock().expect("recorder lock");
            match access {
                Ok(access) => recorded.accesses.insert(access),
                Err(other) => recorded.other.insert(other),
            };
        }
        self.inner.call(request)
    }
}

/// Every `(verb, group, resource)` the rules of `role` grant. Wildcards and resource names are
/// refused: a least-privilege role names what it grants.
pub fn granted(role: &ClusterRole) -> BTreeSet<Access> {
    granted_by(
        role.metadata.name.as_deref().unwrap_or_default(),
        role.rules.iter().flatten(),
    )
}

/// [`granted`] for the rules of a namespaced Role.
pub fn granted_in(role: &Role) -> BTreeSet<Access> {
    granted_by(
        role.metadata.name.as_deref().unwrap_or_default(),
        role.rules.iter().flatten(),
    )
}

fn granted_by<'a>(name: &str, rules: impl Iterator<Item = &'a PolicyRule>) -> BTreeSet<Access> {
    let mut granted = BTreeSet::new();
    for rule in rules {
        assert!(
            rule.resource_names.is_none() && rule.non_resource_urls.is_none(),
            "unexpected resourceNames or nonResourceURLs in {rule:?}"
        );
        for group in rule.api_groups.iter().flatten() {
            for resource in rule.resources.iter().flatten() {
                for verb in &rule.verbs {
                    assert!(
                        ![group, resource, verb].iter().any(|s| s.contains('*')),
                        "wildcard in role {name}: {rule:?}"
                    );
                    granted.insert(Access {
                        group: group.clone(),
                        resource: resource.clone(),
                        verb: verb.clone(),
                    });
                }
            }
        }
    }
    granted
}

/// The accesses as one per line, for failure messages.
pub fn lines<'a>(accesses: impl IntoIterator<Item = &'a Access>) -> String {
    accesses
        .into_iter()
        .fold(String::new(), |mut text, access| {
            let _ = writeln!(text, "  {access}");
            text
        })
}
