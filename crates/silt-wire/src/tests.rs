#![expect(clippy::cast_possible_truncation, reason = "test sizes are small")]

use bson::{doc, Document};
use proptest::prelude::*;

use super::*;

/// Parses a complete message the way a server would: header, then body.
fn parse_full(message: &[u8]) -> Result<(Request, Option<Compressor>), WireError> {
    let header = MsgHeader::parse(&message[..HEADER_LEN.min(message.len())])?;
    let body = message
        .get(HEADER_LEN..header.message_length as usize)
        .ok_or(WireError::Truncated("test body"))?;
    parse_message_with_compressor(&header, body)
}

fn parse_msg(message: &[u8]) -> Result<OpMsg, WireError> {
    match parse_full(message)? {
        (Request::Msg(msg), None) => Ok(msg),
        other => panic!("expected an uncompressed OP_MSG, got {other:?}"),
    }
}

fn doc_bytes(doc: &Document) -> Vec<u8> {
    bson::to_vec(doc).unwrap()
}

/// Builds a message from a raw body, fixing up the header.
fn raw_message(op_code: i32, body: &[u8]) -> Vec<u8> {
    let mut out = MsgHeader {
        message_length: (HEADER_LEN + body.len()) as i32,
        request_id: 7,
        response_to: 0,
        op_code,
    }
    .to_bytes()
    .to_vec();
    out.extend_from_slice(body);
    out
}

fn sample_msg() -> OpMsg {
    OpMsg {
        flags: 0,
        body: doc! { "insert": "coll", "$db": "test", "ordered": true },
        sequences: vec![(
            "documents".to_owned(),
            vec![
                doc! { "_id": 1, "a": "x" },
                doc! { "_id": 2, "b": [1, 2, 3] },
            ],
        )],
        repeated: Vec::new(),
    }
}

/// Nests `depth` documents: {a: {a: ... {}}}.
fn nested_bytes(depth: usize) -> Vec<u8> {
    // Build inside out: innermost is the empty document.
    let mut bytes = vec![5, 0, 0, 0, 0];
    for _ in 1..depth {
        let len = (bytes.len() + 4 + 1 + 2 + 1) as i32;
        let mut outer = len.to_le_bytes().to_vec();
        outer.extend_from_slice(&[0x03, b'a', 0]);
        outer.extend_from_slice(&bytes);
        outer.push(0);
        bytes = outer;
    }
    bytes
}

#[test]
fn header_round_trip_and_limits() {
    let header = MsgHeader {
        message_length: 100,
        request_id: 42,
        response_to: -3,
        op_code: OP_MSG,
    };
    let mut out = Vec::new();
    header.write(&mut out);
    assert_eq!(out.len(), HEADER_LEN);
    assert_eq!(MsgHeader::parse(&out).unwrap(), header);
    assert_eq!(header.body_len(), 84);

    for bad in [15, 0, -1, i32::MIN, MAX_MESSAGE_BYTES as i32 + 1, i32::MAX] {
        let bytes = MsgHeader {
            message_length: bad,
            ..header
        }
        .to_bytes();
        let err = MsgHeader::parse(&bytes).unwrap_err();
        assert_eq!(err, WireError::BadLength(bad.into()));
        assert!(err.closes_connection());
    }
    let max = MsgHeader {
        message_length: MAX_MESSAGE_BYTES as i32,
        ..header
    };
    assert_eq!(MsgHeader::parse(&max.to_bytes()).unwrap(), max);
    assert!(matches!(
        MsgHeader::parse(&out[..15]),
        Err(WireError::Truncated(_))
    ));
}

#[test]
fn body_length_must_match_header() {
    let message = op_msg_reply(&doc! { "ok": 1 }, 1, 2).unwrap();
    let (header, body) = split_message(&message).unwrap();
    assert!(matches!(
        parse_message(&header, &body[1..]),
        Err(WireError::BadLength(_))
    ));
    assert!(matches!(
        split_message(&message[..message.len() - 1]),
        Err(WireError::BadLength(_))
    ));
}

#[test]
fn op_msg_body_round_trip() {
    let body = doc! { "hello": 1, "$db": "admin", "nested": { "x": [1.5, "s", null] } };
    let message = op_msg_reply(&body, 11, 22).unwrap();
    let (header, _) = split_message(&message).unwrap();
    assert_eq!(
        header,
        MsgHeader {
            message_length: message.len() as i32,
            request_id: 11,
            response_to: 22,
            op_code: OP_MSG,
        }
    );
    let msg = parse_msg(&message).unwrap();
    assert_eq!(msg, OpMsg::new(body.clone()));
    assert!(!msg.more_to_come() && !msg.checksum_present() && !msg.exhaust_allowed());
    assert_eq!(OpMsg::new(body).to_message(11, 22).unwrap(), message);
}

#[test]
fn op_msg_sequences_round_trip_and_into_command() {
    let mut msg = sample_msg();
    msg.sequences.push(("empty".to_owned(), Vec::new()));
    let message = msg.to_message(5, 0).unwrap();
    let parsed = parse_msg(&message).unwrap();
    assert_eq!(parsed, msg);
    let command = parsed.into_command();
    assert_eq!(
        command,
        doc! {
            "insert": "coll", "$db": "test", "ordered": true,
            "documents": [{ "_id": 1, "a": "x" }, { "_id": 2, "b": [1, 2, 3] }],
            "empty": [],
        }
    );
}

#[test]
fn op_msg_sections_in_any_order() {
    // Sequence first, then body: still valid.
    let mut body = 0u32.to_le_bytes().to_vec();
    let docs = doc_bytes(&doc! { "q": {}, "limit": 0 });
    body.push(1);
    body.extend_from_slice(&((4 + 8 + docs.len()) as i32).to_le_bytes());
    body.extend_from_slice(b"deletes\0");
    body.extend_from_slice(&docs);
    body.push(0);
    body.extend_from_slice(&doc_bytes(&doc! { "delete": "c", "$db": "d" }));
    let msg = parse_msg(&raw_message(OP_MSG, &body)).unwrap();
    assert_eq!(
        msg.into_command(),
        doc! { "delete": "c", "$db": "d", "deletes": [{ "q": {}, "limit": 0 }] }
    );
}

#[test]
fn op_msg_checksum() {
    let mut msg = sample_msg();
    msg.flags = OpMsg::CHECKSUM_PRESENT;
    let message = msg.to_message(9, 0).unwrap();
    let crc = u32::from_le_bytes(message[message.len() - 4..].try_into().unwrap());
    assert_eq!(crc, crc32c::crc32c(&message[..message.len() - 4]));
    let parsed = parse_msg(&message).unwrap();
    assert!(parsed.checksum_present());
    assert_eq!(parsed, msg);

    // A flipped bit anywhere (header, body or checksum) is detected.
    for at in [4, 8, 20, message.len() - 10, message.len() - 1] {
        let mut bad = message.clone();
        bad[at] ^= 0x10;
        let err = parse_msg(&bad).unwrap_err();
        assert!(
            matches!(err, WireError::ChecksumMismatch { .. }),
            "{at}: {err}"
        );
        assert_eq!(err.code(), (288, "ChecksumMismatch"));
        assert!(err.closes_connection());
    }

    // Flag set but no room for a checksum.
    let body = OpMsg::CHECKSUM_PRESENT.to_le_bytes();
    assert!(matches!(
        parse_msg(&raw_message(OP_MSG, &body)),
        Err(WireError::Truncated(_))
    ));
}

#[test]
fn op_msg_flags() {
    let mut msg = OpMsg::new(doc! { "insert": "c", "$db": "d" });
    msg.flags = OpMsg::MORE_TO_COME | OpMsg::EXHAUST_ALLOWED | (1 << 30);
    let parsed = parse_msg(&msg.to_message(1, 0).unwrap()).unwrap();
    assert!(parsed.more_to_come());
    assert!(parsed.exhaust_allowed());
    assert!(!parsed.checksum_present());

    for bit in 2..16 {
        msg.flags = 1 << bit;
        let err = parse_msg(&msg.to_message(1, 0).unwrap()).unwrap_err();
        assert_eq!(err, WireError::IllegalFlags(1 << bit));
        assert_eq!(err.code(), (223, "IllegalOpMsgFlag"));
    }
}

#[test]
fn op_msg_structure_errors() {
    let flags = 0u32.to_le_bytes();
    let body = doc_bytes(&doc! { "ping": 1 });
    let seq = |id: &[u8]| {
        let mut s = vec![1];
        s.extend_from_slice(&((4 + id.len() + 1) as i32).to_le_bytes());
        s.extend_from_slice(id);
        s.push(0);
        s
    };
    let cases: Vec<Vec<Vec<u8>>> = vec![
        vec![flags.to_vec()],                                               // no body
        vec![flags.to_vec(), seq(b"documents")],                            // still no body
        vec![flags.to_vec(), vec![0], body.clone(), vec![0], body.clone()], // two bodies
        vec![flags.to_vec(), vec![0], body.clone(), vec![2], body.clone()], // unknown kind
        vec![flags.to_vec(), vec![0], body.clone(), seq(b"a"), seq(b"a")],  // duplicate sequence
        vec![flags.to_vec(), vec![0], body.clone(), seq(b"ping")],          // collides with body
        vec![flags.to_vec(), vec![0], body.clone(), vec![1, 3, 0, 0, 0]],   // sequence size < 4
    ];
    for (i, parts) in cases.into_iter().enumerate() {
        let err = parse_msg(&raw_message(OP_MSG, &parts.concat())).unwrap_err();
        assert!(matches!(err, WireError::Malformed(_)), "case {i}: {err}");
        assert_eq!(err.code(), (9, "FailedToParse"));
    }
    // Sequence whose size runs past the message, and one missing its identifier's NUL.
    for tail in [
        vec![1, 100, 0, 0, 0, b'a', 0],
        vec![1, 6, 0, 0, 0, b'a', b'b'],
    ] {
        let bytes = [flags.to_vec(), vec![0], body.clone(), tail].concat();
        assert!(matches!(
            parse_msg(&raw_message(OP_MSG, &bytes)),
            Err(WireError::Truncated(_))
        ));
    }
}

#[test]
fn strict_bson_lengths() {
    let good = doc_bytes(&doc! { "ping": 1 });
    let with = |doc: &[u8]| raw_message(OP_MSG, &[&[0, 0, 0, 0, 0][..], doc].concat());

    // Declared longer than the bytes left.
    let mut long = good.clone();
    long[0] += 1;
    assert!(matches!(
        parse_msg(&with(&long)),
        Err(WireError::InvalidBson(_))
    ));
    // Declared shorter than the document: the terminator is not where it says.
    let mut short = good.clone();
    short[0] -= 1;
    let err = parse_msg(&with(&short)).unwrap_err();
    assert!(matches!(err, WireError::InvalidBson(_)), "{err}");
    assert_eq!(err.code(), (22, "InvalidBSON"));
    // Too small to be a document, and negative.
    for len in [4i32, 0, -5] {
        let mut bytes = good.clone();
        bytes[..4].copy_from_slice(&len.to_le_bytes());
        assert!(matches!(
            parse_msg(&with(&bytes)),
            Err(WireError::InvalidBson(_))
        ));
    }
    // Above 16 MiB + 16 KiB: too large, checked before anything else.
    let mut huge = good.clone();
    huge[..4].copy_from_slice(&((MAX_BSON_INTERNAL_BYTES + 1) as i32).to_le_bytes());
    let err = parse_msg(&with(&huge)).unwrap_err();
    assert!(matches!(err, WireError::TooLarge { .. }), "{err}");
    assert_eq!(err.code(), (10334, "BSONObjectTooLarge"));
    // Invalid UTF-8 in a string value.
    let mut utf8 = doc_bytes(&doc! { "s": "ab" });
    let at = utf8.len() - 3;
    utf8[at] = 0xFF;
    assert!(matches!(
        parse_msg(&with(&utf8)),
        Err(WireError::InvalidBson(_))
    ));
    // Unknown element type.
    let mut kind = good.clone();
    kind[4] = 0x42;
    assert!(matches!(
        parse_msg(&with(&kind)),
        Err(WireError::InvalidBson(_))
    ));
}

#[test]
fn bson_nesting_depth() {
    let with = |doc: &[u8]| raw_message(OP_MSG, &[&[0, 0, 0, 0, 0][..], doc].concat());
    let ok = parse_msg(&with(&nested_bytes(MAX_BSON_DEPTH))).unwrap();
    assert_eq!(ok.body.len(), 1);
    for depth in [MAX_BSON_DEPTH + 1, 100_000] {
        let err = parse_msg(&with(&nested_bytes(depth))).unwrap_err();
        assert!(matches!(err, WireError::InvalidBson(_)), "{err}");
    }
    // Deep nesting hidden in an array inside a document sequence.
    let mut deep_array = nested_bytes(MAX_BSON_DEPTH + 5);
    deep_array[4] = 0x04;
    let mut seq = vec![1];
    seq.extend_from_slice(&((4 + 2 + deep_array.len()) as i32).to_le_bytes());
    seq.extend_from_slice(b"d\0");
    seq.extend_from_slice(&deep_array);
    let body = [
        &0u32.to_le_bytes()[..],
        &[0],
        &doc_bytes(&doc! { "x": 1 }),
        &seq,
    ]
    .concat();
    assert!(matches!(
        parse_msg(&raw_message(OP_MSG, &body)),
        Err(WireError::InvalidBson(_))
    ));
}

#[test]
fn op_query_parse() {
    let hello = doc! { "isMaster": 1, "client": { "driver": { "name": "x" } } };
    let fields = doc! { "a": 1 };
    let mut body = 4i32.to_le_bytes().to_vec(); // slaveOk
    body.extend_from_slice(b"admin.$cmd\0");
    body.extend_from_slice(&0i32.to_le_bytes());
    body.extend_from_slice(&(-1i32).to_le_bytes());
    body.extend_from_slice(&doc_bytes(&hello));
    let message = raw_message(OP_QUERY, &body);
    let expected = OpQuery {
        flags: 4,
        full_collection_name: "admin.$cmd".into(),
        number_to_skip: 0,
        number_to_return: -1,
        query: hello.clone(),
        return_fields_selector: None,
    };
    let (request, compressor) = parse_full(&message).unwrap();
    assert_eq!(request, Request::Query(expected.clone()));
    assert_eq!(compressor, None);
    assert_eq!(expected.command_database(), Some("admin"));
    assert_eq!(expected.to_message(7, 0).unwrap(), message);

    // With a returnFieldsSelector.
    body.extend_from_slice(&doc_bytes(&fields));
    let Request::Query(q) = parse_full(&raw_message(OP_QUERY, &body)).unwrap().0 else {
        panic!("not a query")
    };
    assert_eq!(q.return_fields_selector, Some(fields));

    // Trailing garbage after the selector.
    body.push(0);
    assert!(matches!(
        parse_full(&raw_message(OP_QUERY, &body)),
        Err(WireError::Malformed(_))
    ));
    let not_cmd = OpQuery {
        full_collection_name: "db.coll".into(),
        ..expected
    };
    assert_eq!(not_cmd.command_database(), None);
}

#[test]
fn op_reply_build() {
    let reply = OpReply {
        response_flags: OpReply::AWAIT_CAPABLE,
        cursor_id: 0x0102_0304_0506_0708,
        starting_from: 3,
        documents: vec![doc! { "ismaster": true, "ok": 1.0 }, doc! { "b": 2 }],
    };
    let message = reply.to_message(100, 7).unwrap();
    let (header, body) = split_message(&message).unwrap();
    assert_eq!((header.request_id, header.response_to), (100, 7));
    assert_eq!(header.op_code, OP_REPLY);
    assert_eq!(&body[..4], &8i32.to_le_bytes());
    assert_eq!(&body[4..12], &0x0102_0304_0506_0708i64.to_le_bytes());
    assert_eq!(&body[12..16], &3i32.to_le_bytes());
    assert_eq!(&body[16..20], &2i32.to_le_bytes());
    assert_eq!(OpReply::parse(body).unwrap(), reply);
    let single = OpReply::single(doc! { "ok": 1 });
    assert_eq!(single.documents.len(), 1);
    assert_eq!(single.cursor_id, 0);

    // numberReturned disagreeing with the documents present.
    let mut bad = body.to_vec();
    bad[16] = 3;
    assert!(OpReply::parse(&bad).is_err());
    bad[16] = 1;
    assert!(matches!(OpReply::parse(&bad), Err(WireError::Malformed(_))));
}

#[test]
fn op_compressed_round_trip() {
    let msg = sample_msg();
    let mut checksummed = sample_msg();
    checksummed.flags = OpMsg::CHECKSUM_PRESENT;
    for compressor in [Compressor::Snappy, Compressor::Zstd, Compressor::Noop] {
        for msg in [&msg, &checksummed] {
            let plain = msg.to_message(77, 0).unwrap();
            let compressed = compress_message(&plain, compressor).unwrap();
            let (header, body) = split_message(&compressed).unwrap();
            assert_eq!(header.op_code, OP_COMPRESSED);
            assert_eq!((header.request_id, header.response_to), (77, 0));
            assert_eq!(&body[..4], &OP_MSG.to_le_bytes());
            assert_eq!(
                &body[4..8],
                &((plain.len() - HEADER_LEN) as i32).to_le_bytes()
            );
            assert_eq!(body[8], compressor.id());
            let (request, used) = parse_message_with_compressor(&header, body).unwrap();
            assert_eq!(used, Some(compressor));
            assert_eq!(request, Request::Msg(msg.clone()));
            assert_eq!(parse_message(&header, body).unwrap(), request);
        }
    }
    // Compressing a reply to a query works the same way.
    let reply = OpReply::single(doc! { "ok": 1 }).to_message(1, 2).unwrap();
    let compressed = compress_message(&reply, Compressor::Zstd).unwrap();
    assert_eq!(
        parse_full(&compressed).unwrap(),
        (
            Request::Legacy { op_code: OP_REPLY },
            Some(Compressor::Zstd)
        )
    );
    // Compression of large bodies actually shrinks them.
    let big = OpMsg::new(doc! { "s": "a".repeat(100_000) })
        .to_message(1, 0)
        .unwrap();
    for c in Compressor::SUPPORTED {
        assert!(compress_message(&big, c).unwrap().len() < 10_000, "{c:?}");
    }
}

#[test]
fn op_compressed_errors() {
    let plain = sample_msg().to_message(1, 0).unwrap();
    let inner = &plain[HEADER_LEN..];
    let envelope = |op: i32, size: i32, id: u8, data: &[u8]| {
        let body = [&op.to_le_bytes()[..], &size.to_le_bytes(), &[id], data].concat();
        raw_message(OP_COMPRESSED, &body)
    };
    let n = inner.len() as i32;

    // zlib round-trips like the others.
    let z = Compressor::Zlib.compress(inner).unwrap();
    assert!(parse_full(&envelope(OP_MSG, n, 2, &z)).is_ok());
    assert!(Compressor::Zlib.is_supported());
    assert_eq!(
        parse_full(&envelope(OP_MSG, n, 9, inner)).unwrap_err(),
        WireError::UnsupportedCompressor(9)
    );
    // uncompressedSize above the limit is refused before decompressing.
    let too_big = parse_full(&envelope(OP_MSG, i32::MAX, 1, inner)).unwrap_err();
    assert!(matches!(too_big, WireError::TooLarge { .. }), "{too_big}");
    assert!(matches!(
        parse_full(&envelope(OP_MSG, -1, 0, inner)),
        Err(WireError::Malformed(_))
    ));
    // Sizes that disagree with the data, for each compressor.
    for c in Compressor::SUPPORTED.into_iter().chain([Compressor::Noop]) {
        let data = c.compress(inner).unwrap();
        for size in [n - 1, n + 1] {
            let err = parse_full(&envelope(OP_MSG, size, c.id(), &data)).unwrap_err();
            assert!(
                matches!(err, WireError::Compression(_)),
                "{c:?} {size}: {err}"
            );
        }
        // Corrupt compressed data.
        let junk = vec![0xAB; 40];
        assert!(parse_full(&envelope(OP_MSG, n, c.id(), &junk)).is_err());
    }
    // Compressed inside compressed.
    let nested = compress_message(&plain, Compressor::Noop).unwrap();
    let twice = envelope(
        OP_COMPRESSED,
        (nested.len() - HEADER_LEN) as i32,
        0,
        &nested[HEADER_LEN..],
    );
    assert!(matches!(parse_full(&twice), Err(WireError::Malformed(_))));
    assert!(matches!(
        compress_message(&nested, Compressor::Snappy),
        Err(WireError::Malformed(_))
    ));
    // Truncated envelope.
    assert!(matches!(
        parse_full(&raw_message(OP_COMPRESSED, &[0xdd, 7, 0, 0, 1])),
        Err(WireError::Truncated(_))
    ));
}

#[test]
fn compressor_names_and_ids() {
    for c in [
        Compressor::Noop,
        Compressor::Snappy,
        Compressor::Zlib,
        Compressor::Zstd,
    ] {
        assert_eq!(Compressor::from_id(c.id()), Ok(c));
        assert_eq!(Compressor::from_name(c.name()), Some(c));
    }
    assert_eq!(Compressor::from_name("lz4"), None);
}

#[test]
fn opcodes() {
    for op in [
        OP_INSERT,
        OP_UPDATE,
        OP_DELETE,
        OP_GET_MORE,
        OP_KILL_CURSORS,
        OP_REPLY,
    ] {
        assert_eq!(
            parse_full(&raw_message(op, &[1, 2, 3])).unwrap().0,
            Request::Legacy { op_code: op }
        );
    }
    for op in [0, 2003, 2010, 2014, -1] {
        let err = parse_full(&raw_message(op, &[])).unwrap_err();
        assert_eq!(err, WireError::UnknownOpcode(op));
        assert_eq!(err.code(), (17, "ProtocolError"));
    }
}

#[test]
fn serialization_limits() {
    let big = doc! { "s": "x".repeat(MAX_BSON_INTERNAL_BYTES) };
    let err = op_msg_reply(&big, 1, 2).unwrap_err();
    assert!(
        matches!(
            err,
            WireError::TooLarge {
                what: "document",
                ..
            }
        ),
        "{err}"
    );
    let mut msg = OpMsg::new(doc! {});
    msg.sequences.push(("a\0b".into(), vec![]));
    assert!(matches!(msg.to_message(1, 0), Err(WireError::Malformed(_))));
    // Many documents below the per-document limit still cannot exceed the message limit.
    let chunk = doc! { "s": "x".repeat(MAX_BSON_OBJECT_BYTES - 100) };
    let reply = OpReply {
        documents: vec![chunk; 3],
        ..OpReply::default()
    };
    assert!(matches!(
        reply.to_message(1, 2),
        Err(WireError::TooLarge {
            what: "message",
            ..
        })
    ));
}

/// Every prefix and many single-byte mutations of valid messages must fail
/// (or parse) without panicking.
#[test]
fn truncations_and_mutations_never_panic() {
    let mut checksummed = sample_msg();
    checksummed.flags = OpMsg::CHECKSUM_PRESENT;
    let plain = sample_msg().to_message(1, 0).unwrap();
    let samples = vec![
        plain.clone(),
        checksummed.to_message(1, 0).unwrap(),
        compress_message(&plain, Compressor::Snappy).unwrap(),
        compress_message(&plain, Compressor::Zstd).unwrap(),
        OpQuery {
            flags: 0,
            full_collection_name: "admin.$cmd".into(),
            number_to_skip: 0,
            number_to_return: -1,
            query: doc! { "hello": 1, "a": { "b": [1, { "c": 2.5 }] } },
            return_fields_selector: Some(doc! { "x": 1 }),
        }
        .to_message(1, 0)
        .unwrap(),
    ];
    for message in &samples {
        let (header, body) = split_message(message).unwrap();
        let full = parse_message(&header, body).unwrap();
        for cut in 0..body.len() {
            let short = MsgHeader {
                message_length: (HEADER_LEN + cut) as i32,
                ..header
            };
            // Cutting at a section boundary (or before OP_QUERY's optional
            // selector) leaves a valid message, but never the original one.
            let result = parse_message(&short, &body[..cut]);
            assert!(result.as_ref() != Ok(&full), "cut {cut}: {result:?}");
        }
        for at in 0..body.len() {
            for value in [0x00, 0x01, 0x7F, 0x80, 0xFF] {
                let mut mutated = body.to_vec();
                mutated[at] = value;
                let _ = parse_message(&header, &mutated);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn random_bytes_never_panic(
        op in prop::sample::select(vec![OP_MSG, OP_QUERY, OP_COMPRESSED, OP_REPLY, 99]),
        body in prop::collection::vec(any::<u8>(), 0..256),
    ) {
        let _ = parse_full(&raw_message(op, &body));
    }

    #[test]
    fn random_headers_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        if let Ok(header) = MsgHeader::parse(&bytes) {
            let body = bytes.get(HEADER_LEN..).unwrap_or(&[]);
            let _ = parse_message(&header, body);
        }
    }

    #[test]
    fn mutated_messages_never_panic(
        compressor in prop::sample::select(vec![None, Some(Compressor::Snappy), Some(Compressor::Zstd)]),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
    ) {
        let mut message = sample_msg().to_message(3, 0).unwrap();
        if let Some(c) = compressor {
            message = compress_message(&message, c).unwrap();
        }
        let body = &mut message[HEADER_LEN..];
        for (at, value) in edits {
            body[at.index(body.len())] = value;
        }
        let mut body = body.to_vec();
        if truncate {
            body.truncate(cut.index(body.len()));
        }
        let header = MsgHeader {
            message_length: (HEADER_LEN + body.len()) as i32,
            request_id: 3,
            response_to: 0,
            op_code: if compressor.is_some() { OP_COMPRESSED } else { OP_MSG },
        };
        let _ = parse_message(&header, &body);
    }

    #[test]
    fn op_msg_round_trips(
        flags in prop::sample::select(vec![0, OpMsg::CHECKSUM_PRESENT, OpMsg::MORE_TO_COME, OpMsg::EXHAUST_ALLOWED]),
        values in prop::collection::vec(any::<i64>(), 0..20),
        name in "[a-z]{1,8}",
        s in ".{0,40}",
    ) {
        let msg = OpMsg {
            flags,
            body: doc! { "cmd": &s, "$db": "db" },
            sequences: vec![(
                format!("seq_{name}"),
                values.iter().map(|v| doc! { "v": *v, "s": &s }).collect(),
            )],
            repeated: Vec::new(),
        };
        let message = msg.to_message(1, 0).unwrap();
        prop_assert_eq!(parse_msg(&message).unwrap(), msg);
    }
}

/// A document using every BSON type the `bson` crate can build.
fn every_type() -> Document {
    use bson::spec::BinarySubtype;
    use bson::{Binary, Decimal128, JavaScriptCodeWithScope, Regex, Timestamp};
    doc! {
        "double": 1.5,
        "string": "héllo",
        "doc": { "a": 1, "b": { "c": [] } },
        "array": [1, "two", { "three": 3 }, [4]],
        "binary": Binary { subtype: BinarySubtype::Generic, bytes: vec![1, 2, 3] },
        "old_binary": Binary { subtype: BinarySubtype::BinaryOld, bytes: vec![9, 8] },
        "undefined": Bson::Undefined,
        "oid": bson::oid::ObjectId::from_bytes([7; 12]),
        "bool": true,
        "date": bson::DateTime::from_millis(1_700_000_000_000),
        "null": Bson::Null,
        "regex": Regex { pattern: "^a.*".into(), options: "i".into() },
        "code": Bson::JavaScriptCode("f()".into()),
        "symbol": Bson::Symbol("sym".into()),
        "scope": JavaScriptCodeWithScope { code: "g(x)".into(), scope: doc! { "x": { "y": 1 } } },
        "int32": 42i32,
        "ts": Timestamp { time: 5, increment: 6 },
        "int64": 1i64 << 40,
        "dec": Decimal128::from_bytes([3; 16]),
        "min": Bson::MinKey,
        "max": Bson::MaxKey,
    }
}

#[test]
fn decoder_round_trips_every_type() {
    let doc = every_type();
    let bytes = doc_bytes(&doc);
    assert_eq!(reader::decode_document(&bytes, 0).unwrap(), doc);
    // Code-with-scope nesting counts towards the depth limit.
    // (Built by hand: serializing it with `bson` would overflow the stack.)
    let nest = |levels: usize| {
        let mut scope = doc_bytes(&doc! { "leaf": 1 });
        for _ in 0..levels {
            let total = (4 + 4 + 2 + scope.len()) as i32;
            let mut element = vec![0x0F, b's', 0];
            element.extend_from_slice(&total.to_le_bytes());
            element.extend_from_slice(&2i32.to_le_bytes());
            element.extend_from_slice(b"c\0");
            element.extend_from_slice(&scope);
            scope = ((4 + element.len() + 1) as i32).to_le_bytes().to_vec();
            scope.extend_from_slice(&element);
            scope.push(0);
        }
        scope
    };
    assert!(reader::decode_document(&nest(MAX_BSON_DEPTH - 1), 0).is_ok());
    for levels in [MAX_BSON_DEPTH, 50_000] {
        let err = reader::decode_document(&nest(levels), 0).unwrap_err();
        assert!(matches!(err, WireError::InvalidBson(_)), "{err}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    /// The iterative decoder accepts exactly what `Document::from_reader`
    /// accepts (on shallow input, where the latter is safe) and decodes it
    /// the same way.
    #[test]
    fn decoder_agrees_with_from_reader(
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ) {
        let mut bytes = doc_bytes(&every_type());
        for (at, value) in edits {
            let at = 4 + at.index(bytes.len() - 4); // keep the outer length exact
            bytes[at] = value;
        }
        let ours = reader::decode_document(&bytes, 0);
        let theirs = Document::from_reader(&bytes[..]);
        match (&ours, &theirs) {
            // Compared as bytes: a mutated double may be NaN, which is not equal to itself.
            (Ok(a), Ok(b)) => {
                let (mut x, mut y) = (Vec::new(), Vec::new());
                a.to_writer(&mut x).unwrap();
                b.to_writer(&mut y).unwrap();
                prop_assert_eq!(x, y);
            }
            (Err(_), Err(_)) => {}
            _ => prop_assert!(false, "decoder {:?} vs from_reader {:?} on {:?}", ours, theirs, bytes),
        }
    }
}

/// A document with `key` twice, the raw way (a `bson::Document` cannot hold it).
fn twice(key: &str, a: i32, b: i32) -> Vec<u8> {
    let mut body = Vec::new();
    for v in [a, b] {
        body.push(0x10);
        body.extend_from_slice(key.as_bytes());
        body.push(0);
        body.extend_from_slice(&v.to_le_bytes());
    }
    let mut out = (i32::try_from(body.len()).unwrap() + 5)
        .to_le_bytes()
        .to_vec();
    out.extend_from_slice(&body);
    out.push(0);
    out
}

#[test]
fn repeated_keys_are_noted_with_their_path_and_bytes() {
    // {insert: "c", $db: "d"} with the sequence documents: [{_id: 1, _id: 2}], and a body
    // field {f: {x: [{}, {v: 3, v: 4}]}}.
    let inner = twice("v", 3, 4);
    let mut arr = bson::to_vec(&doc! { "0": {} }).unwrap();
    arr.pop();
    arr.push(0x03);
    arr.extend_from_slice(b"1\0");
    arr.extend_from_slice(&inner);
    arr.push(0);
    let len = i32::try_from(arr.len()).unwrap().to_le_bytes();
    arr[..4].copy_from_slice(&len);
    let mut x = bson::to_vec(&doc! {}).unwrap();
    x.pop();
    x.push(0x04);
    x.extend_from_slice(b"x\0");
    x.extend_from_slice(&arr);
    x.push(0);
    let len = i32::try_from(x.len()).unwrap().to_le_bytes();
    x[..4].copy_from_slice(&len);
    let mut body = bson::to_vec(&doc! { "insert": "c", "$db": "d" }).unwrap();
    body.pop();
    body.push(0x03);
    body.extend_from_slice(b"f\0");
    body.extend_from_slice(&x);
    body.push(0);
    let len = i32::try_from(body.len()).unwrap().to_le_bytes();
    body[..4].copy_from_slice(&len);

    let doc = twice("_id", 1, 2);
    let mut seq = b"documents\0".to_vec();
    seq.extend_from_slice(&doc);
    let mut sections = vec![0u8];
    sections.extend_from_slice(&body);
    sections.push(1);
    sections.extend_from_slice(&(i32::try_from(seq.len()).unwrap() + 4).to_le_bytes());
    sections.extend_from_slice(&seq);
    let msg = parse_msg(&raw_message(
        OP_MSG,
        &[&0u32.to_le_bytes()[..], &sections].concat(),
    ))
    .unwrap();
    assert_eq!(msg.repeated.len(), 2);
    let body_repeat = &msg.repeated[0];
    assert_eq!(body_repeat.path, ["f", "x", "1"]);
    assert_eq!(body_repeat.key, "v");
    assert_eq!(body_repeat.raw, inner);
    assert!(body_repeat.is_under(&["f", "x"]) && body_repeat.is_at(&["f", "x", "1"]));
    let seq_repeat = &msg.repeated[1];
    assert_eq!(seq_repeat.path, ["documents", "0"]);
    assert_eq!(seq_repeat.key, "_id");
    assert_eq!(seq_repeat.raw, doc);
    // The decoded document keeps the last value, as before.
    assert_eq!(
        msg.into_command().get_array("documents").unwrap()[0],
        bson::Bson::Document(doc! { "_id": 2 })
    );
}
