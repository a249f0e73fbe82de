//! The requests a Kubernetes client sends, as RBAC sees them: a tower layer that records the
//! `(verb, apiGroup, resource[/subresource])` of every request, the further checks the API
//! server makes of some of them (a claim's device status, [`device_status_check`]), and the
//! rules of a ClusterRole or Role expanded into the same triples.

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
    /// The object's name where the rule must name it (`resourceNames`); empty for any object.
    pub name: String,
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let group = if self.group.is_empty() {
            "core"
        } else {
            &self.group
        };
        write!(f, "{} {group}/{}", self.verb, self.resource)?;
        if !self.name.is_empty() {
            write!(f, " named {}", self.name)?;
        }
        Ok(())
    }
}

/// The synthetic subresource whose check stands for the `status.devices` entries of a driver.
const CLAIM_DRIVER: &str = "resourceclaims/driver";

/// The further check kube-apiserver makes of `write` when it changes the `status.devices`
/// entries of `driver` in a claim: from 1.36 (`DRAResourceClaimGranularStatusAuthorization`,
/// beta and on by default) `associated-node:<verb>` of the synthetic `resourceclaims/driver`
/// named after the driver, which a caller bound to the node the claim is allocated on passes
/// (kubernetes/kubernetes#134947). `None` for any other request.
pub fn device_status_check(write: &Access, driver: &str) -> Option<Access> {
    let writes = matches!(write.verb.as_str(), "update" | "patch");
    (write.group == "resource.k8s.io" && write.resource == "resourceclaims/status" && writes).then(
        || Access {
            group: write.group.clone(),
            resource: CLAIM_DRIVER.to_owned(),
            verb: format!("associated-node:{}", write.verb),
            name: driver.to_owned(),
        },
    )
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
        name: String::new(),
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

/// Every `(verb, group, resource)` the rules of `role` grant. Wildcards are refused, and so are
/// resource names but for `resourceclaims/driver`, where they name the drivers: a
/// least-privilege role names what it grants.
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
        let resources = rule.resources.iter().flatten();
        let names = match &rule.resource_names {
            None => vec![String::new()],
            Some(names) => {
                assert!(
                    resources.clone().all(|r| r == CLAIM_DRIVER),
                    "unexpected resourceNames in {rule:?}"
                );
                names.clone()
            }
        };
        assert!(
            rule.non_resource_urls.is_none(),
            "unexpected nonResourceURLs in {rule:?}"
        );
        for group in rule.api_groups.iter().flatten() {
            for resource in resources.clone() {
                for verb in &rule.verbs {
                    assert!(
                        ![group, resource, verb].iter().any(|s| s.contains('*')),
                        "wildcard in role {name}: {rule:?}"
                    );
                    for object in &names {
                        granted.insert(Access {
                            group: group.clone(),
                            resource: resource.clone(),
                            verb: verb.clone(),
                            name: object.clone(),
                        });
                    }
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
