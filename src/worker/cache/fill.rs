//! Fills: a GET (or a one-slot MGET, or a part of a cross-slot one) that
//! missed and whose keys the cache admits is sent with a ticket, behind
//! the opt-in that makes the node track what it reads for this worker's
//! tracker (CLIENT CACHING YES, and CLIENT TRACKING ... REDIRECT id OPTIN
//! first when the connection's tracking points elsewhere); its reply is
//! stored if the ticket still stands. A tracking client's read goes with
//! the same opt-in, without a ticket.
//!
//! Invariants: a ticket is armed only while the connection's node has a
//! tracker with a known id (`fills_open`, [`Worker::send_opted`] checks
//! again); every ticket ends filled or cancelled (a fill redirected,
//! retried or whose opt-in was refused gives its tickets up and goes on
//! as a plain request).
//!
//! Never: fill from a replica read, a redirected or retried GET, or an
//! error reply.

use super::storable;
use crate::backend::Role;
use crate::resp::walk::{frame_args, reply_items};
use crate::worker::purpose::{InFlight, Purpose};
use crate::worker::{Timer, Worker};
use bytes::Bytes;
use reactor::{Context, Key};

const CACHING_YES: &[u8] = b"*3\r\n$6\r\nCLIENT\r\n$7\r\nCACHING\r\n$3\r\nYES\r\n";

fn tracking_frame(id: u64) -> Bytes {
    let id = id.to_string();
    let mut out = Vec::with_capacity(64);
    crate::resp::encode::request(
        &mut out,
        &[
            b"CLIENT",
            b"TRACKING",
            b"ON",
            b"REDIRECT",
            id.as_bytes(),
            b"OPTIN",
        ],
    );
    Bytes::from(out)
}

impl Worker {
    /// The tracker a read sent on `pool` may opt in for (0: none: the
    /// node is not tracked, or its pipe is another worker's).
    fn fill_tracker(&mut self, session: Key, pool: usize) -> u64 {
        if self.goes_remote(session, pool) {
            // Its pipe's tracking is the owner's: the owner's tracker
            // hears the invalidations and passes them on (pipes.rs).
            return self.owner_tracker(pool);
        }
        self.cache.tracker_id(self.place.addr_of(pool))
    }

    /// Send `req` of `session` (at `seq` if it has its ring slot) on its
    /// connection of `pool`, as `plain`; when a fill is admitted for its
    /// keys (of `unit`), preceded by the opt-in and as `filling(ticket)`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn send_filling(
        &mut self,
        cx: &mut Context<'_, Timer>,
        pool: usize,
        session: Key,
        seq: Option<u64>,
        req: Bytes,
        (plain, unit): (Purpose, u16),
        filling: impl FnOnce(u32) -> Purpose,
    ) {
        let tracker = self.fill_tracker(session, pool);
        let mut keys = frame_args(&req);
        let multi = !keys.next().is_some_and(|c| c.eq_ignore_ascii_case(b"get"));
        let ticket = match (tracker, multi) {
            (0, _) => None,
            (_, false) => keys
                .next()
                .and_then(|k| self.cache.cache.arm(k, 1, unit).ok()),
            (_, true) => {
                let n = keys.clone().count();
                self.cache.cache.arm_all(keys, n, unit)
            }
        };
        match ticket {
            Some(t) => {
                let fill = Some((t, filling(t)));
                self.send_opted(cx, pool, session, seq, req, (plain, 1), fill)
            }
            None if self.cache.tracked_read => {
                self.send_opted(cx, pool, session, seq, req, (plain, 1), None)
            }
            None => match seq {
                Some(seq) => self.send_to_pool(cx, pool, InFlight::new(session, seq, req, plain)),
                None => self.send_new(cx, pool, session, |seq| {
                    InFlight::new(session, seq, req, plain)
                }),
            },
        }
    }

    /// Send `req` for `session` (at `seq`, or a new ring slot) on its
    /// connection of `pool` preceded by the opt-in (CLIENT CACHING YES,
    /// and CLIENT TRACKING toward the tracker first when the connection's
    /// is not): the node tracks its keys for this worker's tracker. As
    /// `plain` (with its count of replies), or with a fill's ticket as the
    /// fill's purpose.
    #[allow(clippy::too_many_arguments)]
    pub(in crate::worker) fn send_opted(
        &mut self,
        cx: &mut Context<'_, Timer>,
        pool: usize,
        session: Key,
        seq: Option<u64>,
        req: Bytes,
        (plain, expect): (Purpose, u32),
        fill: Option<(u32, Purpose)>,
    ) {
        let entry = move |seq: u64, req: Bytes, purpose: Purpose| InFlight {
            expect,
            ..InFlight::new(session, seq, req, purpose)
        };
        let tracker = self.fill_tracker(session, pool);
        if tracker == 0 {
            // Only fills check for a tracker before: a tracking read's was
            // known at its dispatch and has gone since; the node will not
            // track it, so the null follows its reply.
            if let Some((t, _)) = fill {
                self.cancel_fill(&req, t);
            }
            let seq = match seq {
                Some(seq) => {
                    self.send_to_pool(cx, pool, entry(seq, req, plain));
                    Some(seq)
                }
                None => {
                    self.send_new(cx, pool, session, |seq| entry(seq, req, plain));
                    self.sessions
                        .get(session)
                        .and_then(|s| s.ring.next_seq().checked_sub(1))
                }
            };
            if let (true, Some(seq)) = (self.cache.tracked_read, seq) {
                self.track_push(session, None, Some(seq));
            }
            return;
        }
        let Some((sticky, db)) = self
            .sessions
            .get(session)
            .map(|s| (s.conn_choice(), s.other_db()))
        else {
            if let Some((t, _)) = fill {
                self.cancel_fill(&req, t);
            }
            return;
        };
        let pool = db.map_or(pool, |db| self.place.in_db(pool, db));
        let bkey = match self.backend_for(cx, pool, sticky) {
            Ok(b) => b,
            Err(err) => {
                if let Some((t, _)) = fill {
                    self.cancel_fill(&req, t);
                }
                return match seq {
                    Some(seq) => self.fail(cx, entry(seq, req, plain), err),
                    None => self.fail_new(session, err),
                };
            }
        };
        if let Some(b) = self.backends.get_mut(bkey) {
            if b.tracking != tracker {
                b.tracking = tracker;
                b.enqueue(InFlight::new(
                    Key::NONE,
                    0,
                    tracking_frame(tracker),
                    Purpose::Tracking,
                ));
            }
            b.enqueue(InFlight::new(
                Key::NONE,
                0,
                Bytes::from_static(CACHING_YES),
                Purpose::Caching,
            ));
        }
        let seq = match seq {
            Some(seq) => seq,
            None => match self.sessions.get_mut(session) {
                Some(s) => s.ring.push_pending(),
                None => return,
            },
        };
        let purpose = fill.map_or(plain, |f| f.1);
        self.send_on(bkey, entry(seq, req, purpose));
    }

    /// Give up the ticket of every key of `req` (a GET or an MGET).
    fn cancel_fill(&mut self, req: &[u8], ticket: u32) {
        for k in frame_args(req).skip(1) {
            self.cache.cache.cancel(k, ticket);
        }
    }

    /// The reply to a fill: each key stored if its ticket stands.
    pub(in crate::worker) fn cache_fill(&mut self, ticket: u32, req: &[u8], frame: &[u8]) {
        let mut args = frame_args(req);
        let multi = !args.next().is_some_and(|c| c.eq_ignore_ascii_case(b"get"));
        let now = self.cache_now_ms();
        if !multi {
            if let Some(k) = args.next() {
                match storable(frame) {
                    Some(f) => {
                        self.cache.cache.fill(k, ticket, f, now);
                    }
                    None => self.cache.cache.cancel(k, ticket),
                }
            }
            return;
        }
        let mut items = reply_items(frame);
        for k in args {
            match items.as_mut().and_then(Iterator::next).and_then(storable) {
                Some(f) => {
                    self.cache.cache.fill(k, ticket, f, now);
                }
                None => self.cache.cache.cancel(k, ticket),
            }
        }
    }

    /// A fill that will not fill (redirected, retried, refused opt-in):
    /// its tickets are given up and it goes on as a plain request.
    pub(in crate::worker) fn unfill(&mut self, f: &mut InFlight) {
        // A tracking client's read goes again without the opt-in: the
        // node that answers will not track it, so the client is told to
        // keep nothing once that reply is out.
        if self.cache.clients > 0 {
            self.track_push(f.session, None, Some(f.seq));
        }
        let Some((plain, ticket)) = f.purpose.unfilled() else {
            return;
        };
        f.purpose = plain;
        let req = f.req.clone();
        self.cancel_fill(&req, ticket);
    }

    /// The reply to an opt-in frame on a shared connection. An error:
    /// tracking is off there (CLIENT TRACKING refused, e.g. for a tracker
    /// id that died); the GET behind a refused CACHING fills nothing, and
    /// the next fill on the connection asks for tracking again.
    pub(in crate::worker) fn opt_in_answered(&mut self, bkey: Key, purpose: Purpose, head: u8) {
        if self
            .backends
            .get(bkey)
            .is_some_and(|b| b.role == Role::Tracker)
        {
            // A BCAST tracker's CLIENT TRACKING ON BCAST (`trackers.rs`).
            return self.bcast_tracker_on(bkey, head != b'-');
        }
        if head != b'-' {
            return;
        }
        let Some(b) = self.backends.get_mut(bkey) else {
            return;
        };
        b.tracking = 0;
        if purpose == Purpose::Caching {
            // A tracking client's read behind it was not tracked by the
            // node: the client may not keep what it read.
            let behind = b.head_mut().map(|f| (f.session, f.seq));
            if let Some((session, seq)) = behind.filter(|_| self.cache.clients > 0) {
                self.track_push(session, None, Some(seq));
            }
            let Some(b) = self.backends.get_mut(bkey) else {
                return;
            };
            let refused = b.head_mut().and_then(|f| {
                let (plain, ticket) = f.purpose.unfilled()?;
                f.purpose = plain;
                Some((f.req.clone(), ticket))
            });
            if let Some((req, ticket)) = refused {
                self.cancel_fill(&req, ticket);
            }
        }
    }
}
