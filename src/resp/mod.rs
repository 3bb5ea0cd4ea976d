//! The RESP layer: everything mithril knows about the Redis wire protocol,
//! and nothing about commands, routing or sockets.
//!
//! | module    | owns                                                        |
//! |-----------|-------------------------------------------------------------|
//! | `request` | client request scanner: frame boundaries, argument ranges   |
//! | `reply`   | backend reply scanner: frame boundaries for RESP2 and RESP3 |
//! | `value`   | an owned value tree for non-hot paths                       |
//! | `encode`  | writing replies and requests, RESP2 or RESP3                |
//! | `limits`  | the bounds applied to client input                          |
//! | `error`   | protocol errors, with Redis's exact error texts             |
//!
//! Invariants of the whole layer:
//! - Scanners never copy frame bytes and never build values: a request or a
//!   reply travels onward as a slice of the buffer it arrived in.
//! - Scanners are resumable: fed a buffer that only grows, they never revisit
//!   work, so cost is linear in the bytes however they were split into reads.
//! - No input reaches a panic, an unbounded wait or an allocation sized by a
//!   claim in a header.
//!
//! One deliberate difference from Redis: the request scanner requires CRLF
//! after every header line and after every bulk payload, where Redis skips
//! two bytes unchecked. Requests are forwarded verbatim on backend
//! connections shared with other clients; a frame the proxy and the backend
//! would cut differently could smuggle a command onto another client's
//! pipeline. Such frames get an error and the client is closed (see
//! `request` for the details).
//!
//! Never: no I/O, no logging on these paths, no knowledge of command names.

pub mod encode;
pub mod error;
pub mod limits;
mod num;
pub mod reply;
pub mod request;
pub mod value;
pub mod walk;

#[cfg(test)]
mod testutil;

pub use encode::{Encoder, Proto};
pub use error::{ProtoError, ReplyError};
pub use limits::Limits;
/// Redis's strict integer reading (`string2ll`), for key counts too.
pub(crate) use num::{int_reply, parse_i64};
pub use reply::{ReplyScan, ReplyScanner};
pub use request::{RequestScanner, Scan};
pub use value::Value;
