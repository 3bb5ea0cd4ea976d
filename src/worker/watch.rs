//! WATCH: optimistic locking on a pinned connection.
//!
//! A node keeps a client's watched keys on its connection, and EXEC on that
//! same connection answers nil when one of them changed. Shared pipelined
//! connections carry many sessions, so a WATCH never goes on one: the
//! first WATCH of a session takes a lease (an exclusive connection to the
//! master of the keys' slot, drawn from the same per-node cap as the
//! blocking commands' leases, `blocking.rs`) and pins the session to it.
//!
//! ```text
//!   WATCH k ──► lease to master(slot k) ──► Pin { conn, slot } on the session
//!   GET/SET/... of that slot, WATCH of more keys ──► on the pin, in order
//!   a key of another slot ──► CROSSSLOT
//!   cluster-wide (FLUSHALL, DBSIZE, KEYS, ...) ──► every master, the
//!       pinned one's part on the pin
//!   MULTI ... (queued here, slot = the pin's) EXEC ──► MULTI..EXEC on the pin
//!   EXEC, DISCARD, UNWATCH, RESET ──► released: idle again once a clean
//!       reply (EXEC's, or +OK to an UNWATCH) came back on it, else closed
//!   the client leaves ──► UNWATCH when nothing is in flight on it, else closed
//! ```
//!
//! While its pin is being released the session dispatches nothing more
//! (it is `Blocked` on the pin, as behind a blocking command): what it
//! sends next goes to shared connections, and must not run before the
//! reads and writes still on the pin.
//!
//! A redirect on the pin means the slot moved (or is moving) away from the
//! watching node: a watch there no longer sees every change of its keys.
//! The pin is then *broken*: a plain command that met MOVED or ASK is
//! followed off the pin as any request is (later ones stay on the pin, so
//! they keep their order, and are followed the same way), a WATCH that met
//! one answers +OK without being sent elsewhere, and the EXEC answers nil
//! without running, as when a watched key changed; a client retrying its
//! optimistic transaction then watches on the new owner. A transaction
//! whose queued commands meet a redirect, TRYAGAIN or CLUSTERDOWN on the
//! pin answers nil as well (nothing of it ran, and its watch is gone with
//! EXEC, so it cannot be sent again). A pin whose connection is lost is
//! broken too, and the session's commands are routed as usual meanwhile.

use super::purpose::{InFlight, PinOp, Purpose, Release};
use super::{Timer, Worker};
use crate::backend::Role;
use crate::command::{self, Args, Command};
use crate::resp::Proto;
use crate::router::{self, Redirect};
use crate::session::Session;
use crate::session::{Pin, Txn};
use bytes::Bytes;
use reactor::{Context, Key};
use std::net::SocketAddr;

const UNWATCH: &[u8] = b"*1\r\n$7\r\nUNWATCH\r\n";
const OK: &[u8] = b"+OK\r\n";

/// EXEC's nil, in the session's protocol.
fn null_array(proto: Proto) -> &'static [u8] {
    match proto {
        Proto::Resp2 => b"*-1\r\n",
        Proto::Resp3 => b"_\r\n",
    }
}

impl Worker {
    /// WATCH of keys of `slot`: on the session's pin, taken now if it has
    /// none (the router refused keys of another slot).
    pub(super) fn watch(&mut self, cx: &mut Context<'_, Timer>, key: Key, slot: u16, frame: Bytes) {
        let Some(s) = self.sessions.get_mut(key) else {
            return;
        };
        if let Some(p) = s.pin.as_mut() {
            if self.backends.contains(p.conn) {
                let conn = p.conn;
                self.send_pinned(key, conn, frame, PinOp::Watch);
                return;
            }
            // Its connection was lost: the watch is broken already, and
            // EXEC answers nil.
            p.broken = true;
            return self.reply_static(key, OK);
        }
        if self.place.map().is_empty() {
            return self.reply_static(key, router::ERR_NO_TOPOLOGY);
        }
        let proto = s.proto;
        let Some(pool) = self.place.master(slot, proto) else {
            return self.reply_static(key, router::ERR_SLOT_UNSERVED);
        };
        let addr = self.place.conns.sets[pool].key.addr;
        let conn = match self.try_lease(cx, addr, proto, self.where_of(key)) {
            Ok(conn) => conn,
            Err(e) => return self.fail_new(key, e.unwrap_or_else(|| watch_cap_reply(addr))),
        };
        if let Some(s) = self.sessions.get_mut(key) {
            s.pin = Some(Pin {
                conn,
                slot,
                broken: false,
            });
        }
        self.send_pinned(key, conn, frame, PinOp::Watch);
    }

    /// UNWATCH outside MULTI: +OK, and the pin (if any) released.
    pub(super) fn unwatch(&mut self, key: Key) {
        if !self.release_pin(key, Release::Ok) {
            self.reply_static(key, OK);
        }
    }

    /// A read or write while watching: on the pin (the router checked its
    /// keys' slot and that the connection is alive). A blocking command
    /// blocks the session too, as on a lease.
    pub(super) fn pinned(&mut self, key: Key, cmd: &'static Command, frame: Bytes, args: &Args) {
        let Some(conn) = self.sessions.get(key).and_then(|s| s.pin).map(|p| p.conn) else {
            return;
        };
        if command::is_blocking_call(cmd, args) {
            let seq = self.send_pinned(key, conn, frame, PinOp::Block);
            if let Some(s) = self.sessions.get_mut(key) {
                s.block(conn, seq);
            }
            return;
        }
        self.send_pinned(key, conn, frame, PinOp::Cmd);
    }

    fn send_pinned(&mut self, key: Key, conn: Key, frame: Bytes, op: PinOp) -> u64 {
        let Some(s) = self.sessions.get_mut(key) else {
            return 0;
        };
        let seq = s.ring.push_pending();
        self.send_on(conn, InFlight::new(key, seq, frame, Purpose::Pin(op)));
        seq
    }

    /// A part of a command sent to every master (FLUSHALL, DBSIZE, KEYS,
    /// ...): to `pool`, or on the session's pin when that is the pinned
    /// node, so that it runs in order with the pinned commands (a FLUSHALL
    /// after a write of a watched key deletes it, and touches the watch).
    pub(super) fn send_part(&mut self, cx: &mut Context<'_, Timer>, pool: usize, f: InFlight) {
        let pin = self.sessions.get(f.session).and_then(|s| s.pin);
        if let Some(p) = pin {
            let addr = self.place.conns.sets[pool].key.addr;
            if self.backends.get(p.conn).is_some_and(|b| b.addr == addr) {
                return self.send_on(p.conn, f);
            }
        }
        self.send_to_pool(cx, pool, f)
    }

    /// HELLO switched a watching session's protocol: its pin follows
    /// (HELLO on it, as a set-up command: an error fails it), so the
    /// node's replies come in the session's protocol.
    pub(super) fn pin_protocol(&mut self, key: Key) {
        let Some((pin, proto)) = self.sessions.get(key).and_then(|s| Some((s.pin?, s.proto)))
        else {
            return;
        };
        let Some(b) = self.backends.get_mut(pin.conn) else {
            return;
        };
        if b.proto == proto {
            return;
        }
        b.proto = proto;
        let hello: &'static [u8] = match proto {
            Proto::Resp2 => b"*2\r\n$5\r\nHELLO\r\n$1\r\n2\r\n",
            Proto::Resp3 => b"*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n",
        };
        let hello = Bytes::from_static(hello);
        self.send_on(pin.conn, InFlight::new(Key::NONE, 0, hello, Purpose::Init));
    }

    /// The slot MULTI's queued commands must hash to: the watched one.
    pub(super) fn pinned_slot(&self, key: Key) -> Option<u16> {
        self.sessions.get(key).and_then(|s| s.pin).map(|p| p.slot)
    }

    /// Leave the WATCH (EXEC answered here, DISCARD, UNWATCH, RESET):
    /// UNWATCH is sent on the pin in the place of the command, whose
    /// reply (`answer`) comes with it, and the session waits for it
    /// (`Blocked` on the pin), so that nothing it sends later overtakes
    /// what is still on the pin. False when there was no live pin: the
    /// caller answers.
    pub(super) fn release_pin(&mut self, key: Key, answer: Release) -> bool {
        let Some(s) = self.sessions.get_mut(key) else {
            return false;
        };
        let Some(p) = s.pin.take() else {
            return false;
        };
        if !self.backends.contains(p.conn) {
            return false;
        }
        let seq = s.ring.push_pending();
        s.block(p.conn, seq);
        let unwatch = Bytes::from_static(UNWATCH);
        let op = PinOp::Release(answer);
        self.send_on(p.conn, InFlight::new(key, seq, unwatch, Purpose::Pin(op)));
        true
    }

    /// EXEC while watching: `MULTI, the queued requests, EXEC` on the pin,
    /// or nil (EXECABORT for a doomed transaction) answered here when the
    /// pin is broken.
    pub(super) fn pin_exec(&mut self, key: Key, t: Txn) {
        let Some(s) = self.sessions.get_mut(key) else {
            return;
        };
        let Some(p) = s.pin else {
            return;
        };
        if t.failed || p.broken || !self.backends.contains(p.conn) {
            let answer = if t.failed {
                Release::ExecAbort
            } else {
                Release::ExecNil
            };
            if !self.release_pin(key, answer) {
                let proto = self.sessions.get(key).map_or(Proto::Resp2, |s| s.proto);
                self.reply_static(key, answer_of(answer, proto));
            }
            return;
        }
        s.pin = None;
        let expect = t.queued.len() as u32 + 2;
        let req = super::txn::frame_of(&t);
        let seq = s.ring.push_pending();
        s.block(p.conn, seq);
        self.send_on(
            p.conn,
            InFlight {
                expect,
                ..InFlight::new(key, seq, req, Purpose::Pin(PinOp::Exec))
            },
        );
        if self.cache.tracked_read {
            // Reads of a tracking client inside: the pin has no opt-in, so
            // the client keeps nothing of them (the null invalidation
            // follows EXEC's reply).
            self.track_push(key, None, Some(seq));
        }
    }

    /// The reply to a request on a pin (see the module doc).
    pub(super) fn pin_reply(
        &mut self,
        cx: &mut Context<'_, Timer>,
        bkey: Key,
        via: SocketAddr,
        mut f: InFlight,
        frame: Bytes,
        head: u8,
    ) {
        let Purpose::Pin(op) = f.purpose else {
            return;
        };
        let redirect = if head == b'-' {
            router::parse_redirect(&frame, via, self.place.map())
        } else {
            None
        };
        match op {
            PinOp::Release(_) => {
                let clean = frame[..] == *OK;
                self.unpin_answered(cx, bkey, f.session, clean);
                self.pin_delivered(f, frame, op);
            }
            PinOp::Exec => {
                let (inside, retry) = self
                    .backends
                    .get_mut(bkey)
                    .map(|b| {
                        // (A queued command's refusal is not named here:
                        // the pin's EXEC answers as the node did.)
                        b.txn_error = None;
                        (b.txn_redirect.take(), b.txn_retry.take())
                    })
                    .unwrap_or_default();
                let redirect = inside.or(redirect);
                let aborted =
                    redirect.is_some() || (retry.is_some() && frame.starts_with(b"-EXECABORT"));
                if let Some(r) = redirect {
                    self.note_redirect(r);
                }
                let proto = self
                    .sessions
                    .get(f.session)
                    .map_or(Proto::Resp2, |s| s.proto);
                let frame = if aborted {
                    Bytes::from_static(null_array(proto))
                } else {
                    if head == b'-' {
                        self.observe_error(f.purpose, &frame);
                    }
                    frame
                };
                // EXEC left the node's transaction and its watch: the
                // connection is clean whatever it answered.
                self.unpin_answered(cx, bkey, f.session, true);
                self.pin_delivered(f, frame, PinOp::Exec);
            }
            PinOp::Watch | PinOp::Cmd | PinOp::Block => {
                if let Some(r) = redirect {
                    self.pin_broken(f.session, bkey);
                    f.purpose = match op {
                        PinOp::Block => Purpose::Blocking,
                        PinOp::Cmd => Purpose::Client,
                        _ => {
                            // Never watched elsewhere: EXEC answers nil,
                            // and the client's retry watches on the new
                            // owner.
                            self.note_redirect(r);
                            let ok = Bytes::from_static(OK);
                            return self.deliver(f.session, f.seq, ok, &[]);
                        }
                    };
                    return self.follow(cx, via, f, r);
                }
                if head == b'-' {
                    self.observe_error(f.purpose, &frame);
                }
                self.pin_delivered(f, frame, op);
            }
        }
    }

    /// A pinned command's final reply (also for a lost pin's requests,
    /// from `finish`).
    pub(super) fn pin_delivered(&mut self, f: InFlight, frame: Bytes, op: PinOp) {
        match op {
            PinOp::Watch | PinOp::Cmd => self.deliver(f.session, f.seq, frame, &f.req),
            PinOp::Block => {
                self.deliver(f.session, f.seq, frame, &[]);
                if self.still_blocked(f.session, f.seq) {
                    self.unblock(f.session);
                }
            }
            PinOp::Exec => {
                let frame = self.exec_denied_spliced(f.session, f.seq, frame);
                self.deliver(f.session, f.seq, frame, super::observe::EXEC_FRAME);
                self.unblock(f.session);
            }
            PinOp::Release(answer) => {
                let proto = self
                    .sessions
                    .get(f.session)
                    .map_or(Proto::Resp2, |s| s.proto);
                let reply = Bytes::from_static(answer_of(answer, proto));
                self.deliver(f.session, f.seq, reply, &[]);
                self.unblock(f.session);
            }
        }
    }

    /// A redirect the pin does not follow: what it teaches is kept (a
    /// MOVED target, a refresh asked), as `follow` would.
    fn note_redirect(&mut self, r: Redirect) {
        if let Redirect::Moved { slot, addr } = r {
            self.obs.stats.counters.moved += 1; // observe
            self.place.learn_moved(slot, addr);
        }
        self.shared.topology.request_refresh();
    }

    /// A command on `conn` met a redirect: the session's watch there no
    /// longer sees every change of its keys.
    fn pin_broken(&mut self, session: Key, conn: Key) {
        if let Some(p) = self.sessions.get_mut(session).and_then(|s| s.pin.as_mut()) {
            if p.conn == conn {
                p.broken = true;
            }
        }
    }

    /// The release of a pin was answered (the UNWATCH, or the EXEC):
    /// the session reads on, and the connection goes back to the idle
    /// leases when the reply was `clean` and nothing else is in flight on
    /// it; otherwise it is closed.
    fn unpin_answered(
        &mut self,
        cx: &mut Context<'_, Timer>,
        conn: Key,
        session: Key,
        clean: bool,
    ) {
        let busy = self.backends.get(conn).map(|b| b.in_flight() > 0);
        match busy {
            Some(false) if clean => self.lease_answered(conn, session),
            Some(false) => {
                if let Some(s) = self.sessions.get_mut(session) {
                    s.lease_returned(conn);
                }
                self.drop_backend(cx, conn);
            }
            // Something else is on it (it cannot be, with the session
            // waiting): answered with errors, never left behind.
            Some(true) => self.backend_failed(cx, conn, "released pin still busy"),
            None => {}
        }
        self.unblock(session);
    }

    /// The session closes while pinned: its pin goes back idle after an
    /// UNWATCH when nothing is in flight on it, else it is closed (the
    /// node drops the watch and any transaction with it).
    pub(super) fn pin_closed(&mut self, cx: &mut Context<'_, Timer>, pin: Pin) {
        let Some(b) = self.backends.get(pin.conn) else {
            return;
        };
        if b.role != Role::Lease {
            return;
        }
        if b.in_flight() > 0 {
            return self.drop_backend(cx, pin.conn);
        }
        let unwatch = Bytes::from_static(UNWATCH);
        let op = PinOp::Release(Release::Ok);
        self.send_on(
            pin.conn,
            InFlight::new(Key::NONE, 0, unwatch, Purpose::Pin(op)),
        );
    }
}

/// What the command that released a pin with an UNWATCH is answered.
fn answer_of(answer: Release, proto: Proto) -> &'static [u8] {
    match answer {
        Release::Ok => OK,
        Release::Reset => b"+RESET\r\n",
        Release::ExecNil => null_array(proto),
        Release::ExecAbort => super::txn::EXECABORT,
    }
}

/// What a WATCH gets when its node has every exclusive connection the cap
/// allows in use.
fn watch_cap_reply(addr: SocketAddr) -> Bytes {
    Bytes::from(format!(
        "-ERR mithril: too many exclusive connections to {addr} for WATCH (at most {} per node, shared with blocking commands)\r\n",
        crate::shared::MAX_LEASES_PER_NODE
    ))
}

/// Session hook: its pin goes back idle or is closed (`pin_closed`).
#[inline]
pub(super) fn session_closed(w: &mut Worker, cx: &mut Context<'_, Timer>, s: &mut Session) {
    if let Some(pin) = s.pin.take() {
        w.pin_closed(cx, pin);
    }
}
