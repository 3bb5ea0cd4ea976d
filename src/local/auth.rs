//! AUTH, HELLO and RESET: who the client is and which protocol it speaks.
//!
//! The users are the [`Acl`](crate::acl::Acl)'s: `default` (a `requirepass`
//! password, a `user default` line, or the built-in one that needs no
//! password) and the `user` lines. A session starts as `default`,
//! authenticated when that user needs no password. `AUTH user password`
//! and `HELLO ... AUTH user password` switch it to that user; `AUTH
//! password` names `default`, as in Redis (with `auth-any-user yes`, for
//! predixy's clients, also any other user with that password). A failed
//! attempt never takes away an earlier success, as in Redis, and is
//! counted in INFO (`acl_access_denied_auth`) and logged (warning, with
//! the user name and the client's address, sampled).
//!
//! Guessing is capped (`acl::throttle`): the failed attempt that reaches
//! `auth-max-failures` on a connection is answered and the connection
//! closed; an address over `auth-failures-per-source` this second gets
//! [`ERR_THROTTLED`](crate::acl::throttle::ERR_THROTTLED) without its
//! password being looked at.
//!
//! Never: log or echo a password.

use super::{built, client, parse_i64, Outcome};
use crate::acl::{AuthError, SessionStart};
use crate::command::Args;
use crate::resp::encode::Proto;
use crate::session::Session;
use crate::shared::Shared;
use bytes::Bytes;

const ERR_WRONGPASS: &[u8] = b"-WRONGPASS invalid username-password pair or user is disabled.\r\n";
const ERR_NO_PASSWORD: &[u8] = b"-ERR AUTH <password> called without any password configured \
for the default user. Are you sure your configuration is correct?\r\n";
const ERR_HELLO_NOAUTH: &[u8] = b"-NOAUTH HELLO must be called with the client already \
authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to \
authenticate the client and select the RESP protocol version at the same time\r\n";
const ERR_NOPROTO: &[u8] = b"-NOPROTO unsupported protocol version\r\n";
const ERR_PROTO_NOT_INT: &[u8] = b"-ERR Protocol version is not an integer or out of range\r\n";

fn stat(b: &'static [u8]) -> Outcome {
    Outcome::Reply(Bytes::from_static(b))
}

/// Authenticates `s` as `user` (`None`: the one-argument form) with
/// `pass`; on failure the session keeps what it had.
fn log_in(
    shared: &Shared,
    s: &mut Session,
    user: Option<&[u8]>,
    pass: &[u8],
) -> Result<(), AuthError> {
    // A pool that asks its clients for a password of its own (twemproxy's
    // redis_auth) takes it for `default`.
    let pool_pass = shared
        .pools
        .get(s.pool())
        .and_then(|p| p.client_password.as_deref());
    if let Some(pw) = pool_pass {
        if user.map_or(true, |u| u == b"default") {
            if pass != pw.as_bytes() {
                return Err(AuthError::WrongPass);
            }
            let u = shared.admin.acl.default_user();
            s.log_in(u);
            return Ok(());
        }
    }
    let u = shared.admin.acl.authenticate(user, pass)?;
    s.log_in(u);
    Ok(())
}

/// A refused AUTH or HELLO AUTH, as a warning naming the user, sampled
/// (one line per second and thread, the next saying how many were held
/// back): a client can repeat it as fast as it is answered. The name is
/// the client's bytes: shown escaped and cut at 64.
fn log_refusal(what: &str, s: &Session, user: &[u8]) {
    if !log::log_enabled!(target: "mithril::auth", log::Level::Warn) {
        return;
    }
    if let Some(n) = crate::stats::sample::allow_site(concat!(file!(), ":", line!())) {
        log::warn!(
            target: "mithril::auth",
            "client {} ({}): {what} refused for user '{}'{}",
            s.id,
            s.peer(),
            user[..user.len().min(64)].escape_ascii(),
            crate::stats::sample::note(n)
        );
    }
}

/// A failed login: counted for the connection and its address; the
/// answer, or it and a close once the connection spent its
/// `auth-max-failures`.
fn failed(
    shared: &Shared,
    s: &mut Session,
    what: &str,
    user: &[u8],
    reply: &'static [u8],
) -> Outcome {
    let throttle = &shared.admin.acl.throttle;
    throttle.failed(s.peer().ip(), std::time::Instant::now());
    let failures = s.auth_failed();
    log_refusal(what, s, user);
    if throttle.conn_spent(failures) {
        return Outcome::ReplyAndClose(Bytes::from_static(reply));
    }
    stat(reply)
}

/// An address over `auth-failures-per-source` this second: refused
/// unchecked (and counted against the connection's cap).
fn throttled(shared: &Shared, s: &mut Session) -> Option<Outcome> {
    let throttle = &shared.admin.acl.throttle;
    if !throttle.refused(s.peer().ip(), std::time::Instant::now()) {
        return None;
    }
    let failures = s.auth_failed();
    let reply = crate::acl::throttle::ERR_THROTTLED;
    Some(if throttle.conn_spent(failures) {
        Outcome::ReplyAndClose(Bytes::from_static(reply))
    } else {
        stat(reply)
    })
}

fn auth_error(e: AuthError) -> Outcome {
    match e {
        AuthError::WrongPass => stat(ERR_WRONGPASS),
        AuthError::NoDefaultPassword => stat(ERR_NO_PASSWORD),
    }
}

/// AUTH password | AUTH username password.
pub fn auth(shared: &Shared, s: &mut Session, args: &Args) -> Outcome {
    let arg = |i: usize| args.get(i).unwrap_or_default();
    if !matches!(args.len(), 2 | 3) {
        return stat(super::ERR_SYNTAX);
    }
    if let Some(refused) = throttled(shared, s) {
        return refused;
    }
    let (user, outcome) = match args.len() {
        2 => (&b"default"[..], log_in(shared, s, None, arg(1))),
        _ => (arg(1), log_in(shared, s, Some(arg(1)), arg(2))),
    };
    match outcome {
        Ok(()) => stat(super::OK),
        Err(AuthError::WrongPass) => failed(shared, s, "AUTH", user, ERR_WRONGPASS),
        Err(e) => auth_error(e),
    }
}

/// HELLO [protover [AUTH username password] [SETNAME clientname]]: checks
/// everything first, then authenticates, then names the client and
/// switches its protocol, and answers the server map in the new protocol.
pub fn hello(shared: &Shared, s: &mut Session, args: &Args) -> Outcome {
    let arg = |i: usize| args.get(i).unwrap_or_default();
    let mut proto = None;
    if args.len() >= 2 {
        match parse_i64(arg(1)) {
            None => return stat(ERR_PROTO_NOT_INT),
            Some(2) => proto = Some(Proto::Resp2),
            Some(3) => proto = Some(Proto::Resp3),
            Some(_) => return stat(ERR_NOPROTO),
        }
    }
    let mut creds = None;
    let mut name = None;
    let mut j = 2;
    while j < args.len() {
        let more = args.len() - 1 - j;
        let opt = arg(j);
        if opt.eq_ignore_ascii_case(b"AUTH") && more >= 2 {
            creds = Some((arg(j + 1), arg(j + 2)));
            j += 3;
        } else if opt.eq_ignore_ascii_case(b"SETNAME") && more >= 1 {
            let n = arg(j + 1);
            if !client::valid_name(n) {
                return stat(client::ERR_BAD_NAME);
            }
            name = Some(n);
            j += 2;
        } else {
            let mut msg = b"ERR Syntax error in HELLO option '".to_vec();
            msg.extend_from_slice(c_str(opt));
            msg.push(b'\'');
            return super::error_bytes(&msg);
        }
    }
    if let Some((user, pass)) = creds {
        if let Some(refused) = throttled(shared, s) {
            return refused;
        }
        // HELLO always names the user: no password-only lookup here.
        if log_in(shared, s, Some(user), pass).is_err() {
            return failed(shared, s, "HELLO AUTH", user, ERR_WRONGPASS);
        }
    }
    if !s.authenticated() {
        return stat(ERR_HELLO_NOAUTH);
    }
    if let Some(n) = name {
        s.set_name(n);
    }
    if let Some(p) = proto {
        s.proto = p;
    }
    let id = i64::try_from(s.id).unwrap_or(i64::MAX);
    let proto_num = if s.proto == Proto::Resp3 { 3 } else { 2 };
    built(
        |e| {
            e.map(7);
            e.bulk(b"server").bulk(b"redis");
            e.bulk(b"version")
                .bulk(super::reported_version(shared).as_bytes());
            e.bulk(b"proto").int(proto_num);
            e.bulk(b"id").int(id);
            let ring = shared.pools.get(s.pool()).is_some_and(|p| p.ring);
            e.bulk(b"mode")
                .bulk(if ring { b"standalone" } else { b"cluster" });
            e.bulk(b"role").bulk(b"master");
            e.bulk(b"modules").array(0);
        },
        s,
    )
}

/// RESET: the connection as it was when it was accepted.
pub fn reset(shared: &Shared, s: &mut Session) -> Outcome {
    reset_session(s, shared.session_start(s.pool()));
    // RESET selects the pool's own database again.
    s.select(shared.pools.get(s.pool()).map_or(0, |p| p.db));
    stat(b"+RESET\r\n")
}

/// Puts a session back in its just-connected state: RESP2, no name, the
/// `default` user, and not authenticated when that user has a password.
/// (Unsubscribing and discarding a transaction belong here too; their
/// owners add them.)
pub fn reset_session(s: &mut Session, start: SessionStart) {
    s.proto = Proto::Resp2;
    s.set_name(b"");
    s.log_out(start);
    s.set_reply_mode(crate::session::ClientReply::On);
}

/// The bytes before the first NUL: Redis formats options as C strings.
fn c_str(b: &[u8]) -> &[u8] {
    match b.iter().position(|&c| c == 0) {
        Some(n) => b.get(..n).unwrap_or(b),
        None => b,
    }
}
