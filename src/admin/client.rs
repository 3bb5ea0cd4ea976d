//! CLIENT: the connection's own attributes (id, name, library) and the
//! CLIENT INFO line.
//!
//! Subcommands that would change how the node treats the connection
//! (TRACKING, CACHING, REPLY, PAUSE, ...) are refused with an error that
//! names the proxy: they cannot be emulated faithfully through shared
//! backend connections, and a silent OK would lie. KILL and LIST need a
//! look at every worker's sessions and are answered by the worker core.
//!
//! Invariant: a name or library attribute only ever holds bytes from '!'
//! to '~', so CLIENT INFO / LIST lines always split on spaces.

use super::{built, display_name, error, help, Outcome};
use crate::command::{Args, Command};
use crate::resp::encode::Proto;
use crate::session::Session;
use crate::shared::Shared;
use bytes::Bytes;
use std::fmt::Write as _;
use std::time::Instant;

pub(super) const ERR_BAD_NAME: &[u8] =
    b"-ERR Client names cannot contain spaces, newlines or special characters.\r\n";

/// What Redis accepts in a client name or library attribute: printable
/// ASCII without spaces (an empty value clears the attribute).
pub(super) fn valid_name(name: &[u8]) -> bool {
    name.iter().all(|&b| (b'!'..=b'~').contains(&b))
}

fn stat(b: &'static [u8]) -> Outcome {
    Outcome::Reply(Bytes::from_static(b))
}

pub fn client(_shared: &Shared, s: &mut Session, cmd: &'static Command, args: &Args) -> Outcome {
    let arg = |i: usize| args.get(i).unwrap_or_default();
    match cmd.name {
        "client|id" => {
            let id = i64::try_from(s.id).unwrap_or(i64::MAX);
            built(
                |e| {
                    e.int(id);
                },
                s,
            )
        }
        "client|setname" => {
            let name = arg(2);
            if !valid_name(name) {
                return stat(ERR_BAD_NAME);
            }
            s.name = (!name.is_empty()).then(|| name.to_vec());
            stat(super::OK)
        }
        "client|getname" => built(
            |e| {
                match &s.name {
                    Some(n) => e.bulk(n),
                    None => e.null(),
                };
            },
            s,
        ),
        "client|info" => {
            let mut line = client_info_line(s, current_worker(), Instant::now());
            line.push('\n');
            built(
                |e| {
                    e.verbatim(b"txt", line.as_bytes());
                },
                s,
            )
        }
        "client|setinfo" => setinfo(s, arg(2), arg(3)),
        "client|no-evict" | "client|no-touch" => {
            let v = arg(2);
            if v.eq_ignore_ascii_case(b"on") || v.eq_ignore_ascii_case(b"off") {
                stat(super::OK)
            } else {
                stat(super::ERR_SYNTAX)
            }
        }
        // Capabilities are claims the proxy may ignore.
        "client|capa" => stat(super::OK),
        "client|getredir" => stat(b":-1\r\n"),
        "client|trackinginfo" => built(
            |e| {
                e.map(3);
                e.bulk(b"flags").set(1).bulk(b"off");
                e.bulk(b"redirect").int(-1);
                e.bulk(b"prefixes").array(0);
            },
            s,
        ),
        "client|kill" | "client|list" => error(&format!(
            "ERR mithril: {} is not supported yet",
            display_name(cmd)
        )),
        "client|help" => help(
            s,
            &[
                "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "ID",
                "    Return the id of this connection.",
                "SETNAME <name>",
                "    Name this connection (an empty name removes it).",
                "GETNAME",
                "    Return the name of this connection.",
                "INFO",
                "    Describe this connection in the format of CLIENT LIST.",
                "SETINFO <LIB-NAME|LIB-VER> <value>",
                "    Record the client library's name or version.",
                "NO-EVICT (ON|OFF), NO-TOUCH (ON|OFF)",
                "    Accepted; mithril holds no keys, so they change nothing.",
                "GETREDIR",
                "    Always -1: tracking is not available through the proxy.",
                "TRACKINGINFO",
                "    Always reports tracking off.",
                "HELP",
                "    Print this help.",
                "TRACKING, CACHING, REPLY, PAUSE, UNPAUSE and UNBLOCK are not supported through mithril.",
            ],
        ),
        _ => error(&format!(
            "ERR mithril: {} is not supported through the proxy",
            display_name(cmd)
        )),
    }
}

/// CLIENT SETINFO LIB-NAME|LIB-VER value.
fn setinfo(s: &mut Session, attr: &[u8], value: &[u8]) -> Outcome {
    let quoted = String::from_utf8_lossy(attr);
    let slot = if attr.eq_ignore_ascii_case(b"lib-name") {
        &mut s.lib_name
    } else if attr.eq_ignore_ascii_case(b"lib-ver") {
        &mut s.lib_ver
    } else {
        return error(&format!("ERR Unrecognized option '{quoted}'"));
    };
    if !valid_name(value) {
        return error(&format!(
            "ERR {quoted} cannot contain spaces, newlines or special characters."
        ));
    }
    *slot = (!value.is_empty()).then(|| value.to_vec());
    stat(super::OK)
}

/// The worker a session lives on, from the worker thread's name
/// (`worker-N`); 0 outside a worker thread.
fn current_worker() -> usize {
    std::thread::current()
        .name()
        .and_then(|n| n.strip_prefix("worker-"))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// One CLIENT LIST / CLIENT INFO line for `s` (without the final newline),
/// in Redis 7.2's field order, plus `worker=N`. Fields the proxy has no
/// counterpart for are 0 (or Redis's "none" value: `multi=-1`,
/// `redir=-1`).
pub fn client_info_line(s: &Session, worker: usize, now: Instant) -> String {
    use std::os::fd::AsRawFd;
    let text = |v: &Option<Vec<u8>>| {
        v.as_deref()
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_default()
    };
    let age = now.saturating_duration_since(s.created).as_secs();
    let idle = now.saturating_duration_since(s.last_active).as_secs();
    let qbuf = s.rbuf.len();
    let rbs = s.rbuf.capacity();
    let omem = s.out_bytes();
    let oll = s.outstanding();
    let (sub, psub) = s
        .sub
        .as_ref()
        .map(|x| (x.channels.len(), x.patterns.len()))
        .unwrap_or((0, 0));
    let multi: i64 = s.txn.as_ref().map(|t| t.queued.len() as i64).unwrap_or(-1);
    let flags = match (s.sub.is_some(), s.txn.is_some(), s.blocked) {
        (_, _, true) => "b",
        (true, _, _) => "P",
        (_, true, _) => "x",
        _ => "N",
    };
    let laddr = s.local.map(|a| a.to_string()).unwrap_or_default();
    let events = if oll > 0 { "rw" } else { "r" };
    let resp = if s.proto == Proto::Resp3 { 3 } else { 2 };
    let mut line = String::with_capacity(320);
    let _ = write!(
        line,
        "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db=0 sub={} psub={} ssub=0 \
         multi={} qbuf={} qbuf-free={} argv-mem=0 multi-mem=0 rbs={} rbp={} obl=0 oll={} \
         omem={} tot-mem={} events={} cmd={} user={} redir=-1 resp={} lib-name={} \
         lib-ver={} worker={}",
        s.id,
        s.peer,
        laddr,
        s.stream.as_raw_fd(),
        text(&s.name),
        age,
        idle,
        flags,
        sub,
        psub,
        multi,
        qbuf,
        rbs - qbuf.min(rbs),
        rbs,
        rbs,
        oll,
        omem,
        rbs + omem,
        events,
        s.last_cmd,
        s.user.as_ref().map_or("default", |u| u.name.as_str()),
        resp,
        text(&s.lib_name),
        text(&s.lib_ver),
        worker,
    );
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_redis_charset() {
        assert!(valid_name(b""));
        assert!(valid_name(b"my-app_1!~"));
        assert!(!valid_name(b"a b"));
        assert!(!valid_name(b"a\nb"));
        assert!(!valid_name("é".as_bytes()));
        assert!(!valid_name(b"\x7f"));
    }
}
