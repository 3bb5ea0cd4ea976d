//! Commands the proxy answers itself.
//!
//! Each handler gets the session (protocol, name, id) and the shared state
//! (configuration, topology) and returns the reply frame. Nothing here goes
//! to a backend and nothing here is on the hot path of routed traffic.

mod introspect;

use crate::command::{Args, Command};
use crate::resp::encode::Encoder;
use crate::session::Session;
use crate::shared::Shared;
use bytes::Bytes;

pub enum Outcome {
    Reply(Bytes),
    /// Reply, then close the connection once it is written (QUIT).
    ReplyAndClose(Bytes),
}

const OK: &[u8] = b"+OK\r\n";
const PONG: &[u8] = b"+PONG\r\n";
const ERR_NOT_INTEGER: &[u8] = b"-ERR value is not an integer or out of range\r\n";

fn stat(s: &'static [u8]) -> Outcome {
    Outcome::Reply(Bytes::from_static(s))
}

fn built(f: impl FnOnce(&mut Encoder<'_>), s: &Session) -> Outcome {
    let mut out = Vec::new();
    f(&mut Encoder::new(&mut out, s.proto));
    Outcome::Reply(Bytes::from(out))
}

/// Redis's error frame for a message (`msg` without the leading '-').
pub fn error(msg: &str) -> Outcome {
    Outcome::Reply(Bytes::from(format!("-{msg}\r\n")))
}

/// Parse an argument as Redis's string2ll does (strict decimal).
pub fn parse_i64(b: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(b).ok()?;
    if s.is_empty()
        || s.starts_with('+')
        || (s.len() > 1 && s.starts_with('0'))
        || s.starts_with("-0")
    {
        return None;
    }
    s.parse().ok()
}

pub fn execute(shared: &Shared, s: &mut Session, cmd: &'static Command, args: &Args) -> Outcome {
    let arg = |i: usize| args.get(i).unwrap_or_default();
    match cmd.name {
        "ping" => match args.len() {
            1 => stat(PONG),
            _ => built(
                |e| {
                    e.bulk(arg(1));
                },
                s,
            ),
        },
        "echo" => built(
            |e| {
                e.bulk(arg(1));
            },
            s,
        ),
        "quit" => Outcome::ReplyAndClose(Bytes::from_static(OK)),
        "select" => match parse_i64(arg(1)) {
            None => stat(ERR_NOT_INTEGER),
            Some(n) if i32::try_from(n).is_err() => stat(ERR_NOT_INTEGER),
            Some(0) => stat(OK),
            Some(_) => error("ERR SELECT is not allowed in cluster mode"),
        },
        name if name == "command" || name.starts_with("command|") => {
            introspect::command(shared, s, cmd, args)
        }
        _ => Outcome::Reply(Bytes::from(format!(
            "-ERR mithril: '{}' is not supported yet\r\n",
            cmd.name.replace('|', " ").to_uppercase()
        ))),
    }
}
