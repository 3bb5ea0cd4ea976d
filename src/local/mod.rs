//! Commands the proxy answers itself.
//!
//! What it owns: the replies to every command the table routes
//! `Local(which)` and the router hands over as `Decision::Local`
//! (connection commands, AUTH/HELLO/RESET, CONFIG, CLIENT, COMMAND, ACL
//! and the one-node CLUSTER face); the bit of live state those commands
//! keep is `Shared::admin` (`shared::AdminState`). INFO, CLIENT
//! LIST/KILL, CONFIG RESETSTAT and SLOWLOG need every worker: the router
//! sends them to the worker instead (`Decision::Gather`), and the INFO
//! text is built here ([`info`]).
//!
//! ```text
//!   router::decide ──► Decision::Local(which)
//!                             │
//!                             ▼
//!   execute(shared, session, which, cmd, args) ──► Outcome (one frame)
//!      ├─ auth        AUTH HELLO RESET
//!      ├─ acl_cmd     ACL WHOAMI USERS LIST GETUSER SETUSER DELUSER CAT GENPASS LOG
//!      ├─ client      CLIENT ...          (+ client_info_line)
//!      ├─ config_cmd  CONFIG ...
//!      ├─ cluster     CLUSTER ...         (one master, all slots)
//!      ├─ introspect  COMMAND ...         (from the static table)
//!      └─ getkeys     COMMAND GETKEYS[ANDFLAGS]
//! ```
//!
//! The match in [`execute`] is exhaustive over `LocalCmd`, which the
//! command table's generator emits: a command marked local in
//! `tools/command_overlay.json` does not compile until it has a handler.
//!
//! Invariants: every reply is exactly one frame, built in the session's
//! protocol with [`Encoder`], so one handler answers RESP2 and RESP3 the
//! way Redis 7 does (texts of errors included); a handler touches only its
//! own session and `Shared`. Nothing here is on the path of routed traffic.
//!
//! Never: send anything to a backend, block, or panic on client input.

mod acl_cmd;
mod auth;
pub mod client;
mod cluster;
mod config_cmd;
mod getkeys;
pub mod info;
mod introspect;

pub use auth::reset_session;
pub use client::client_info_line;
pub(crate) use config_cmd::apply_live;
pub use config_cmd::{own_pairs as config_own_pairs, set_own as config_set_own, HIDDEN_PASSWORD};

use crate::command::{Args, Command, LocalCmd};
use crate::resp::encode::Encoder;
use crate::session::Session;
use crate::shared::Shared;
use bytes::Bytes;

pub use crate::shared::admin::{MITHRIL_VERSION, REDIS_VERSION};

/// The Redis version the proxy reports (INFO server, HELLO): the lowest
/// among the masters, as the topology learned it, or [`REDIS_VERSION`]
/// before the masters answered.
pub fn reported_version(shared: &Shared) -> String {
    shared
        .topology
        .load()
        .min_version
        .clone()
        .unwrap_or_else(|| REDIS_VERSION.to_string())
}

pub enum Outcome {
    Reply(Bytes),
    /// Reply, then close the connection once it is written (QUIT).
    ReplyAndClose(Bytes),
}

const OK: &[u8] = b"+OK\r\n";
const PONG: &[u8] = b"+PONG\r\n";
pub(crate) const ERR_NOT_INTEGER: &[u8] = b"-ERR value is not an integer or out of range\r\n";
const ERR_SYNTAX: &[u8] = b"-ERR syntax error\r\n";

fn stat(s: &'static [u8]) -> Outcome {
    Outcome::Reply(Bytes::from_static(s))
}

/// A reply built in the session's protocol.
fn built(f: impl FnOnce(&mut Encoder<'_>), s: &Session) -> Outcome {
    let mut out = Vec::new();
    f(&mut Encoder::new(&mut out, s.proto));
    Outcome::Reply(Bytes::from(out))
}

/// Redis's error frame for a message (`msg` without the leading '-').
/// CR and LF inside are turned into spaces, so client bytes quoted in the
/// message cannot break the frame.
pub fn error(msg: &str) -> Outcome {
    error_bytes(msg.as_bytes())
}

fn error_bytes(msg: &[u8]) -> Outcome {
    let mut out = Vec::with_capacity(msg.len() + 3);
    Encoder::new(&mut out, crate::resp::encode::Proto::Resp2).error(msg);
    Outcome::Reply(Bytes::from(out))
}

/// A HELP reply: one status line per entry, as Redis formats them.
fn help(s: &Session, lines: &[&str]) -> Outcome {
    built(
        |e| {
            e.array(lines.len());
            for l in lines {
                e.simple(l.as_bytes());
            }
        },
        s,
    )
}

/// The command's name as users write it: `CLIENT SETNAME`.
fn display_name(cmd: &Command) -> String {
    cmd.name.replace('|', " ").to_uppercase()
}

/// Integer arguments are read as Redis's string2ll reads them.
pub(crate) use crate::resp::parse_i64;

/// Answer a local command. `which` is the handler the command table
/// names; `cmd` is the resolved (sub)command, for the families that look
/// at their subcommand.
pub fn execute(
    shared: &Shared,
    s: &mut Session,
    which: LocalCmd,
    cmd: &'static Command,
    args: &Args,
) -> Outcome {
    let arg = |i: usize| args.get(i).unwrap_or_default();
    match which {
        LocalCmd::Ping => match args.len() {
            1 => stat(PONG),
            // PING takes at most one message (Redis checks this itself:
            // the table's arity only says "at least one").
            3.. => error("ERR wrong number of arguments for 'ping' command"),
            _ => built(
                |e| {
                    e.bulk(arg(1));
                },
                s,
            ),
        },
        LocalCmd::Echo => built(
            |e| {
                e.bulk(arg(1));
            },
            s,
        ),
        LocalCmd::Quit => Outcome::ReplyAndClose(Bytes::from_static(OK)),
        LocalCmd::Select => select(shared, s, arg(1)),
        LocalCmd::Time => time(s),
        LocalCmd::Lolwut => built(
            |e| {
                e.verbatim(
                    b"txt",
                    format!("mithril ver. {MITHRIL_VERSION}\n").as_bytes(),
                );
            },
            s,
        ),
        // Cluster-client handshakes; the proxy routes every read itself.
        LocalCmd::Asking | LocalCmd::Readonly | LocalCmd::Readwrite => stat(OK),
        // The worker runs them on the session's pinned connection
        // (`Decision::Watch` / `Unwatch`, worker/watch.rs): never here.
        LocalCmd::Watch | LocalCmd::Unwatch => stat(OK),
        LocalCmd::Auth => auth::auth(shared, s, args),
        LocalCmd::Hello => auth::hello(shared, s, args),
        LocalCmd::Reset => auth::reset(shared, s),
        LocalCmd::Acl => acl_cmd::acl(shared, s, cmd, args),
        // CLIENT ID too; CLIENT TRACKING's state is the worker's, which
        // answers it before this (worker/tracking.rs) but for its errors.
        LocalCmd::Client | LocalCmd::ClientId | LocalCmd::ClientTracking => {
            client::client(shared, s, cmd, args)
        }
        LocalCmd::Config => config_cmd::config(shared, s, cmd, args),
        LocalCmd::Cluster => cluster::cluster(shared, s, cmd, args),
        LocalCmd::Command => introspect::command(shared, s, cmd, args),
        // The router sends these to the worker (they need every worker,
        // the transaction code, or the worker's monitors); reaching here is a routing bug,
        // answered rather than panicked on.
        LocalCmd::Info
        | LocalCmd::ClientKill
        | LocalCmd::ClientUnblock
        | LocalCmd::ClientList
        | LocalCmd::ConfigResetstat
        | LocalCmd::Slowlog
        | LocalCmd::Monitor
        | LocalCmd::Multi
        | LocalCmd::Exec
        | LocalCmd::Sync
        | LocalCmd::Discard => error(&format!(
            "ERR mithril: internal routing error for '{}'",
            display_name(cmd)
        )),
    }
}

/// TIME: seconds and microseconds of the proxy's clock, as two bulk
/// strings.
fn time(s: &Session) -> Outcome {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    built(
        |e| {
            e.array(2)
                .bulk(now.as_secs().to_string().as_bytes())
                .bulk(now.subsec_micros().to_string().as_bytes());
        },
        s,
    )
}

/// SELECT n: within the pool's `databases` (a cluster pool has one, as a
/// cluster node has), the session's later requests take that database's
/// connections. Not while a WATCH pins the session to a connection of the
/// database it watched in.
fn select(shared: &Shared, s: &mut Session, arg: &[u8]) -> Outcome {
    let pool = shared.pools.get(s.pool());
    if pool.is_some_and(|p| p.groups) {
        // predixy's pools of groups: one refusal for every bad index.
        let databases = pool.map_or(1, |p| p.databases);
        return match parse_i64(arg) {
            Some(n) if (0..i64::from(databases)).contains(&n) => {
                if s.pin.is_some() && n != i64::from(s.db()) {
                    return error(
                        "ERR mithril: SELECT while a WATCH is in force is not supported, UNWATCH first",
                    );
                }
                s.select(n as u32);
                stat(OK)
            }
            _ => error("ERR invalid DB index"),
        };
    }
    let n = match parse_i64(arg) {
        Some(n) if i32::try_from(n).is_ok() => n,
        _ => return stat(ERR_NOT_INTEGER),
    };
    let databases = shared.pools.get(s.pool()).map_or(1, |p| p.databases);
    if databases <= 1 {
        return match n {
            0 => stat(OK),
            _ => error("ERR SELECT is not allowed in cluster mode"),
        };
    }
    if n < 0 || n >= i64::from(databases) {
        return error("ERR DB index is out of range");
    }
    if s.pin.is_some() {
        return error(
            "ERR mithril: SELECT while a WATCH is in force is not supported, UNWATCH first",
        );
    }
    s.select(n as u32);
    stat(OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_integers() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-5"), Some(-5));
        assert_eq!(parse_i64(b"12"), Some(12));
        for bad in [
            &b""[..],
            b"+1",
            b"01",
            b"-0",
            b"1x",
            b" 1",
            b"99999999999999999999",
        ] {
            assert_eq!(parse_i64(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn errors_stay_one_line() {
        let Outcome::Reply(r) = error("ERR a\r\nb") else {
            panic!()
        };
        assert_eq!(&r[..], b"-ERR a  b\r\n");
    }
}
