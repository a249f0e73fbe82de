use super::*;

const PREFACE: &[u8; PREFACE_LEN] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const DATA: u8 = 0x0;
const SETTINGS: u8 = 0x4;

/// Header fields: names and values.
type Fields = Vec<(Vec<u8>, Vec<u8>)>;

/// A gRPC request's headers with `authority`.
fn request(authority: &str) -> Fields {
    [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", "/pluginregistration.Registration/GetInfo"),
        (":authority", authority),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    ]
    .iter()
    .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
    .collect()
}

fn encode(encoder: &mut Encoder<'static>, fields: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    encoder.encode(fields.iter().map(|(n, v)| (n.as_slice(), v.as_slice())))
}

/// A frame, as bytes.
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    write_frame(&mut out, kind, flags, stream, payload);
    out
}

/// The frames in `bytes`: type, flags, stream and payload.
fn frames(mut bytes: &[u8]) -> Vec<(u8, u8, u32, Vec<u8>)> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let len = usize::from(bytes[0]) << 16 | usize::from(bytes[1]) << 8 | usize::from(bytes[2]);
        let stream = u32::from_be_bytes([bytes[5], bytes[6], bytes[7], bytes[8]]);
        out.push((bytes[3], bytes[4], stream, bytes[9..9 + len].to_vec()));
        bytes = &bytes[9 + len..];
    }
    out
}

/// What the server decodes from the header blocks of `bytes` (after the preface).
fn server_view(bytes: &[u8]) -> Vec<(u8, Fields)> {
    assert_eq!(&bytes[..PREFACE_LEN], PREFACE);
    let mut decoder = Decoder::new();
    frames(&bytes[PREFACE_LEN..])
        .into_iter()
        .filter(|(kind, ..)| *kind == HEADERS)
        .map(|(_, flags, _, block)| (flags, decoder.decode(&block).expect("the server decodes")))
        .collect()
}

fn rewrite(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    Rewriter::default().feed(input, &mut out);
    out
}

fn authority(fields: &[(Vec<u8>, Vec<u8>)]) -> &[u8] {
    &fields.iter().find(|(n, _)| n == b":authority").unwrap().1
}

#[test]
fn socket_paths_as_authority_reach_the_server_as_localhost_and_other_headers_unchanged() {
    let mut client = Encoder::new();
    let mut input = PREFACE.to_vec();
    input.extend(frame(SETTINGS, 0, 0, &[]));
    let authorities = [
        "/var/lib/kubelet/plugins_registry/gpu.dra-ledger.io.sock",
        "unix:///var/lib/kubelet/plugins/gpu.dra-ledger.io/plugin.sock",
        "%2Fvar%2Flib%2Fkubelet%2Fplugins%2Fdra.sock",
        "localhost",
        "127.0.0.1:8080",
    ];
    for (i, authority) in authorities.iter().enumerate() {
        let block = encode(&mut client, &request(authority));
        input.extend(frame(
            HEADERS,
            END_HEADERS,
            2 * u32::try_from(i).unwrap() + 1,
            &block,
        ));
    }
    let view = server_view(&rewrite(&input));
    let seen: Vec<&[u8]> = view
        .iter()
        .map(|(_, fields)| self::authority(fields))
        .collect();
    assert_eq!(
        seen,
        [
            &b"localhost"[..],
            b"localhost",
            b"localhost",
            b"localhost",
            b"127.0.0.1:8080"
        ]
    );
    for (_, fields) in &view {
        let others: Vec<_> = fields.iter().filter(|(n, _)| n != b":authority").collect();
        let expected = request("x");
        let expected: Vec<_> = expected
            .iter()
            .filter(|(n, _)| n != b":authority")
            .collect();
        assert_eq!(others, expected);
    }
}

#[test]
fn a_padded_block_with_priority_and_continuations_becomes_one_headers_frame_keeping_end_stream() {
    let block = encode(&mut Encoder::new(), &request("/run/x.sock"));
    let (first, rest) = block.split_at(5);
    let (second, third) = rest.split_at(7);
    let mut padded = vec![3];
    padded.extend([0, 0, 0, 0, 16]);
    padded.extend(first);
    padded.extend([0, 0, 0]);
    let mut input = PREFACE.to_vec();
    input.extend(frame(HEADERS, PADDED | PRIORITY | END_STREAM, 1, &padded));
    input.extend(frame(CONTINUATION, 0, 1, second));
    input.extend(frame(CONTINUATION, END_HEADERS, 1, third));
    let out = rewrite(&input);
    let sent = frames(&out[PREFACE_LEN..]);
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].1, END_STREAM | END_HEADERS);
    let view = server_view(&out);
    assert_eq!(authority(&view[0].1), b"localhost");
}

#[test]
fn the_clients_dynamic_table_is_followed_across_requests() {
    // The second request refers to the entries the first one added to the client's table.
    let mut client = Encoder::new();
    let mut input = PREFACE.to_vec();
    for stream in [1, 3, 5] {
        let block = encode(&mut client, &request("/run/dra.sock"));
        input.extend(frame(HEADERS, END_HEADERS, stream, &block));
    }
    let view = server_view(&rewrite(&input));
    assert_eq!(view.len(), 3);
    assert!(view.iter().all(|(_, f)| authority(f) == b"localhost"));
}

#[test]
fn bytes_fed_one_at_a_time_come_out_as_when_fed_at_once() {
    let mut client = Encoder::new();
    let mut input = PREFACE.to_vec();
    input.extend(frame(SETTINGS, 0, 0, &[0, 4, 0, 1, 0, 0]));
    input.extend(frame(
        HEADERS,
        END_HEADERS,
        1,
        &encode(&mut client, &request("/a.sock")),
    ));
    input.extend(frame(DATA, END_STREAM, 1, &[0, 0, 0, 0, 0]));
    let mut rewriter = Rewriter::default();
    let mut out = Vec::new();
    for byte in &input {
        rewriter.feed(std::slice::from_ref(byte), &mut out);
    }
    assert_eq!(out, rewrite(&input));
    // SETTINGS and DATA pass byte for byte.
    let sent = frames(&out[PREFACE_LEN..]);
    assert_eq!(sent[0], (SETTINGS, 0, 0, vec![0, 4, 0, 1, 0, 0]));
    assert_eq!(sent[2], (DATA, END_STREAM, 1, vec![0, 0, 0, 0, 0]));
}

#[test]
fn a_block_that_does_not_decode_and_all_after_it_pass_unchanged() {
    let mut input = PREFACE.to_vec();
    // Index 0x46 (70) does not exist in an empty dynamic table.
    input.extend(frame(HEADERS, END_HEADERS, 1, &[0x80 | 0x46]));
    input.extend(frame(
        HEADERS,
        END_HEADERS,
        3,
        &encode(&mut Encoder::new(), &request("/a.sock")),
    ));
    assert_eq!(rewrite(&input), input);
}

#[test]
fn a_frame_inside_a_header_block_passes_the_block_unchanged() {
    let block = encode(&mut Encoder::new(), &request("/a.sock"));
    let (first, rest) = block.split_at(4);
    let mut input = PREFACE.to_vec();
    input.extend(frame(HEADERS, 0, 1, first));
    input.extend(frame(DATA, 0, 1, b"x"));
    input.extend(frame(CONTINUATION, END_HEADERS, 1, rest));
    assert_eq!(rewrite(&input), input);
}

#[test]
fn a_large_block_is_split_into_frames_the_server_accepts() {
    let mut fields = request("/a.sock");
    fields.push((b"x-big".to_vec(), vec![b'v'; 40_000]));
    let block = encode(&mut Encoder::new(), &fields);
    let mut input = PREFACE.to_vec();
    for (i, chunk) in block.chunks(MAX_FRAME).enumerate() {
        let last = (i + 1) * MAX_FRAME >= block.len();
        let kind = if i == 0 { HEADERS } else { CONTINUATION };
        input.extend(frame(kind, if last { END_HEADERS } else { 0 }, 1, chunk));
    }
    let out = rewrite(&input);
    let sent = frames(&out[PREFACE_LEN..]);
    assert!(sent.len() >= 3, "{}", sent.len());
    assert!(sent
        .iter()
        .all(|(_, _, _, payload)| payload.len() <= MAX_FRAME));
    let block: Vec<u8> = sent.iter().flat_map(|(.., p)| p.clone()).collect();
    let fields = Decoder::new().decode(&block).unwrap();
    assert_eq!(authority(&fields), b"localhost");
    assert_eq!(fields.last().unwrap().1.len(), 40_000);
}
