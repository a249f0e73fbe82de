//! The agent's sockets answer whatever `:authority` a client sends, as the Go gRPC servers of
//! the kubelet's own plugins do: grpc-core clients (Python, C++) and grpc-java send the socket
//! path there, plain, as a `unix://` URI or percent-encoded, which the HTTP/2 server under
//! tonic alone resets with `PROTOCOL_ERROR`. The client here speaks HTTP/2 frame by frame, so
//! that it can send an authority no Rust HTTP client would.

use std::path::Path;
use std::time::Duration;

use loona_hpack::{Decoder, Encoder};
use prost::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

use crate::support::{Agent, DRIVER};
use dra_types::kubelet::pluginregistration::{InfoRequest, PluginInfo};
use dra_types::kubelet::v1alpha3::{NodePrepareResourcesRequest, NodePrepareResourcesResponse};

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const GOAWAY: u8 = 0x7;
const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;

/// What the server answered to one call.
#[derive(Debug, Default)]
struct Answer {
    /// The header fields of every header block, in order (response headers, trailers).
    headers: Vec<(String, String)>,
    /// The DATA payload.
    data: Vec<u8>,
    /// The error code of a `RST_STREAM` or `GOAWAY`, if one came.
    reset: Option<u32>,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The one gRPC message of the answer, without its 5-byte prefix.
    fn message(&self) -> &[u8] {
        assert!(self.data.len() >= 5, "{self:?}");
        &self.data[5..]
    }
}

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).unwrap().to_be_bytes();
    let mut out = len[1..].to_vec();
    out.extend([kind, flags]);
    out.extend(stream.to_be_bytes());
    out.extend(payload);
    out
}

/// One unary gRPC call of `method` with `message` on a new connection to `socket`, sending
/// `authority` as `:authority`.
async fn call(socket: &Path, authority: &str, method: &str, message: &[u8]) -> Answer {
    let mut stream = UnixStream::connect(socket).await.unwrap();
    let fields = [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", method),
        (":authority", authority),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    ];
    let block = Encoder::new().encode(fields.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())));
    let mut grpc = vec![0];
    grpc.extend(u32::try_from(message.len()).unwrap().to_be_bytes());
    grpc.extend(message);
    let mut request = PREFACE.to_vec();
    request.extend(frame(SETTINGS, 0, 0, &[]));
    request.extend(frame(HEADERS, END_HEADERS, 1, &block));
    request.extend(frame(DATA, END_STREAM, 1, &grpc));
    stream.write_all(&request).await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), read_answer(&mut stream))
        .await
        .expect("the server answers")
}

/// Reads frames until stream 1 ends, is reset or the connection goes away.
async fn read_answer(stream: &mut UnixStream) -> Answer {
    let mut decoder = Decoder::new();
    let mut answer = Answer::default();
    loop {
        let mut header = [0; 9];
        if stream.read_exact(&mut header).await.is_err() {
            return answer;
        }
        let len =
            usize::from(header[0]) << 16 | usize::from(header[1]) << 8 | usize::from(header[2]);
        let (kind, flags) = (header[3], header[4]);
        let mut payload = vec![0; len];
        stream.read_exact(&mut payload).await.unwrap();
        match kind {
            SETTINGS if flags & ACK == 0 => {
                stream
                    .write_all(&frame(SETTINGS, ACK, 0, &[]))
                    .await
                    .unwrap();
            }
            HEADERS => {
                assert!(flags & END_HEADERS != 0, "a small answer fits one frame");
                for (name, value) in decoder.decode(&payload).unwrap() {
                    let text = |b: Vec<u8>| String::from_utf8(b).unwrap();
                    answer.headers.push((text(name), text(value)));
                }
                if flags & END_STREAM != 0 {
                    return answer;
                }
            }
            DATA => answer.data.extend(payload),
            RST_STREAM => {
                answer.reset = Some(u32::from_be_bytes(payload[..4].try_into().unwrap()));
                return answer;
            }
            GOAWAY => {
                answer.reset = Some(u32::from_be_bytes(payload[4..8].try_into().unwrap()));
                return answer;
            }
            _ => {}
        }
    }
}

/// What grpc-core and grpc-java clients send for a socket at `path`, and Go's client.
fn authorities(path: &Path) -> Vec<String> {
    let path = path.to_str().unwrap();
    vec![
        path.to_owned(),
        format!("unix://{path}"),
        path.replace('/', "%2F"),
        "localhost".to_owned(),
    ]
}

#[tokio::test]
async fn the_registration_socket_answers_get_info_whatever_the_authority() {
    let mut agent = Agent::start();
    let socket = agent.sockets.registration().to_owned();
    for authority in authorities(&socket) {
        let request = InfoRequest {}.encode_to_vec();
        let answer = call(
            &socket,
            &authority,
            "/pluginregistration.Registration/GetInfo",
            &request,
        )
        .await;
        assert_eq!(answer.reset, None, "{authority}: {answer:?}");
        assert_eq!(answer.header(":status"), Some("200"), "{authority}");
        assert_eq!(
            answer.header("grpc-status"),
            Some("0"),
            "{authority}: {answer:?}"
        );
        let info = PluginInfo::decode(answer.message()).unwrap();
        assert_eq!(info.name, DRIVER, "{authority}");
    }
    agent.stop().await.unwrap();
}

#[tokio::test]
async fn the_plugin_socket_answers_prepare_whatever_the_authority() {
    let mut agent = Agent::start();
    let socket = agent.sockets.plugin().to_owned();
    for authority in authorities(&socket) {
        let request = NodePrepareResourcesRequest { claims: Vec::new() }.encode_to_vec();
        let answer = call(
            &socket,
            &authority,
            "/v1alpha3.Node/NodePrepareResources",
            &request,
        )
        .await;
        assert_eq!(answer.reset, None, "{authority}: {answer:?}");
        assert_eq!(
            answer.header("grpc-status"),
            Some("0"),
            "{authority}: {answer:?}"
        );
        let prepared = NodePrepareResourcesResponse::decode(answer.message()).unwrap();
        assert!(prepared.claims.is_empty(), "{authority}");
    }
    agent.stop().await.unwrap();
}
