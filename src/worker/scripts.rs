//! Scripts and functions: EVAL remembered, the management commands on
//! every master, and the transparent reload of a script or library a node
//! lacks.
//!
//! ```text
//!   EVAL body ───────────► registry.note_script ──► forwarded as Slot / AnyMaster
//!   EVAL body 0, EVALSHA sha 0, FCALL f 0 (the router said any master)
//!        ──► the registry: the slot of the first key the code names
//!            literally (script::literal, found once) ──► that slot's node,
//!            else any master
//!   SCRIPT LOAD|EXISTS|FLUSH, FUNCTION LOAD|DELETE|FLUSH|RESTORE
//!        ──► every master (a gathering finished by a closure) ──► one reply
//!   SCRIPT KILL, FUNCTION KILL, FUNCTION STATS ──► every master on a lease
//!        each (a node running a script reads nothing more from the
//!        connection that sent it)
//!   sweep (every 25 ms while script calls are in flight, and each tick):
//!        a script call unanswered between two sweeps ──► registry.note_stalled
//!   PING while some worker sees one ──► every master on a lease each
//!        ──► a master's BUSY, else the first answer
//!   node: -NOSCRIPT to EVALSHA sha / -ERR Function not found to FCALL f
//!        ──► a later request of the session on that connection? ──► the
//!            node's error is the reply (a reload would reorder them)
//!        ──► else registry knows it? ──► on that same connection:
//!            [SCRIPT LOAD body | FUNCTION LOAD code] (Purpose::Reload), then
//!            the call again with its sequence number ──► the client sees the
//!            call's reply only
//! ```
//!
//! Replies: SCRIPT LOAD and FUNCTION LOAD answer the SHA-1 / library name
//! when every master gave the same one; the others answer OK when every
//! master did. Otherwise the first error, in master order, is the reply.
//! SCRIPT EXISTS answers 1 for a script an EVALSHA through mithril runs
//! anywhere: every master has it, or some master has it and the registry
//! keeps its body (it loads it on the others when they answer NOSCRIPT;
//! an EVAL leaves its script on the one master that ran it). A script no
//! master has is 0, even if the registry keeps it (a body that failed to
//! compile, a cache flushed on the nodes directly).
//! SCRIPT KILL / FUNCTION KILL answer OK when some master killed a script,
//! else the first error other than NOTBUSY, else NOTBUSY.
//!
//! The registry learns a script when a master answered SCRIPT LOAD with
//! its SHA-1 (or when EVAL passes, queued in MULTI included), a library
//! when a master answered FUNCTION LOAD with its name; SCRIPT FLUSH,
//! FUNCTION DELETE, FUNCTION FLUSH and FUNCTION RESTORE ... FLUSH forget
//! what they removed once a master said OK. Libraries that FUNCTION RESTORE
//! brings are not learnt (the payload is a node's dump).
//!
//! Reloads: only a client's own request is reloaded (`Purpose::Client`),
//! never a transaction (a NOSCRIPT inside EXEC is what Redis answers), and
//! at most until the request has spent its redirects (`MAX_HOPS`): each
//! reload counts as one. Libraries are loaded again only through a master
//! connection (a replica refuses FUNCTION LOAD; FCALL_RO read from a
//! replica gets the replica's error). Order: a reload never reorders a
//! session's requests. It happens only when nothing of the session was
//! sent (or queued) on that connection after the call: the reload and
//! the call go behind whatever the connection carries of other sessions,
//! and every later request of the session to that node behind them. When
//! the session has a later request there (a pipeline: EVALSHA, SET k,
//! GET k), that request has already run or will run before a call sent
//! again could, where Redis ran the call first: the client gets the
//! node's NOSCRIPT (or "Function not found") exactly as from Redis, and
//! its library loads the script and calls again (issue 32). A call that
//! meets a new master after a failover (MOVED, then NOSCRIPT) is the
//! common case of the first kind: cured unseen.

use super::purpose::{InFlight, Purpose};
use super::{Timer, Worker};
use crate::command::known;
use crate::command::{self, flags, Args, Command, Wide};
use crate::placement::Unit;
use crate::resp::limits::Limits;
use crate::resp::request::{RequestScanner, Scan};
use crate::resp::value::{self, Value};
use crate::router;
use crate::script::sha1;
use crate::session::ring::{Finish, Gathering};
use crate::shared::Shared;
use bytes::{Bytes, BytesMut};
use reactor::{Context, Key};
use std::ops::Range;
use std::sync::Arc;

const ERR_DISAGREE: &[u8] = b"-ERR mithril: the masters answered differently\r\n";
const ERR_BAD_REPLY: &[u8] =
    b"-ERR mithril: unexpected reply from a node to a scripting command\r\n";
const NOTBUSY: &[u8] = b"-NOTBUSY";
const OK: &[u8] = b"+OK\r\n";
const FUNCTION_NOT_FOUND: &[u8] = b"-ERR Function not found\r\n";

/// A node's error that a remembered script or library may cure.
#[inline]
pub(super) fn is_missing(frame: &[u8]) -> bool {
    frame.starts_with(b"-NOSCRIPT") || frame == FUNCTION_NOT_FOUND
}

pub(super) fn is_error(frame: &[u8]) -> bool {
    frame.first() == Some(&b'-')
}

/// The first error among `parts`.
pub(super) fn first_error(parts: &[Bytes]) -> Option<Bytes> {
    parts.iter().find(|p| is_error(p)).cloned()
}

/// SCRIPT LOAD, FUNCTION LOAD: the one answer every master gave.
fn agreed(parts: Vec<Bytes>) -> Bytes {
    if let Some(e) = first_error(&parts) {
        return e;
    }
    match parts.split_first() {
        Some((first, rest)) if rest.iter().all(|p| p == first) => first.clone(),
        Some(_) => Bytes::from_static(ERR_DISAGREE),
        None => Bytes::from_static(ERR_BAD_REPLY),
    }
}

/// Every master said OK.
pub(super) fn all_ok(parts: Vec<Bytes>) -> Bytes {
    if let Some(e) = first_error(&parts) {
        return e;
    }
    match parts.iter().all(|p| p.as_ref() == OK) {
        true => Bytes::from_static(OK),
        false => Bytes::from_static(ERR_BAD_REPLY),
    }
}

/// SCRIPT KILL, FUNCTION KILL: OK if some master killed a script; else
/// an error other than NOTBUSY (UNKILLABLE, ...); else NOTBUSY.
fn killed(parts: Vec<Bytes>) -> Bytes {
    if parts.iter().any(|p| p.as_ref() == OK) {
        return Bytes::from_static(OK);
    }
    if let Some(e) = parts
        .iter()
        .find(|p| is_error(p) && !p.starts_with(NOTBUSY))
    {
        return e.clone();
    }
    parts
        .into_iter()
        .next()
        .unwrap_or_else(|| Bytes::from_static(ERR_BAD_REPLY))
}

/// SCRIPT EXISTS: per script, 1 where every master answered 1, or where
/// some master did and `kept(i)` says the registry can load script `i` on
/// the others.
fn exists_for_proxy(parts: Vec<Bytes>, n: usize, kept: impl Fn(usize) -> bool) -> Bytes {
    if let Some(e) = first_error(&parts) {
        return e;
    }
    let (mut all, mut any) = (vec![true; n], vec![false; n]);
    for p in &parts {
        let Ok(Some((Value::Array(items), _))) = value::parse(p) else {
            return Bytes::from_static(ERR_BAD_REPLY);
        };
        if items.len() != n {
            return Bytes::from_static(ERR_BAD_REPLY);
        }
        for (i, item) in items.iter().enumerate() {
            let has = item.as_int() == Some(1);
            all[i] &= has;
            any[i] |= has;
        }
    }
    let mut out = Vec::with_capacity(8 + 4 * n);
    out.extend_from_slice(format!("*{n}\r\n").as_bytes());
    for i in 0..n {
        let exists = all[i] || (any[i] && kept(i));
        out.extend_from_slice(if exists { b":1\r\n" } else { b":0\r\n" });
    }
    Bytes::from(out)
}

/// PING while a script seems busy: a master's BUSY if one said it (the
/// node's answer while a script runs past its busy-reply-threshold), else
/// the first answer that is not an error, else the first error.
fn busy_or_first(parts: Vec<Bytes>) -> Bytes {
    if let Some(b) = parts.iter().find(|p| p.starts_with(b"-BUSY")) {
        return b.clone();
    }
    parts
        .iter()
        .find(|p| !is_error(p))
        .or(parts.first())
        .cloned()
        .unwrap_or_else(|| Bytes::from_static(ERR_BAD_REPLY))
}

/// FUNCTION STATS: the answer of the master running a script (its
/// `running_script` is not null), else the first; the first error if any.
fn running_or_first(parts: Vec<Bytes>) -> Bytes {
    if let Some(e) = first_error(&parts) {
        return e;
    }
    const FIELD: &[u8] = b"running_script\r\n";
    let running = |p: &Bytes| {
        let Some(at) = p.windows(FIELD.len()).position(|w| w == FIELD) else {
            return false;
        };
        let next = &p[at + FIELD.len()..];
        !(next.starts_with(b"$-1") || next.starts_with(b"*-1") || next.starts_with(b"_"))
    };
    parts
        .iter()
        .find(|p| running(p))
        .or(parts.first())
        .cloned()
        .unwrap_or_else(|| Bytes::from_static(ERR_BAD_REPLY))
}

/// The sweep's period while script calls are in flight.
const SCRIPT_WATCH: std::time::Duration = std::time::Duration::from_millis(25);

/// How many unanswered requests of a stalled connection the sweep looks
/// at for a script call.
const STALL_LOOK: usize = 16;

/// A script call (a request unanswered on a stalled connection;
/// re-scanned, only by the periodic sweep).
fn is_script_call(req: &Bytes) -> bool {
    name_and_first(req).is_some_and(|(cmd, _)| known::script_call(cmd).is_some())
}

/// The body of a bulk string reply (RESP2 and RESP3 alike).
fn bulk_text(frame: &[u8]) -> Option<&[u8]> {
    let rest = frame.strip_prefix(b"$")?;
    let nl = rest.iter().position(|&b| b == b'\r')?;
    let len: usize = std::str::from_utf8(&rest[..nl]).ok()?.parse().ok()?;
    let body = rest.get(nl + 2..)?.strip_suffix(b"\r\n")?;
    (body.len() == len).then_some(body)
}

/// `SCRIPT LOAD body` / `FUNCTION LOAD code` as one request frame.
fn load_frame(container: &[u8], text: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(text.len() + 48);
    out.extend_from_slice(b"*3\r\n");
    for arg in [container, b"LOAD", text] {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
    out.freeze()
}

/// The command name and first argument of a request frame (re-scanned:
/// only on the NOSCRIPT path).
fn name_and_first(req: &Bytes) -> Option<(&'static Command, Bytes)> {
    let mut sc = RequestScanner::new();
    let limits = Limits {
        max_bulk_len: usize::MAX / 2,
        ..Limits::default()
    };
    let Scan::Request { .. } = sc.scan(req, &limits, true) else {
        return None;
    };
    let ranges = sc.args().to_vec();
    let args = Args {
        buf: req,
        ranges: &ranges,
    };
    let cmd = command::resolve(&args).ok()?;
    let first = ranges.get(1)?;
    Some((cmd, req.slice(first.clone())))
}

/// The closure that makes one reply of every master's, and updates the
/// registry from what they said.
fn finish_for(shared: Arc<Shared>, wide: Wide, args: &Args) -> Option<Finish> {
    let last = args.get(args.len() - 1).unwrap_or_default();
    let f: Finish = match wide {
        Wide::ScriptLoad => {
            let body = Bytes::copy_from_slice(args.get(2).unwrap_or_default());
            let sha = sha1::digest(&body);
            Box::new(move |parts| {
                if parts.iter().any(|p| bulk_text(p).is_some()) {
                    shared.scripts.insert_script(sha, &body);
                }
                agreed(parts)
            })
        }
        Wide::ScriptExists => {
            let shas: Vec<Option<[u8; 20]>> = (2..args.len())
                .map(|i| sha1::parse_hex(args.get(i).unwrap_or_default()))
                .collect();
            let n = shas.len();
            Box::new(move |parts| {
                exists_for_proxy(parts, n, |i| {
                    shas[i].is_some_and(|sha| shared.scripts.has_script(&sha))
                })
            })
        }
        Wide::ScriptFlush => Box::new(move |parts| {
            if parts.iter().any(|p| p.as_ref() == OK) {
                shared.scripts.clear_scripts();
            }
            all_ok(parts)
        }),
        Wide::ScriptKill | Wide::FunctionKill => Box::new(killed),
        Wide::FunctionLoad => {
            let code = Bytes::copy_from_slice(last);
            Box::new(move |parts| {
                if let Some(name) = parts.iter().find_map(|p| bulk_text(p)) {
                    shared.scripts.insert_library(name, &code);
                }
                agreed(parts)
            })
        }
        Wide::FunctionDelete => {
            let name = last.to_vec();
            Box::new(move |parts| {
                if parts.iter().any(|p| p.as_ref() == OK) {
                    shared.scripts.remove_library(&name);
                }
                all_ok(parts)
            })
        }
        Wide::FunctionFlush => Box::new(move |parts| {
            if parts.iter().any(|p| p.as_ref() == OK) {
                shared.scripts.clear_libraries();
            }
            all_ok(parts)
        }),
        Wide::FunctionRestore => {
            // FLUSH replaces every library with the payload's.
            let flush = args.len() == 4 && last.eq_ignore_ascii_case(b"flush");
            Box::new(move |parts| {
                if flush && parts.iter().any(|p| p.as_ref() == OK) {
                    shared.scripts.clear_libraries();
                }
                all_ok(parts)
            })
        }
        // Not scripting commands (`Wide::is_scripting`).
        _ => return None,
    };
    Some(f)
}

impl Worker {
    /// EVAL / EVAL_RO: remember the body, then route as a keyed command;
    /// without keys, by the first key the body names literally
    /// (`script::literal`), else to any master.
    pub(super) fn eval(
        &mut self,
        cx: &mut Context<'_, Timer>,
        key: Key,
        unit: Option<Unit>,
        read: bool,
        frame: Bytes,
        args: &Args,
    ) {
        let pool = self.pool_of(key);
        let unit = match unit {
            Some(unit) => {
                self.note_eval(args);
                Some(unit)
            }
            None => args
                .get(1)
                .and_then(|body| self.shared.scripts.note_keyless_script(body))
                .map(|k| self.place.unit_of(pool, &k)),
        };
        match unit {
            Some(unit) if self.place.known(pool) => self.forward_unit(cx, key, unit, read, frame),
            _ => self.forward_any(cx, key, frame),
        }
    }

    /// A call the router sent to any master. EVALSHA / FCALL (and their
    /// _RO forms) without keys go where the first key their script or
    /// function names literally is, when the registry keeps its code;
    /// anything else to any master.
    pub(super) fn forward_keyless(
        &mut self,
        cx: &mut Context<'_, Timer>,
        key: Key,
        cmd: Option<&'static Command>,
        ranges: &[Range<usize>],
        frame: Bytes,
    ) {
        let slot = cmd.and_then(|cmd| {
            let args = Args {
                buf: &frame,
                ranges,
            };
            let first = args.get(1)?;
            let scripts = &self.shared.scripts;
            if known::is_function_stats(cmd) {
                return Some(None);
            }
            let literal = match known::script_call(cmd) {
                Some(known::ScriptCall::Sha) => scripts.script_slot(&sha1::parse_hex(first)?)?,
                Some(known::ScriptCall::Function) => scripts.function_slot(first),
                _ => None,
            }?;
            let unit = self.place.unit_of(self.pool_of(key), &literal);
            Some(Some((unit, cmd.flags & flags::READONLY != 0)))
        });
        match slot {
            Some(Some((unit, read))) if self.place.known(self.pool_of(key)) => {
                self.forward_unit(cx, key, unit, read, frame)
            }
            // FUNCTION STATS: every master on a lease each (a busy one
            // reads nothing more from a connection waiting on its script).
            Some(None) => {
                self.gather_every_master(cx, key, frame, Box::new(running_or_first), true)
            }
            _ => self.forward_any(cx, key, frame),
        }
    }

    /// PING while a script sent through this process seems to be running
    /// long on some master (`scripts_tick`): the masters are asked, each on
    /// a lease, and a BUSY from one is the answer, as a server busy with a
    /// script answers. Not when the session still waits for replies of
    /// its own (its own script, maybe): a server would run the PING after
    /// them, so it is answered here, in its turn. Returns whether the PING
    /// was taken.
    pub(super) fn ping_while_busy(
        &mut self,
        cx: &mut Context<'_, Timer>,
        key: Key,
        frame: &Bytes,
    ) -> bool {
        if !self.shared.scripts.scripts_stalled() || self.place.map().is_empty() {
            return false;
        }
        if !self
            .sessions
            .get(key)
            .is_some_and(|s| s.ring.pending() == 0)
        {
            return false;
        }
        self.gather_every_master(cx, key, frame.clone(), Box::new(busy_or_first), true);
        true
    }

    /// `frame` to every master (`on_leases`: on a lease each), their
    /// replies made into one by `finish`.
    pub(super) fn gather_every_master(
        &mut self,
        cx: &mut Context<'_, Timer>,
        key: Key,
        frame: Bytes,
        finish: Finish,
        on_leases: bool,
    ) {
        let masters = self.place.master_count(self.pool_of(key));
        if masters == 0 {
            return self.reply_static(key, router::ERR_NO_TOPOLOGY);
        }
        let Some(s) = self.sessions.get_mut(key) else {
            return;
        };
        let proto = s.proto;
        let mut g = Gathering::new(masters, finish);
        g.request = frame.clone(); // observe: slow log
        let seq = s.ring.push_gather(g);
        self.obs.stats.pool(s.pool()).fragments += masters as u64; // observe
        match on_leases {
            true => self.parts_on_leases(cx, key, seq, masters, proto, &frame),
            false => self.parts_to_masters(cx, key, seq, masters, proto, &frame),
        }
    }

    /// The sweep: whether one of this worker's connections has had no
    /// reply since the previous sweep with a script call among its first
    /// [`STALL_LOOK`] unanswered requests (a script running long on that
    /// node: it answers nothing on that connection, not even what came
    /// before the script in the same read), told to the registry for every
    /// worker's PING to see. Returns whether any connection has a script
    /// call in flight or a stall is still reported (the watch goes on
    /// then).
    pub(super) fn scripts_tick(&mut self, now: std::time::Instant) -> bool {
        let mut scripts = false;
        let stalled = self.backends.iter_mut().fold(false, |stalled, (_, b)| {
            let call =
                b.awaiting() > 0 && b.sent().take(STALL_LOOK).any(|f| is_script_call(&f.req));
            scripts |= call;
            // (stalled_for samples the connection: call it for each.)
            (call && b.stalled_for(now) > std::time::Duration::ZERO) || stalled
        });
        // Cleared only by two sweeps in a row that see no stall: a new
        // script call's first sample on a connection says "no stall yet"
        // even while another script of the same connection had just run
        // long, and a PING must not flip from BUSY back to PONG then.
        let stalled = if stalled {
            self.script_unstall = 0;
            true
        } else if self.script_stalled {
            self.script_unstall += 1;
            self.script_unstall < 2
        } else {
            false
        };
        if stalled != self.script_stalled {
            self.script_stalled = stalled;
            self.shared.scripts.note_stalled(stalled);
        }
        scripts || stalled
    }

    /// A script call was dispatched: the sweep runs every `SCRIPT_WATCH`
    /// while script calls are in flight, so one running long is seen
    /// within about two of them (a tick alone took up to two ticks, and
    /// a PING sent 200 ms after the script could still get PONG).
    pub(super) fn arm_script_watch(&mut self, cx: &mut Context<'_, Timer>) {
        if !self.script_watch {
            self.script_watch = true;
            cx.schedule_in(SCRIPT_WATCH, Timer::ScriptWatch);
        }
    }

    pub(super) fn script_watch(&mut self, cx: &mut Context<'_, Timer>) {
        self.script_watch = false;
        if self.scripts_tick(cx.now) {
            self.arm_script_watch(cx);
        }
    }

    /// Remember an EVAL's body (also when it is queued in a transaction).
    pub(super) fn note_eval(&mut self, args: &Args) {
        if let Some(body) = args.get(1) {
            self.shared.scripts.note_script(body);
        }
    }

    /// SCRIPT LOAD / EXISTS / FLUSH / KILL, FUNCTION LOAD / DELETE / FLUSH
    /// / RESTORE / KILL: sent to every master, one reply made of theirs.
    pub(super) fn scripting(
        &mut self,
        cx: &mut Context<'_, Timer>,
        key: Key,
        wide: Wide,
        frame: Bytes,
        args: &Args,
    ) {
        let masters = self.place.master_count(self.pool_of(key));
        let Some(finish) = finish_for(self.shared.clone(), wide, args) else {
            return;
        };
        let Some(s) = self.sessions.get_mut(key) else {
            return;
        };
        let proto = s.proto;
        let seq = s.ring.push_gather(Gathering::new(masters, finish));
        self.obs.stats.pool(s.pool()).fragments += masters as u64; // observe
        if !matches!(wide, Wide::ScriptKill | Wide::FunctionKill) {
            return self.parts_to_masters(cx, key, seq, masters, proto, &frame);
        }
        // A node running a script reads nothing more from the connection
        // that sent it (maybe this worker's shared one): each kill goes on
        // a lease of its own.
        self.parts_on_leases(cx, key, seq, masters, proto, &frame);
    }

    /// Send `frame` to every master on a lease each, as parts of the
    /// gathering at `seq` (each lease goes back when answered).
    fn parts_on_leases(
        &mut self,
        cx: &mut Context<'_, Timer>,
        key: Key,
        seq: u64,
        masters: usize,
        proto: crate::resp::Proto,
        frame: &Bytes,
    ) {
        let shards = self.place.masters(self.pool_of(key));
        for (part, shard) in shards.take(masters).enumerate() {
            let part = part as u32;
            let Some(pool) = self.place.shard_master(shard, proto) else {
                let e = Bytes::from_static(router::ERR_NO_TOPOLOGY);
                self.fold_part(cx, key, seq, part, e);
                continue;
            };
            let addr = self.place.conns.sets[pool].key.addr;
            match self.take_lease(cx, addr, proto, self.where_of(key)) {
                Ok(lease) => {
                    let out = InFlight::new(key, seq, frame.clone(), Purpose::Kill(part));
                    self.send_on(lease, out);
                }
                Err(e) => self.fold_part(cx, key, seq, part, e),
            }
        }
    }

    /// A node answered NOSCRIPT (EVALSHA) or "Function not found" (FCALL)
    /// to a client's request on `bkey`: when the registry knows the script
    /// or the library and nothing of the session follows the call on that
    /// connection, load it there and send the request again behind it;
    /// otherwise the node's error is the reply.
    #[cold]
    #[inline(never)]
    pub(super) fn reload_missing(
        &mut self,
        cx: &mut Context<'_, Timer>,
        bkey: Key,
        f: InFlight,
        frame: Bytes,
    ) {
        // A later request of the session on this connection (queued or
        // already sent: the call was the head) would run before the call
        // sent again, where Redis ran the call first: the client gets the
        // node's error, as from Redis, and its library loads the script.
        let behind = self
            .backends
            .get(bkey)
            .is_some_and(|b| b.carries(f.session));
        // Each reload spends one of the request's redirects.
        let load = if f.hops < router::MAX_HOPS && !behind {
            self.reload_frame(bkey, &f, &frame)
        } else {
            None
        };
        match load {
            Some(load) => {
                let Some(b) = self.backends.get_mut(bkey) else {
                    return self.complete_error(cx, f, frame);
                };
                crate::debug_sampled!(
                    target: "mithril::worker",
                    "worker {}: {} on {}: loading it again",
                    self.id,
                    String::from_utf8_lossy(&frame).trim_end(),
                    b.addr
                );
                b.enqueue(InFlight::new(Key::NONE, 0, load, Purpose::Reload));
                b.enqueue(InFlight {
                    hops: f.hops + 1,
                    ..f
                });
                self.mark_backend_dirty(bkey);
            }
            _ => self.complete_error(cx, f, frame),
        }
    }

    /// The load that cures `frame` for `f`, if the registry has its text
    /// (and counts it as a reload).
    fn reload_frame(&self, bkey: Key, f: &InFlight, frame: &[u8]) -> Option<Bytes> {
        let (cmd, first) = name_and_first(&f.req)?;
        let scripts = &self.shared.scripts;
        match known::script_call(cmd)? {
            known::ScriptCall::Sha if frame.starts_with(b"-NOSCRIPT") => {
                let body = scripts.script(&sha1::parse_hex(&first)?)?;
                scripts.count_script_reload();
                Some(load_frame(b"SCRIPT", &body))
            }
            known::ScriptCall::Function if frame == FUNCTION_NOT_FOUND => {
                // A replica refuses FUNCTION LOAD (its master's libraries
                // reach it by replication).
                let pool = self.backends.get(bkey)?.conn_set()?;
                if !self
                    .place
                    .conns
                    .sets
                    .get(pool)
                    .is_some_and(|p| !p.key.readonly)
                {
                    return None;
                }
                let (_, code) = scripts.library_of(&first)?;
                scripts.count_function_reload();
                Some(load_frame(b"FUNCTION", &code))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &'static str) -> Bytes {
        Bytes::from_static(s.as_bytes())
    }

    #[test]
    fn loads_agree_or_answer_the_first_error() {
        let sha = b("$40\r\ne0e1f9fabfc9d4800c877a703b823ac0578ff8db\r\n");
        assert_eq!(agreed(vec![sha.clone(), sha.clone(), sha.clone()]), sha);
        let e1 = b("-ERR Error compiling script\r\n");
        let e2 = b("-CLUSTERDOWN mithril: cannot reach 127.0.0.1:1\r\n");
        assert_eq!(agreed(vec![sha.clone(), e1.clone(), e2]), e1);
        assert_eq!(
            agreed(vec![sha, b("$3\r\nabc\r\n")]),
            b("-ERR mithril: the masters answered differently\r\n")
        );
        assert_eq!(bulk_text(b"$3\r\nlib\r\n"), Some(&b"lib"[..]));
        assert_eq!(bulk_text(b"$4\r\nlib\r\n"), None);
        assert_eq!(bulk_text(b"-ERR x\r\n"), None);
    }

    #[test]
    fn oks_and_kills() {
        assert_eq!(all_ok(vec![b("+OK\r\n"), b("+OK\r\n")]), b("+OK\r\n"));
        let nolib = b("-ERR Library not found\r\n");
        assert_eq!(all_ok(vec![b("+OK\r\n"), nolib.clone()]), nolib);
        let notbusy = b("-NOTBUSY No scripts in execution right now.\r\n");
        let unkillable = b("-UNKILLABLE Sorry the script already executed write commands\r\n");
        assert_eq!(
            killed(vec![notbusy.clone(), b("+OK\r\n"), notbusy.clone()]),
            b("+OK\r\n")
        );
        assert_eq!(killed(vec![notbusy.clone(), notbusy.clone()]), notbusy);
        assert_eq!(
            killed(vec![notbusy.clone(), unkillable.clone()]),
            unkillable
        );
    }

    #[test]
    fn exists_needs_every_master_or_the_registry() {
        let parts = || {
            vec![
                b("*4\r\n:1\r\n:1\r\n:0\r\n:0\r\n"),
                b("*4\r\n:1\r\n:0\r\n:0\r\n:1\r\n"),
            ]
        };
        let none = |_| false;
        assert_eq!(
            exists_for_proxy(parts(), 4, none),
            b("*4\r\n:1\r\n:0\r\n:0\r\n:0\r\n")
        );
        // Kept by the registry: 1 where some master has it, never where
        // none has.
        assert_eq!(
            exists_for_proxy(parts(), 4, |_| true),
            b("*4\r\n:1\r\n:1\r\n:0\r\n:1\r\n")
        );
        assert_eq!(
            exists_for_proxy(vec![b("*1\r\n:1\r\n")], 2, none),
            Bytes::from_static(ERR_BAD_REPLY)
        );
        let e = b("-ERR x\r\n");
        assert_eq!(
            exists_for_proxy(vec![b("*1\r\n:1\r\n"), e.clone()], 1, none),
            e
        );
    }

    #[test]
    fn ping_and_function_stats_while_a_script_runs() {
        let pong = b("+PONG\r\n");
        let busy = b("-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n");
        let down = b("-CLUSTERDOWN mithril: cannot reach 127.0.0.1:1\r\n");
        assert_eq!(
            busy_or_first(vec![pong.clone(), busy.clone(), pong.clone()]),
            busy
        );
        assert_eq!(busy_or_first(vec![down.clone(), pong.clone()]), pong);
        assert_eq!(busy_or_first(vec![down.clone()]), down);
        // RESP2 and RESP3 nulls mean no script runs there.
        let idle2 = b("*4\r\n$14\r\nrunning_script\r\n$-1\r\n$7\r\nengines\r\n*0\r\n");
        let idle3 = b("%2\r\n$14\r\nrunning_script\r\n_\r\n$7\r\nengines\r\n%0\r\n");
        let running = b("*4\r\n$14\r\nrunning_script\r\n*6\r\n$4\r\nname\r\n$4\r\nspin\r\n$7\r\ncommand\r\n*3\r\n$5\r\nfcall\r\n$4\r\nspin\r\n$1\r\n0\r\n$11\r\nduration_ms\r\n:210\r\n$7\r\nengines\r\n*0\r\n");
        assert_eq!(
            running_or_first(vec![idle2.clone(), running.clone(), idle2.clone()]),
            running
        );
        assert_eq!(running_or_first(vec![idle3.clone(), idle3.clone()]), idle3);
        assert_eq!(running_or_first(vec![idle2, down.clone()]), down);
        assert!(is_script_call(&b(
            "*3\r\n$5\r\nFCALL\r\n$1\r\nf\r\n$1\r\n0\r\n"
        )));
        assert!(is_script_call(&b(
            "*3\r\n$4\r\neval\r\n$1\r\nx\r\n$1\r\n0\r\n"
        )));
        assert!(!is_script_call(&b("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n")));
    }

    #[test]
    fn what_a_reload_cures_and_sends() {
        assert!(is_missing(
            b"-NOSCRIPT No matching script. Please use EVAL.\r\n"
        ));
        assert!(is_missing(FUNCTION_NOT_FOUND));
        assert!(!is_missing(b"-ERR Function not found here\r\n"));
        assert!(!is_missing(b"-ERR unknown command\r\n"));
        assert_eq!(
            load_frame(b"SCRIPT", b"return 1"),
            b("*3\r\n$6\r\nSCRIPT\r\n$4\r\nLOAD\r\n$8\r\nreturn 1\r\n")
        );
        let req = b("*3\r\n$7\r\nEVALSHA\r\n$3\r\nabc\r\n$1\r\n0\r\n");
        let (cmd, first) = name_and_first(&req).unwrap();
        assert_eq!((cmd.name, first.as_ref()), ("evalsha", &b"abc"[..]));
        assert!(name_and_first(&b("*1\r\n$4\r\nPING\r\n")).is_none());
        assert!(name_and_first(&b("garbage")).is_none());
    }
}
