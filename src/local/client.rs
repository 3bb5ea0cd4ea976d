//! CLIENT: the connection's own attributes (id, name, library), the
//! CLIENT INFO / LIST line, and the filters of CLIENT LIST and CLIENT KILL.
//!
//! CLIENT REPLY is the session's (it drops the replies it silences).
//! CLIENT UNBLOCK is the worker's (`worker/blocking.rs`): the node that
//! holds the blocked command is told to unblock it.
//! PAUSE and UNPAUSE go to every master (the command table routes them).
//! Subcommands that would change how the node treats one connection are
//! refused with an error that names the proxy: they cannot be emulated
//! faithfully through shared backend connections, and a silent OK would
//! lie. Client tracking is the proxy's own (CLIENT
//! TRACKING in `worker/tracking.rs`; CACHING, GETREDIR and TRACKINGINFO
//! here, from the session's state). LIST and KILL need a
//! look at every worker's sessions: the worker core (`worker::observe`)
//! asks every worker, which applies the filter parsed here ([`parse_list`],
//! [`parse_kill`]) to its own sessions.
//!
//! Invariant: a name or library attribute only ever holds bytes from '!'
//! to '~', so CLIENT INFO / LIST lines always split on spaces.

use super::{built, display_name, error, help, Outcome};
use crate::command::{Args, Command};
use crate::resp::encode::Proto;
use crate::session::{ClientReply, Session};
use crate::shared::Shared;
use crate::stats::gather::{ClientType, KillFilter, ListFilter};
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
            s.set_name(name);
            stat(super::OK)
        }
        "client|getname" => built(
            |e| {
                match s.name() {
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
        "client|reply" => reply_mode(s, arg(2)),
        // Capabilities are claims the proxy may ignore.
        "client|capa" => stat(super::OK),
        // CLIENT TRACKING itself changes the worker's state: the worker
        // answers it (worker/tracking.rs).
        "client|caching" => caching(s, arg(2)),
        "client|getredir" => {
            let r = s.tracking().map_or(-1, |t| t.redirect as i64);
            Outcome::Reply(Bytes::from(format!(":{r}\r\n")))
        }
        "client|trackinginfo" => {
            let t = s.tracking();
            let mut fl: Vec<&[u8]> = vec![if t.is_some() { b"on" } else { b"off" }];
            if let Some(t) = t {
                let flags: [(bool, &[u8]); 7] = [
                    (t.bcast, b"bcast"),
                    (t.optin, b"optin"),
                    (t.optin && t.caching, b"caching-yes"),
                    (t.optout, b"optout"),
                    (t.optout && t.caching, b"caching-no"),
                    (t.noloop, b"noloop"),
                    (t.broken_redirect, b"broken_redirect"),
                ];
                fl.extend(flags.iter().filter(|f| f.0).map(|f| f.1));
            }
            let redirect = t.map_or(-1, |t| t.redirect as i64);
            let prefixes: &[Vec<u8>] = t.map_or(&[], |t| &t.prefixes);
            built(
                |e| {
                    e.map(3);
                    e.bulk(b"flags").set(fl.len());
                    for f in &fl {
                        e.bulk(f);
                    }
                    e.bulk(b"redirect").int(redirect);
                    e.bulk(b"prefixes").array(prefixes.len());
                    for p in prefixes {
                        e.bulk(p);
                    }
                },
                s,
            )
        }
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
                "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
                "         [OPTIN] [OPTOUT] [NOLOOP]",
                "    Control server assisted client side caching (served by mithril from the",
                "    invalidations of every master).",
                "CACHING (YES|NO)",
                "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
                "GETREDIR",
                "    Return the client ID we are redirecting to when tracking is enabled.",
                "TRACKINGINFO",
                "    Return information about client side caching for the current connection.",
                "LIST [TYPE (NORMAL|MASTER|REPLICA|PUBSUB)] [ID <id> [<id> ...]]",
                "    One line per client connection, on every worker of the proxy.",
                "KILL <ip:port>",
                "    Close the connection of the client at this address.",
                "KILL <filter> <value> ... [<filter> <value>]",
                "    Close every connection matching all the filters: ID <id>, TYPE <type>,",
                "    USER <name>, ADDR <ip:port>, LADDR <ip:port>, SKIPME (YES|NO) (YES by default:",
                "    the calling connection is spared). Returns how many were closed.",
                "HELP",
                "    Print this help.",
                "REPLY (ON|OFF|SKIP)",
                "    Control the replies sent to the current connection.",
                "UNBLOCK <clientid> [TIMEOUT|ERROR]",
                "    Unblock the specified blocked client.",
                "PAUSE <timeout> [WRITE|ALL]",
                "    Suspend clients on every master for <timeout> milliseconds (writes only,",
                "    or every command).",
                "UNPAUSE",
                "    Stop the current client pause on every master.",
            ],
        ),
        _ => error(&format!(
            "ERR mithril: {} is not supported through the proxy",
            display_name(cmd)
        )),
    }
}

/// CLIENT REPLY ON|OFF|SKIP. The session drops the replies it silences
/// as they leave (`Session::after_command`), this command's own OK under
/// OFF and SKIP included, as Redis sends none.
fn reply_mode(s: &mut Session, opt: &[u8]) -> Outcome {
    let to = if opt.eq_ignore_ascii_case(b"on") {
        ClientReply::On
    } else if opt.eq_ignore_ascii_case(b"off") {
        ClientReply::Off
    } else if opt.eq_ignore_ascii_case(b"skip") {
        ClientReply::Skip
    } else {
        return stat(super::ERR_SYNTAX);
    };
    s.set_reply_mode(to);
    stat(super::OK)
}

/// CLIENT CACHING YES|NO, with Redis's checks: the flag lasts for the
/// next command (or transaction), which the worker clears after it.
fn caching(s: &mut Session, opt: &[u8]) -> Outcome {
    let Some(t) = s.tracking_mut() else {
        return error(
            "ERR CLIENT CACHING can be called only when the client is in tracking mode \
             with OPTIN or OPTOUT mode enabled",
        );
    };
    if opt.eq_ignore_ascii_case(b"yes") {
        if !t.optin {
            return error(
                "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.",
            );
        }
    } else if opt.eq_ignore_ascii_case(b"no") {
        if !t.optout {
            return error(
                "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.",
            );
        }
    } else {
        return stat(super::ERR_SYNTAX);
    }
    t.caching = true;
    stat(super::OK)
}

/// CLIENT SETINFO LIB-NAME|LIB-VER value.
fn setinfo(s: &mut Session, attr: &[u8], value: &[u8]) -> Outcome {
    let quoted = String::from_utf8_lossy(attr);
    let set = if attr.eq_ignore_ascii_case(b"lib-name") {
        Session::set_lib_name
    } else if attr.eq_ignore_ascii_case(b"lib-ver") {
        Session::set_lib_ver
    } else {
        return error(&format!("ERR Unrecognized option '{quoted}'"));
    };
    if !valid_name(value) {
        return error(&format!(
            "ERR {quoted} cannot contain spaces, newlines or special characters."
        ));
    }
    set(s, value);
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
    let text = |v: Option<&[u8]>| {
        v.map(|b| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_default()
    };
    let age = now.saturating_duration_since(s.created()).as_secs();
    let idle = now.saturating_duration_since(s.last_active()).as_secs();
    let qbuf = s.rbuf.len();
    let rbs = s.rbuf.capacity();
    let omem = s.out_bytes();
    let oll = s.outstanding();
    let (sub, psub, ssub) = s
        .sub
        .as_ref()
        .map(|x| (x.channels.len(), x.patterns.len(), x.shard.len()))
        .unwrap_or((0, 0, 0));
    let multi: i64 = s.txn.as_ref().map(|t| t.queued.len() as i64).unwrap_or(-1);
    let flags = match (s.sub.is_some(), s.txn.is_some(), s.input().is_blocked()) {
        _ if s.is_monitor() => "O",
        (_, _, true) => "b",
        (true, _, _) => "P",
        (_, true, _) => "x",
        _ => "N",
    };
    let laddr = s.local_addr().map(|a| a.to_string()).unwrap_or_default();
    let events = if oll > 0 { "rw" } else { "r" };
    let resp = if s.proto == Proto::Resp3 { 3 } else { 2 };
    let mut line = String::with_capacity(320);
    let _ = write!(
        line,
        "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db=0 sub={} psub={} ssub={} \
         multi={} qbuf={} qbuf-free={} argv-mem=0 multi-mem=0 rbs={} rbp={} obl=0 oll={} \
         omem={} tot-mem={} events={} cmd={} user={} redir=-1 resp={} lib-name={} \
         lib-ver={} worker={}",
        s.id,
        s.peer(),
        laddr,
        s.fd(),
        text(s.name()),
        age,
        idle,
        flags,
        sub,
        psub,
        ssub,
        multi,
        qbuf,
        rbs - qbuf.min(rbs),
        rbs,
        rbs,
        oll,
        omem,
        rbs + omem,
        events,
        s.last_cmd(),
        s.user().map_or("default", |u| u.name.as_str()),
        resp,
        text(s.lib_name()),
        text(s.lib_ver()),
        worker,
    );
    line
}

// The filters travel to the other workers inside `Ask` (stats::gather,
// where they are defined); what they match is decided here, beside the
// rest of CLIENT, from the session.

impl ClientType {
    fn parse(name: &[u8]) -> Option<ClientType> {
        let n = name.to_ascii_lowercase();
        match n.as_slice() {
            b"normal" => Some(ClientType::Normal),
            b"master" => Some(ClientType::Master),
            b"slave" | b"replica" => Some(ClientType::Replica),
            b"pubsub" => Some(ClientType::Pubsub),
            _ => None,
        }
    }

    /// What a session is: pubsub while it has subscriptions, else normal.
    pub fn of(s: &Session) -> ClientType {
        if s.sub.as_ref().is_some_and(|x| x.count() > 0) {
            ClientType::Pubsub
        } else {
            ClientType::Normal
        }
    }
}

fn unknown_type(name: &[u8]) -> Bytes {
    error_frame(&format!(
        "ERR Unknown client type '{}'",
        String::from_utf8_lossy(name)
    ))
}

fn error_frame(msg: &str) -> Bytes {
    match error(msg) {
        Outcome::Reply(b) | Outcome::ReplyAndClose(b) => b,
    }
}

impl ListFilter {
    pub fn matches(&self, s: &Session) -> bool {
        match self {
            ListFilter::All => true,
            ListFilter::Type(t) => ClientType::of(s) == *t,
            ListFilter::Ids(ids) => ids.contains(&s.id),
        }
    }
}

/// CLIENT LIST's arguments; an error is the reply to give.
pub fn parse_list(args: &Args) -> Result<ListFilter, Bytes> {
    let arg = |i: usize| args.get(i).unwrap_or_default();
    let n = args.len();
    if n == 2 {
        return Ok(ListFilter::All);
    }
    if n == 4 && arg(2).eq_ignore_ascii_case(b"type") {
        return ClientType::parse(arg(3))
            .map(ListFilter::Type)
            .ok_or_else(|| unknown_type(arg(3)));
    }
    if n > 3 && arg(2).eq_ignore_ascii_case(b"id") {
        let mut ids = Vec::with_capacity(n - 3);
        for i in 3..n {
            match super::parse_i64(arg(i)) {
                // Ids are positive: 0 and below match nobody, as in Redis.
                Some(id) => ids.extend(u64::try_from(id).ok().filter(|&v| v > 0)),
                None => return Err(error_frame("ERR Invalid client ID")),
            }
        }
        return Ok(ListFilter::Ids(ids));
    }
    Err(Bytes::from_static(super::ERR_SYNTAX))
}

impl KillFilter {
    pub fn matches(&self, s: &Session) -> bool {
        if self.skipme && s.id == self.caller {
            return false;
        }
        if self.id.is_some_and(|id| id != s.id) {
            return false;
        }
        if self.ctype.is_some_and(|t| t != ClientType::of(s)) {
            return false;
        }
        if self
            .addr
            .as_ref()
            .is_some_and(|a| *a != s.peer().to_string())
        {
            return false;
        }
        let laddr = || s.local_addr().map(|a| a.to_string()).unwrap_or_default();
        if self.laddr.as_ref().is_some_and(|a| *a != laddr()) {
            return false;
        }
        if let Some(user) = &self.user {
            let name = s.user().map_or("default", |u| u.name.as_str());
            if name != user {
                return false;
            }
        }
        true
    }
}

/// Whether `s` may close other clients' connections. Every client may
/// while the proxy has one user; the access-control work decides here.
pub fn may_kill(s: &Session) -> bool {
    let _ = s;
    true
}

/// CLIENT UNBLOCK's arguments, checked in Redis's order (the reason, then
/// the id): the id and whether the command is to fail with UNBLOCKED;
/// None for an id no session can have. An error is the reply.
pub fn parse_unblock(args: &Args) -> Result<Option<(u64, bool)>, Bytes> {
    if !(3..=4).contains(&args.len()) {
        // Redis quotes the subcommand as the client spelt it.
        let sub =
            String::from_utf8_lossy(args.get(1).unwrap_or_default()).replace(['\r', '\n'], " ");
        return Err(Bytes::from(format!(
            "-ERR unknown subcommand or wrong number of arguments for '{sub}'. Try CLIENT HELP.\r\n"
        )));
    }
    let error = match args.get(3) {
        None => false,
        Some(r) if r.eq_ignore_ascii_case(b"timeout") => false,
        Some(r) if r.eq_ignore_ascii_case(b"error") => true,
        Some(_) => {
            return Err(Bytes::from_static(
                b"-ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR\r\n",
            ))
        }
    };
    match super::parse_i64(args.get(2).unwrap_or_default()) {
        Some(id) => Ok(u64::try_from(id).ok().map(|id| (id, error))),
        None => Err(Bytes::from_static(super::ERR_NOT_INTEGER)),
    }
}

/// CLIENT KILL's arguments for the caller `s`; an error is the reply.
pub fn parse_kill(s: &Session, acl: &crate::acl::Acl, args: &Args) -> Result<KillFilter, Bytes> {
    let arg = |i: usize| args.get(i).unwrap_or_default();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let mut f = KillFilter {
        old_form: false,
        id: None,
        ctype: None,
        addr: None,
        laddr: None,
        user: None,
        skipme: true,
        caller: s.id,
    };
    let n = args.len();
    if n == 3 {
        f.old_form = true;
        f.skipme = false;
        f.addr = Some(text(arg(2)));
        return Ok(f);
    }
    if n < 3 {
        return Err(Bytes::from_static(super::ERR_SYNTAX));
    }
    let mut i = 2;
    while i < n {
        let (opt, value) = (arg(i), args.get(i + 1));
        let Some(value) = value else {
            return Err(Bytes::from_static(super::ERR_SYNTAX));
        };
        if opt.eq_ignore_ascii_case(b"id") {
            match super::parse_i64(value) {
                Some(id) if id > 0 => f.id = Some(id as u64),
                _ => return Err(error_frame("ERR client-id should be greater than 0")),
            }
        } else if opt.eq_ignore_ascii_case(b"type") {
            f.ctype = Some(ClientType::parse(value).ok_or_else(|| unknown_type(value))?);
        } else if opt.eq_ignore_ascii_case(b"addr") {
            f.addr = Some(text(value));
        } else if opt.eq_ignore_ascii_case(b"laddr") {
            f.laddr = Some(text(value));
        } else if opt.eq_ignore_ascii_case(b"user") {
            // A user the ACL knows (the file's, and ACL SETUSER's).
            let name = text(value);
            if !acl.users().iter().any(|u| u.name == name) {
                return Err(error_frame(&format!("ERR No such user '{name}'")));
            }
            f.user = Some(name);
        } else if opt.eq_ignore_ascii_case(b"skipme") {
            if value.eq_ignore_ascii_case(b"yes") {
                f.skipme = true;
            } else if value.eq_ignore_ascii_case(b"no") {
                f.skipme = false;
            } else {
                return Err(Bytes::from_static(super::ERR_SYNTAX));
            }
        } else {
            return Err(Bytes::from_static(super::ERR_SYNTAX));
        }
        i += 2;
    }
    Ok(f)
}

/// The reply to CLIENT KILL once every worker said how many it closed.
pub fn kill_reply(f: &KillFilter, killed: u64) -> Bytes {
    if f.old_form {
        if killed == 0 {
            error_frame("ERR No such client")
        } else {
            Bytes::from_static(super::OK)
        }
    } else {
        Bytes::from(format!(":{killed}\r\n"))
    }
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
