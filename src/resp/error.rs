//! Error types of the RESP layer.
//!
//! Owns: [`ProtoError`], what a *client* did wrong (each maps to the error
//! frame Redis itself would send before closing that client), and
//! [`ReplyError`], what a *backend* stream did wrong (the proxy drops that
//! backend connection; nothing is sent to a client from it).
//! Invariant: `ProtoError::reply()` is always one well formed RESP error
//! line; no byte of client input can put a CR or LF into it.
//! Never: these types carry no buffers and no I/O state.

use bytes::Bytes;
use std::fmt;

/// A protocol violation in client input. Every variant ends the session: the
/// caller writes [`ProtoError::reply`] and then closes the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProtoError {
    /// A `*` header line got no CRLF within `max_inline_len` bytes.
    TooBigMultibulkCount,
    /// The `*` count is not a number, exceeds the limit, or its CR lacks an LF.
    InvalidMultibulkLength,
    /// A `$` header line got no CRLF within `max_inline_len` bytes.
    TooBigBulkCount,
    /// An argument header started with this byte instead of `$`.
    ExpectedDollar(u8),
    /// The `$` length is not a number, negative, over the limit, or its CR
    /// lacks an LF.
    InvalidBulkLength,
    /// An inline line got no LF within `max_inline_len` bytes.
    TooBigInline,
    /// An inline line has an unterminated quote, or a closing quote glued to
    /// the next character.
    UnbalancedQuotes,
    /// More than 10 arguments from a client that has not authenticated.
    UnauthenticatedMultibulkLength,
    /// A bulk over 16384 bytes from a client that has not authenticated.
    UnauthenticatedBulkLength,
    /// A bulk payload was not followed by CRLF. Redis has no such error (it
    /// skips two bytes blindly); mithril refuses the frame instead.
    BulkNotTerminated,
}

impl ProtoError {
    /// The message text, without the leading `ERR ` (for the fixed cases).
    fn static_text(&self) -> Option<&'static str> {
        Some(match self {
            ProtoError::TooBigMultibulkCount => "Protocol error: too big mbulk count string",
            ProtoError::InvalidMultibulkLength => "Protocol error: invalid multibulk length",
            ProtoError::TooBigBulkCount => "Protocol error: too big bulk count string",
            ProtoError::ExpectedDollar(_) => return None,
            ProtoError::InvalidBulkLength => "Protocol error: invalid bulk length",
            ProtoError::TooBigInline => "Protocol error: too big inline request",
            ProtoError::UnbalancedQuotes => "Protocol error: unbalanced quotes in request",
            ProtoError::UnauthenticatedMultibulkLength => {
                "Protocol error: unauthenticated multibulk length"
            }
            ProtoError::UnauthenticatedBulkLength => "Protocol error: unauthenticated bulk length",
            ProtoError::BulkNotTerminated => "Protocol error: expected CRLF after bulk data",
        })
    }

    /// The complete error frame to send to the client, e.g.
    /// `-ERR Protocol error: invalid multibulk length\r\n`.
    pub fn reply(&self) -> Bytes {
        match self {
            ProtoError::TooBigMultibulkCount => {
                Bytes::from_static(b"-ERR Protocol error: too big mbulk count string\r\n")
            }
            ProtoError::InvalidMultibulkLength => {
                Bytes::from_static(b"-ERR Protocol error: invalid multibulk length\r\n")
            }
            ProtoError::TooBigBulkCount => {
                Bytes::from_static(b"-ERR Protocol error: too big bulk count string\r\n")
            }
            ProtoError::ExpectedDollar(got) => {
                // Redis formats the raw byte with %c and then turns CR and LF
                // into spaces so the error stays on one line.
                let got = match *got {
                    b'\r' | b'\n' => b' ',
                    other => other,
                };
                let mut out = Vec::with_capacity(48);
                out.extend_from_slice(b"-ERR Protocol error: expected '$', got '");
                out.push(got);
                out.extend_from_slice(b"'\r\n");
                Bytes::from(out)
            }
            ProtoError::InvalidBulkLength => {
                Bytes::from_static(b"-ERR Protocol error: invalid bulk length\r\n")
            }
            ProtoError::TooBigInline => {
                Bytes::from_static(b"-ERR Protocol error: too big inline request\r\n")
            }
            ProtoError::UnbalancedQuotes => {
                Bytes::from_static(b"-ERR Protocol error: unbalanced quotes in request\r\n")
            }
            ProtoError::UnauthenticatedMultibulkLength => {
                Bytes::from_static(b"-ERR Protocol error: unauthenticated multibulk length\r\n")
            }
            ProtoError::UnauthenticatedBulkLength => {
                Bytes::from_static(b"-ERR Protocol error: unauthenticated bulk length\r\n")
            }
            ProtoError::BulkNotTerminated => {
                Bytes::from_static(b"-ERR Protocol error: expected CRLF after bulk data\r\n")
            }
        }
    }
}

impl fmt::Display for ProtoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self, self.static_text()) {
            (_, Some(text)) => f.write_str(text),
            (ProtoError::ExpectedDollar(got), None) => {
                let got = match *got {
                    b'\r' | b'\n' => ' ',
                    other => char::from(other),
                };
                write!(f, "Protocol error: expected '$', got '{got}'")
            }
            (_, None) => Ok(()),
        }
    }
}

impl std::error::Error for ProtoError {}

/// A malformed backend reply stream. The connection it came from cannot be
/// trusted any further and must be dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyError {
    /// A frame started with a byte that is no RESP2/RESP3 type.
    UnknownType(u8),
    /// A line or a bulk payload was not followed by CRLF.
    BadLineEnd,
    /// A length or element count is not a number or is out of range.
    BadLength,
    /// A length, count, integer, boolean or null line ran past 32 bytes
    /// without its CRLF.
    HeaderTooLong,
    /// An `:` integer line is not a valid 64-bit integer.
    BadInteger,
    /// A `#` boolean line is neither `t` nor `f`.
    BadBoolean,
    /// A `_` null line is not empty.
    BadNull,
    /// A streamed string or aggregate (`$?`, `*?`, ...) was announced; the
    /// proxy does not accept them.
    Streamed,
    /// A `,` double line is not a number (only [`crate::resp::value::parse`]
    /// looks inside doubles).
    BadDouble,
    /// A `=` verbatim string lacks its `xxx:` format prefix (only
    /// [`crate::resp::value::parse`] checks it).
    BadVerbatim,
    /// Aggregates nested deeper than [`crate::resp::value::MAX_DEPTH`] (only
    /// [`crate::resp::value::parse`] limits depth).
    TooDeep,
}

impl fmt::Display for ReplyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReplyError::UnknownType(b) => write!(f, "unknown RESP type byte 0x{b:02x}"),
            ReplyError::BadLineEnd => f.write_str("line or bulk payload not followed by CRLF"),
            ReplyError::BadLength => f.write_str("invalid length or element count"),
            ReplyError::HeaderTooLong => f.write_str("header line too long"),
            ReplyError::BadInteger => f.write_str("invalid integer"),
            ReplyError::BadBoolean => f.write_str("invalid boolean"),
            ReplyError::BadNull => f.write_str("invalid null"),
            ReplyError::Streamed => {
                f.write_str("streamed strings and aggregates are not supported")
            }
            ReplyError::BadDouble => f.write_str("invalid double"),
            ReplyError::BadVerbatim => f.write_str("invalid verbatim string"),
            ReplyError::TooDeep => f.write_str("aggregates nested too deep"),
        }
    }
}

impl std::error::Error for ReplyError {}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_fixed() -> Vec<(ProtoError, &'static str)> {
        vec![
            (
                ProtoError::TooBigMultibulkCount,
                "Protocol error: too big mbulk count string",
            ),
            (
                ProtoError::InvalidMultibulkLength,
                "Protocol error: invalid multibulk length",
            ),
            (
                ProtoError::TooBigBulkCount,
                "Protocol error: too big bulk count string",
            ),
            (
                ProtoError::InvalidBulkLength,
                "Protocol error: invalid bulk length",
            ),
            (
                ProtoError::TooBigInline,
                "Protocol error: too big inline request",
            ),
            (
                ProtoError::UnbalancedQuotes,
                "Protocol error: unbalanced quotes in request",
            ),
            (
                ProtoError::UnauthenticatedMultibulkLength,
                "Protocol error: unauthenticated multibulk length",
            ),
            (
                ProtoError::UnauthenticatedBulkLength,
                "Protocol error: unauthenticated bulk length",
            ),
            (
                ProtoError::BulkNotTerminated,
                "Protocol error: expected CRLF after bulk data",
            ),
        ]
    }

    #[test]
    fn fixed_texts_and_frames() {
        for (err, text) in all_fixed() {
            assert_eq!(err.to_string(), text);
            assert_eq!(&err.reply()[..], format!("-ERR {text}\r\n").as_bytes());
        }
    }

    #[test]
    fn expected_dollar_text() {
        let e = ProtoError::ExpectedDollar(b'x');
        assert_eq!(e.to_string(), "Protocol error: expected '$', got 'x'");
        assert_eq!(
            &e.reply()[..],
            b"-ERR Protocol error: expected '$', got 'x'\r\n"
        );
        // CR and LF never reach the error line.
        let e = ProtoError::ExpectedDollar(b'\r');
        assert_eq!(
            &e.reply()[..],
            b"-ERR Protocol error: expected '$', got ' '\r\n"
        );
        assert_eq!(e.to_string(), "Protocol error: expected '$', got ' '");
        let e = ProtoError::ExpectedDollar(b'\n');
        assert_eq!(
            &e.reply()[..],
            b"-ERR Protocol error: expected '$', got ' '\r\n"
        );
        // Other bytes are sent raw, as Redis's %c does.
        let e = ProtoError::ExpectedDollar(0xff);
        assert_eq!(
            &e.reply()[..],
            b"-ERR Protocol error: expected '$', got '\xff'\r\n"
        );
    }

    #[test]
    fn reply_error_display() {
        assert_eq!(
            ReplyError::UnknownType(b'@').to_string(),
            "unknown RESP type byte 0x40"
        );
        assert_eq!(
            ReplyError::BadLength.to_string(),
            "invalid length or element count"
        );
    }
}
