//! The write side of a session: what may leave now (pushes whose
//! barrier has passed, then the ready front of the ring) moves into the
//! write queue, which is written with one `writev` of up to 256 frames at
//! a time; and the counts of what is held for the client, which the
//! dispatch window and the output limits read.
//!
//! Invariants: replies leave in request order; a push never leaves before
//! the replies up to its barrier; `out_bytes` and the pressure's
//! `push_bytes` count exactly what is queued; a reply that must wait for a
//! slow client is not left pinning a backend buffer ([`unpin`]).
//!
//! Never: block, or keep what the socket did not take anywhere but the
//! write queue (the rest waits for writability).

use super::{Session, BATCH_WAIT_OVER};
use crate::stats::WorkerStats;
use bytes::Bytes;
use reactor::writev::{IoBatch, MAX_IOV};
use std::io;

pub enum FlushOutcome {
    /// Everything ready was written (the front may still be pending).
    Done,
    /// The socket is full; wait for writability.
    Blocked,
    Error(io::Error),
}

/// Replies below this size are copied when they must wait (see `unpin`).
const UNPIN_BELOW: usize = 64 * 1024;

/// A reply that will wait in the write queue of a client that is not
/// reading is copied out of the backend read buffer it is a slice of, when
/// it is small: a slice keeps its whole buffer (64 KiB or more, shared
/// with other clients' replies) alive, so a slow client's small replies
/// could otherwise hold thousands of times their size. Clients that keep
/// up never pay for the copy.
#[inline]
fn unpin(frame: Bytes, waiting: bool) -> Bytes {
    if waiting && frame.len() < UNPIN_BELOW {
        Bytes::copy_from_slice(&frame)
    } else {
        frame
    }
}

impl Session {
    /// Move what may leave now into the write queue: pushes whose barrier
    /// has been passed, and the ready front of the ring, in order. Each
    /// reply leaving the ring is counted in `stats` (observe).
    // Inlined into `flush` as before `flush_tls` called it too.
    #[inline(always)]
    pub(super) fn collect(&mut self, stats: &mut WorkerStats) {
        // Output left from the last flush: the client is not keeping up,
        // and what is queued now will wait (see `unpin`).
        let waiting = !self.out.is_empty();
        loop {
            while let Some(&(barrier, _)) = self.pushes.front() {
                if barrier >= self.ring.base() {
                    break;
                }
                if let Some((_, p)) = self.pushes.pop_front() {
                    self.pressure.push_bytes -= p.len().min(self.pressure.push_bytes);
                    self.out_bytes += p.len();
                    self.out.push_back(unpin(p, waiting));
                }
            }
            let seq = self.ring.base();
            match self.ring.pop_ready_stamped() {
                Some((r, stamp)) => {
                    stats.reply_left(stamp, r.first().copied().unwrap_or(0));
                    if !self.quiet.is_empty() && self.silenced(seq) {
                        continue;
                    }
                    self.out_bytes += r.len();
                    // The reply-size estimate behind the dispatch window.
                    self.pressure.batch_max = self.pressure.batch_max.max(r.len());
                    self.out.push_back(unpin(r, waiting));
                }
                None => break,
            }
        }
    }

    /// Whether its ready replies should wait for the rest of their read's
    /// (a batch wait, at most `batch_wait_us` from `batch_since`): the
    /// replies to a pipelined read then leave in one write, which the client takes in one read,
    /// instead of one write per node that answered part of it. They wait
    /// only when all of them belong to the latest read (every earlier
    /// read's replies have left), some of that read's are still to come,
    /// and nothing else is queued for the client; never for a subscriber,
    /// a transaction or a WATCH (they may wait long by design), nor for a
    /// session paused on its dispatch window (its flush lets it go on).
    #[inline]
    pub fn waits_for_batch(&self, now_us: u64, batch_wait_us: u64) -> bool {
        batch_wait_us > 0
            && !self.ring.all_ready()
            && self.ring.front_ready()
            && self.ring.base() >= self.batch_start
            && self.out.is_empty()
            && self.pushes.is_empty()
            && self.sub.is_none()
            && self.txn.is_none()
            && self.pin.is_none()
            && !self.input.is_paused()
            && (self.batch_since == 0
                || (self.batch_since != BATCH_WAIT_OVER
                    && now_us.saturating_sub(self.batch_since) < batch_wait_us))
    }

    /// Write everything that may leave: one `writev` of up to 256 frames at
    /// a time, until nothing is left or the socket is full.
    pub fn flush(&mut self, stats: &mut WorkerStats) -> FlushOutcome {
        if self.tls.is_some() {
            return self.flush_tls(stats);
        }
        self.collect(stats);
        while !self.out.is_empty() {
            let mut batch = IoBatch::new();
            for (i, reply) in self.out.iter().take(MAX_IOV).enumerate() {
                let part = if i == 0 {
                    &reply[self.out_off.min(reply.len())..]
                } else {
                    &reply[..]
                };
                batch.push(part);
            }
            let wanted = batch.bytes();
            if wanted == 0 {
                self.out.clear();
                self.out_off = 0;
                self.out_bytes = 0;
                break;
            }
            let written = match batch.write_to(self.fd) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return FlushOutcome::Blocked,
                Err(e) => return FlushOutcome::Error(e),
            };
            self.net_out += written as u64; // observe
            self.consume(written);
            self.pressure.wrote |= written > 0;
            if written < wanted {
                return FlushOutcome::Blocked;
            }
        }
        // Everything written: the small hits split off the arena are gone,
        // and its buffer is taken again from its start, with no allocation.
        // (Not if some still wait in the ring: the hit path then takes a
        // new buffer once this one is full.)
        self.hit_arena.reclaim();
        FlushOutcome::Done
    }

    // Inlined into `flush` as before `flush_tls` called it too.
    #[inline(always)]
    pub(super) fn consume(&mut self, mut n: usize) {
        self.out_bytes -= n.min(self.out_bytes);
        while let Some(front) = self.out.front() {
            let left = front.len() - self.out_off.min(front.len());
            if n >= left {
                n -= left;
                self.out_off = 0;
                self.out.pop_front();
            } else {
                self.out_off += n;
                return;
            }
        }
    }

    /// Queue an out-of-band push (a published message). It leaves once
    /// every reply up to `barrier` has left.
    pub fn push_oob(&mut self, barrier: u64, frame: Bytes) {
        self.pressure.push_bytes += frame.len();
        self.pushes.push_back((barrier, frame));
    }

    /// Pushes not yet written (queued or in the write queue counts only
    /// those still waiting for their barrier).
    pub fn pushes_waiting(&self) -> usize {
        self.pushes.len()
    }

    /// Frames the push window counts toward a subscriber: pushes waiting
    /// for their barrier and everything in the write queue (a client that
    /// does not read holds its pushes there).
    pub fn push_backlog(&self) -> usize {
        self.pushes.len() + self.out.len()
    }

    /// Unsent bytes in the write queue.
    pub fn out_bytes(&self) -> usize {
        self.out_bytes
    }

    /// Unsent output the output limits count: the write queue plus pushes
    /// waiting for their barrier.
    pub fn unsent(&self) -> usize {
        self.out_bytes + self.pressure.push_bytes
    }

    /// Output held for the client: the unsent write queue, pushes waiting
    /// for their barrier, and replies that arrived but wait in the ring
    /// (behind an earlier one, or until the flush). What Redis's output
    /// buffer counts, and so what the hard output limit is checked on.
    #[inline]
    pub fn output_held(&self) -> usize {
        self.unsent() + self.ring.ready_bytes()
    }
}
