//! Server administration through the proxy: WAIT and WAITAOF, DEBUG, and
//! CONFIG GET / SET of the servers' parameters.
//!
//! WAIT / WAITAOF: a node counts the replicas (or AOFs) that acknowledged
//! the *connection's* last write, and may block for the whole timeout, so
//! neither the session's shared connection (it would stall every session
//! behind it) nor a bare lease (whose last write is none: it would answer
//! at once) can carry it. Each master the session wrote to since its last
//! WAIT (`session::Written`; one master, rotating, when none) gets, in
//! order:
//!
//! ```text
//!   shared conn: PING (WaitSync) ─ answered: every earlier request of the
//!        │                         session on that conn has run
//!        ▼
//!   lease: FUNCTION RESTORE <empty payload> APPEND   (Reload: dropped)
//!          WAIT n t                                  (Kill(part))
//! ```
//!
//! The empty restore loads no library and changes nothing, but a node
//! propagates it, which sets the lease's write offset to the master's
//! current one: past every write the session made there. WAIT on the
//! lease then waits for what a WAIT on the writing connection would. With
//! no write since the last WAIT, one master (rotating) gets the WAIT on a
//! lease without the restore: the count a connection that wrote nothing
//! gets (its connected replicas). The
//! answers fold as a gathering: the first error, else the smallest count
//! (WAITAOF: element by element). The session goes on dispatching
//! meanwhile (the reply keeps its place in the ring); a session that
//! leaves closes its WAIT leases, so nothing waits for ever.
//!
//! DEBUG: the subcommands that name keys go to the key's master; the rest
//! to every master, answered OK when all say OK, DIGEST as one digest of
//! theirs, anything else as the first master's reply. The ones that stop
//! or crash a server are refused.

use super::purpose::{InFlight, Purpose};
use super::scripts::{all_ok, first_error, is_error};
use super::{Timer, Worker};
use crate::command::Args;
use crate::resp::encode::{array_into, bulk_into, Encoder, Proto};
use crate::resp::value::{self, Value};
use crate::router;
use crate::script::sha1;
use crate::session::ring::{Finish, Gathering};
use crate::session::Session;
use bytes::Bytes;
use reactor::{Context, Key};

/// `FUNCTION RESTORE <payload> APPEND` with the payload of an empty
/// function set (RDB version 10 and its CRC64, as `FUNCTION DUMP` gives it
/// on a 7.0 server with no library): loads nothing, but is propagated.
const RESTORE_NOTHING: &[u8] =
    b"*4\r\n$8\r\nFUNCTION\r\n$7\r\nRESTORE\r\n$10\r\n\n\x00]\x9b\\@\x0f\x7f\xa2\xda\r\n$6\r\nAPPEND\r\n";
const PING: &[u8] = b"*1\r\n$4\r\nPING\r\n";
const OK: &[u8] = b"+OK\r\n";
const ERR_BAD_REPLY: &[u8] = b"-ERR mithril: unexpected reply from a node\r\n";
/// WAIT: the smallest count; WAITAOF (`aof`): the smallest of each of the
/// two counts. The first error wins.
fn min_counts(parts: Vec<Bytes>, aof: bool) -> Bytes {
    if let Some(e) = first_error(&parts) {
        return e;
    }
    let width = if aof { 2 } else { 1 };
    let mut least = [i64::MAX; 2];
    for p in &parts {
        let Ok(Some((v, _))) = value::parse(p) else {
            return Bytes::from_static(ERR_BAD_REPLY);
        };
        let counts: Vec<i64> = match (&v, aof) {
            (Value::Int(n), false) => vec![*n],
            (v, true) => match v.as_array() {
                Some(items) => items.iter().filter_map(Value::as_int).collect(),
                None => Vec::new(),
            },
            _ => Vec::new(),
        };
        if counts.len() != width {
            return Bytes::from_static(ERR_BAD_REPLY);
        }
        for (l, c) in least.iter_mut().zip(counts) {
            *l = (*l).min(c);
        }
    }
    if parts.is_empty() {
        return Bytes::from_static(ERR_BAD_REPLY);
    }
    Bytes::from(match aof {
        false => format!(":{}\r\n", least[0]),
        true => format!("*2\r\n:{}\r\n:{}\r\n", least[0], least[1]),
    })
}

/// DEBUG DIGEST over the masters (in shard order): forty zeros when every
/// master's dataset is empty, as one empty server answers; else the SHA-1
/// of their digests, so the same data gives the same digest and any change
/// another (it is not the digest one server holding all the keys gives).
fn combined_digest(parts: Vec<Bytes>) -> Bytes {
    if let Some(e) = first_error(&parts) {
        return e;
    }
    let mut all = Vec::with_capacity(parts.len() * 40);
    for p in &parts {
        let Ok(Some((v, _))) = value::parse(p) else {
            return Bytes::from_static(ERR_BAD_REPLY);
        };
        match v.as_bytes() {
            Some(d) if d.len() == 40 => all.extend_from_slice(d),
            _ => return Bytes::from_static(ERR_BAD_REPLY),
        }
    }
    let text = if all.iter().all(|&b| b == b'0') {
        [b'0'; 40]
    } else {
        sha1::hex(&sha1::digest(&all))
    };
    // A status reply, as DEBUG DIGEST's.
    let mut out = Vec::with_capacity(43);
    out.push(b'+');
    out.extend_from_slice(&text);
    out.extend_from_slice(b"\r\n");
    Bytes::from(out)
}

/// The other DEBUG subcommands on every master: OK when all said OK, else
/// the first error, else the first master's reply.
fn first_or_ok(parts: Vec<Bytes>) -> Bytes {
    if let Some(e) = first_error(&parts) {
        return e;
    }
    if parts.iter().all(|p| p.as_ref() == OK) {
        return Bytes::from_static(OK);
    }
    parts
        .into_iter()
        .next()
        .unwrap_or_else(|| Bytes::from_static(ERR_BAD_REPLY))
}

/// CONFIG GET: mithril's own pairs first, then the node's that mithril
/// does not shadow (a name that is one of its directives, or one already
/// listed), as a map in the session's protocol.
fn config_get_reply(own: &[(Vec<u8>, String)], node: &[u8], proto: Proto) -> Bytes {
    if is_error(node) {
        return Bytes::copy_from_slice(node);
    }
    let Ok(Some((v, _))) = value::parse(node) else {
        return Bytes::from_static(ERR_BAD_REPLY);
    };
    let flat: Vec<&[u8]> = match &v {
        Value::Map(pairs) => pairs
            .iter()
            .flat_map(|(k, v)| [k.as_bytes(), v.as_bytes()])
            .map(|b| b.unwrap_or_default())
            .collect(),
        other => match other.as_array() {
            Some(items) => items
                .iter()
                .map(|i| i.as_bytes().unwrap_or_default())
                .collect(),
            None => return Bytes::from_static(ERR_BAD_REPLY),
        },
    };
    let shadowed = |name: &[u8]| {
        own.iter().any(|(n, _)| n.eq_ignore_ascii_case(name))
            || std::str::from_utf8(name)
                .ok()
                .and_then(crate::config::lookup)
                .is_some()
    };
    let theirs: Vec<(&[u8], &[u8])> = flat
        .chunks_exact(2)
        .map(|kv| (kv[0], kv[1]))
        .filter(|(k, _)| !shadowed(k))
        .collect();
    let mut out = Vec::new();
    let mut e = Encoder::new(&mut out, proto);
    e.map(own.len() + theirs.len());
    for (k, v) in own {
        e.bulk(k).bulk(v.as_bytes());
    }
    for (k, v) in theirs {
        // A node's password (masterauth, requirepass) is never shown,
        // as mithril's own backend-password is not.
        let v = match crate::command::known::secret_param(k) && !v.is_empty() {
            true => crate::local::HIDDEN_PASSWORD.as_bytes(),
            false => v,
        };
        e.bulk(k).bulk(v);
    }
    Bytes::from(out)
}

impl Worker {
    /// WAIT / WAITAOF (see the module doc).
    pub(super) fn wait(
        &mut self,
        cx: &mut Context<'_, Timer>,
        key: Key,
        frame: Bytes,
        args: &Args,
    ) {
        let pool = self.pool_of(key);
        let masters = self.place.master_count(pool);
        let first = self.place.masters(pool).start;
        let epoch = self.place.epoch();
        let aof = args
            .get(0)
            .is_some_and(|n| n.eq_ignore_ascii_case(b"waitaof"));
        let Some(s) = self.sessions.get_mut(key) else {
            return;
        };
        // With no write since the last WAIT, the count one master gives
        // a connection that wrote nothing (its connected replicas).
        let (targets, wrote) = match s.take_written(epoch, first, masters) {
            None => ((first..first + masters).collect(), true),
            Some(t) if t.is_empty() => (self.place.any_master(pool).into_iter().collect(), false),
            Some(t) => (t, true),
        };
        let proto = s.proto;
        let finish: Finish = Box::new(move |parts| min_counts(parts, aof));
        let mut g = Gathering::new(targets.len(), finish);
        g.request = frame; // sent on the leases; observe: slow log
        let seq = s.ring.push_gather(g);
        self.obs.stats.pool(s.pool()).fragments += targets.len() as u64; // observe
        for (part, &shard) in targets.iter().enumerate() {
            let purpose = Purpose::WaitSync {
                part: part as u16,
                shard: shard as u16,
                wrote,
            };
            match self.place.shard_master(shard, proto) {
                Some(pool) => {
                    let out = InFlight::new(key, seq, Bytes::from_static(PING), purpose);
                    self.send_to_pool(cx, pool, out)
                }
                None => {
                    let e = Bytes::from_static(router::ERR_NO_TOPOLOGY);
                    self.collect_part(key, seq, part as u32, e)
                }
            }
        }
    }

    /// A WAIT part's PING came back on the session's shared connection:
    /// what the session sent there before has run. The WAIT goes on a
    /// lease now, behind the restore that sets the lease's write offset.
    pub(super) fn wait_synced(&mut self, cx: &mut Context<'_, Timer>, f: InFlight, frame: Bytes) {
        let Purpose::WaitSync { part, shard, wrote } = f.purpose else {
            return;
        };
        let (session, seq, part) = (f.session, f.seq, u32::from(part));
        if is_error(&frame) {
            return self.collect_part(session, seq, part, frame);
        }
        let Some(s) = self.sessions.get_mut(session) else {
            return;
        };
        if s.eof() && !s.input().is_blocked() {
            // The client left (EOF) before its WAIT could block: as for a
            // blocking command, it is cancelled, not sent.
            s.close_after_flush();
            return self.deliver(session, seq, Bytes::new(), &[]);
        }
        let proto = s.proto;
        let Some(request) = s.ring.gather_mut(seq).map(|g| g.request.clone()) else {
            return;
        };
        let addr = self
            .place
            .shard_master(usize::from(shard), proto)
            .map(|p| self.place.addr_of(p));
        let Some(addr) = addr else {
            let e = Bytes::from_static(router::ERR_NO_TOPOLOGY);
            return self.collect_part(session, seq, part, e);
        };
        match self.take_lease(cx, addr, proto, self.where_of(session)) {
            Ok(lease) => {
                if wrote {
                    let restore = Bytes::from_static(RESTORE_NOTHING);
                    self.send_on(lease, InFlight::new(Key::NONE, 0, restore, Purpose::Reload));
                }
                self.send_on(
                    lease,
                    InFlight::new(session, seq, request, Purpose::Kill(part)),
                );
                let backends = &self.backends;
                if let Some(s) = self.sessions.get_mut(session) {
                    s.add_wait_lease(lease, seq, |k| {
                        backends.get(k).is_some_and(|b| b.carries(session))
                    });
                }
            }
            Err(e) => self.collect_part(session, seq, part, e),
        }
    }

    /// The session leaves: close the leases still carrying its WAIT parts
    /// (the nodes forget the WAITs).
    pub(super) fn close_wait_leases(
        &mut self,
        cx: &mut Context<'_, Timer>,
        key: Key,
        leases: Vec<(Key, u64)>,
    ) {
        for (lease, _) in leases {
            self.close_lease_of(cx, key, lease);
        }
    }

    /// The client half-closed while its WAIT is out: as for a blocking
    /// command, the WAIT is cancelled (its leases closed, its reply
    /// nothing), every earlier reply is still written, and the session
    /// closes then.
    pub(super) fn abandon_waits(&mut self, cx: &mut Context<'_, Timer>, key: Key) {
        let Some(s) = self.sessions.get_mut(key) else {
            return;
        };
        // Only the leases still carrying one of its WAITs (the others
        // were answered and went back).
        let backends = &self.backends;
        s.keep_wait_leases(|k| backends.get(k).is_some_and(|b| b.carries(key)));
        if !s.has_wait_leases() {
            return;
        }
        let leases = s.take_wait_leases();
        s.close_after_flush();
        for &(_, seq) in &leases {
            self.deliver(key, seq, Bytes::new(), &[]);
        }
        self.close_wait_leases(cx, key, leases);
    }

    /// DEBUG (see the module doc).
    pub(super) fn debug(
        &mut self,
        cx: &mut Context<'_, Timer>,
        key: Key,
        frame: Bytes,
        args: &Args,
    ) {
        // The router sent the refused and the keyed subcommands elsewhere
        // (`router::DEBUG_KEYED`): what is left goes to every master.
        let sub = args.get(1).unwrap_or_default();
        let finish: Finish = match sub.eq_ignore_ascii_case(b"digest") {
            true => Box::new(combined_digest),
            false => Box::new(first_or_ok),
        };
        self.gather_masters(cx, key, frame, finish);
    }

    /// CONFIG GET of patterns that may match a server's parameters.
    pub(super) fn config_get(
        &mut self,
        cx: &mut Context<'_, Timer>,
        key: Key,
        frame: Bytes,
        args: &Args,
    ) {
        let own = crate::local::config_own_pairs(&self.shared, args);
        let Some(s) = self.sessions.get_mut(key) else {
            return;
        };
        let proto = s.proto;
        let finish: Finish = Box::new(move |parts: Vec<Bytes>| {
            let node = parts.first().cloned().unwrap_or_default();
            config_get_reply(&own, &node, proto)
        });
        let mut g = Gathering::new(1, finish);
        g.request = frame.clone(); // observe: slow log
        let seq = s.ring.push_gather(g);
        let pool = self.place.any_master(self.pool_of(key));
        match pool.and_then(|shard| self.place.shard_master(shard, proto)) {
            Some(pool) => {
                self.send_to_pool(cx, pool, InFlight::new(key, seq, frame, Purpose::Part(0)))
            }
            None => self.collect_part(key, seq, 0, Bytes::from_static(router::ERR_NO_TOPOLOGY)),
        }
    }

    /// CONFIG SET naming a server's parameter. The servers' pairs go to
    /// every master (every OK, else the first error). mithril's own pairs
    /// among them are checked first (their error is the answer, and
    /// nothing is sent), and applied once every master said OK: a node's
    /// refusal (an unknown name, a bad value) leaves mithril's unchanged.
    pub(super) fn config_set(
        &mut self,
        cx: &mut Context<'_, Timer>,
        key: Key,
        frame: Bytes,
        args: &Args,
    ) {
        let mut own = Vec::new();
        let mut theirs = Vec::new();
        for i in (2..args.len()).step_by(2) {
            let (name, value) = (
                args.get(i).unwrap_or_default(),
                args.get(i + 1).unwrap_or_default(),
            );
            let mine = std::str::from_utf8(name)
                .ok()
                .and_then(crate::config::lookup)
                .is_some_and(|d| d.name != "include");
            match mine {
                true => own.push((name.to_vec(), value.to_vec())),
                false => theirs.push((name, value)),
            }
        }
        if own.is_empty() {
            return self.gather_masters(cx, key, frame, Box::new(all_ok));
        }
        if let Some(e) = crate::local::config_set_own(&self.shared, &own, false) {
            return self.reply(key, e);
        }
        let mut req = Vec::with_capacity(frame.len());
        array_into(&mut req, 2 + 2 * theirs.len());
        bulk_into(&mut req, b"CONFIG");
        bulk_into(&mut req, b"SET");
        for (name, value) in theirs {
            bulk_into(&mut req, name);
            bulk_into(&mut req, value);
        }
        let shared = self.shared.clone();
        let finish: Finish = Box::new(move |parts| {
            let r = all_ok(parts);
            if r.as_ref() != OK {
                return r;
            }
            crate::local::config_set_own(&shared, &own, true).unwrap_or(r)
        });
        self.gather_masters(cx, key, Bytes::from(req), finish);
    }

    /// `frame` to every master, their replies made into one by `finish`.
    fn gather_masters(
        &mut self,
        cx: &mut Context<'_, Timer>,
        key: Key,
        frame: Bytes,
        finish: Finish,
    ) {
        self.gather_every_master(cx, key, frame, finish, false);
    }
}

/// Session hook: the leases still carrying its WAIT parts are closed.
#[inline]
pub(super) fn session_closed(w: &mut Worker, cx: &mut Context<'_, Timer>, s: &mut Session) {
    if s.has_wait_leases() {
        w.close_wait_leases(cx, s.key, s.take_wait_leases());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &'static [u8]) -> Bytes {
        Bytes::from_static(s)
    }

    #[test]
    fn wait_answers_the_smallest_count_or_the_first_error() {
        assert_eq!(
            min_counts(vec![b(b":2\r\n"), b(b":1\r\n"), b(b":3\r\n")], false),
            b(b":1\r\n")
        );
        assert_eq!(min_counts(vec![b(b":0\r\n")], false), b(b":0\r\n"));
        let e = b(b"-ERR timeout is negative\r\n");
        assert_eq!(min_counts(vec![b(b":1\r\n"), e.clone()], false), e);
        assert_eq!(
            min_counts(
                vec![b(b"*2\r\n:1\r\n:2\r\n"), b(b"*2\r\n:0\r\n:5\r\n")],
                true
            ),
            b(b"*2\r\n:0\r\n:2\r\n")
        );
        assert_eq!(min_counts(vec![b(b"+OK\r\n")], false), b(ERR_BAD_REPLY));
        assert_eq!(min_counts(vec![b(b"*1\r\n:1\r\n")], true), b(ERR_BAD_REPLY));
    }

    #[test]
    fn debug_digest_is_zero_only_for_empty_masters() {
        let zero = b(b"+0000000000000000000000000000000000000000\r\n");
        assert_eq!(combined_digest(vec![zero.clone(), zero.clone()]), zero);
        let some = b(b"+943d800368fb9c0e951138f1bc0e313ac769d91f\r\n");
        let one = combined_digest(vec![zero.clone(), some.clone()]);
        assert_ne!(one, zero);
        assert_eq!(one, combined_digest(vec![zero.clone(), some.clone()]));
        assert_ne!(one, combined_digest(vec![some, zero]));
        assert_eq!(first_or_ok(vec![b(OK), b(OK)]), b(OK));
        assert_eq!(first_or_ok(vec![b(b":1\r\n"), b(OK)]), b(b":1\r\n"));
    }

    #[test]
    fn config_get_lists_its_own_then_the_unshadowed_server_pairs() {
        let own = vec![(b"maxmemory".to_vec(), "0".to_string())];
        let node = b(b"*6\r\n$9\r\nmaxmemory\r\n$3\r\n100\r\n$2\r\nhz\r\n$2\r\n10\r\n$4\r\nport\r\n$4\r\n7000\r\n");
        let r = config_get_reply(&own, &node, Proto::Resp2);
        assert_eq!(
            r,
            b(b"*4\r\n$9\r\nmaxmemory\r\n$1\r\n0\r\n$2\r\nhz\r\n$2\r\n10\r\n")
        );
        let node = b(b"*4\r\n$10\r\nmasterauth\r\n$2\r\npw\r\n$10\r\nmasteruser\r\n$0\r\n\r\n");
        assert_eq!(
            config_get_reply(&[], &node, Proto::Resp2),
            b(b"*4\r\n$10\r\nmasterauth\r\n$8\r\n(hidden)\r\n$10\r\nmasteruser\r\n$0\r\n\r\n")
        );
        let node3 = b(b"%1\r\n$2\r\nhz\r\n$2\r\n10\r\n");
        let r = config_get_reply(&[], &node3, Proto::Resp3);
        assert_eq!(r, b(b"%1\r\n$2\r\nhz\r\n$2\r\n10\r\n"));
    }
}
