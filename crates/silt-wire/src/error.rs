//! The one error type of the crate.

/// Why a message could not be parsed or built.
///
/// Every malformed input maps to one of these; nothing in this crate panics on
/// bad bytes. [`WireError::code`] gives the MongoDB error code and name to put
/// in an error reply, and [`WireError::closes_connection`] says whether the
/// server should drop the connection instead of replying.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The header's `messageLength` is below 16 or above [`crate::MAX_MESSAGE_BYTES`],
    /// or disagrees with the bytes actually supplied.
    #[error("invalid message length {0}")]
    BadLength(i64),
    /// The message ended before a field it declares.
    #[error("message truncated while reading {0}")]
    Truncated(&'static str),
    /// A BSON document is malformed (bad length, bad element, nesting too deep, invalid UTF-8, ...).
    #[error("invalid BSON: {0}")]
    InvalidBson(String),
    /// The opcode is not one MongoDB defines.
    #[error("unknown opcode {0}")]
    UnknownOpcode(i32),
    /// The OP_MSG CRC-32C checksum does not match the message.
    #[error("OP_MSG checksum mismatch: message says {expected:#010x}, computed {actual:#010x}")]
    ChecksumMismatch {
        /// The checksum carried by the message.
        expected: u32,
        /// The checksum computed over the message.
        actual: u32,
    },
    /// OP_COMPRESSED names a compressor this crate cannot decompress (zlib or an unknown id).
    #[error("unsupported compressor id {0}")]
    UnsupportedCompressor(u8),
    /// Compressing failed, or compressed data is corrupt or expands to a length other than the declared `uncompressedSize`.
    #[error("compression error: {0}")]
    Compression(String),
    /// A document or message exceeds its size limit.
    #[error("{what} of {size} bytes exceeds the limit of {limit} bytes")]
    TooLarge {
        /// What was too large ("document", "message", "uncompressed message").
        what: &'static str,
        /// Its size in bytes.
        size: usize,
        /// The limit it exceeds.
        limit: usize,
    },
    /// OP_MSG sets a required flag bit (0-15) this protocol version does not define.
    #[error("OP_MSG contains unknown required flag bits {0:#x}")]
    IllegalFlags(u32),
    /// The message's structure is wrong (no or two body sections, unknown section kind,
    /// duplicate sequence identifiers, trailing bytes, ...).
    #[error("malformed message: {0}")]
    Malformed(String),
}

impl WireError {
    /// The MongoDB error code and code name to report for this error.
    pub fn code(&self) -> (i32, &'static str) {
        match self {
            Self::BadLength(_) | Self::UnknownOpcode(_) | Self::Compression(_) => {
                (17, "ProtocolError")
            }
            Self::UnsupportedCompressor(_) => (17, "ProtocolError"),
            Self::Truncated(_) | Self::Malformed(_) => (9, "FailedToParse"),
            Self::InvalidBson(_) => (22, "InvalidBSON"),
            Self::ChecksumMismatch { .. } => (288, "ChecksumMismatch"),
            Self::TooLarge { .. } => (10334, "BSONObjectTooLarge"),
            Self::IllegalFlags(_) => (223, "IllegalOpMsgFlag"),
        }
    }

    /// Whether the server should close the connection rather than reply.
    ///
    /// True for a bad header length (the stream can no longer be framed) and for
    /// the errors MongoDB classes as `ConnectionFatalMessageParseError`
    /// (checksum mismatch, illegal OP_MSG flags).
    pub fn closes_connection(&self) -> bool {
        matches!(
            self,
            Self::BadLength(_) | Self::ChecksumMismatch { .. } | Self::IllegalFlags(_)
        )
    }
}
