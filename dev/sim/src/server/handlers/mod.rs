//! HTTP entry point: one fallback handler that routes every request by path and method to the
//! per-verb handlers (get/list, watch, create/update/patch/binding, delete).
//!
//! Handlers are async; they touch the store only through its short synchronous operations.

mod binding;
mod create;
mod delete;
mod options;
mod params;
mod read;
mod watch;
mod write;

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, Method, StatusCode, Uri};
use serde_json::Value;

use super::convert;
use super::discovery;
use super::error::{Result, StatusError};
use super::faults::{FaultInjector, WriteFault};
use super::render::{self, Format};
use super::resources::ResourceInfo;
use super::route::{self, ResourceRequest, Target};
use super::store::Store;

pub(crate) use delete::finalize_namespaces;
use options::WriteKind;
pub(crate) use params::Params;

/// Shared state of all handlers.
#[derive(Debug)]
pub(crate) struct AppState {
    pub store: Arc<Store>,
    pub faults: Arc<FaultInjector>,
    pub bookmark_interval: Duration,
    pub default_watch_timeout: Duration,
    /// Bumped to end all open watches (on-demand disconnect).
    pub disconnect: tokio::sync::watch::Sender<u64>,
    /// Set to true on shutdown; ends watches and background tasks.
    pub closing: tokio::sync::watch::Sender<bool>,
    /// Address the server listens on (for discovery).
    pub addr: std::net::SocketAddr,
}

/// One request on a resource as every per-verb handler takes it: the server's state, the
/// resource and object addressed, the query parameters, the headers and the body (empty for
/// reads).
#[derive(Clone, Copy)]
struct Call<'a> {
    state: &'a Arc<AppState>,
    req: &'a ResourceRequest,
    params: &'a Params,
    headers: &'a HeaderMap,
    body: &'a [u8],
}

impl<'a> Call<'a> {
    /// State, request, parameters, headers and body, in that order.
    fn parts(
        self,
    ) -> (
        &'a Arc<AppState>,
        &'a ResourceRequest,
        &'a Params,
        &'a HeaderMap,
        &'a [u8],
    ) {
        (self.state, self.req, self.params, self.headers, self.body)
    }
}

/// The fallback handler serving every path.
pub(crate) async fn dispatch(
    State(state): State<Arc<AppState>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let params = match Params::from_uri(&uri) {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    let target = match route::parse(uri.path(), &state.store.registry()) {
        Ok(t) => t,
        Err(e) => return e.into_response(),
    };
    let streams = matches!(&target, Target::Resource(r) if r.name.is_none() && r.subresource.is_none())
        && method == Method::GET
        && params.flag("watch");
    let pretty = !streams && params.pretty(&headers);
    let result = match target {
        Target::Resource(req) => resource(&state, method, req, &params, &headers, body).await,
        Target::OpenApiV2 | Target::OpenApiRoot | Target::OpenApiGroupVersion(_)
            if method == Method::GET =>
        {
            super::openapi::serve(&state.store, &target, &headers)
        }
        other if method == Method::GET => {
            discovery::serve(&state.store.registry(), &other, state.addr)
        }
        _ => Err(StatusError::MethodNotAllowed(format!(
            "the server does not allow this method on the requested resource ({method})"
        ))),
    };
    let response = result.unwrap_or_else(IntoResponse::into_response);
    if pretty {
        indent(response).await
    } else {
        response
    }
}

/// Re-renders a JSON answer indented by two spaces (`pretty`); other answers pass unchanged.
async fn indent(response: Response) -> Response {
    let is_json = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if !is_json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return Response::from_parts(parts, axum::body::Body::empty());
    };
    let pretty = serde_json::from_slice::<Value>(&bytes)
        .ok()
        .and_then(|v| serde_json::to_vec_pretty(&v).ok());
    let bytes = match pretty {
        Some(mut p) => {
            p.push(b'\n');
            Bytes::from(p)
        }
        None => bytes,
    };
    parts.headers.remove(http::header::CONTENT_LENGTH);
    Response::from_parts(parts, axum::body::Body::from(bytes))
}

fn is_write(method: &Method) -> bool {
    matches!(
        *method,
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    )
}

async fn resource(
    state: &Arc<AppState>,
    method: Method,
    req: ResourceRequest,
    params: &Params,
    headers: &HeaderMap,
    body: Bytes,
) -> Result<Response> {
    if is_write(&method) {
        match state.faults.next_write() {
            WriteFault::None => {}
            WriteFault::Delay(d) => tokio::time::sleep(d).await,
            WriteFault::Conflict => {
                let name = req.name.clone().unwrap_or_default();
                return Err(StatusError::conflict(
                    &req.info.plural,
                    &req.info.group,
                    &name,
                    "injected conflict",
                ));
            }
            WriteFault::Error => {
                return Err(StatusError::Internal("injected internal error".into()))
            }
        }
    } else if method == Method::GET && !params.flag("watch") && state.faults.next_read_fails() {
        return Err(StatusError::Internal("injected internal error".into()));
    }
    let sub = req.subresource.as_deref();
    let call = Call {
        state,
        req: &req,
        params,
        headers,
        body: &body,
    };
    match (method, req.name.is_some(), sub) {
        (Method::GET, false, None) if params.flag("watch") => {
            options::validate_list(params, true)?;
            watch::watch(call)
        }
        (Method::GET, false, None) => {
            options::validate_list(params, false)?;
            read::list(call)
        }
        (Method::GET, true, None | Some("status")) => read::get(call),
        (Method::POST, false, None) => {
            options::validate_write(WriteKind::Create, params)?;
            create::create(call)
        }
        (Method::POST, _, Some("binding")) => {
            options::validate_write(WriteKind::Create, params)?;
            binding::bind(call)
        }
        (Method::PUT, true, None | Some("status")) => {
            options::validate_write(WriteKind::Update, params)?;
            write::update(call)
        }
        (Method::PATCH, true, None | Some("status")) => {
            options::validate_write(WriteKind::Patch, params)?;
            write::patch(call)
        }
        (Method::DELETE, true, None) => delete::delete(call),
        (Method::DELETE, false, None) => delete::delete_collection(call),
        (m, _, _) => Err(StatusError::MethodNotAllowed(format!(
            "the server does not allow this method on the requested resource ({m})"
        ))),
    }
}

/// One stored object as `format` renders it for a client of `info`'s version. In the common case
/// (JSON, a version that shows the object as stored) it is serialized in place, without a copy.
pub(crate) fn object_body(format: Format, info: &ResourceInfo, stored: &Value) -> Vec<u8> {
    let encoded = match format {
        Format::Json if !convert::needs_presenting(info, stored) => serde_json::to_vec(stored),
        Format::Json => serde_json::to_vec(&convert::present(info, stored)),
        other => serde_json::to_vec(&render::object(
            other,
            info,
            &convert::present(info, stored),
        )),
    };
    // A `Value` always serializes: its map keys are strings.
    encoded.unwrap_or_default()
}

/// A response with one stored object (see [`object_body`]).
pub(crate) fn object_response(
    code: StatusCode,
    format: Format,
    info: &ResourceInfo,
    stored: &Value,
) -> Response {
    (
        code,
        [(http::header::CONTENT_TYPE, "application/json")],
        object_body(format, info, stored),
    )
        .into_response()
}

/// A response with a JSON body already encoded.
pub(crate) fn json_bytes_response(code: StatusCode, body: Vec<u8>) -> Response {
    (
        code,
        [(http::header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}

/// A JSON response with a status code.
pub(crate) fn json_response(code: StatusCode, body: &Value) -> Response {
    // A `Value` always serializes: its map keys are strings.
    json_bytes_response(code, serde_json::to_vec(body).unwrap_or_default())
}
