//! MONITOR, produced by mithril: every command any client sends through
//! the proxy, on any worker, as a line to every monitoring client.
//!
//! ```text
//!   dispatch (any worker) ── Monitors::on()? ──► line ──► this worker's
//!                                     │            monitors (out-of-band pushes)
//!                                     └──► this turn's batch
//!   end of turn: batch ──► each other worker with monitors: its inbox
//!                          (PipeReply::Monitor, one lock per batch)
//!   that worker's next turn: inbox ──► its monitors
//! ```
//!
//! The line is a node's: `+<seconds>.<microseconds> [0 <ip:port>] "arg" ...`
//! with each argument quoted as `sdscatrepr` quotes it. What is fed is
//! what Redis 7.0 feeds: a command that passed the checks a node makes
//! before running it (unknown names, wrong arity, NOAUTH, NOPERM, OOM and
//! CROSSSLOT are never fed), unless it is an admin command (MONITOR,
//! CONFIG, DEBUG, CLIENT LIST ...) or one the table marks `skip_monitor`
//! that does not feed itself (EVAL, EVALSHA, FCALL and their _RO forms
//! do). AUTH's and HELLO AUTH's credentials are `(redacted)`. Commands
//! queued by MULTI are fed at EXEC, before the EXEC line; a transaction
//! EXEC aborts feeds only EXEC. The monitor sees its own commands too,
//! as on a node. Unlike a node, the commands a script runs are not seen
//! (they run on the nodes), and the commands of a transaction a WATCH
//! aborts are fed all the same (the abort is known only at the reply).
//!
//! A monitoring session may still send commands that do not touch the
//! keyspace (a node answers the others "Replica can't interact with the
//! keyspace"); RESET ends the feed; a second MONITOR is not answered, as
//! on a node.
//!
//! Bounds: the lines delivered to a monitor count toward its output
//! limits as a subscriber's messages do (`client-output-buffer-limit`,
//! the pubsub class): past the hard limit, or over the soft one for its
//! seconds, it is disconnected. A worker's inbox holds at most
//! `shared::monitor::INBOX_MOST` bytes of lines; past that the batch is
//! dropped and that worker's monitors are disconnected.
//!
//! Cost while nobody monitors: one relaxed load per dispatched command
//! (`Monitors::on`).

use super::{Timer, Worker};
use crate::command::{self, flags, Args, Command};
use crate::resp::limits::Limits;
use crate::resp::request::{RequestScanner, Scan};
use crate::router::{Decision, TxnOp};
use crate::session::Session;
use crate::shared::pipe::PipeReply;
use bytes::Bytes;
use reactor::{Context, Key};
use std::io::Write;
use std::net::SocketAddr;

/// A node's answer to a keyspace command from a monitoring client (it
/// is a replica there).
const OK: &[u8] = b"+OK\r\n";

#[derive(Default)]
pub(super) struct MonitorState {
    /// The lines of this turn's commands, sent at its end.
    batch: Vec<u8>,
    /// This worker's monitoring sessions.
    local: Vec<Key>,
}

/// Whether a node feeds `cmd` to its monitors.
fn fed(cmd: &Command) -> bool {
    if cmd.flags & flags::ADMIN != 0 {
        return false;
    }
    // The scripting commands are `skip_monitor` because they feed
    // themselves, before the commands they run.
    cmd.flags & flags::SKIP_MONITOR == 0 || command::known::script_call(cmd).is_some()
}

/// `arg` quoted as Redis's `sdscatrepr` quotes it.
pub(crate) fn repr(out: &mut Vec<u8>, arg: &[u8]) {
    out.push(b'"');
    for &b in arg {
        match b {
            b'\\' | b'"' => out.extend_from_slice(&[b'\\', b]),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x07 => out.extend_from_slice(b"\\a"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x20..=0x7e => out.push(b),
            _ => {
                let _ = write!(out, "\\x{b:02x}");
            }
        }
    }
    out.push(b'"');
}

/// One feed line for `args`, sent by `peer` at `now`.
pub(crate) fn line(
    out: &mut Vec<u8>,
    now: std::time::Duration,
    peer: &SocketAddr,
    cmd: &Command,
    args: &Args,
) {
    let hidden = crate::command::known::secret_args(cmd, args);
    let _ = write!(
        out,
        "+{}.{:06} [0 {peer}] ",
        now.as_secs(),
        now.subsec_micros()
    );
    for i in 0..args.len() {
        if i > 0 {
            out.push(b' ');
        }
        if hidden.contains(&i) {
            out.extend_from_slice(b"\"(redacted)\"");
        } else {
            repr(out, args.get(i).unwrap_or_default());
        }
    }
    out.extend_from_slice(b"\r\n");
}

fn wall_clock() -> std::time::Duration {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
}

impl Worker {
    /// A command was decided while some client monitors: feed it when a
    /// node would (a monitor's own keyspace command was refused by the
    /// router, as a node refuses it).
    pub(super) fn monitor_dispatch(
        &mut self,
        key: Key,
        cmd: &'static Command,
        args: &Args,
        decision: &Decision,
    ) {
        let Some(s) = self.sessions.get(key) else {
            return;
        };
        if matches!(decision, Decision::Refuse(_) | Decision::Queue { .. }) {
            return;
        }
        let now = wall_clock();
        let start = self.monitor.batch.len();
        let batch = &mut self.monitor.batch;
        if let (Decision::Txn(TxnOp::Exec), Some(t)) = (decision, s.txn.as_ref()) {
            if !t.failed {
                // The queued commands run now, before EXEC's line.
                let limits = Limits {
                    max_bulk_len: usize::MAX / 2,
                    ..Limits::default()
                };
                let mut sc = RequestScanner::new();
                for q in &t.queued {
                    if let Scan::Request { .. } = sc.scan(q, &limits, true) {
                        let qa = Args {
                            buf: q,
                            ranges: sc.args(),
                        };
                        if let Ok(c) = command::resolve(&qa) {
                            if fed(c) {
                                line(batch, now, &s.peer(), c, &qa);
                            }
                        }
                    }
                    sc.reset();
                }
            }
        }
        if fed(cmd) {
            line(batch, now, &s.peer(), cmd, args);
        }
        if batch.len() > start && !self.monitor.local.is_empty() {
            // This worker's monitors get the lines at once: a monitor's
            // own command's line follows its reply and comes before the
            // next command's, as on a node.
            // A monitor's RESET ends its feed before its line.
            let own = !matches!(decision, Decision::Reset);
            let lines = Bytes::copy_from_slice(&batch[start..]);
            self.monitor_deliver(lines, Some((key, own)));
        }
    }

    /// MONITOR: the session receives the feed from now on.
    pub(super) fn monitor_start(&mut self, key: Key) {
        let Some(s) = self.sessions.get_mut(key) else {
            return;
        };
        if !s.set_monitor(true) {
            // A node ignores it, without a reply: the slot stays empty.
            return self.reply(key, Bytes::new());
        }
        self.monitor.local.push(key);
        self.shared.monitors.started(self.id);
        self.reply_static(key, OK);
    }

    /// RESET: the session's feed ends (lines already queued still go).
    pub(super) fn monitor_stop(&mut self, key: Key) {
        if let Some(s) = self.sessions.get_mut(key) {
            if s.set_monitor(false) {
                self.monitor_gone(key);
            }
        }
    }

    /// A monitoring session stopped or closed.
    pub(super) fn monitor_gone(&mut self, key: Key) {
        self.monitor.local.retain(|&k| k != key);
        self.shared.monitors.stopped(self.id);
    }

    /// End of the turn: the turn's lines to every other worker that has
    /// monitors (one lock of its inbox each).
    pub(super) fn monitor_flush(&mut self, cx: &mut Context<'_, Timer>) {
        if !self.monitor.local.is_empty() && self.shared.monitors.take_lost(self.id) {
            // Lines for them were dropped: they are cut off, as a client
            // past its output limit.
            for key in self.monitor.local.clone() {
                self.output_limit_close(cx, key, super::overload::Cut::Hard);
            }
        }
        if self.monitor.batch.is_empty() {
            return;
        }
        let lines = Bytes::from(std::mem::take(&mut self.monitor.batch));
        let mut sent = false;
        for w in 0..self.shared.workers.len() {
            // This worker's own had them as they came (monitor_dispatch).
            if w == self.id || self.shared.monitors.on_worker(w) == 0 {
                continue;
            }
            if self.shared.monitors.reserve(w, lines.len()) {
                self.pipes
                    .out(w)
                    .replies
                    .push(PipeReply::Monitor(lines.clone()));
                sent = true;
            }
        }
        if sent {
            self.pipe_send();
        }
    }

    /// Lines for this worker's monitors: of a command `from` this
    /// worker's session is dispatching (and whether that session, if it
    /// monitors, gets them too), or a batch from another worker's inbox
    /// (`None`).
    pub(super) fn monitor_deliver(&mut self, lines: Bytes, from: Option<(Key, bool)>) {
        for i in 0..self.monitor.local.len() {
            let key = self.monitor.local[i];
            // An ACL change took MONITOR away: it is closing.
            if self.revoked(key) {
                continue;
            }
            let Some(s) = self.sessions.get_mut(key) else {
                continue;
            };
            // After every reply of the commands it sent so far, and of
            // the one it is sending now if the line is of that one.
            let barrier = match from {
                Some((k, false)) if k == key => continue,
                Some((k, true)) if k == key => s.ring.next_seq(),
                _ => s.ring.next_seq().wrapping_sub(1),
            };
            s.push_oob(barrier, lines.clone());
            super::overload::mark_over_hard(&self.overload, s);
            if s.mark_dirty() {
                self.dirty_sessions.push(key);
            }
        }
    }

    /// A batch taken from the inbox.
    pub(super) fn monitor_received(&mut self, lines: Bytes) {
        self.shared.monitors.taken(self.id, lines.len());
        if !self.monitor.local.is_empty() {
            self.monitor_deliver(lines, None);
        }
    }
}

/// Session hook: a monitor leaves the feed.
#[inline]
pub(super) fn session_closed(w: &mut Worker, _cx: &mut Context<'_, Timer>, s: &mut Session) {
    if s.is_monitor() {
        w.monitor_gone(s.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ops::Range;

    fn args_of(parts: &[&[u8]]) -> (Vec<u8>, Vec<Range<usize>>) {
        let mut buf = Vec::new();
        let mut ranges = Vec::new();
        for p in parts {
            ranges.push(buf.len()..buf.len() + p.len());
            buf.extend_from_slice(p);
        }
        (buf, ranges)
    }

    fn line_of(parts: &[&[u8]]) -> String {
        let (buf, ranges) = args_of(parts);
        let args = Args {
            buf: &buf,
            ranges: &ranges,
        };
        let cmd = command::resolve(&args).expect("known");
        let mut out = Vec::new();
        let peer: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        line(
            &mut out,
            std::time::Duration::new(1700000000, 42_000),
            &peer,
            cmd,
            &args,
        );
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn quoting_as_sdscatrepr() {
        let mut out = Vec::new();
        repr(&mut out, b"a\"b\\c\n\r\t\x07\x08\x01\xff \xc3\xa9~");
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#""a\"b\\c\n\r\t\a\b\x01\xff \xc3\xa9~""#
        );
    }

    #[test]
    fn lines_and_redaction() {
        assert_eq!(
            line_of(&[b"set", b"k", b"1 2"]),
            "+1700000000.000042 [0 127.0.0.1:5000] \"set\" \"k\" \"1 2\"\r\n"
        );
        let tail = |l: String| l.split("] ").nth(1).unwrap().to_string();
        assert_eq!(
            tail(line_of(&[b"auth", b"pw"])),
            "\"auth\" \"(redacted)\"\r\n"
        );
        assert_eq!(
            tail(line_of(&[b"auth", b"u", b"pw"])),
            "\"auth\" \"(redacted)\" \"(redacted)\"\r\n"
        );
        assert_eq!(
            tail(line_of(&[b"auth", b"a", b"b", b"c"])),
            "\"auth\" \"a\" \"b\" \"c\"\r\n"
        );
        assert_eq!(
            tail(line_of(&[
                b"hello", b"3", b"setname", b"n", b"AUTH", b"u", b"p"
            ])),
            "\"hello\" \"3\" \"setname\" \"n\" \"AUTH\" \"(redacted)\" \"(redacted)\"\r\n"
        );
        assert_eq!(
            tail(line_of(&[b"hello", b"4", b"auth", b"u", b"p"])),
            "\"hello\" \"4\" \"auth\" \"u\" \"p\"\r\n"
        );
    }

    #[test]
    fn what_a_node_feeds() {
        let cmd = |n: &str| command::lookup_full(n.as_bytes()).expect(n);
        assert!(fed(cmd("get")));
        assert!(fed(cmd("eval")));
        assert!(fed(cmd("fcall_ro")));
        assert!(fed(cmd("client|setname")));
        assert!(!fed(cmd("monitor")));
        assert!(!fed(cmd("config|get")));
        assert!(!fed(cmd("client|list")));
    }
}
