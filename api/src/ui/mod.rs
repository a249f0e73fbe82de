//! The device page: `GET /` and `GET /ui/` answer one HTML page, `GET /ui/{file}` its script and
//! stylesheet, all compiled into the binary (`page.html`, `page.js`, `page.css` beside this
//! file; no framework, no build step). The page only reads: its script calls the `/v1` routes
//! (so the token and the forwarding to the leader apply to it as to `dra-ledger admin`) and
//! draws the devices by node, utilisation by model, usage by namespace and idle allocations
//! with HTML and SVG.
//!
//! These routes are answered by the replica reached (they are not `/v1`), with a
//! Content-Security-Policy that admits only this origin's script, style and API, and cache
//! headers for a static page: the HTML is revalidated on every load, the script and stylesheet
//! are named by a hash of their content and kept for a year. Depends on nothing of the crate
//! but the error answer.

use std::hash::{Hash, Hasher};
use std::sync::LazyLock;

use axum::extract::rejection::PathRejection;
use axum::extract::Path;
use axum::http::header::{self, HeaderName};
use axum::response::{IntoResponse, Response};

use crate::error_response::{ErrorBody, ErrorResponse};

const PAGE_HTML: &str = include_str!("page.html");
const PAGE_JS: &str = include_str!("page.js");
const PAGE_CSS: &str = include_str!("page.css");

/// The page's Content-Security-Policy: script, style and requests from this origin only, no
/// inline code, no frames, no forms posting anywhere.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
    style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; \
    form-action 'none'; frame-ancestors 'none'";

/// `Cache-Control` of the HTML: revalidated on every load, so a new binary's page is seen at
/// once.
const CACHE_PAGE: &str = "no-cache";
/// `Cache-Control` of the script and stylesheet, whose URLs change with their content.
const CACHE_ASSET: &str = "public, max-age=31536000, immutable";

/// A short hash of the script and stylesheet, the `v` of their URLs in the page.
static ASSET_VERSION: LazyLock<String> = LazyLock::new(|| {
    let mut hasher = std::hash::DefaultHasher::new();
    PAGE_JS.hash(&mut hasher);
    PAGE_CSS.hash(&mut hasher);
    format!("{:016x}", hasher.finish())
});

/// The page with its asset URLs versioned.
static PAGE: LazyLock<String> =
    LazyLock::new(|| PAGE_HTML.replace("{{version}}", ASSET_VERSION.as_str()));

/// `body` as `content_type` with the page's security and cache headers.
fn static_answer(content_type: &'static str, cache: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, cache),
            (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
            (HeaderName::from_static("x-frame-options"), "DENY"),
        ],
        body,
    )
        .into_response()
}

fn page() -> Response {
    static_answer("text/html; charset=utf-8", CACHE_PAGE, PAGE.as_str())
}

/// The device page.
#[utoipa::path(get, path = "/", tag = "ui",
    responses((status = 200, description = "The device page (HTML)", content_type = "text/html", body = String)))]
pub async fn root() -> Response {
    page()
}

/// The device page, at the address the docs give.
#[utoipa::path(get, path = "/ui/", tag = "ui",
    responses((status = 200, description = "The device page (HTML)", content_type = "text/html", body = String)))]
pub async fn ui() -> Response {
    page()
}

/// The page's script (`page.js`) or stylesheet (`page.css`).
#[utoipa::path(get, path = "/ui/{file}", tag = "ui",
    params(("file" = String, Path, description = "`page.js` or `page.css`")),
    responses(
        (status = 200, description = "The script or stylesheet", content(
            (String = "text/javascript"),
            (String = "text/css"),
        )),
        (status = 404, description = "Another file", body = ErrorBody),
    ))]
pub async fn asset(file: Result<Path<String>, PathRejection>) -> Result<Response, ErrorResponse> {
    let file = crate::v1::read::segments(file)?;
    match file.as_str() {
        "page.js" => Ok(static_answer(
            "text/javascript; charset=utf-8",
            CACHE_ASSET,
            PAGE_JS,
        )),
        "page.css" => Ok(static_answer(
            "text/css; charset=utf-8",
            CACHE_ASSET,
            PAGE_CSS,
        )),
        _ => Err(ErrorResponse::NotFound {
            path: format!("/ui/{file}"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_names_its_assets_by_their_version_and_has_no_inline_code() {
        assert!(!PAGE.contains("{{version}}"));
        let version = ASSET_VERSION.as_str();
        assert!(PAGE.contains(&format!("/ui/page.js?v={version}")));
        assert!(PAGE.contains(&format!("/ui/page.css?v={version}")));
        // The policy admits no inline script or style: the page must not need any.
        assert!(!PAGE.contains("<script>"), "inline script");
        assert!(!PAGE.contains("<style"), "inline style");
        assert!(!PAGE.contains(" style=\""), "inline style attribute");
        let handler = PAGE.split(" on").skip(1).find(|rest| {
            let name_end = rest.find(|c: char| !c.is_ascii_lowercase()).unwrap_or(0);
            name_end > 0 && rest[name_end..].starts_with('=')
        });
        assert!(handler.is_none(), "inline event handler: on{handler:?}");
    }

    #[test]
    fn the_script_makes_no_write_request() {
        for write in [
            "POST",
            "PUT",
            "PATCH",
            "DELETE",
            "/cordon",
            "/reconcile",
            "/backup",
        ] {
            assert!(!PAGE_JS.contains(write), "the page script mentions {write}");
        }
    }
}
