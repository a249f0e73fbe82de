//! A small HTTP/1 client of the admin API (hyper-util's client over plain TCP): JSON requests
//! with an optional bearer token, the server's JSON error turned into its message, and the
//! backup streamed to a file; every answer with the replica that answered it ([`AnsweredBy`],
//! from the `Dra-Ledger-Replica` and `Dra-Ledger-Forwarded-By` headers). Knows the API only as
//! paths, headers and JSON; no server code.

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context};
use bytes::Bytes;
use http::{header, HeaderMap, Method, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use tokio::io::AsyncWriteExt;

/// Time limit of one request (the backup: until its body starts).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// Time limit of a whole backup download.
const BACKUP_TIMEOUT: Duration = Duration::from_secs(3600);

/// The replica whose ledger answered a request, and the standby it was forwarded by, as the
/// answer's headers name them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AnsweredBy {
    /// `Dra-Ledger-Replica`.
    pub replica: Option<String>,
    /// `Dra-Ledger-Forwarded-By`.
    pub forwarded_by: Option<String>,
}

impl AnsweredBy {
    fn of(headers: &HeaderMap) -> Self {
        let text = |name: &str| {
            headers
                .get(name)
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        };
        AnsweredBy {
            replica: text("dra-ledger-replica"),
            forwarded_by: text("dra-ledger-forwarded-by"),
        }
    }

    /// `answered by replica R` (`, forwarded by S`), or `None` when the server named none (a
    /// node agent).
    pub fn describe(&self) -> Option<String> {
        let replica = self.replica.as_deref()?;
        Some(match &self.forwarded_by {
            Some(standby) => format!("answered by replica {replica} (forwarded by {standby})"),
            None => format!("answered by replica {replica}"),
        })
    }
}

/// A client of one admin server.
pub struct AdminClient {
    base: String,
    token: Option<String>,
    http: Client<HttpConnector, Full<Bytes>>,
}

impl std::fmt::Debug for AdminClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminClient")
            .field("base", &self.base)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .finish_non_exhaustive()
    }
}

/// Everything but the unreserved characters of RFC 3986 (letters, digits, `-._~`).
const RESERVED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Percent-encodes one path segment or query value (unreserved characters stay).
pub fn encode(text: &str) -> String {
    utf8_percent_encode(text, RESERVED).to_string()
}

impl AdminClient {
    /// A client of `server` (`http://host:port`), sending the token of `token_file` if any.
    pub fn new(server: &str, token_file: Option<&Path>) -> anyhow::Result<Self> {
        let base = server.trim_end_matches('/').to_owned();
        let uri: Uri = base
            .parse()
            .with_context(|| format!("invalid --server URL {server}"))?;
        if uri.scheme_str() != Some("http") || uri.host().is_none() {
            bail!("invalid --server URL {server}: expected http://HOST:PORT");
        }
        let token = match token_file {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read token file {}", path.display()))?;
                let token = text.trim();
                if token.is_empty() {
                    bail!("token file {} is empty", path.display());
                }
                Some(token.to_owned())
            }
            None => None,
        };
        Ok(AdminClient {
            base,
            token,
            http: Client::builder(TokioExecutor::new()).build_http(),
        })
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
    ) -> anyhow::Result<hyper::Response<hyper::body::Incoming>> {
        let url = format!("{}{path}", self.base);
        let mut request = Request::builder().method(method).uri(&url);
        if let Some(token) = &self.token {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let request = request
            .body(Full::new(Bytes::new()))
            .with_context(|| format!("invalid request URL {url}"))?;
        let response = tokio::time::timeout(REQUEST_TIMEOUT, self.http.request(request))
            .await
            .map_err(|_| {
                anyhow::anyhow!(
                    "no answer from the admin server at {} within {REQUEST_TIMEOUT:?}",
                    self.base
                )
            })?
            .map_err(|error| {
                // The connector's cause (connection refused, no such host) is the useful part.
                let mut cause = error.to_string();
                let mut source = std::error::Error::source(&error);
                while let Some(inner) = source {
                    cause = inner.to_string();
                    source = inner.source();
                }
                anyhow::anyhow!("cannot reach the admin server at {}: {cause}", self.base)
            })?;
        Ok(response)
    }

    /// The error of a non-success answer: the server's JSON message when there is one, and the
    /// replica that answered.
    async fn failure(response: hyper::Response<hyper::body::Incoming>) -> anyhow::Error {
        let status = response.status();
        let by = AnsweredBy::of(response.headers())
            .describe()
            .map(|by| format!(", {by}"))
            .unwrap_or_default();
        let body = response
            .into_body()
            .collect()
            .await
            .map(http_body_util::Collected::to_bytes)
            .unwrap_or_default();
        let message = serde_json::from_slice::<serde_json::Value>(&body)
            .ok()
            .and_then(|json| json["error"]["message"].as_str().map(str::to_owned))
            .unwrap_or_else(|| String::from_utf8_lossy(&body).trim().to_owned());
        let hint = match status {
            StatusCode::UNAUTHORIZED => " (pass the server's token with --token-file)",
            _ => "",
        };
        anyhow::anyhow!("{message}{hint} (HTTP {}{by})", status.as_u16())
    }

    /// `method path` answered with JSON, and by whom; a non-2xx answer is an error with the
    /// server's message.
    pub async fn json(
        &self,
        method: Method,
        path: &str,
    ) -> anyhow::Result<(serde_json::Value, AnsweredBy)> {
        let response = self.send(method, path).await?;
        if !response.status().is_success() {
            return Err(Self::failure(response).await);
        }
        let by = AnsweredBy::of(response.headers());
        let body = response
            .into_body()
            .collect()
            .await
            .context("reading the answer failed")?
            .to_bytes();
        let json =
            serde_json::from_slice(&body).context("the admin server answered with invalid JSON")?;
        Ok((json, by))
    }

    /// Downloads `GET /v1/backup` to `to` (which must not exist) through a temporary file in the
    /// same directory, so an interrupted download leaves nothing at `to`. Returns the bytes,
    /// and by whom.
    pub async fn backup(&self, to: &Path) -> anyhow::Result<(u64, AnsweredBy)> {
        if to.exists() {
            bail!("{} already exists", to.display());
        }
        let response = self.send(Method::GET, "/v1/backup").await?;
        if !response.status().is_success() {
            return Err(Self::failure(response).await);
        }
        let by = AnsweredBy::of(response.headers());
        let dir = to
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let partial = tempfile::Builder::new()
            .prefix(".dra-ledger-backup-")
            .tempfile_in(dir)
            .with_context(|| format!("cannot write in {}", dir.display()))?;
        let mut file = tokio::fs::File::from_std(partial.reopen()?);
        let mut body = response.into_body();
        let mut written = 0u64;
        let download = async {
            while let Some(frame) = body.frame().await {
                let frame = frame.context("the backup download broke off")?;
                if let Ok(data) = frame.into_data() {
                    file.write_all(&data).await?;
                    written += data.len() as u64;
                }
            }
            file.sync_all().await?;
            anyhow::Ok(())
        };
        tokio::time::timeout(BACKUP_TIMEOUT, download)
            .await
            .map_err(|_| {
                anyhow::anyhow!("the backup download took longer than {BACKUP_TIMEOUT:?}")
            })??;
        partial
            .persist_noclobber(to)
            .with_context(|| format!("cannot create {}", to.display()))?;
        Ok((written, by))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_percent_encoded() {
        assert_eq!(encode("node-a.1_~"), "node-a.1_~");
        assert_eq!(encode("a/b c"), "a%2Fb%20c");
        assert_eq!(encode("gpu-é?&="), "gpu-%C3%A9%3F%26%3D");
    }

    #[test]
    fn answered_by_names_the_replica_and_the_standby_it_came_through() {
        let mut headers = HeaderMap::new();
        assert_eq!(AnsweredBy::of(&headers).describe(), None);
        headers.insert("dra-ledger-replica", "r-1_ab".parse().unwrap());
        assert_eq!(
            AnsweredBy::of(&headers).describe().as_deref(),
            Some("answered by replica r-1_ab")
        );
        headers.insert("dra-ledger-forwarded-by", "r-0_cd".parse().unwrap());
        assert_eq!(
            AnsweredBy::of(&headers).describe().as_deref(),
            Some("answered by replica r-1_ab (forwarded by r-0_cd)")
        );
    }

    #[test]
    fn only_http_servers_are_accepted() {
        assert!(AdminClient::new("http://127.0.0.1:8080/", None).is_ok());
        for bad in ["https://x:1", "127.0.0.1:8080", "nonsense url"] {
            assert!(AdminClient::new(bad, None).is_err(), "{bad}");
        }
    }
}
