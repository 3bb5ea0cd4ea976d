//! Replication feeds: SYNC and PSYNC answered by mithril itself.
//!
//! ```text
//!   client ──SYNC──► session (Input::Feed: dispatches nothing, its input dropped)
//!                      ▲ "\n" (or +FULLRESYNC) at once, "\n" every second,
//!                      │ then $<len> + an empty RDB, then the merged stream
//!                      │ (pushes behind the SYNC's ring slot)
//!   link ×1 per master ┘
//!     connect ─► AUTH (backend-password), +OK ─► SYNC ─► skip "\n" keepalives
//!     ─► skip the master's RDB ($<len> or $EOF:<mark>) ─► scan its stream
//! ```
//!
//! A client that sends SYNC (or `PSYNC <replid> <offset>`, answered with a
//! full resynchronisation) becomes a feed for the rest of its life. Its
//! worker opens one link, a plain replica connection of its own (kind
//! [`FEED`] in the reactor, not a backend), to every master that serves
//! slots, and sends each SYNC. Once every master has passed its RDB the
//! client gets a valid empty RDB ([`EMPTY_RDB`]: the proxy holds no data to
//! give), then every command the masters propagate, as each link's bytes
//! are read (arrival order across masters, each master's own order kept),
//! with these exceptions:
//!
//! - a SELECT of the database the client's stream already selected is
//!   dropped (every master starts with `SELECT 0`: the client sees one);
//! - a master's PING (its link keepalive, every `repl-ping-replica-period`)
//!   goes on only when the stream was quiet for a second: a real replica
//!   still hears one before its `repl-timeout`, and three masters do not
//!   make three; `REPLCONF GETACK` is dropped (the links never ACK, so a
//!   master's WAIT does not count them, and the client's ACKs are dropped);
//! - a master's MULTI ... EXEC is held until its EXEC and passed whole, so
//!   no other master's command lands inside it;
//! - what a master streams before the last master's RDB is done waits in
//!   its link's buffer, and goes out in link order after the empty RDB.
//!
//! Bounds: at most [`MAX_FEEDS`] feeds in the process (more get an error);
//! the client's output is held under `client-output-buffer-limit replica`
//! (256mb hard, 64mb for 60 s soft by default, as Redis's slow replica) and
//! the client is closed past it; a link's waiting stream and a held
//! MULTI block are bounded by the same hard limit (the feed closes).
//!
//! The feed ends (the client's connection is closed, as a master drops a
//! replica that must resynchronise; before the RDB, after an error line
//! saying why) when a link fails or closes, when a master stays silent
//! [`LOAD_TIMEOUT`] before its RDB, when a link's TLS handshake is not
//! over `tls-handshake-timeout` after its connect started (`tls.rs`), when
//! the set of masters changes (a failover, a new master), at SIGTERM, and
//! when the client closes. Closing the client closes every link, so the
//! masters' `connected_slaves` goes back down.
//!
//! Never: touch the hot path (the only cost elsewhere is one compare of the
//! input mode in the output limit's class and the idle sweep), or send the
//! masters anything but the handshake.

use super::{Timer, Worker};
use crate::command::{Args, Command};
use crate::resp::limits::Limits;
use crate::resp::request::{RequestScanner, Scan};
use crate::session::Session;
use bytes::{Bytes, BytesMut};
use mio::event::Event;
use mio::net::TcpStream;
use mio::Interest;
use reactor::event_loop::token_for;
use reactor::read::{read_budgeted, Growth, ReadEnd};
use reactor::{Context, GenSlab, Key, Kind};
use std::io::Write;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The reactor kind of a feed's link to a master.
pub const FEED: Kind = Kind(3);

mod rdb;
mod tls;

use rdb::new_replid;
pub use rdb::EMPTY_RDB;

const SYNC: &[u8] = b"SYNC\r\n";

/// Feeds open at once in the process, all workers together.
pub const MAX_FEEDS: usize = 16;
static FEEDS: AtomicUsize = AtomicUsize::new(0);

/// A feed waiting for the masters' RDBs sends the client a newline this
/// often, as a master does for a replica waiting for its BGSAVE.
const KEEPALIVE: Duration = Duration::from_secs(1);
/// A master that sends nothing this long before its RDB is done fails the
/// feed (Redis's default `repl-timeout`).
const LOAD_TIMEOUT: Duration = Duration::from_secs(60);
/// Bytes read from one link per readiness event.
const LINK_READ_BUDGET: usize = 1024 * 1024;
/// Longest handshake line a master may send (a `$<len>` or an error).
const MAX_LINE: usize = 64 * 1024;
const GROWTH: Growth = Growth {
    min_spare: 4 * 1024,
    chunk: 64 * 1024,
    double: true,
};
/// What bounds a link's waiting stream and a held MULTI block when the
/// replica class has no hard limit.
const DEFAULT_HOLD: usize = 256 * 1024 * 1024;

const ERR_TOO_MANY: &str = "-ERR mithril: too many replication feeds (at most 16)\r\n";
const ERR_BUSY_SESSION: &[u8] =
    b"-ERR mithril: SYNC needs a connection that is not subscribed, tracking, watching or monitoring\r\n";

/// A worker's feeds and their links.
#[derive(Default)]
pub(super) struct FeedState {
    links: GenSlab<Link>,
    feeds: Vec<Feed>,
    /// Links whose read budget ran out with data left.
    ready: Vec<Key>,
}

impl FeedState {
    #[inline]
    pub(super) fn is_empty(&self) -> bool {
        self.feeds.is_empty()
    }

    #[inline]
    pub(super) fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }

    fn feed_mut(&mut self, session: Key) -> Option<&mut Feed> {
        self.feeds.iter_mut().find(|f| f.session == session)
    }
}

/// Held by a feed: its place under [`MAX_FEEDS`].
struct Ticket;

impl Ticket {
    fn take() -> Option<Ticket> {
        let mut n = FEEDS.load(Ordering::Relaxed);
        loop {
            if n >= MAX_FEEDS {
                return None;
            }
            match FEEDS.compare_exchange_weak(n, n + 1, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return Some(Ticket),
                Err(now) => n = now,
            }
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        FEEDS.fetch_sub(1, Ordering::Relaxed);
    }
}

struct Feed {
    session: Key,
    links: Vec<Key>,
    /// Links still before the end of their master's RDB.
    loading: usize,
    /// The SYNC's ring slot: everything fed leaves after it.
    barrier: u64,
    /// The database the client's stream has selected.
    db: Option<Vec<u8>>,
    /// When the client was last given something (a keepalive, a command).
    last_out: Instant,
    /// The masters it was opened on, and the map's epoch then.
    masters: Vec<SocketAddr>,
    epoch: u64,
    _ticket: Ticket,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// The TCP connect is under way; the handshake waits in `out`.
    Connecting,
    /// Waiting for AUTH's +OK (`auth`), then for the RDB's header.
    Handshake { auth: bool },
    /// Skipping the RDB payload: this many bytes are left.
    Rdb { left: u64 },
    /// Skipping a diskless RDB up to its 40-byte end mark.
    RdbEof { mark: [u8; 40] },
    /// Scanning the master's propagated commands.
    Stream,
}

struct Link {
    session: Key,
    addr: SocketAddr,
    stream: TcpStream,
    /// With `tls-cluster yes`: rustls between the link and its socket
    /// (`tls.rs`).
    tls: Option<Box<rustls::ClientConnection>>,
    rbuf: BytesMut,
    /// Handshake bytes not yet written.
    out: Vec<u8>,
    phase: Phase,
    scanner: RequestScanner,
    /// The last time the master sent anything (the load timeout).
    heard: Instant,
    /// When the connect started (the TLS handshake's bound, `tls.rs`).
    opened: Instant,
    /// A MULTI of this master held until its EXEC, and its bytes.
    block: Option<(Vec<Bytes>, usize)>,
}

/// What scanning a link's buffer came to.
enum Step {
    /// Nothing more to do until more bytes arrive.
    Wait,
    /// The master's RDB was just passed.
    RdbDone,
    /// The feed must end: why.
    Fail(String),
}

impl Worker {
    /// SYNC / PSYNC from session `key` (an admin: the ACL check ran).
    pub(super) fn feed_start(
        &mut self,
        cx: &mut Context<'_, Timer>,
        key: Key,
        cmd: &'static Command,
        _args: &Args,
    ) {
        let Some(s) = self.sessions.get(key) else {
            return;
        };
        if s.sub.is_some() || s.pin.is_some() || s.tracking().is_some() || s.is_monitor() {
            return self.reply_static(key, ERR_BUSY_SESSION);
        }
        let masters = self.place.map().serving_masters();
        if masters.is_empty() {
            return self.reply_static(key, crate::router::ERR_NO_TOPOLOGY);
        }
        let Some(ticket) = Ticket::take() else {
            return self.reply(key, Bytes::from_static(ERR_TOO_MANY.as_bytes()));
        };
        let mut links = Vec::with_capacity(masters.len());
        for &addr in &masters {
            match self.link_open(cx, key, addr) {
                Ok(k) => links.push(k),
                Err(e) => {
                    for k in links {
                        self.link_drop(cx, k);
                    }
                    return self.reply(key, Bytes::from(format!("-ERR mithril: SYNC: {e}\r\n")));
                }
            }
        }
        // The first bytes a replica sees: +FULLRESYNC for PSYNC, a newline
        // (as a master's keepalive) for SYNC. The feed goes behind it.
        // PSYNC takes a replication id and an offset; SYNC nothing.
        let first = if cmd.arity != 1 {
            Bytes::from(format!("+FULLRESYNC {} 0\r\n", new_replid()))
        } else {
            Bytes::from_static(b"\n")
        };
        let barrier = self.sessions.get(key).map_or(0, |s| s.ring.next_seq());
        self.reply(key, first);
        if let Some(s) = self.sessions.get_mut(key) {
            s.become_feed();
        }
        let n = links.len();
        self.replfeed.feeds.push(Feed {
            session: key,
            links,
            loading: n,
            barrier,
            db: None,
            last_out: cx.now,
            masters,
            epoch: self.place.epoch(),
            _ticket: ticket,
        });
        log::debug!(target: "mithril::replfeed", "worker {}: replication feed opened on {n} masters", self.id);
    }

    fn link_open(
        &mut self,
        cx: &mut Context<'_, Timer>,
        session: Key,
        addr: SocketAddr,
    ) -> Result<Key, String> {
        let mut stream =
            reactor::net::connect(addr).map_err(|e| format!("cannot connect to {addr} ({e})"))?;
        let _ = reactor::net::configure(&stream, self.keepalive);
        let key = self.replfeed.links.vacant_key();
        cx.registry
            .register(
                &mut stream,
                token_for(FEED, key),
                Interest::READABLE | Interest::WRITABLE,
            )
            .map_err(|e| format!("cannot register a connection to {addr} ({e})"))?;
        // AUTH first, alone: a node refuses SYNC while a reply to the same
        // client is still unsent ("SYNC and PSYNC are invalid with pending
        // output"), so SYNC follows AUTH's +OK (`link_step`).
        let out = match crate::backend::auth::frame(&self.shared.config) {
            Some(a) => a.to_vec(),
            None => SYNC.to_vec(),
        };
        let tls =
            match crate::tls::nodes::NodeTls::connect_if(self.shared.node_tls.as_deref(), addr) {
                Ok(conn) => conn.map(Box::new),
                Err(e) => {
                    let _ = cx.registry.deregister(&mut stream);
                    return Err(format!("cannot start TLS toward {addr} ({e})"));
                }
            };
        let now = cx.now;
        self.replfeed.links.insert_with(|_| Link {
            session,
            addr,
            stream,
            tls,
            rbuf: BytesMut::new(),
            out,
            phase: Phase::Connecting,
            scanner: RequestScanner::new(),
            heard: now,
            opened: now,
            block: None,
        });
        Ok(key)
    }

    fn link_drop(&mut self, cx: &mut Context<'_, Timer>, key: Key) {
        if let Some(mut l) = self.replfeed.links.remove(key) {
            let _ = cx.registry.deregister(&mut l.stream);
        }
    }

    /// Session `key` is closing: if it is a feed, its links go with it.
    pub(super) fn feed_closed(&mut self, cx: &mut Context<'_, Timer>, key: Key) {
        let Some(i) = self.replfeed.feeds.iter().position(|f| f.session == key) else {
            return;
        };
        let feed = self.replfeed.feeds.swap_remove(i);
        for k in feed.links {
            self.link_drop(cx, k);
        }
        self.replfeed
            .ready
            .retain(|k| self.replfeed.links.contains(*k));
        log::debug!(target: "mithril::replfeed", "worker {}: replication feed closed", self.id);
    }

    /// End the feed of `session`: the client is closed, as a master drops
    /// a replica that must resynchronise. Before its RDB it is told why
    /// first, with an error where the RDB's header would be (what a master
    /// that cannot serve a SYNC sends; a replica logs it).
    fn feed_fail(&mut self, cx: &mut Context<'_, Timer>, session: Key, why: &str) {
        let id = self.sessions.get(session).map_or(0, |s| s.id);
        log::info!(target: "mithril::replfeed", "worker {}: closing replication feed of client {id}: {why}", self.id);
        let loading = self.replfeed.feed_mut(session).and_then(|f| {
            (f.loading > 0 && !self.sessions.get(session)?.pressure.over_hard).then_some(f.barrier)
        });
        let Some(barrier) = loading else {
            return self.close_session(cx, session);
        };
        // The links go now; the client once the error is written.
        self.feed_closed(cx, session);
        let Some(s) = self.sessions.get_mut(session) else {
            return;
        };
        let line = why.replace(['\r', '\n'], " ");
        s.push_oob(barrier, Bytes::from(format!("-ERR mithril: {line}\r\n")));
        s.close_after_flush();
        if s.mark_dirty() {
            self.dirty_sessions.push(session);
        }
    }

    /// Readiness on a link.
    pub(super) fn feed_event(&mut self, cx: &mut Context<'_, Timer>, key: Key, event: &Event) {
        let Some(l) = self.replfeed.links.get_mut(key) else {
            return;
        };
        let session = l.session;
        if event.is_writable() && l.wants_write() {
            if l.phase == Phase::Connecting {
                if let Ok(Some(e)) | Err(e) = l.stream.take_error() {
                    let why = format!("cannot connect to {} ({e})", l.addr);
                    return self.feed_fail(cx, session, &why);
                }
                if l.stream.peer_addr().is_err() {
                    return; // still connecting
                }
                l.phase = Phase::Handshake {
                    auth: !self.shared.config.backend_password.is_empty(),
                };
            }
            if let Err(e) = link_write(l) {
                let why = format!("write to {} failed ({e})", l.addr);
                return self.feed_fail(cx, session, &why);
            }
        }
        if event.is_readable() || event.is_read_closed() || event.is_error() {
            self.link_read(cx, key, event.is_read_closed());
        }
    }

    /// Links left with data after their read budget: read again.
    pub(super) fn feed_ready(&mut self, cx: &mut Context<'_, Timer>) {
        let mut list = std::mem::take(&mut self.replfeed.ready);
        list.sort_unstable();
        list.dedup();
        for k in list {
            self.link_read(cx, k, false);
        }
    }

    fn link_read(&mut self, cx: &mut Context<'_, Timer>, key: Key, hup: bool) {
        let hold = self.hold_limit();
        let Some(l) = self.replfeed.links.get_mut(key) else {
            return;
        };
        if l.phase == Phase::Connecting {
            return;
        }
        let session = l.session;
        let (end, n) = if l.tls.is_some() {
            let read = tls::read(l, LINK_READ_BUDGET, hold);
            // Handshake messages rustls could not send at once.
            if l.wants_write() {
                if let Err(e) = link_write(l) {
                    let why = format!("write to {} failed ({e})", l.addr);
                    return self.feed_fail(cx, session, &why);
                }
            }
            read
        } else {
            let fd = l.stream.as_raw_fd();
            read_budgeted(fd, &mut l.rbuf, LINK_READ_BUDGET, hold, hup, GROWTH)
        };
        if n > 0 {
            l.heard = cx.now;
        }
        let addr = l.addr;
        match end {
            ReadEnd::Drained => {}
            ReadEnd::Budget => self.replfeed.ready.push(key),
            ReadEnd::Full => {
                let why = format!("{addr}'s stream waits past the replica output limit");
                return self.feed_fail(cx, session, &why);
            }
            ReadEnd::Eof => {
                self.link_scan(cx, key);
                let why = format!("the master {addr} closed the replication link");
                return self.feed_fail(cx, session, &why);
            }
            ReadEnd::Error(e) => {
                let why = format!("reading the master {addr} failed ({e})");
                return self.feed_fail(cx, session, &why);
            }
        }
        self.link_scan(cx, key);
    }

    /// What bounds a link's waiting stream and a held MULTI block.
    fn hold_limit(&self) -> usize {
        match self.overload.replica.hard {
            0 => DEFAULT_HOLD,
            n => n.min(usize::MAX as u64) as usize,
        }
    }

    /// Work through what link `key` has buffered, and carry out what it
    /// came to.
    fn link_scan(&mut self, cx: &mut Context<'_, Timer>, key: Key) {
        let hold = self.hold_limit();
        let mut out = Vec::new();
        let Some(session) = self.replfeed.links.get(key).map(|l| l.session) else {
            return;
        };
        let step = {
            let FeedState { links, feeds, .. } = &mut self.replfeed;
            let (Some(l), Some(feed)) = (
                links.get_mut(key),
                feeds.iter_mut().find(|f| f.session == session),
            ) else {
                return;
            };
            link_step(l, feed, hold, cx.now, &mut out)
        };
        self.feed_push(session, out);
        match step {
            Step::Wait => {}
            Step::Fail(why) => self.feed_fail(cx, session, &why),
            Step::RdbDone => {
                let Some(feed) = self.replfeed.feed_mut(session) else {
                    return;
                };
                feed.loading -= 1;
                if feed.loading > 0 {
                    return;
                }
                // Every master passed its RDB: the client's own, then what
                // the links hold, in link order.
                let links = feed.links.clone();
                let mut rdb = format!("${}\r\n", EMPTY_RDB.len()).into_bytes();
                rdb.extend_from_slice(EMPTY_RDB);
                self.feed_push(session, vec![Bytes::from(rdb)]);
                for k in links {
                    self.link_scan(cx, k);
                }
            }
        }
    }

    /// Append `frames` to the feed client's output, behind the SYNC's
    /// ring slot, under its output limit.
    fn feed_push(&mut self, session: Key, frames: Vec<Bytes>) {
        if frames.is_empty() {
            return;
        }
        // An ACL change took SYNC / PSYNC away: it is closing.
        if self.revoked(session) {
            return;
        }
        let Some(barrier) = self.replfeed.feed_mut(session).map(|f| f.barrier) else {
            return;
        };
        let Some(s) = self.sessions.get_mut(session) else {
            return;
        };
        for f in frames {
            s.push_oob(barrier, f);
        }
        super::overload::mark_over_hard(&self.overload, s);
        if s.mark_dirty() {
            self.dirty_sessions.push(session);
        }
    }

    /// At every tick: keepalives to feeds still loading, the load timeout,
    /// a changed set of masters.
    pub(super) fn feeds_tick(&mut self, cx: &mut Context<'_, Timer>) {
        let now = cx.now;
        let handshake = self.tls_handshake_limit();
        let mut fail: Vec<(Key, String)> = Vec::new();
        let mut keepalive = Vec::new();
        let topo = self.place.map();
        for f in self.replfeed.feeds.iter_mut() {
            if f.epoch != topo.epoch {
                if topo.serving_masters() != f.masters {
                    fail.push((f.session, "the cluster's masters changed".to_string()));
                    continue;
                }
                f.epoch = topo.epoch;
            }
            if f.loading == 0 {
                continue;
            }
            for k in &f.links {
                if let Some(l) = self.replfeed.links.get(*k) {
                    let loading = !matches!(l.phase, Phase::Stream);
                    let why = if loading && now.saturating_duration_since(l.heard) > LOAD_TIMEOUT {
                        Some(format!(
                            "the master {} sent nothing for 60s before its RDB",
                            l.addr
                        ))
                    } else {
                        l.handshake_overdue(now, handshake)
                    };
                    if let Some(why) = why {
                        fail.push((f.session, why));
                        break;
                    }
                }
            }
            if now.saturating_duration_since(f.last_out) >= KEEPALIVE {
                f.last_out = now;
                keepalive.push(f.session);
            }
        }
        for s in keepalive {
            self.feed_push(s, vec![Bytes::from_static(b"\n")]);
        }
        for (s, why) in fail {
            self.feed_fail(cx, s, &why);
        }
    }

    /// SIGTERM: feeds have no reply to wait for; they close now.
    pub(super) fn feeds_close_all(&mut self, cx: &mut Context<'_, Timer>) {
        let sessions: Vec<Key> = self.replfeed.feeds.iter().map(|f| f.session).collect();
        for s in sessions {
            self.close_session(cx, s);
        }
    }
}

/// Write what the handshake has left to send, as far as the socket takes
/// it (the rest goes at its next writable edge).
fn link_write(l: &mut Link) -> std::io::Result<()> {
    if l.tls.is_some() {
        return tls::write(l);
    }
    while !l.out.is_empty() {
        match l.stream.write(&l.out) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                l.out.drain(..n);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// A frame's command name is `name` (ASCII case ignored).
fn is(frame: &[u8], args: &[std::ops::Range<usize>], i: usize, name: &[u8]) -> bool {
    args.get(i)
        .and_then(|r| frame.get(r.clone()))
        .is_some_and(|a| a.eq_ignore_ascii_case(name))
}

/// Scan what link `l` holds, as far as its phase allows: the handshake's
/// lines, the RDB skipped, the stream's commands appended to `out`.
fn link_step(
    l: &mut Link,
    feed: &mut Feed,
    hold: usize,
    now: Instant,
    out: &mut Vec<Bytes>,
) -> Step {
    const LIMITS: Limits = Limits {
        max_multibulk_len: i32::MAX as usize,
        max_bulk_len: 1 << 32,
        max_inline_len: 64 * 1024,
    };
    loop {
        match l.phase {
            Phase::Connecting => return Step::Wait,
            Phase::Handshake { auth } => {
                let Some(end) = l.rbuf.iter().position(|&b| b == b'\n') else {
                    if l.rbuf.len() > MAX_LINE {
                        return Step::Fail(format!("{} sent an overlong line", l.addr));
                    }
                    return Step::Wait;
                };
                let line = l.rbuf.split_to(end + 1);
                let text = line.strip_suffix(b"\n").unwrap_or(&line);
                let text = text.strip_suffix(b"\r").unwrap_or(text);
                if text.is_empty() {
                    continue; // a keepalive while the master saves
                }
                match text[0] {
                    b'-' => {
                        let why = if auth {
                            crate::backend::auth::setup_failure(text)
                        } else {
                            String::from_utf8_lossy(&text[1..]).into_owned()
                        };
                        return Step::Fail(format!("{} refused SYNC: {why}", l.addr));
                    }
                    b'+' if auth => {
                        l.phase = Phase::Handshake { auth: false };
                        l.out.extend_from_slice(SYNC);
                        if let Err(e) = link_write(l) {
                            return Step::Fail(format!("write to {} failed ({e})", l.addr));
                        }
                    }
                    b'$' if text.starts_with(b"$EOF:") && text.len() == 45 => {
                        let mut mark = [0u8; 40];
                        mark.copy_from_slice(&text[5..]);
                        l.phase = Phase::RdbEof { mark };
                    }
                    b'$' => match crate::resp::parse_i64(&text[1..]) {
                        Some(n) if n >= 0 => {
                            l.phase = Phase::Rdb { left: n as u64 };
                        }
                        _ => return Step::Fail(format!("{} sent a bad RDB header", l.addr)),
                    },
                    _ => {} // +FULLRESYNC and the like: nothing to do
                }
            }
            Phase::Rdb { left } => {
                let n = (l.rbuf.len() as u64).min(left);
                let _ = l.rbuf.split_to(n as usize);
                if n < left {
                    l.phase = Phase::Rdb { left: left - n };
                    l.rbuf.clear();
                    return Step::Wait;
                }
                l.phase = Phase::Stream;
                return Step::RdbDone;
            }
            Phase::RdbEof { mark } => {
                if let Some(at) = l.rbuf.windows(40).position(|w| w == mark) {
                    let _ = l.rbuf.split_to(at + 40);
                    l.phase = Phase::Stream;
                    return Step::RdbDone;
                }
                // Keep what could be the start of the mark.
                let keep = l.rbuf.len().min(39);
                let _ = l.rbuf.split_to(l.rbuf.len() - keep);
                return Step::Wait;
            }
            Phase::Stream => {
                if feed.loading > 0 {
                    // Another master's RDB is still coming: this stream
                    // waits in the buffer (bounded by the read's limit).
                    return Step::Wait;
                }
                let step = stream_step(l, feed, hold, now, out, &LIMITS);
                if !out.is_empty() {
                    feed.last_out = now;
                }
                return step;
            }
        }
    }
}

/// The stream phase of [`link_step`].
fn stream_step(
    l: &mut Link,
    feed: &mut Feed,
    hold: usize,
    now: Instant,
    out: &mut Vec<Bytes>,
    limits: &Limits,
) -> Step {
    loop {
        let (len, inline) = match l.scanner.scan(&l.rbuf, limits, true) {
            Scan::Incomplete => return Step::Wait,
            Scan::Skip { len } => {
                let _ = l.rbuf.split_to(len);
                continue;
            }
            Scan::Request { len } => (len, false),
            Scan::Inline { len } => (len, true),
            Scan::Error(e) => return Step::Fail(format!("{}'s stream: {e}", l.addr)),
        };
        let frame = if inline {
            let _ = l.rbuf.split_to(len);
            Bytes::from(l.scanner.take_inline_frame())
        } else {
            l.rbuf.split_to(len).freeze()
        };
        let args = l.scanner.args();
        if is(&frame, args, 0, b"replconf") {
            continue;
        }
        if is(&frame, args, 0, b"ping") {
            let quiet = out.is_empty() && now.saturating_duration_since(feed.last_out) >= KEEPALIVE;
            if quiet && l.block.is_none() {
                feed.last_out = now;
                out.push(frame);
            }
            continue;
        }
        if is(&frame, args, 0, b"select") {
            let db = args.get(1).and_then(|r| frame.get(r.clone()));
            if db.is_some() && db == feed.db.as_deref() {
                continue;
            }
            feed.db = db.map(<[u8]>::to_vec);
        }
        if l.block.is_none() && is(&frame, args, 0, b"multi") {
            l.block = Some((vec![frame], 0));
            continue;
        }
        let exec = is(&frame, args, 0, b"exec");
        match l.block.as_mut() {
            Some((held, bytes)) => {
                *bytes += frame.len();
                held.push(frame);
                if exec {
                    if let Some((held, _)) = l.block.take() {
                        out.extend(held);
                    }
                } else if *bytes > hold {
                    return Step::Fail(format!(
                        "{}'s transaction is larger than the replica output limit",
                        l.addr
                    ));
                }
            }
            None => out.push(frame),
        }
    }
}

/// Session hook: a replication feed's links go with it.
#[inline]
pub(super) fn session_closed(w: &mut Worker, cx: &mut Context<'_, Timer>, s: &mut Session) {
    if !w.replfeed.is_empty() {
        w.feed_closed(cx, s.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A link and its feed over a connected loopback socket (never read
    /// or written here: the bytes are put into the buffer by hand).
    fn link_and_feed() -> (Link, Feed, std::net::TcpListener) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let s = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let addr = l.local_addr().unwrap();
        let now = Instant::now();
        let link = Link {
            session: Key::NONE,
            addr,
            stream: TcpStream::from_std(s),
            tls: None,
            rbuf: BytesMut::new(),
            out: Vec::new(),
            phase: Phase::Handshake { auth: true },
            scanner: RequestScanner::new(),
            heard: now,
            opened: now,
            block: None,
        };
        let feed = Feed {
            session: Key::NONE,
            links: Vec::new(),
            loading: 1,
            barrier: 0,
            db: None,
            last_out: now,
            masters: Vec::new(),
            epoch: 0,
            _ticket: Ticket::take().unwrap(),
        };
        (link, feed, l)
    }

    fn req(args: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        crate::resp::encode::request(&mut out, args);
        out
    }

    /// Feed `input` one byte at a time (every split) and collect what the
    /// client would get; the RDB's end is taken as the feed's.
    fn run(input: &[u8]) -> (Vec<Vec<u8>>, Step) {
        let (mut l, mut f, _keep) = link_and_feed();
        let mut out = Vec::new();
        let mut last = Step::Wait;
        for &b in input {
            l.rbuf.extend_from_slice(&[b]);
            loop {
                match link_step(&mut l, &mut f, 1 << 20, Instant::now(), &mut out) {
                    Step::RdbDone => f.loading = 0,
                    Step::Wait => break,
                    fail @ Step::Fail(_) => {
                        last = fail;
                        break;
                    }
                }
            }
            if matches!(last, Step::Fail(_)) {
                break;
            }
        }
        (out.iter().map(|b| b.to_vec()).collect(), last)
    }

    #[test]
    fn a_link_skips_the_rdb_and_merges_its_stream() {
        let stream = [
            req(&[b"SELECT", b"0"]),
            req(&[b"SET", b"a", b"1"]),
            req(&[b"PING"]),
            req(&[b"REPLCONF", b"GETACK", b"*"]),
            req(&[b"SELECT", b"0"]),
            req(&[b"MULTI"]),
            req(&[b"SET", b"b", b"2"]),
            req(&[b"EXEC"]),
        ]
        .concat();
        let want = vec![
            req(&[b"SELECT", b"0"]),
            req(&[b"SET", b"a", b"1"]),
            req(&[b"MULTI"]),
            req(&[b"SET", b"b", b"2"]),
            req(&[b"EXEC"]),
        ];
        // Disk-based, after AUTH's +OK and keepalives.
        let mut input = b"+OK\r\n\n\n$7\r\nREDIS\r\n".to_vec();
        input.extend_from_slice(&stream);
        let (got, last) = run(&input);
        assert!(matches!(last, Step::Wait));
        assert_eq!(got, want);
        // Diskless, the mark split over reads, the RDB holding a near miss.
        let mark = [b'x'; 40];
        let mut input = b"+OK\r\n$EOF:".to_vec();
        input.extend_from_slice(&mark);
        input.extend_from_slice(b"\r\nREDIS0010");
        input.extend_from_slice(&[b'x'; 39]);
        input.push(b'y');
        input.extend_from_slice(&mark);
        input.extend_from_slice(&stream);
        let (got, _) = run(&input);
        assert_eq!(got, want);
        // A refusal fails the feed, naming the credentials.
        let (_, last) = run(b"-WRONGPASS invalid username-password pair\r\n");
        let Step::Fail(why) = last else {
            panic!("not failed")
        };
        assert!(why.contains("backend-password"), "{why}");
    }

    #[test]
    fn the_cap_error_names_the_cap() {
        assert!(ERR_TOO_MANY.contains(&format!("at most {MAX_FEEDS})")));
    }

    #[test]
    fn replids_are_40_hex_digits() {
        let a = new_replid();
        assert_eq!(a.len(), 40);
        assert!(a.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(a, new_replid());
    }
}
