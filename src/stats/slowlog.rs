//! The slow log: requests whose time through the proxy reached
//! `slowlog-log-slower-than` microseconds, newest first, at most
//! `slowlog-max-len` of them, and the SLOWLOG command that reads them.
//!
//! A request's time is measured from the loop turn that read it to the turn
//! its reply (the last part's, for a fan-out) reached the proxy: what the
//! request cost, not how long it then waited behind earlier replies of the
//! same pipeline (that wait shows in the latency histograms). Blocking
//! commands are not logged (their time is the client's timeout), nor are
//! commands flagged `skip_slowlog`. Commands the proxy answers itself,
//! SLOWLOG included, are logged once they ran, as a node logs them: RESET
//! leaves its own entry, GET and LEN do not see theirs. Workers read the
//! threshold once per loop turn, so a CONFIG SET made through any worker
//! holds for the next command on every worker.
//!
//! Each worker appends to its own log under its own mutex, taken only for a
//! request that passed the threshold and by SLOWLOG itself; ids come from
//! one process-wide counter, so merging the logs by id gives one history.
//! A worker writes at most `slowlog-max-len` entries per tick (100 ms): no
//! more could be kept, and a flood of slow requests must not make the proxy
//! slower still (the others are counted as skipped).
//! Arguments are trimmed as Redis trims them: at most 32 (the last saying
//! how many more there were), each at most 128 bytes (then how many more);
//! passwords are replaced by `(redacted)`.

use crate::command::Args;
use crate::resp::encode::{Encoder, Proto};
use crate::resp::limits::Limits;
use crate::resp::request::{RequestScanner, Scan};
use bytes::Bytes;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Most arguments kept per entry (the last one may be the "more" note).
pub const MAX_ARGC: usize = 32;
/// Most bytes kept per argument.
pub const MAX_ARG_LEN: usize = 128;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlowEntry {
    pub id: u64,
    /// Unix time, seconds, when it was logged.
    pub unix_secs: u64,
    pub micros: u64,
    pub args: Vec<Vec<u8>>,
    /// The client's `ip:port`.
    pub addr: String,
    pub name: Vec<u8>,
}

/// Every worker's slow log.
pub struct SlowLogs {
    logs: Vec<Mutex<VecDeque<SlowEntry>>>,
    next_id: AtomicU64,
    /// `slowlog-max-len`, live (CONFIG SET).
    max_len: AtomicUsize,
}

impl SlowLogs {
    pub fn new(workers: usize, max_len: usize) -> SlowLogs {
        SlowLogs {
            logs: (0..workers.max(1))
                .map(|_| Mutex::new(VecDeque::new()))
                .collect(),
            next_id: AtomicU64::new(0),
            max_len: AtomicUsize::new(max_len),
        }
    }

    /// Add an entry to `worker`'s log (its id is assigned here).
    pub fn push(&self, worker: usize, mut e: SlowEntry) {
        let max_len = self.max_len();
        if max_len == 0 {
            return;
        }
        let Some(log) = self.logs.get(worker) else {
            return;
        };
        e.id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut log = log.lock().unwrap_or_else(|p| p.into_inner());
        log.push_front(e);
        log.truncate(max_len);
    }

    /// Entries, newest first, at most `n`.
    pub fn newest(&self, n: usize) -> Vec<SlowEntry> {
        let n = n.min(self.max_len());
        let mut all: Vec<SlowEntry> = Vec::new();
        for log in &self.logs {
            let log = log.lock().unwrap_or_else(|p| p.into_inner());
            all.extend(log.iter().take(n).cloned());
        }
        all.sort_unstable_by_key(|e| std::cmp::Reverse(e.id));
        all.truncate(n);
        all
    }

    /// `slowlog-max-len`.
    pub fn max_len(&self) -> usize {
        self.max_len.load(Ordering::Relaxed)
    }

    /// CONFIG SET slowlog-max-len: takes effect at once (each worker's log
    /// is cut to the new length; workers pick up the per-tick budget at
    /// their next tick).
    pub fn set_max_len(&self, n: usize) {
        self.max_len.store(n, Ordering::Relaxed);
        for log in &self.logs {
            log.lock().unwrap_or_else(|p| p.into_inner()).truncate(n);
        }
    }

    /// Entries kept (what SLOWLOG LEN says).
    pub fn len(&self) -> usize {
        let total: usize = self
            .logs
            .iter()
            .map(|l| l.lock().unwrap_or_else(|p| p.into_inner()).len())
            .sum();
        total.min(self.max_len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn reset(&self) {
        for log in &self.logs {
            log.lock().unwrap_or_else(|p| p.into_inner()).clear();
        }
    }
}

/// The arguments of one request frame (`*N` RESP), trimmed for the log.
/// `None` when the frame does not scan as one request.
pub fn entry_args(frame: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut sc = RequestScanner::new();
    let limits = Limits {
        max_bulk_len: usize::MAX / 2,
        ..Limits::default()
    };
    match sc.scan(frame, &limits, true) {
        Scan::Request { .. } => {}
        _ => return None,
    }
    let args = Args {
        buf: frame,
        ranges: sc.args(),
    };
    Some(trim_args(&args))
}

/// Redis's trimming, plus redaction of passwords.
pub fn trim_args(args: &Args) -> Vec<Vec<u8>> {
    let argc = args.len();
    let secret = crate::command::resolve(args)
        .map(|cmd| crate::command::known::secret_args(cmd, args))
        .unwrap_or_default();
    let kept = argc.min(MAX_ARGC);
    let mut out = Vec::with_capacity(kept);
    for i in 0..kept {
        if kept != argc && i == kept - 1 {
            out.push(format!("... ({} more arguments)", argc - kept + 1).into_bytes());
            break;
        }
        let a = args.get(i).unwrap_or_default();
        if secret.contains(&i) {
            out.push(b"(redacted)".to_vec());
        } else if a.len() > MAX_ARG_LEN {
            let mut v = a[..MAX_ARG_LEN].to_vec();
            v.extend_from_slice(format!("... ({} more bytes)", a.len() - MAX_ARG_LEN).as_bytes());
            out.push(v);
        } else {
            out.push(a.to_vec());
        }
    }
    out
}

const ERR_COUNT: &[u8] = b"-ERR count should be greater than or equal to -1\r\n";

/// SLOWLOG GET [count] | LEN | RESET | HELP: the reply frame.
pub fn command(logs: &SlowLogs, proto: Proto, name: &str, args: &Args) -> Bytes {
    let mut out = Vec::new();
    let mut e = Encoder::new(&mut out, proto);
    match name {
        "slowlog|get" => {
            let count = match args.get(2) {
                None => 10,
                Some(a) => match crate::resp::parse_i64(a) {
                    Some(-1) => usize::MAX,
                    Some(n) if n >= 0 => usize::try_from(n).unwrap_or(usize::MAX),
                    _ => return Bytes::from_static(ERR_COUNT),
                },
            };
            let entries = logs.newest(count);
            e.array(entries.len());
            for x in &entries {
                e.array(6)
                    .int(i64::try_from(x.id).unwrap_or(i64::MAX))
                    .int(i64::try_from(x.unix_secs).unwrap_or(i64::MAX))
                    .int(i64::try_from(x.micros).unwrap_or(i64::MAX))
                    .array(x.args.len());
                for a in &x.args {
                    e.bulk(a);
                }
                e.bulk(x.addr.as_bytes()).bulk(&x.name);
            }
        }
        "slowlog|len" => {
            e.int(i64::try_from(logs.len()).unwrap_or(i64::MAX));
        }
        "slowlog|reset" => {
            logs.reset();
            e.simple(b"OK");
        }
        _ => {
            let lines = [
                "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "GET [<count>]",
                "    The <count> most recent entries (10 by default, -1 for all), newest first.",
                "    Each is: id, unix time, microseconds taken through the proxy, the",
                "    arguments, the client's address and port, the client's name.",
                "LEN",
                "    The number of entries kept.",
                "RESET",
                "    Forget every entry.",
                "HELP",
                "    Print this help.",
            ];
            e.array(lines.len());
            for l in lines {
                e.simple(l.as_bytes());
            }
        }
    }
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(args: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        crate::resp::encode::request(&mut out, args);
        out
    }

    #[test]
    fn trims_as_redis_does() {
        let long = vec![b'x'; 300];
        let got = entry_args(&req(&[b"SET", b"k", &long])).unwrap();
        assert_eq!(got[0], b"SET");
        assert_eq!(got[2].len(), 128 + "... (172 more bytes)".len());
        assert!(got[2].ends_with(b"... (172 more bytes)"));
        let many: Vec<Vec<u8>> = (0..42).map(|i| i.to_string().into_bytes()).collect();
        let mut a: Vec<&[u8]> = vec![b"RPUSH", b"l"];
        a.extend(many.iter().map(|v| v.as_slice()));
        let got = entry_args(&req(&a)).unwrap();
        assert_eq!(got.len(), 32);
        assert_eq!(got[30], b"28");
        assert_eq!(got[31], b"... (13 more arguments)");
        let exact: Vec<&[u8]> = (0..32).map(|_| &b"a"[..]).collect();
        assert_eq!(entry_args(&req(&exact)).unwrap().len(), 32);
        assert!(entry_args(b"not resp").is_none());
    }

    #[test]
    fn passwords_are_redacted() {
        let got = entry_args(&req(&[b"AUTH", b"user", b"pw"])).unwrap();
        assert_eq!(got, [&b"AUTH"[..], b"(redacted)", b"(redacted)"]);
        let got = entry_args(&req(&[
            b"HELLO", b"3", b"AUTH", b"u", b"pw", b"SETNAME", b"n",
        ]))
        .unwrap();
        assert_eq!(
            got,
            [
                &b"HELLO"[..],
                b"3",
                b"AUTH",
                b"(redacted)",
                b"(redacted)",
                b"SETNAME",
                b"n"
            ]
        );
        // Issue 30: what Redis 7.0 redacts in its own slow log.
        let got = entry_args(&req(&[b"ACL", b"SETUSER", b"u", b"on", b">s3cret"])).unwrap();
        assert_eq!(
            got,
            [
                &b"ACL"[..],
                b"SETUSER",
                b"(redacted)",
                b"(redacted)",
                b"(redacted)"
            ]
        );
        let got = entry_args(&req(&[b"CONFIG", b"SET", b"masterauth", b"pw"])).unwrap();
        assert_eq!(got, [&b"CONFIG"[..], b"SET", b"masterauth", b"(redacted)"]);
        let got = entry_args(&req(&[
            b"MIGRATE", b"h", b"1", b"k", b"0", b"9", b"AUTH2", b"u", b"p",
        ]))
        .unwrap();
        assert_eq!(&got[6..], [&b"AUTH2"[..], b"(redacted)", b"(redacted)"]);
    }

    #[test]
    fn logs_merge_newest_first_and_stay_bounded() {
        let logs = SlowLogs::new(2, 3);
        let e = |m: u64| SlowEntry {
            id: 0,
            unix_secs: 0,
            micros: m,
            args: vec![],
            addr: String::new(),
            name: vec![],
        };
        logs.push(0, e(1));
        logs.push(1, e(2));
        logs.push(0, e(3));
        logs.push(1, e(4));
        assert_eq!(logs.len(), 3);
        let got: Vec<u64> = logs.newest(10).iter().map(|x| x.micros).collect();
        assert_eq!(got, [4, 3, 2]);
        assert_eq!(logs.newest(1)[0].id, 3);
        logs.reset();
        assert!(logs.is_empty());
        let none = SlowLogs::new(1, 0);
        none.push(0, e(1));
        assert_eq!(none.len(), 0);
    }
}
