//! Test-only commands: a fault to inject and a look at the worker's
//! sessions, for the integration tests of the overload bounds.
//!
//! Compiled only in debug builds (`cfg(debug_assertions)`; release builds,
//! `cargo bench` included, never contain it) and accepted only when the
//! process was started with `MITHRIL_TEST_HOOKS=1`. Anything else reaching
//! here is dispatched as usual.
//!
//! `MITHRIL-TEST PANIC` panics while the calling session is being served,
//! to prove the worker's panic fence. `MITHRIL-TEST SESSIONS` answers an
//! array: first `worker buffered=N used_memory=N obuf_closes=N
//! qbuf_closes=N idle_closes=N output_held=N` (output_held: the output
//! held for every client, as this worker sums it), then one line per
//! session on this worker, `id=N rbuf=N rbufcap=N outstanding=N window=N
//! unsent=N paused=0|1 backlog=0|1 pushes=N subs=N`. `MITHRIL-TEST
//! RETRY-WAIT ms` makes every TRYAGAIN / CLUSTERDOWN wait on this worker
//! last `ms` milliseconds (0: the usual 2 to 64 ms), so a test can act
//! while a request waits. `MITHRIL-TEST PIPES-FORCE shared|local|none`
//! sets `backend-sharding auto`'s verdict by hand (none: the experiment
//! decides again), and `MITHRIL-TEST PIPES-SCALE n` divides the
//! experiment's durations by `n`; `MITHRIL-TEST PIPES-BUSY permille`
//! sets the CPU share that counts as busy (0: the usual 85%), so a test
//! can let the experiment decide on a machine it cannot load that much.
//!
//! Never: reachable from a release build; the replies are for tests, not a
//! stable interface.

use super::{Timer, Worker};
use bytes::Bytes;
use reactor::{Context, Key};
use std::ops::Range;
use std::sync::atomic::Ordering;
use std::time::Duration;

impl Worker {
    /// Handles a test-only command; false when `frame` is not one.
    pub(super) fn test_hook(
        &mut self,
        _cx: &mut Context<'_, Timer>,
        key: Key,
        frame: &Bytes,
        ranges: &[Range<usize>],
    ) -> bool {
        let arg = |i: usize| ranges.get(i).and_then(|r| frame.get(r.clone()));
        if !arg(0).is_some_and(|a| a.eq_ignore_ascii_case(b"MITHRIL-TEST")) {
            return false;
        }
        let sub = arg(1).map(|a| a.to_ascii_uppercase()).unwrap_or_default();
        match sub.as_slice() {
            b"PANIC" => {
                let id = self.sessions.get(key).map_or(0, |s| s.id);
                panic!("MITHRIL-TEST PANIC from client {id}");
            }
            b"SESSIONS" => {
                let o = &self.shared.overload;
                let mut lines = vec![format!(
                    "worker buffered={} used_memory={} obuf_closes={} qbuf_closes={} idle_closes={} output_held={}",
                    self.overload.buffered,
                    o.used_memory.load(Ordering::Relaxed),
                    o.output_limit_disconnections.load(Ordering::Relaxed),
                    o.query_limit_disconnections.load(Ordering::Relaxed),
                    o.idle_disconnections.load(Ordering::Relaxed),
                    self.output_sum().0,
                )];
                for (_, s) in self.sessions.iter() {
                    lines.push(format!(
                        "id={} rbuf={} rbufcap={} outstanding={} window={} unsent={} paused={} backlog={} pushes={} subs={}",
                        s.id,
                        s.rbuf.len(),
                        s.rbuf.capacity(),
                        s.outstanding(),
                        s.pressure.window,
                        s.unsent(),
                        u8::from(s.input().is_paused()),
                        u8::from(s.input().has_backlog()),
                        s.push_backlog(),
                        s.sub.as_ref().map_or(0, |x| x.count()),
                    ));
                }
                let mut out = format!("*{}\r\n", lines.len());
                for l in &lines {
                    out.push_str(&format!("${}\r\n{l}\r\n", l.len()));
                }
                self.reply(key, Bytes::from(out));
            }
            b"RETRY-WAIT" => {
                let ms = arg(2)
                    .and_then(|a| std::str::from_utf8(a).ok())
                    .and_then(|a| a.parse::<u64>().ok());
                match ms {
                    Some(ms) => {
                        self.test_retry_wait = (ms > 0).then(|| Duration::from_millis(ms));
                        self.reply_static(key, b"+OK\r\n");
                    }
                    None => self.reply_static(key, b"-ERR MITHRIL-TEST RETRY-WAIT ms\r\n"),
                }
            }
            b"PIPES-FORCE" => {
                let force = match arg(2).map(|a| a.to_ascii_lowercase()).as_deref() {
                    Some(b"shared") => Some(1),
                    Some(b"local") => Some(2),
                    Some(b"none") => Some(0),
                    _ => None,
                };
                match force {
                    Some(f) => {
                        self.shared.pipes.force.store(f, Ordering::Relaxed);
                        self.reply_static(key, b"+OK\r\n");
                    }
                    None => self.reply_static(
                        key,
                        b"-ERR MITHRIL-TEST PIPES-FORCE shared|local|none\r\n",
                    ),
                }
            }
            b"PIPES-BUSY" => {
                let n = arg(2)
                    .and_then(|a| std::str::from_utf8(a).ok())
                    .and_then(|a| a.parse::<u32>().ok())
                    .filter(|&n| n <= 1000);
                match n {
                    Some(n) => {
                        self.shared.pipes.busy_permille.store(n, Ordering::Relaxed);
                        self.reply_static(key, b"+OK\r\n");
                    }
                    None => self.reply_static(key, b"-ERR MITHRIL-TEST PIPES-BUSY permille\r\n"),
                }
            }
            b"PIPES-SCALE" => {
                let n = arg(2)
                    .and_then(|a| std::str::from_utf8(a).ok())
                    .and_then(|a| a.parse::<u32>().ok())
                    .filter(|&n| n > 0);
                match n {
                    Some(n) => {
                        self.shared.pipes.scale.store(n, Ordering::Relaxed);
                        self.reply_static(key, b"+OK\r\n");
                    }
                    None => self.reply_static(key, b"-ERR MITHRIL-TEST PIPES-SCALE n\r\n"),
                }
            }
            _ => self.reply_static(
                key,
                b"-ERR MITHRIL-TEST PANIC | SESSIONS | RETRY-WAIT ms | PIPES-FORCE | PIPES-SCALE | PIPES-BUSY\r\n",
            ),
        }
        true
    }
}
