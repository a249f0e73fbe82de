//! The routes of the admin API and their OpenAPI 3 document, built from the same registrations
//! (`utoipa_axum::routes!` over handlers annotated with `#[utoipa::path]`), so the document
//! cannot list a route the router lacks or miss one it has.
//!
//! - [`read`]: nodes, devices, claims, intents, audit, utilisation (no token);
//! - [`grid`]: the devices of a few named nodes and their claims, for the device page (no
//!   token);
//! - [`history`]: usage over a window and a device's history (no token);
//! - [`idle`]: allocated claims no consumer uses (no token);
//! - [`write`](mod@write): cordon, uncordon, reconcile, backup (bearer token);
//! - [`types`]: the JSON shapes; [`paging`]: the `continue` token.
//!
//! The document also describes, on every answer, the headers of [`crate::forward`] naming the
//! replica that answered.

pub mod grid;
pub mod history;
pub mod idle;
pub mod paging;
pub mod read;
pub mod types;
pub mod write;

use std::sync::LazyLock;

use axum::http::header;
use axum::response::{IntoResponse, Response};
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::RefOr;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::error_response::ErrorBody;
use crate::health;
use crate::state::AppState;
use crate::ui;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "dra-ledger admin API",
        description = "Read the device ledger of the dra-ledger DRA driver, cordon devices, \
            run a reconcile and take a backup. Mutating endpoints and the backup need \
            `Authorization: Bearer <token>` matching the server's --admin-token-file. Every \
            `/v1` request is answered from the leader's ledger: a standby replica forwards it to \
            the leader, or answers 503 naming the leader when it cannot reach it; the \
            `Dra-Ledger-Replica` header of every answer names the replica that answered."
    ),
    modifiers(&BearerAuth),
    components(schemas(ErrorBody)),
    tags(
        (name = "health", description = "Process health and metrics"),
        (name = "ui", description = "The device page, which reads the `/v1` routes"),
        (name = "ledger", description = "Read views of the ledger"),
        (name = "admin", description = "Changes and backup (bearer token)"),
    )
)]
struct ApiDoc;

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// Every route of the admin server, with its OpenAPI operation.
pub(crate) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(health::healthz))
        .routes(routes!(health::readyz))
        .routes(routes!(health::metrics))
        .routes(routes!(openapi_json))
        .routes(routes!(ui::root))
        .routes(routes!(ui::ui))
        .routes(routes!(ui::asset))
        .routes(routes!(read::list_nodes))
        .routes(routes!(read::node_devices))
        .routes(routes!(read::list_claims))
        .routes(routes!(read::get_claim))
        .routes(routes!(read::list_intents))
        .routes(routes!(read::audit))
        .routes(routes!(read::utilisation))
        .routes(routes!(grid::devices_of_nodes))
        .routes(routes!(history::usage))
        .routes(routes!(history::device_history))
        .routes(routes!(idle::idle))
        .routes(routes!(write::cordon))
        .routes(routes!(write::uncordon))
        .routes(routes!(write::reconcile))
        .routes(routes!(write::backup))
}

/// The OpenAPI 3 document of every route of [`crate::router()`].
pub fn openapi() -> utoipa::openapi::OpenApi {
    let mut document = routes().into_openapi();
    document_replica_headers(&mut document);
    document
}

/// Adds the headers naming the replica that answered to every response of every operation.
fn document_replica_headers(document: &mut utoipa::openapi::OpenApi) {
    let replica = HeaderBuilder::new()
        .description(Some(
            "The replica that answered: for `/v1`, the one whose ledger answered (the leader, \
             or the only replica without leader election), except for the 503 codes \
             `leader_unreachable`, `no_leader` and `not_leader`, which the replica reached \
             answers itself; for `/healthz`, `/readyz` and `/metrics`, always the replica \
             reached. With leader election the name is the replica's Lease identity.",
        ))
        .build();
    let forwarded_by = HeaderBuilder::new()
        .description(Some(
            "On an answer forwarded from the leader: the standby replica that was reached and \
             forwarded the request.",
        ))
        .build();
    for item in document.paths.paths.values_mut() {
        let operations = [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
        ];
        for operation in operations.into_iter().flatten() {
            for response in operation.responses.responses.values_mut() {
                if let RefOr::T(response) = response {
                    response
                        .headers
                        .insert("Dra-Ledger-Replica".to_owned(), replica.clone());
                    response
                        .headers
                        .insert("Dra-Ledger-Forwarded-By".to_owned(), forwarded_by.clone());
                }
            }
        }
    }
}

static DOCUMENT: LazyLock<String> = LazyLock::new(|| {
    openapi()
        .to_pretty_json()
        .unwrap_or_else(|error| format!("{{\"error\":\"{error}\"}}"))
});

/// The OpenAPI 3 document of this API.
#[utoipa::path(get, path = "/v1/openapi.json", tag = "health",
    responses(
        (status = 200, description = "OpenAPI 3 document", content_type = "application/json", body = Object),
        (status = 503, description = "A standby that cannot forward to the leader (codes `leader_unreachable`, `no_leader`, `not_leader`)", body = ErrorBody),
    ))]
pub async fn openapi_json() -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        DOCUMENT.as_str(),
    )
        .into_response()
}
