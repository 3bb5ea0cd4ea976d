//! Transactions: MULTI queues locally, EXEC ships the whole transaction.
//!
//! Between MULTI and EXEC the proxy queues each request itself (answering
//! +QUEUED) and checks that every key hashes to the slot of the first one:
//! a key elsewhere gets Redis's CROSSSLOT error and dooms the transaction,
//! as a cluster node does. EXEC sends `MULTI, the requests, EXEC` as one
//! frame to the slot's master (any master if no command had a key); the
//! node's replies to MULTI and to each queued request are dropped, and
//! EXEC's reply is the client's. If a node answers a queued request with a
//! redirect, its EXEC fails, and the whole transaction is sent again where
//! the redirect points (after ASKING, for ASK). If it answers one with
//! TRYAGAIN or CLUSTERDOWN (a multi-key command on a slot being migrated),
//! EXEC aborts before anything ran, and the whole transaction is retried
//! after the waits of `retry.rs`; EXEC's EXECABORT is the answer only once
//! they are spent.
//!
//! FLUSHALL / FLUSHDB and SCRIPT LOAD / FLUSH run in the transaction on its node
//! and, sent just before EXEC, on every other master (replies dropped);
//! FLUSHALL / FLUSHDB are refused while watching (the router), whose nil
//! could not take them back.
//!
//! Rights are checked when a command is queued and, if any user was
//! edited since MULTI, again at EXEC (`recheck`): a command the user may
//! no longer run is left out, and EXEC's reply has Redis's NOPERM "ACLs
//! rules changed between the moment the transaction was accumulated and
//! the EXEC call" in its place (`spliced`), the others having run.
//!
//! An EXEC the router refuses (OOM, NOPERM, BUSY while a script runs long)
//! ends the transaction with EXECABORT and the reason (`dispatch.rs`,
//! `refuse_exec`).
//!
//! The queue is bounded by `query-buffer-limit` bytes.

use super::purpose::{InFlight, Purpose, Release};
use super::{Timer, Worker};
use crate::command::{self, Args, Command, Route, Wide};
use crate::placement::Unit;
use crate::resp::limits::Limits;
use crate::resp::request::{RequestScanner, Scan};
use crate::router;
use crate::session::Txn;
use bytes::Bytes;
use reactor::{Context, Key};

const MULTI: &[u8] = b"*1\r\n$5\r\nMULTI\r\n";
const EXEC: &[u8] = b"*1\r\n$4\r\nEXEC\r\n";
const QUEUED: &[u8] = b"+QUEUED\r\n";
const ERR_NESTED: &[u8] = b"-ERR MULTI calls can not be nested\r\n";
const ERR_EXEC_WITHOUT: &[u8] = b"-ERR EXEC without MULTI\r\n";
const ERR_DISCARD_WITHOUT: &[u8] = b"-ERR DISCARD without MULTI\r\n";
pub(super) const EXECABORT: &[u8] =
    b"-EXECABORT Transaction discarded because of previous errors.\r\n";
const ERR_TOO_LARGE: &[u8] = b"-ERR mithril: transaction too large (query-buffer-limit)\r\n";

/// `MULTI, the queued requests, EXEC` as one frame.
pub(super) fn frame_of(t: &Txn) -> Bytes {
    let mut req = Vec::with_capacity(t.bytes + MULTI.len() + EXEC.len());
    req.extend_from_slice(MULTI);
    for q in &t.queued {
        req.extend_from_slice(q);
    }
    req.extend_from_slice(EXEC);
    Bytes::from(req)
}

/// How many replies a transaction frame produces (one per request in it).
pub(super) fn replies_of(f: &InFlight) -> u32 {
    let mut sc = RequestScanner::new();
    let limits = Limits {
        max_bulk_len: usize::MAX / 2,
        ..Limits::default()
    };
    let mut at = 0;
    let mut n = 0;
    while at < f.req.len() {
        match sc.scan(&f.req[at..], &limits, true) {
            Scan::Request { len } | Scan::Skip { len } | Scan::Inline { len } => {
                at += len;
                n += 1;
            }
            _ => break,
        }
    }
    n.max(1)
}

impl Worker {
    /// A transaction holding FLUSHALL/FLUSHDB or SCRIPT LOAD: those
    /// commands to every master but the transaction's own (`shard`), queued
    /// ahead of anything the session sends them later on this worker's
    /// connections, so the session reads nothing of theirs from before the
    /// flush and finds the script everywhere. Their replies are dropped:
    /// the node that runs the transaction answers for it.
    fn send_to_other_masters(
        &mut self,
        cx: &mut Context<'_, Timer>,
        key: Key,
        shard: Option<usize>,
        frames: Vec<Bytes>,
    ) {
        let Some(s) = self.sessions.get(key) else {
            return;
        };
        let (proto, sticky, db) = (s.proto, s.conn_choice(), s.other_db());
        for other in self.place.masters(s.pool()).filter(|&i| Some(i) != shard) {
            let Some(pool) = self.place.shard_master(other, proto) else {
                continue;
            };
            let pool = db.map_or(pool, |db| self.place.in_db(pool, db));
            if let Ok(bkey) = self.backend_for(cx, pool, sticky) {
                for f in &frames {
                    self.send_on(
                        bkey,
                        InFlight::new(Key::NONE, 0, f.clone(), Purpose::Reload),
                    );
                }
            }
        }
    }

    /// Mark the session's transaction (if any) as doomed.
    pub(super) fn txn_flag(&mut self, key: Key) {
        if let Some(t) = self.sessions.get_mut(key).and_then(|s| s.txn.as_mut()) {
            t.failed = true;
        }
    }

    pub(super) fn txn_multi(&mut self, key: Key) {
        // Watching: every queued key must be of the watched slot.
        let slot = self.pinned_slot(key);
        let Some(s) = self.sessions.get_mut(key) else {
            return;
        };
        if s.txn.is_some() {
            return self.reply_static(key, ERR_NESTED);
        }
        s.txn = Some(Box::new(Txn {
            slot,
            acl_gen: s.acl_gen(),
            ..Txn::default()
        }));
        self.reply_static(key, b"+OK\r\n");
    }

    pub(super) fn txn_discard(&mut self, key: Key) {
        let Some(s) = self.sessions.get_mut(key) else {
            return;
        };
        match s.txn.take() {
            // DISCARD leaves the WATCH too, as on a node.
            Some(_) if self.release_pin(key, Release::Ok) => {}
            Some(_) => self.reply_static(key, b"+OK\r\n"),
            None => self.reply_static(key, ERR_DISCARD_WITHOUT),
        }
    }

    /// Queue one request of an open transaction; `unit` is its keys' (the
    /// router checked they are the transaction's).
    pub(super) fn txn_queue(
        &mut self,
        key: Key,
        cmd: &'static Command,
        unit: Option<Unit>,
        frame: Bytes,
        args: &Args,
    ) {
        let limit = self.query_limit;
        let Some(t) = self.sessions.get_mut(key).and_then(|s| s.txn.as_mut()) else {
            return;
        };
        if t.slot.is_none() {
            t.slot = unit;
        }
        if t.bytes + frame.len() > limit {
            t.failed = true;
            return self.reply_static(key, ERR_TOO_LARGE);
        }
        t.bytes += frame.len();
        // EXEC is refused over maxmemory when it would run a denyoom command.
        t.denyoom |= cmd.flags & command::flags::DENYOOM != 0;
        match cmd.route {
            Route::ClusterWide(Wide::Flushall) if !t.flushes => {
                t.flushes = true;
                t.everywhere.push(frame.clone());
            }
            Route::ClusterWide(Wide::ScriptFlush) => {
                t.flushes_scripts = true;
                t.everywhere.push(frame.clone());
            }
            Route::ClusterWide(Wide::ScriptLoad) => {
                if let Some(body) = args.get(2) {
                    self.shared.scripts.note_script(body);
                }
                t.everywhere.push(frame.clone());
            }
            _ => {}
        }
        t.queued.push(frame);
        self.reply_static(key, QUEUED);
    }

    /// EXEC's reply, with the errors of the commands an ACL change
    /// refused at EXEC put in (`recheck`); unchanged for every other
    /// EXEC.
    #[inline]
    pub(super) fn exec_denied_spliced(&mut self, key: Key, seq: u64, frame: Bytes) -> Bytes {
        let Some(s) = self.sessions.get_mut(key) else {
            return frame;
        };
        match s.take_exec_denied(seq) {
            Some(d) => spliced(&d, &frame),
            None => frame,
        }
    }

    pub(super) fn txn_exec(&mut self, cx: &mut Context<'_, Timer>, key: Key) {
        let Some(s) = self.sessions.get_mut(key) else {
            return;
        };
        let Some(mut t) = s.txn.take() else {
            return self.reply_static(key, ERR_EXEC_WITHOUT);
        };
        if !t.failed && t.acl_gen != s.acl_gen() && s.restricted() {
            recheck(&self.shared.admin.acl, s, &mut t, self.id, cx.now);
            if t.queued.is_empty() && s.pin.is_none() {
                if let Some(d) = s.take_exec_denied(s.ring.next_seq()) {
                    return self.reply(key, spliced(&d, b"*0\r\n"));
                }
            }
        }
        if s.pin.is_some() {
            return self.pin_exec(key, *t);
        }
        if t.failed {
            return self.reply_static(key, EXECABORT);
        }
        if t.queued.is_empty() {
            return self.reply_static(key, b"*0\r\n");
        }
        let req = frame_of(&t);
        let Txn {
            queued,
            slot,
            everywhere,
            flushes_scripts,
            ..
        } = *t;
        let (proto, pool) = (s.proto, s.pool());
        let expect = queued.len() as u32 + 2;
        let (pool, shard) = match slot {
            Some(slot) => (self.place.master(slot, proto), self.place.shard_of(slot)),
            None => match self.place.any_master(pool) {
                Some(shard) => (self.place.shard_master(shard, proto), Some(shard)),
                None => return self.reply_static(key, router::ERR_NO_TOPOLOGY),
            },
        };
        if pool.is_some() && flushes_scripts {
            self.shared.scripts.clear_scripts();
        }
        if pool.is_some() && !everywhere.is_empty() {
            self.send_to_other_masters(cx, key, shard, everywhere);
        }
        match pool {
            // Reads of a tracking client inside: the node tracks them.
            Some(pool) if self.cache.tracked_read => {
                self.send_opted(cx, pool, key, None, req, (Purpose::Txn, expect), None)
            }
            Some(pool) => self.send_new(cx, pool, key, |seq| InFlight {
                expect,
                ..InFlight::new(key, seq, req, Purpose::Txn)
            }),
            None => self.reply_static(key, router::ERR_SLOT_UNSERVED),
        }
    }
}

/// EXEC after an ACL change since MULTI (`ACL SETUSER`, `DELUSER` of
/// another user: any edit bumps the generation): every queued command
/// is checked again against the session's user as it is now, as Redis
/// does at EXEC. A refused one leaves the transaction (and the frames
/// sent to the other masters), is logged in ACL LOG (context `multi`),
/// and its NOPERM goes in its place in EXEC's reply (`spliced`, when
/// the node's reply to the rest arrives).
#[cold]
#[inline(never)]
fn recheck(
    acl: &crate::acl::Acl,
    s: &mut crate::session::Session,
    t: &mut Txn,
    worker: usize,
    now: std::time::Instant,
) {
    let user = s.user().cloned().unwrap_or_else(|| acl.default_user());
    let limits = Limits {
        max_bulk_len: usize::MAX / 2,
        ..Limits::default()
    };
    let mut sc = RequestScanner::new();
    let mut errors = Vec::new();
    let mut kept = Vec::with_capacity(t.queued.len());
    for (i, q) in std::mem::take(&mut t.queued).into_iter().enumerate() {
        sc.reset();
        let refused = match sc.scan(&q, &limits, true) {
            Scan::Request { .. } => {
                let args = Args {
                    buf: &q,
                    ranges: sc.args(),
                };
                command::resolve(&args).ok().and_then(|cmd| {
                    let d = acl.check(&user, cmd, &args).err()?;
                    if let Some((reason, object)) = crate::acl::explain(&user, cmd, &args) {
                        acl.log(crate::acl::LogEntry {
                            count: 1,
                            reason,
                            context: "multi",
                            object,
                            username: user.name.clone(),
                            at: now,
                            client_info: crate::local::client::client_info_line(s, worker, now),
                        });
                    }
                    Some(d)
                })
            }
            _ => None,
        };
        match refused {
            Some(d) => {
                if let Some(at) = t.everywhere.iter().position(|e| *e == q) {
                    t.everywhere.remove(at);
                }
                errors.push((i, crate::acl::exec_refusal(d)));
            }
            None => kept.push(q),
        }
    }
    t.queued = kept;
    t.bytes = t.queued.iter().map(|q| q.len()).sum();
    if !errors.is_empty() {
        s.deny_at_exec(errors);
    }
}

/// EXEC's reply with the refused commands' errors put back in their
/// places; `reply` unchanged when it is not an array (EXECABORT, the nil
/// of a WATCH that failed).
pub(super) fn spliced(d: &crate::session::ExecDenied, reply: &[u8]) -> Bytes {
    use crate::resp::reply::{ReplyScan, ReplyScanner};
    let header = reply
        .strip_prefix(b"*")
        .and_then(|r| r.iter().position(|&b| b == b'\r').map(|e| (&r[..e], e + 3)));
    let Some((n, mut at)) = header else {
        return Bytes::copy_from_slice(reply);
    };
    let Some(n) = crate::resp::parse_i64(n).and_then(|n| usize::try_from(n).ok()) else {
        return Bytes::copy_from_slice(reply);
    };
    let mut out = Vec::with_capacity(reply.len() + d.errors.len() * 200);
    out.extend_from_slice(format!("*{}\r\n", n + d.errors.len()).as_bytes());
    let mut errors = d.errors.iter().peekable();
    let mut sc = ReplyScanner::new();
    for place in 0..n + d.errors.len() {
        if let Some((_, e)) = errors.next_if(|(i, _)| *i == place) {
            out.extend_from_slice(e);
            continue;
        }
        match sc.scan(reply.get(at..).unwrap_or_default()) {
            ReplyScan::Complete { len, .. } => {
                out.extend_from_slice(&reply[at..at + len]);
                at += len;
            }
            _ => return Bytes::copy_from_slice(reply),
        }
    }
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_commands_take_their_places_in_execs_reply() {
        let d = crate::session::ExecDenied {
            seq: 0,
            errors: vec![
                (0, Bytes::from_static(b"-NOPERM a\r\n")),
                (2, Bytes::from_static(b"-NOPERM b\r\n")),
            ],
        };
        assert_eq!(
            spliced(&d, b"*2\r\n+OK\r\n*2\r\n$1\r\nx\r\n:1\r\n"),
            Bytes::from_static(b"*4\r\n-NOPERM a\r\n+OK\r\n-NOPERM b\r\n*2\r\n$1\r\nx\r\n:1\r\n")
        );
        let every = crate::session::ExecDenied {
            seq: 0,
            errors: vec![
                (0, Bytes::from_static(b"-NOPERM a\r\n")),
                (1, Bytes::from_static(b"-NOPERM b\r\n")),
            ],
        };
        assert_eq!(
            spliced(&every, b"*0\r\n"),
            Bytes::from_static(b"*2\r\n-NOPERM a\r\n-NOPERM b\r\n")
        );
        assert_eq!(spliced(&d, b"*-1\r\n"), Bytes::from_static(b"*-1\r\n"));
        assert_eq!(
            spliced(&d, b"-EXECABORT x\r\n"),
            Bytes::from_static(b"-EXECABORT x\r\n")
        );
    }
}
