//! The client-to-server half of an HTTP/2 connection, rewritten so that every request's
//! `:authority` is one the HTTP/2 server accepts: an authority that is not a valid URI
//! authority (a socket path, `unix:///...`, a percent-encoded path) becomes `localhost`, what
//! Go's gRPC client sends over a Unix socket. Everything else passes unchanged.
//!
//! Header blocks (HEADERS and its CONTINUATION frames) are decoded with the client's HPACK
//! context and encoded again with one of our own, which the server decodes; padding and the
//! deprecated priority fields are dropped on the way. Other frames pass byte for byte. When a
//! block cannot be decoded (or the connection breaks the framing rules), the rewriter stops
//! rewriting and passes that block and the rest of the connection as they came, so the server
//! answers the error it would have answered anyway.
//!
//! Pure: bytes in, bytes out. No I/O, no async.

use loona_hpack::{Decoder, Encoder};

/// The client connection preface (RFC 9113 section 3.4).
const PREFACE_LEN: usize = 24;
/// The length of a frame header.
const FRAME_HEADER_LEN: usize = 9;
/// The `HEADERS` frame type.
const HEADERS: u8 = 0x1;
/// The `CONTINUATION` frame type.
const CONTINUATION: u8 = 0x9;
/// The `END_STREAM` flag.
const END_STREAM: u8 = 0x1;
/// The `END_HEADERS` flag.
const END_HEADERS: u8 = 0x4;
/// The `PADDED` flag.
const PADDED: u8 = 0x8;
/// The `PRIORITY` flag.
const PRIORITY: u8 = 0x20;
/// The largest frame payload written: the initial `SETTINGS_MAX_FRAME_SIZE` every HTTP/2
/// server accepts.
const MAX_FRAME: usize = 16_384;
/// The most header block bytes held back at once; past it the block passes unchanged.
const MAX_BLOCK: usize = 1 << 20;
/// What replaces an authority the server would refuse.
pub(crate) const LOCALHOST: &[u8] = b"localhost";

/// A header block waiting for its CONTINUATION frames.
struct Pending {
    stream: u32,
    end_stream: bool,
    fragment: Vec<u8>,
    /// The frames as received, passed on if the block cannot be rewritten.
    raw: Vec<u8>,
}

/// Rewrites what a client sends; see the module documentation.
pub(crate) struct Rewriter {
    preface_left: usize,
    /// Bytes of the current non-header frame still to pass unchanged.
    passing: usize,
    /// Received bytes not processed yet (an incomplete frame).
    input: Vec<u8>,
    pending: Option<Pending>,
    /// Set once rewriting gave up: everything passes unchanged.
    verbatim: bool,
    decoder: Decoder<'static>,
    encoder: Encoder<'static>,
}

impl Default for Rewriter {
    fn default() -> Self {
        Self {
            preface_left: PREFACE_LEN,
            passing: 0,
            input: Vec::new(),
            pending: None,
            verbatim: false,
            decoder: Decoder::new(),
            encoder: Encoder::new(),
        }
    }
}

/// Whether the HTTP/2 server takes `value` as an authority.
fn acceptable(value: &[u8]) -> bool {
    http::uri::Authority::try_from(value).is_ok()
}

impl Rewriter {
    /// Processes `bytes` received from the client, appending what the server is to read to
    /// `out`. An incomplete frame is kept until the rest arrives.
    pub(crate) fn feed(&mut self, mut bytes: &[u8], out: &mut Vec<u8>) {
        if self.verbatim {
            out.extend_from_slice(bytes);
            return;
        }
        // The preface and the payload of frames that pass unchanged are not held back.
        while self.input.is_empty() && (self.preface_left > 0 || self.passing > 0) {
            let left = if self.preface_left > 0 {
                &mut self.preface_left
            } else {
                &mut self.passing
            };
            let take = (*left).min(bytes.len());
            if take == 0 {
                return;
            }
            out.extend_from_slice(&bytes[..take]);
            *left -= take;
            bytes = &bytes[take..];
        }
        self.input.extend_from_slice(bytes);
        self.process(out);
    }

    /// Processes the complete frames of `input`.
    fn process(&mut self, out: &mut Vec<u8>) {
        let mut at = 0;
        while !self.verbatim && self.input.len() - at >= FRAME_HEADER_LEN {
            let header = &self.input[at..at + FRAME_HEADER_LEN];
            let len =
                usize::from(header[0]) << 16 | usize::from(header[1]) << 8 | usize::from(header[2]);
            let (kind, flags) = (header[3], header[4]);
            let stream =
                u32::from_be_bytes([header[5], header[6], header[7], header[8]]) & 0x7fff_ffff;
            if kind != HEADERS && kind != CONTINUATION {
                if self.pending.is_some() {
                    // A frame inside a header block: the server's connection error to answer.
                    self.give_up(at, out);
                    return;
                }
                // Passes unchanged; its payload is not held back.
                let available = (self.input.len() - at - FRAME_HEADER_LEN).min(len);
                out.extend_from_slice(&self.input[at..at + FRAME_HEADER_LEN + available]);
                self.passing = len - available;
                at += FRAME_HEADER_LEN + available;
                continue;
            }
            if len > MAX_FRAME {
                self.give_up(at, out);
                return;
            }
            if self.input.len() - at < FRAME_HEADER_LEN + len {
                break;
            }
            let frame = self.input[at..at + FRAME_HEADER_LEN + len].to_vec();
            at += FRAME_HEADER_LEN + len;
            if !self.header_frame(kind, flags, stream, &frame, out) {
                let raw = self.pending.take().map(|p| p.raw).unwrap_or_default();
                out.extend_from_slice(&raw);
                self.verbatim = true;
            }
        }
        let rest = self.input.split_off(at);
        if self.verbatim {
            out.extend_from_slice(&rest);
            self.input.clear();
        } else {
            self.input = rest;
        }
    }

    /// Stops rewriting: the held-back block and the input from `at` pass unchanged.
    fn give_up(&mut self, at: usize, out: &mut Vec<u8>) {
        if let Some(pending) = self.pending.take() {
            out.extend_from_slice(&pending.raw);
        }
        out.extend_from_slice(&self.input[at..]);
        self.input.clear();
        self.verbatim = true;
    }

    /// Handles one HEADERS or CONTINUATION frame; false when the block cannot be rewritten, the
    /// frames received of it (this one included) then in `pending.raw`.
    fn header_frame(
        &mut self,
        kind: u8,
        flags: u8,
        stream: u32,
        frame: &[u8],
        out: &mut Vec<u8>,
    ) -> bool {
        let payload = &frame[FRAME_HEADER_LEN..];
        let open_stream = self.pending.as_ref().map(|p| p.stream);
        let pending = self.pending.get_or_insert_with(|| Pending {
            stream,
            end_stream: flags & END_STREAM != 0,
            fragment: Vec::new(),
            raw: Vec::new(),
        });
        pending.raw.extend_from_slice(frame);
        match (kind, open_stream) {
            (HEADERS, None) => match headers_fragment(flags, payload) {
                Some(fragment) => pending.fragment.extend_from_slice(fragment),
                None => return false,
            },
            (CONTINUATION, Some(open)) if open == stream => {
                pending.fragment.extend_from_slice(payload);
            }
            _ => return false,
        }
        if pending.fragment.len() > MAX_BLOCK {
            return false;
        }
        if flags & END_HEADERS == 0 {
            return true;
        }
        let Some(pending) = self.pending.take() else {
            return false;
        };
        let Ok(fields) = self.decoder.decode(&pending.fragment) else {
            self.pending = Some(pending);
            return false;
        };
        let fields = fields.into_iter().map(|(name, value)| {
            if name == b":authority" && !acceptable(&value) {
                (name, LOCALHOST.to_vec())
            } else {
                (name, value)
            }
        });
        let fields: Vec<(Vec<u8>, Vec<u8>)> = fields.collect();
        let block = self
            .encoder
            .encode(fields.iter().map(|(n, v)| (n.as_slice(), v.as_slice())));
        write_block(out, pending.stream, pending.end_stream, &block);
        true
    }
}

/// The header block fragment of a HEADERS payload, without padding and priority; `None` when
/// the lengths do not fit (a frame the server refuses).
fn headers_fragment(flags: u8, payload: &[u8]) -> Option<&[u8]> {
    let (pad, start) = if flags & PADDED != 0 {
        (usize::from(*payload.first()?), 1)
    } else {
        (0, 0)
    };
    let start = if flags & PRIORITY != 0 {
        start + 5
    } else {
        start
    };
    let end = payload.len().checked_sub(pad)?;
    payload.get(start..end)
}

/// Writes `block` as one HEADERS frame and as many CONTINUATION frames as it needs.
fn write_block(out: &mut Vec<u8>, stream: u32, end_stream: bool, block: &[u8]) {
    let mut chunks = block.chunks(MAX_FRAME);
    let mut first = true;
    // An empty block is still one HEADERS frame.
    let empty: &[u8] = &[];
    let mut next = chunks.next().or(Some(empty));
    while let Some(chunk) = next {
        next = chunks.next();
        let mut flags = if next.is_none() { END_HEADERS } else { 0 };
        if first && end_stream {
            flags |= END_STREAM;
        }
        let kind = if first { HEADERS } else { CONTINUATION };
        write_frame(out, kind, flags, stream, chunk);
        first = false;
    }
}

/// Writes one frame.
pub(crate) fn write_frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    let len = u32::try_from(payload.len())
        .unwrap_or(u32::MAX)
        .to_be_bytes();
    out.extend_from_slice(&len[1..]);
    out.extend_from_slice(&[kind, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
}

#[cfg(test)]
#[path = "rewriter_tests.rs"]
mod tests;
