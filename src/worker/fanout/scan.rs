//! SCAN over every master: the cursor carries the master's index in its
//! top bits and that node's own cursor below ([`CURSOR_BITS`]). A page is
//! filled over the masters, one node call after the other, until it holds
//! COUNT keys, every master is done, or it made its calls
//! ([`SCAN_CALLS`], at least two per master); its ring slot holds the
//! page (`Fold::ScanPage`) meanwhile.
//!
//! Invariants: the masters are walked in the map's order, each from its
//! cursor 0 to its cursor 0; a cursor the proxy gave back names the master
//! and the node cursor to go on from.
//!
//! Never: carry a node cursor past [`CURSOR_MASK`] (the page answers an
//! error instead).

use super::{array_items, bulk_body, ERR_BAD_PART};
use crate::command::Args;
use crate::resp::encode::{array_into, bulk_into};
use crate::router;
use crate::session::ring::{Fold, Merge};
use crate::worker::purpose::{InFlight, Purpose};
use crate::worker::{Timer, Worker};
use bytes::Bytes;
use reactor::{Context, Key};

/// Bits of a SCAN cursor that carry the node's own cursor; the master
/// index sits above them.
const CURSOR_BITS: u32 = 52;
const CURSOR_MASK: u64 = (1 << CURSOR_BITS) - 1;

const ERR_INVALID_CURSOR: &[u8] = b"-ERR invalid cursor\r\n";

impl Worker {
    /// SCAN cursor [MATCH p] [COUNT n] [TYPE t]: the master index lives in
    /// the cursor's top bits, the node's cursor below. The page is filled
    /// over the masters, one node call after the other, until it holds
    /// COUNT keys (10 when not given), every master is done (cursor 0),
    /// or it made its calls (`SCAN_CALLS`, so a MATCH that few keys pass
    /// costs a bounded amount of work per call, as on a server).
    pub(super) fn scan(
        &mut self,
        cx: &mut Context<'_, Timer>,
        key: Key,
        frame: Bytes,
        args: &Args,
    ) {
        let cursor = args
            .get(1)
            .and_then(|c| std::str::from_utf8(c).ok())
            .filter(|c| !c.starts_with('+') && !c.starts_with('-'))
            .and_then(|c| c.parse::<u64>().ok());
        let Some(cursor) = cursor else {
            return self.reply_static(key, ERR_INVALID_CURSOR);
        };
        let index = (cursor >> CURSOR_BITS) as usize;
        let masters = self.place.master_count(self.pool_of(key));
        if index >= masters {
            // A cursor from a larger cluster, or a made-up one: done.
            return self.reply_static(key, b"*2\r\n$1\r\n0\r\n*0\r\n");
        }
        // COUNT as the node reads it (the last one given); a bad one is
        // the node's error to give.
        let count = (2..args.len().saturating_sub(1))
            .step_by(2)
            .rev()
            .find(|&i| {
                args.get(i)
                    .is_some_and(|a| a.eq_ignore_ascii_case(b"count"))
            })
            .and_then(|i| {
                std::str::from_utf8(args.get(i + 1)?)
                    .ok()?
                    .parse::<i64>()
                    .ok()
            })
            .unwrap_or(10);
        let node_cursor = (cursor & CURSOR_MASK).to_string();
        let mut req = Vec::with_capacity(64);
        array_into(&mut req, args.len());
        bulk_into(&mut req, b"SCAN");
        bulk_into(&mut req, node_cursor.as_bytes());
        for i in 2..args.len() {
            bulk_into(&mut req, args.get(i).unwrap_or_default());
        }
        let Some(s) = self.sessions.get_mut(key) else {
            return;
        };
        let calls = SCAN_CALLS.max(2 * masters as u32);
        let mut page = Merge::new(Fold::ScanPage, calls);
        page.fold.sum = count;
        page.request = frame; // observe: slow log
        let seq = s.ring.push_merge(page);
        self.send_scan(cx, key, seq, index, Bytes::from(req));
    }

    fn send_scan(
        &mut self,
        cx: &mut Context<'_, Timer>,
        key: Key,
        seq: u64,
        index: usize,
        req: Bytes,
    ) {
        let Some(proto) = self.sessions.get(key).map(|s| s.proto) else {
            return;
        };
        let shard = self.place.masters(self.pool_of(key)).nth(index);
        match shard.and_then(|shard| self.place.shard_master(shard, proto)) {
            Some(pool) => self.send_to_pool(
                cx,
                pool,
                InFlight::new(key, seq, req, Purpose::Scan(index as u32)),
            ),
            None => self.deliver(key, seq, Bytes::from_static(router::ERR_NO_TOPOLOGY), &[]),
        }
    }

    /// A node's SCAN reply for the page at `seq`: its keys join the page;
    /// then the page is answered (full, out of calls, or every master
    /// done) or the walk goes on where it stands, on the same node or the
    /// next master. `req` is the node request that got `frame`.
    pub(in crate::worker) fn scan_page(
        &mut self,
        cx: &mut Context<'_, Timer>,
        session: Key,
        seq: u64,
        index: u32,
        req: &Bytes,
        frame: Bytes,
    ) {
        let masters = self.place.master_count(self.pool_of(session));
        let Some(s) = self.sessions.get_mut(session) else {
            return;
        };
        let Some(page) = s.ring.merge_mut(seq) else {
            return;
        };
        let step = match scan_step(&frame, index, masters) {
            Ok(step) => step,
            Err(e) => {
                let request = std::mem::take(&mut page.request);
                return self.deliver(session, seq, e, &request);
            }
        };
        page.fold.items.extend(step.keys);
        page.parts_left = page.parts_left.saturating_sub(1);
        let full = page.fold.items.len() as i64 >= page.fold.sum || page.parts_left == 0;
        match step.next {
            Some((next, node_cursor)) if !full => {
                let Some(req) = with_cursor(req, node_cursor) else {
                    let request = std::mem::take(&mut page.request);
                    return self.deliver(session, seq, Bytes::from_static(ERR_BAD_PART), &request);
                };
                self.send_scan(cx, session, seq, next as usize, req);
            }
            next => {
                let cursor = next.map_or(0, |(i, c)| (u64::from(i) << CURSOR_BITS) | c);
                let text = cursor.to_string();
                let keys = std::mem::take(&mut page.fold.items);
                let request = std::mem::take(&mut page.request);
                let mut out = Vec::with_capacity(keys.iter().map(|k| k.len()).sum::<usize>() + 48);
                out.extend_from_slice(b"*2\r\n");
                bulk_into(&mut out, text.as_bytes());
                array_into(&mut out, keys.len());
                for k in &keys {
                    out.extend_from_slice(k);
                }
                self.deliver(session, seq, Bytes::from(out), &request);
            }
        }
    }
}

/// Most node calls one SCAN page makes (at least two per master).
const SCAN_CALLS: u32 = 32;

/// What one node's SCAN reply adds to a page.
struct ScanStep {
    /// Its keys (zero-copy slices of the reply).
    keys: Vec<Bytes>,
    /// Where the walk stands now: (master index, node cursor), or None
    /// when the last master is done.
    next: Option<(u32, u64)>,
}

/// Read a node's SCAN reply, from master `index` of `masters`: its keys,
/// and where the walk goes next (a finished node hands over to the next
/// master at its cursor 0). An error reply, or one that is not a SCAN
/// reply, is the page's answer.
fn scan_step(frame: &Bytes, index: u32, masters: usize) -> Result<ScanStep, Bytes> {
    if frame.first() == Some(&b'-') {
        return Err(frame.clone());
    }
    let bad = || Bytes::from_static(ERR_BAD_PART);
    let items = array_items(frame).ok_or_else(bad)?;
    let [cursor, keys] = &items[..] else {
        return Err(bad());
    };
    let node_cursor = bulk_body(cursor)
        .flatten()
        .and_then(|c| std::str::from_utf8(c).ok()?.parse::<u64>().ok())
        .ok_or_else(bad)?;
    if node_cursor > CURSOR_MASK {
        return Err(Bytes::from_static(
            b"-ERR mithril: a node's SCAN cursor is too large to carry\r\n",
        ));
    }
    let keys = array_items(keys).ok_or_else(bad)?;
    let next = match node_cursor {
        0 if (index as usize) + 1 < masters => Some((index + 1, 0)),
        0 => None,
        c => Some((index, c)),
    };
    Ok(ScanStep { keys, next })
}

/// The node request `req` (`SCAN <cursor> ...`, as `scan` builds it) with
/// another cursor.
fn with_cursor(req: &Bytes, cursor: u64) -> Option<Bytes> {
    let line = req.windows(2).position(|w| w == b"\r\n")? + 2;
    let name = b"$4\r\nSCAN\r\n";
    let rest = req.get(line..)?.strip_prefix(&name[..])?;
    let nl = rest.windows(2).position(|w| w == b"\r\n")?;
    let len: usize = std::str::from_utf8(rest.get(1..nl)?).ok()?.parse().ok()?;
    let tail = rest.get(nl + 2 + len + 2..)?;
    let mut out = Vec::with_capacity(req.len() + 20);
    out.extend_from_slice(&req[..line]);
    out.extend_from_slice(name);
    bulk_into(&mut out, cursor.to_string().as_bytes());
    out.extend_from_slice(tail);
    Some(Bytes::from(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resp::int_reply;

    #[test]
    fn splits_arrays_and_rewrites_cursors() {
        let f = Bytes::from_static(b"*3\r\n$1\r\na\r\n$-1\r\n*1\r\n:1\r\n");
        let items = array_items(&f).unwrap();
        assert_eq!(items.len(), 3);
        assert_eq!(&items[1][..], b"$-1\r\n");
        assert_eq!(&items[2][..], b"*1\r\n:1\r\n");
        assert!(array_items(&Bytes::from_static(b"*2\r\n$1\r\na\r\n")).is_none());

        let r = Bytes::from_static(b"*2\r\n$2\r\n17\r\n*1\r\n$1\r\nk\r\n");
        let step = scan_step(&r, 2, 3).unwrap();
        assert_eq!(step.keys, vec![Bytes::from_static(b"$1\r\nk\r\n")]);
        assert_eq!(step.next, Some((2, 17)));
        let done = Bytes::from_static(b"*2\r\n$1\r\n0\r\n*0\r\n");
        assert_eq!(scan_step(&done, 0, 3).unwrap().next, Some((1, 0)));
        assert_eq!(scan_step(&done, 2, 3).unwrap().next, None);
        let e = Bytes::from_static(b"-ERR syntax error\r\n");
        assert_eq!(scan_step(&e, 0, 3).err(), Some(e));
        let req = Bytes::from_static(b"*4\r\n$4\r\nSCAN\r\n$1\r\n0\r\n$5\r\nCOUNT\r\n$1\r\n5\r\n");
        assert_eq!(
            with_cursor(&req, 1234).unwrap(),
            Bytes::from_static(b"*4\r\n$4\r\nSCAN\r\n$4\r\n1234\r\n$5\r\nCOUNT\r\n$1\r\n5\r\n")
        );
        assert_eq!(int_reply(b":-5\r\n"), Some(-5));
    }
}
