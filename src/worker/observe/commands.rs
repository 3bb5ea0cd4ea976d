//! The commands whose answer is gathered from every worker (and, for
//! INFO and CONFIG RESETSTAT, from the masters too): INFO, CLIENT LIST,
//! CLIENT KILL, CLIENT UNBLOCK, CONFIG RESETSTAT. Each checks its
//! arguments, reserves its ring slot for as many parts as it asks, with
//! the closure that makes the reply of them, and asks (`ask.rs`).
//!
//! Invariants: an error among the workers' parts is the answer; the
//! masters' parts come first in the slot, the workers' after them.
//!
//! Never: answer from this worker's clients alone.

use crate::command::{Args, Command};
use crate::local::client as aclient;
use crate::local::info;
use crate::resp::encode::{Encoder, Proto};
use crate::session::ring::Finish;
use crate::stats::gather::Ask;
use crate::worker::{Timer, Worker};
use bytes::Bytes;
use reactor::{Context, Key};
use std::sync::atomic::Ordering;

/// The sections of every master's INFO that a proxy's INFO shows the
/// data's side of (`local::info`).
const INFO_MASTERS: &[u8] = b"*7\r\n$4\r\nINFO\r\n$8\r\nKEYSPACE\r\n$11\r\nPERSISTENCE\r\n\
    $5\r\nSTATS\r\n$6\r\nMEMORY\r\n$11\r\nREPLICATION\r\n$7\r\nCLIENTS\r\n";

fn encode_text(proto: Proto, text: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(text.len() + 16);
    Encoder::new(&mut out, proto).verbatim(b"txt", text);
    Bytes::from(out)
}

/// The first error among `parts`, if any.
fn first_error(parts: &[Bytes]) -> Option<Bytes> {
    parts.iter().find(|p| p.first() == Some(&b'-')).cloned()
}

/// Parse `:<n>\r\n`.
fn int_of(frame: &[u8]) -> u64 {
    crate::resp::int_reply(frame)
        .and_then(|n| u64::try_from(n).ok())
        .unwrap_or(0)
}

impl Worker {
    pub(super) fn info(&mut self, cx: &mut Context<'_, Timer>, key: Key, args: &Args) {
        let asked: Vec<Vec<u8>> = (1..args.len())
            .filter_map(|i| args.get(i))
            .map(<[u8]>::to_vec)
            .collect();
        let refs: Vec<&[u8]> = asked.iter().map(Vec::as_slice).collect();
        let from_masters = [
            "keyspace",
            "persistence",
            "stats",
            "memory",
            "replication",
            "clients",
        ];
        let pool = self.pool_of(key);
        let masters = if from_masters.iter().any(|s| info::wants(&refs, s)) {
            self.place.master_count(pool)
        } else {
            0
        };
        let Some((proto, seen)) = self
            .sessions
            .get(key)
            .map(|s| (s.proto, info::Seen::of(&self.shared, s)))
        else {
            return;
        };
        if !self.may_ask(key) {
            return;
        }
        let shared = self.shared.clone();
        let finish: Finish = Box::new(move |parts: Vec<Bytes>| {
            let (nodes, workers) = parts.split_at(masters.min(parts.len()));
            if let Some(e) = first_error(workers) {
                return e;
            }
            let refs: Vec<&[u8]> = asked.iter().map(Vec::as_slice).collect();
            encode_text(
                proto,
                info::info_text(&shared, pool, &refs, nodes, seen).as_bytes(),
            )
        });
        let workers = self.shared.workers.len();
        let Some(seq) = self.gather_slot(key, args, masters + workers, finish) else {
            return;
        };
        let req = Bytes::from_static(INFO_MASTERS);
        self.parts_to_masters(cx, key, seq, masters, proto, &req);
        self.ask_workers(cx, key, seq, masters as u32, Ask::Publish);
    }

    pub(super) fn client_list(
        &mut self,
        cx: &mut Context<'_, Timer>,
        key: Key,
        cmd: &'static Command,
        args: &Args,
    ) {
        let filter = match aclient::parse_list(args) {
            Ok(f) => f,
            Err(e) => {
                self.reply(key, e);
                return self.slow_local(key, cmd, args); // observe: it ran
            }
        };
        let Some(proto) = self.sessions.get(key).map(|s| s.proto) else {
            return;
        };
        if !self.may_ask(key) {
            return;
        }
        let finish: Finish = Box::new(move |parts: Vec<Bytes>| {
            if let Some(e) = first_error(&parts) {
                return e;
            }
            let text: Vec<u8> = parts.concat();
            encode_text(proto, &text)
        });
        let workers = self.shared.workers.len();
        if let Some(seq) = self.gather_slot(key, args, workers, finish) {
            self.ask_workers(cx, key, seq, 0, Ask::List(filter));
        }
    }

    pub(super) fn client_kill(
        &mut self,
        cx: &mut Context<'_, Timer>,
        key: Key,
        cmd: &'static Command,
        args: &Args,
    ) {
        let Some(s) = self.sessions.get(key) else {
            return;
        };
        if !aclient::may_kill(s) {
            return self.reply_static(
                key,
                b"-NOPERM this user has no permissions to run the 'client|kill' command\r\n",
            );
        }
        let filter = match aclient::parse_kill(s, &self.shared.admin.acl, args) {
            Ok(f) => f,
            Err(e) => {
                self.reply(key, e);
                return self.slow_local(key, cmd, args); // observe: it ran
            }
        };
        if !self.may_ask(key) {
            return;
        }
        let shape = filter.clone();
        let finish: Finish = Box::new(move |parts: Vec<Bytes>| {
            if let Some(e) = first_error(&parts) {
                return e;
            }
            let killed = parts.iter().map(|p| int_of(p)).sum();
            aclient::kill_reply(&shape, killed)
        });
        let workers = self.shared.workers.len();
        if let Some(seq) = self.gather_slot(key, args, workers, finish) {
            self.ask_workers(cx, key, seq, 0, Ask::Kill(filter));
        }
    }

    /// CLIENT UNBLOCK id [TIMEOUT|ERROR]: every worker looks for the
    /// session (`Ask::Unblock`); 1 when one of them had it blocked.
    pub(super) fn client_unblock(
        &mut self,
        cx: &mut Context<'_, Timer>,
        key: Key,
        cmd: &'static Command,
        args: &Args,
    ) {
        let parsed = match aclient::parse_unblock(args) {
            Ok(p) => p,
            Err(e) => {
                self.reply(key, e);
                return self.slow_local(key, cmd, args); // observe: it ran
            }
        };
        let Some((id, error)) = parsed else {
            // No session has a negative id, or one this large.
            self.reply_static(key, b":0\r\n");
            return self.slow_local(key, cmd, args);
        };
        if !self.may_ask(key) {
            return;
        }
        let finish: Finish = Box::new(move |parts: Vec<Bytes>| {
            if let Some(e) = first_error(&parts) {
                return e;
            }
            let found = parts.iter().any(|p| int_of(p) > 0);
            Bytes::from_static(if found { b":1\r\n" } else { b":0\r\n" })
        });
        let workers = self.shared.workers.len();
        if let Some(seq) = self.gather_slot(key, args, workers, finish) {
            self.ask_workers(cx, key, seq, 0, Ask::Unblock { id, error });
        }
    }

    pub(super) fn reset_stats(&mut self, cx: &mut Context<'_, Timer>, key: Key, args: &Args) {
        if !self.may_ask(key) {
            return;
        }
        let shared = self.shared.clone();
        let finish: Finish = Box::new(move |parts: Vec<Bytes>| {
            if let Some(e) = first_error(&parts) {
                return e;
            }
            shared.total_connections.store(0, Ordering::Relaxed);
            shared.rejected_connections.store(0, Ordering::Relaxed);
            Bytes::from_static(b"+OK\r\n")
        });
        // The masters reset theirs too (parts 0..masters), as a client of
        // one server expects every counter it can read to restart.
        let masters = self.place.master_count(self.pool_of(key));
        let Some(proto) = self.sessions.get(key).map(|s| s.proto) else {
            return;
        };
        let workers = self.shared.workers.len();
        if let Some(seq) = self.gather_slot(key, args, masters + workers, finish) {
            let req = Bytes::from_static(b"*2\r\n$6\r\nCONFIG\r\n$9\r\nRESETSTAT\r\n");
            self.parts_to_masters(cx, key, seq, masters, proto, &req);
            self.ask_workers(cx, key, seq, masters as u32, Ask::Reset);
        }
    }
}
