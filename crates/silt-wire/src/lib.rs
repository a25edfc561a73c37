//! The MongoDB wire protocol, without I/O.
//!
//! **Owns:** message framing (the 16-byte [`MsgHeader`] and the size limits),
//! the opcodes, parsing requests ([`OpMsg`], the legacy [`OpQuery`] handshake,
//! OP_COMPRESSED envelopes) and serializing replies
//! ([`OpMsg`], [`OpReply`]), the OP_MSG CRC-32C checksum, and compression with
//! [`Compressor`]. All input is untrusted: every read is bounds-checked, every
//! BSON document is length-, size- and depth-checked before decoding, and
//! malformed bytes yield a [`WireError`], never a panic.
//!
//! **Must not know:** commands and their semantics (a command is just the
//! [`bson::Document`] from [`OpMsg::into_command`]), storage, and sockets or
//! async runtimes. Everything is a pure function over byte slices, so a
//! server reads [`HEADER_LEN`] bytes, calls [`MsgHeader::parse`] (which rejects
//! bad lengths before anything is allocated), reads the
//! [`MsgHeader::body_len`] remaining bytes and calls
//! [`parse_message_with_compressor`].
//!
//! ```
//! use bson::doc;
//! use silt_wire::{compress_message, op_msg_reply, parse_message_with_compressor};
//! use silt_wire::{MsgHeader, OpMsg, Request, HEADER_LEN};
//!
//! # let bytes = OpMsg::new(doc! { "ping": 1, "$db": "admin" }).to_message(1, 0)?;
//! let header = MsgHeader::parse(&bytes[..HEADER_LEN])?; // the first 16 bytes read
//! let body = &bytes[HEADER_LEN..][..header.body_len()]; // then the rest
//! let (request, compressor) = parse_message_with_compressor(&header, body)?;
//! let Request::Msg(msg) = request else { unreachable!() };
//! assert_eq!(msg.into_command(), doc! { "ping": 1, "$db": "admin" });
//!
//! let mut reply = op_msg_reply(&doc! { "ok": 1.0 }, 2, header.request_id)?;
//! if let Some(compressor) = compressor {
//!     reply = compress_message(&reply, compressor)?;
//! }
//! # Ok::<(), silt_wire::WireError>(())
//! ```

mod compression;
mod error;
mod reader;
mod repeated;

use bson::{Bson, Document};

pub use compression::Compressor;
pub use error::WireError;
use reader::Reader;
pub use repeated::RepeatedKey;

/// Size of the standard message header.
pub const HEADER_LEN: usize = 16;
/// Largest message MongoDB accepts (`maxMessageSizeBytes`).
pub const MAX_MESSAGE_BYTES: usize = 48_000_000;
/// Largest user document (`maxBsonObjectSize`).
pub const MAX_BSON_OBJECT_BYTES: usize = 16 * 1024 * 1024;
/// Largest document accepted on the wire: [`MAX_BSON_OBJECT_BYTES`] plus the
/// 16 KiB of slack MongoDB allows for command overhead.
pub const MAX_BSON_INTERNAL_BYTES: usize = MAX_BSON_OBJECT_BYTES + 16 * 1024;
/// Most write operations in one batch (`maxWriteBatchSize`). Not enforced
/// here: exceeding it is a command-level error for the server to report.
pub const MAX_WRITE_BATCH: usize = 100_000;
/// Deepest nesting of documents and arrays accepted, as MongoDB's default
/// `maxBSONDepth`.
pub const MAX_BSON_DEPTH: usize = 200;

/// Reply to an OP_QUERY (server to client).
pub const OP_REPLY: i32 = 1;
/// Legacy update (removed in MongoDB 6.0).
pub const OP_UPDATE: i32 = 2001;
/// Legacy insert (removed in MongoDB 6.0).
pub const OP_INSERT: i32 = 2002;
/// Legacy query; still used for the initial handshake on `admin.$cmd`.
pub const OP_QUERY: i32 = 2004;
/// Legacy getMore (removed in MongoDB 6.0).
pub const OP_GET_MORE: i32 = 2005;
/// Legacy delete (removed in MongoDB 6.0).
pub const OP_DELETE: i32 = 2006;
/// Legacy killCursors (removed in MongoDB 6.0).
pub const OP_KILL_CURSORS: i32 = 2007;
/// A compressed envelope around another message.
pub const OP_COMPRESSED: i32 = 2012;
/// The extensible message format every modern command uses.
pub const OP_MSG: i32 = 2013;

/// The standard header that starts every message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MsgHeader {
    /// Total message size in bytes, this header included.
    pub message_length: i32,
    /// Identifier the sender chose for this message.
    pub request_id: i32,
    /// The `request_id` this message answers (0 for requests).
    pub response_to: i32,
    /// The message's opcode (`OP_MSG`, ...).
    pub op_code: i32,
}

impl MsgHeader {
    /// Parses the first 16 bytes of `bytes` and checks that `message_length`
    /// lies in `16..=MAX_MESSAGE_BYTES`; the opcode is checked later, by
    /// [`parse_message`]. On [`WireError::BadLength`] the connection is unusable.
    pub fn parse(bytes: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(bytes);
        let header = Self {
            message_length: r.i32("message header")?,
            request_id: r.i32("message header")?,
            response_to: r.i32("message header")?,
            op_code: r.i32("message header")?,
        };
        header.check_length()?;
        Ok(header)
    }

    fn check_length(&self) -> Result<(), WireError> {
        let len = self.message_length;
        if len < wire_len(HEADER_LEN) || len as i64 > MAX_MESSAGE_BYTES as i64 {
            return Err(WireError::BadLength(len.into()));
        }
        Ok(())
    }

    /// Number of bytes following the header (`message_length - 16`, or 0 if
    /// the length is invalid).
    pub fn body_len(&self) -> usize {
        usize::try_from(self.message_length).map_or(0, |len| len.saturating_sub(HEADER_LEN))
    }

    /// The header's 16 wire bytes.
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut out = [0; HEADER_LEN];
        let fields = [
            self.message_length,
            self.request_id,
            self.response_to,
            self.op_code,
        ];
        for (chunk, field) in out.chunks_exact_mut(4).zip(fields) {
            chunk.copy_from_slice(&field.to_le_bytes());
        }
        out
    }

    /// Appends the header's 16 wire bytes to `out`.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_bytes());
    }
}

/// Splits a complete message into its parsed header and body, checking that
/// the header's length matches `message.len()`.
pub fn split_message(message: &[u8]) -> Result<(MsgHeader, &[u8]), WireError> {
    let header = MsgHeader::parse(message)?;
    if header.message_length as usize != message.len() {
        return Err(WireError::BadLength(header.message_length.into()));
    }
    Ok((header, &message[HEADER_LEN..]))
}

/// A parsed request.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// An OP_MSG command.
    Msg(OpMsg),
    /// A legacy OP_QUERY, which MongoDB still accepts for the handshake on `admin.$cmd`.
    Query(OpQuery),
    /// A known opcode MongoDB 6.0+ no longer serves (OP_INSERT, OP_UPDATE,
    /// OP_DELETE, OP_GET_MORE, OP_KILL_CURSORS) or that clients never send
    /// (OP_REPLY). The body is not parsed.
    Legacy {
        /// The opcode.
        op_code: i32,
    },
}

/// Parses a message body (the bytes after `header`), decompressing an
/// OP_COMPRESSED envelope first. See [`parse_message_with_compressor`] to
/// also learn which compressor the client used.
pub fn parse_message(header: &MsgHeader, body: &[u8]) -> Result<Request, WireError> {
    parse_message_with_compressor(header, body).map(|(request, _)| request)
}

/// Like [`parse_message`], also returning the compressor of an OP_COMPRESSED
/// request (`None` if it was not compressed), so the reply can be compressed
/// the same way with [`compress_message`].
pub fn parse_message_with_compressor(
    header: &MsgHeader,
    body: &[u8],
) -> Result<(Request, Option<Compressor>), WireError> {
    header.check_length()?;
    if body.len() != header.body_len() {
        return Err(WireError::BadLength(header.message_length.into()));
    }
    if header.op_code != OP_COMPRESSED {
        return parse_uncompressed(header, body).map(|request| (request, None));
    }
    let mut r = Reader::new(body);
    let op_code = r.i32("OP_COMPRESSED originalOpcode")?;
    let size = r.i32("OP_COMPRESSED uncompressedSize")?;
    let compressor = Compressor::from_id(r.u8("OP_COMPRESSED compressorId")?)?;
    let size = usize::try_from(size).map_err(|_| {
        WireError::Malformed(format!("negative OP_COMPRESSED uncompressedSize {size}"))
    })?;
    let limit = MAX_MESSAGE_BYTES - HEADER_LEN;
    if size > limit {
        return Err(WireError::TooLarge {
            what: "uncompressed message",
            size,
            limit,
        });
    }
    let data = compressor.decompress(r.rest(), size)?;
    let inner = MsgHeader {
        message_length: wire_len(size + HEADER_LEN),
        op_code,
        ..*header
    };
    parse_uncompressed(&inner, &data).map(|request| (request, Some(compressor)))
}

fn parse_uncompressed(header: &MsgHeader, body: &[u8]) -> Result<Request, WireError> {
    match header.op_code {
        OP_MSG => OpMsg::parse(header, body).map(Request::Msg),
        OP_QUERY => OpQuery::parse(body).map(Request::Query),
        OP_REPLY | OP_UPDATE | OP_INSERT | OP_GET_MORE | OP_DELETE | OP_KILL_CURSORS => {
            Ok(Request::Legacy {
                op_code: header.op_code,
            })
        }
        OP_COMPRESSED => Err(WireError::Malformed(
            "OP_COMPRESSED inside OP_COMPRESSED".into(),
        )),
        other => Err(WireError::UnknownOpcode(other)),
    }
}

/// Wraps a complete message (header included) in an OP_COMPRESSED envelope
/// with the same `request_id` and `response_to`, e.g. to answer a compressed
/// request in kind.
pub fn compress_message(message: &[u8], compressor: Compressor) -> Result<Vec<u8>, WireError> {
    let (header, body) = split_message(message)?;
    if header.op_code == OP_COMPRESSED {
        return Err(WireError::Malformed("message is already compressed".into()));
    }
    let compressed = compressor.compress(body)?;
    let mut out = begin_message(9 + compressed.len());
    out.extend_from_slice(&header.op_code.to_le_bytes());
    // `split_message` checked the header's length, which is the message's: at most
    // MAX_MESSAGE_BYTES.
    out.extend_from_slice(&wire_len(body.len()).to_le_bytes());
    out.push(compressor.id());
    out.extend_from_slice(&compressed);
    finish_message(out, header.request_id, header.response_to, OP_COMPRESSED)
}

/// An OP_MSG: flag bits, the body document and any document sequences.
#[derive(Debug, Clone, PartialEq)]
pub struct OpMsg {
    /// The flag bits ([`OpMsg::CHECKSUM_PRESENT`], [`OpMsg::MORE_TO_COME`], [`OpMsg::EXHAUST_ALLOWED`]).
    pub flags: u32,
    /// The kind-0 section: the command document.
    pub body: Document,
    /// The kind-1 sections, as `(identifier, documents)` in wire order.
    pub sequences: Vec<(String, Vec<Document>)>,
    /// Documents of the body and the sequences in which a key appeared twice (the decoded
    /// documents keep the last value); paths into sequences start with the identifier.
    pub repeated: Vec<RepeatedKey>,
}

impl OpMsg {
    /// Bit 0: a CRC-32C checksum follows the sections.
    pub const CHECKSUM_PRESENT: u32 = 1;
    /// Bit 1: the sender will send another message without waiting for a
    /// reply; a request with it set gets no reply.
    pub const MORE_TO_COME: u32 = 1 << 1;
    /// Bit 16: the client accepts multiple replies (exhaust cursors).
    pub const EXHAUST_ALLOWED: u32 = 1 << 16;
    /// Required bits (0-15) this protocol version defines; any other is an error.
    const KNOWN_REQUIRED: u32 = Self::CHECKSUM_PRESENT | Self::MORE_TO_COME;

    /// A message with flags 0, `body` and no sequences.
    pub fn new(body: Document) -> Self {
        Self {
            flags: 0,
            body,
            sequences: Vec::new(),
            repeated: Vec::new(),
        }
    }

    /// Whether `moreToCome` is set (no reply is expected).
    pub fn more_to_come(&self) -> bool {
        self.flags & Self::MORE_TO_COME != 0
    }

    /// Whether `exhaustAllowed` is set.
    pub fn exhaust_allowed(&self) -> bool {
        self.flags & Self::EXHAUST_ALLOWED != 0
    }

    /// Whether `checksumPresent` is set.
    pub fn checksum_present(&self) -> bool {
        self.flags & Self::CHECKSUM_PRESENT != 0
    }

    /// The command: the body with each document sequence added as an array
    /// field named by its identifier (so `insert`'s `documents`, `update`'s
    /// `updates` and `delete`'s `deletes` look the same whichever way the
    /// client sent them). Parsing rejects identifiers that collide with a body
    /// field; for a hand-built message the sequence replaces the field.
    pub fn into_command(self) -> Document {
        let mut command = self.body;
        for (id, docs) in self.sequences {
            let array = docs.into_iter().map(Bson::Document).collect();
            command.insert(id, Bson::Array(array));
        }
        command
    }

    /// [`OpMsg::into_command`], with the repeated keys noted while parsing.
    pub fn into_command_noting(mut self) -> (Document, Vec<RepeatedKey>) {
        let repeated = std::mem::take(&mut self.repeated);
        (self.into_command(), repeated)
    }

    /// Parses an OP_MSG body; `header` is needed to verify the checksum.
    fn parse(header: &MsgHeader, body: &[u8]) -> Result<Self, WireError> {
        let flags = Reader::new(body).u32("OP_MSG flagBits")?;
        if flags & 0xFFFF & !Self::KNOWN_REQUIRED != 0 {
            return Err(WireError::IllegalFlags(flags));
        }
        let mut sections = &body[4..];
        if flags & Self::CHECKSUM_PRESENT != 0 {
            let split = sections
                .len()
                .checked_sub(4)
                .ok_or(WireError::Truncated("OP_MSG checksum"))?;
            let (rest, tail) = sections.split_at(split);
            let expected = Reader::new(tail).u32("OP_MSG checksum")?;
            let covered = &body[..body.len() - 4];
            let actual = crc32c::crc32c_append(crc32c::crc32c(&header.to_bytes()), covered);
            if expected != actual {
                return Err(WireError::ChecksumMismatch { expected, actual });
            }
            sections = rest;
        }

        let mut r = Reader::new(sections);
        let mut main = None;
        let mut sequences: Vec<(String, Vec<Document>)> = Vec::new();
        let mut repeated = Vec::new();
        while !r.is_empty() {
            match r.u8("OP_MSG section kind")? {
                0 => {
                    if main
                        .replace(r.document_noting(&[], &mut repeated)?)
                        .is_some()
                    {
                        return Err(WireError::Malformed(
                            "OP_MSG has more than one body section".into(),
                        ));
                    }
                }
                1 => {
                    let size = r.i32("document sequence size")?;
                    let size = usize::try_from(size)
                        .ok()
                        .and_then(|size| size.checked_sub(4))
                        .ok_or_else(|| {
                            WireError::Malformed(format!("invalid document sequence size {size}"))
                        })?;
                    let mut s = Reader::new(r.take(size, "document sequence")?);
                    let id = s.cstring("document sequence identifier")?.to_owned();
                    if sequences.iter().any(|(other, _)| *other == id) {
                        return Err(WireError::Malformed(format!(
                            "duplicate document sequence {id:?}"
                        )));
                    }
                    let mut docs = Vec::new();
                    while !s.is_empty() {
                        let prefix = [id.clone(), docs.len().to_string()];
                        docs.push(s.document_noting(&prefix, &mut repeated)?);
                    }
                    sequences.push((id, docs));
                }
                kind => {
                    return Err(WireError::Malformed(format!(
                        "unknown OP_MSG section kind {kind}"
                    )))
                }
            }
        }
        let body = main.ok_or_else(|| WireError::Malformed("OP_MSG has no body section".into()))?;
        if let Some((id, _)) = sequences.iter().find(|(id, _)| body.contains_key(id)) {
            return Err(WireError::Malformed(format!(
                "{id:?} is both a body field and a document sequence"
            )));
        }
        Ok(Self {
            flags,
            body,
            sequences,
            repeated,
        })
    }

    /// Serializes the message with a header. If [`OpMsg::CHECKSUM_PRESENT`]
    /// is set the checksum is computed and appended.
    pub fn to_message(&self, request_id: i32, response_to: i32) -> Result<Vec<u8>, WireError> {
        let mut out = begin_message(64);
        out.extend_from_slice(&self.flags.to_le_bytes());
        out.push(0);
        write_document(&mut out, &self.body)?;
        for (id, docs) in &self.sequences {
            out.push(1);
            let start = out.len();
            out.extend_from_slice(&[0; 4]);
            write_cstring(&mut out, id)?;
            for doc in docs {
                write_document(&mut out, doc)?;
            }
            let size = out.len() - start;
            if size > MAX_MESSAGE_BYTES {
                return Err(too_large_message(size));
            }
            out[start..start + 4].copy_from_slice(&wire_len(size).to_le_bytes());
        }
        if !self.checksum_present() {
            return finish_message(out, request_id, response_to, OP_MSG);
        }
        out.extend_from_slice(&[0; 4]);
        let mut out = finish_message(out, request_id, response_to, OP_MSG)?;
        let end = out.len() - 4;
        let crc = crc32c::crc32c(&out[..end]);
        out[end..].copy_from_slice(&crc.to_le_bytes());
        Ok(out)
    }
}

/// Serializes a reply OP_MSG (flags 0, `body` only) with a header.
pub fn op_msg_reply(
    body: &Document,
    request_id: i32,
    response_to: i32,
) -> Result<Vec<u8>, WireError> {
    let mut out = begin_message(64);
    out.extend_from_slice(&0u32.to_le_bytes());
    out.push(0);
    write_document(&mut out, body)?;
    finish_message(out, request_id, response_to, OP_MSG)
}

/// A legacy OP_QUERY.
#[derive(Debug, Clone, PartialEq)]
pub struct OpQuery {
    /// Query flags (tailable, slaveOk, ...).
    pub flags: i32,
    /// `db.collection`; commands go to `db.$cmd`.
    pub full_collection_name: String,
    /// Documents to skip.
    pub number_to_skip: i32,
    /// Batch size requested (commands use -1 or 1).
    pub number_to_return: i32,
    /// The query, or for `$cmd` the command (possibly wrapped in `$query`).
    pub query: Document,
    /// Optional projection.
    pub return_fields_selector: Option<Document>,
}

impl OpQuery {
    /// The database of a command query (`"admin"` for `admin.$cmd`), or `None`
    /// if this is not a command.
    pub fn command_database(&self) -> Option<&str> {
        self.full_collection_name
            .strip_suffix(".$cmd")
            .filter(|db| !db.is_empty())
    }

    /// Parses an OP_QUERY body.
    fn parse(body: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(body);
        let query = Self {
            flags: r.i32("OP_QUERY flags")?,
            full_collection_name: r.cstring("OP_QUERY fullCollectionName")?.to_owned(),
            number_to_skip: r.i32("OP_QUERY numberToSkip")?,
            number_to_return: r.i32("OP_QUERY numberToReturn")?,
            query: r.document()?,
            return_fields_selector: if r.is_empty() {
                None
            } else {
                Some(r.document()?)
            },
        };
        expect_end(&r, "OP_QUERY")?;
        Ok(query)
    }

    /// Serializes the query with a header (for clients and tests).
    pub fn to_message(&self, request_id: i32, response_to: i32) -> Result<Vec<u8>, WireError> {
        let mut out = begin_message(64);
        out.extend_from_slice(&self.flags.to_le_bytes());
        write_cstring(&mut out, &self.full_collection_name)?;
        out.extend_from_slice(&self.number_to_skip.to_le_bytes());
        out.extend_from_slice(&self.number_to_return.to_le_bytes());
        write_document(&mut out, &self.query)?;
        if let Some(fields) = &self.return_fields_selector {
            write_document(&mut out, fields)?;
        }
        finish_message(out, request_id, response_to, OP_QUERY)
    }
}

/// A legacy OP_REPLY, the answer to an [`OpQuery`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct OpReply {
    /// Response flags ([`OpReply::CURSOR_NOT_FOUND`], ...).
    pub response_flags: i32,
    /// Cursor to continue with, 0 if none.
    pub cursor_id: i64,
    /// Position of the first document in the cursor.
    pub starting_from: i32,
    /// The documents; `numberReturned` is their count.
    pub documents: Vec<Document>,
}

impl OpReply {
    /// Bit 0: the getMore's cursor does not exist.
    pub const CURSOR_NOT_FOUND: i32 = 1;
    /// Bit 1: the query failed; the single document is `{$err: ...}`.
    pub const QUERY_FAILURE: i32 = 1 << 1;
    /// Bit 3: the server supports awaitData.
    pub const AWAIT_CAPABLE: i32 = 1 << 3;

    /// A reply carrying one document (a command's result), no cursor.
    pub fn single(document: Document) -> Self {
        Self {
            documents: vec![document],
            ..Self::default()
        }
    }

    /// Serializes the reply with a header.
    pub fn to_message(&self, request_id: i32, response_to: i32) -> Result<Vec<u8>, WireError> {
        let count = i32::try_from(self.documents.len())
            .map_err(|_| too_large_message(self.documents.len()))?;
        let mut out = begin_message(64);
        out.extend_from_slice(&self.response_flags.to_le_bytes());
        out.extend_from_slice(&self.cursor_id.to_le_bytes());
        out.extend_from_slice(&self.starting_from.to_le_bytes());
        out.extend_from_slice(&count.to_le_bytes());
        for doc in &self.documents {
            write_document(&mut out, doc)?;
        }
        finish_message(out, request_id, response_to, OP_REPLY)
    }

    /// Parses an OP_REPLY body (the bytes after the header), e.g. in a client or test.
    pub fn parse(body: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(body);
        let response_flags = r.i32("OP_REPLY responseFlags")?;
        let cursor_id = r.i64("OP_REPLY cursorID")?;
        let starting_from = r.i32("OP_REPLY startingFrom")?;
        let count = r.i32("OP_REPLY numberReturned")?;
        let count = usize::try_from(count)
            .map_err(|_| WireError::Malformed(format!("negative numberReturned {count}")))?;
        let mut documents = Vec::new();
        for _ in 0..count {
            documents.push(r.document()?);
        }
        expect_end(&r, "OP_REPLY")?;
        Ok(Self {
            response_flags,
            cursor_id,
            starting_from,
            documents,
        })
    }
}

fn expect_end(r: &Reader<'_>, what: &str) -> Result<(), WireError> {
    if r.is_empty() {
        Ok(())
    } else {
        Err(WireError::Malformed(format!(
            "{} unexpected bytes after the {what} message",
            r.remaining()
        )))
    }
}

/// A length the caller has bounded by [`MAX_MESSAGE_BYTES`], as the wire's `i32`.
#[expect(
    clippy::cast_possible_truncation,
    reason = "callers bound `n` by MAX_MESSAGE_BYTES, which fits an i32 (asserted below)"
)]
fn wire_len(n: usize) -> i32 {
    debug_assert!(n <= MAX_MESSAGE_BYTES);
    n as i32
}
const _: () = assert!(MAX_MESSAGE_BYTES <= i32::MAX as usize);

/// A buffer with room reserved for the header.
fn begin_message(capacity: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + capacity);
    out.resize(HEADER_LEN, 0);
    out
}

/// Checks the size of a buffer from [`begin_message`] and fills in its header.
fn finish_message(
    mut out: Vec<u8>,
    request_id: i32,
    response_to: i32,
    op_code: i32,
) -> Result<Vec<u8>, WireError> {
    if out.len() > MAX_MESSAGE_BYTES {
        return Err(too_large_message(out.len()));
    }
    let header = MsgHeader {
        message_length: wire_len(out.len()),
        request_id,
        response_to,
        op_code,
    };
    out[..HEADER_LEN].copy_from_slice(&header.to_bytes());
    Ok(out)
}

fn too_large_message(size: usize) -> WireError {
    WireError::TooLarge {
        what: "message",
        size,
        limit: MAX_MESSAGE_BYTES,
    }
}

fn write_document(out: &mut Vec<u8>, doc: &Document) -> Result<(), WireError> {
    let start = out.len();
    doc.to_writer(&mut *out)
        .map_err(|e| WireError::InvalidBson(e.to_string()))?;
    let size = out.len() - start;
    if size > MAX_BSON_INTERNAL_BYTES {
        return Err(WireError::TooLarge {
            what: "document",
            size,
            limit: MAX_BSON_INTERNAL_BYTES,
        });
    }
    Ok(())
}

fn write_cstring(out: &mut Vec<u8>, s: &str) -> Result<(), WireError> {
    if s.contains('\0') {
        return Err(WireError::Malformed(format!("{s:?} contains a NUL byte")));
    }
    out.extend_from_slice(s.as_bytes());
    out.push(0);
    Ok(())
}

#[cfg(test)]
mod tests;
