//! twemproxy's stats document, for the stats port: the same top-level
//! fields as `nutcracker -s` (service, source, version, uptime, timestamp,
//! total_connections, curr_connections), then one object per pool, named
//! by the pool's name, holding nutcracker's pool fields and one object per
//! server with its server fields, each under nutcracker's name, so
//! dashboards and scripts written for nutcracker read it unchanged.
//! `service` is "nutcracker" so tools that check it still work.
//!
//! Servers are named as nutcracker names them: a ring pool's server by its
//! twemproxy name (the name after the address in its `server` line, else
//! `host:port:weight`), a cluster pool's node `host:port`. A ring lists
//! every server, connected or not; a cluster every node of its map
//! (replicas too) and any other the workers counted for it
//! (`stats::pools`).
//!
//! | field | in mithril |
//! |---|---|
//! | `client_eof` | clients of the pool that closed their side |
//! | `client_err` | clients of the pool lost to a read or write error |
//! | `client_connections` | clients of the pool open now |
//! | `server_ejects` | ring: ejections of its servers since start (`auto-eject-hosts`); cluster: nodes whose connecting backs off now |
//! | `forward_error` | requests answered with the proxy's error because their server could not be reached or its connection was lost |
//! | `fragments` | parts sent for split multi-key and every-server requests |
//! | `server_eof` | connections the server closed |
//! | `server_err` | connections lost otherwise (not EOF, not a timeout) |
//! | `server_timedout` | connections dropped by the pool's `timeout` (`backend-timeout`) |
//! | `server_connections` | connections open now (every worker's, leases and subscribers too) |
//! | `server_ejected_at` | ring: Unix microseconds of its last ejection (0: never); cluster: 0 |
//! | `requests`, `request_bytes` | requests queued for the server, and the bytes written to it |
//! | `responses`, `response_bytes` | replies read from it, and their bytes |
//! | `in_queue`, `in_queue_bytes` | requests not written yet, and their bytes left to write |
//! | `out_queue`, `out_queue_bytes` | requests written and not answered yet, and their bytes |
//!
//! Unlike nutcracker, whose figures are copied from its workers every
//! `-i` milliseconds (30 s by default), these are the workers' snapshots,
//! at most one tick (100 ms) old. nutcracker 0.5.0 never counts
//! `fragments`; mithril counts every part it sends. A client's EOF is
//! counted when its session closes, as nutcracker does.

use crate::shared::Shared;
use crate::stats;
use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::time::{SystemTime, UNIX_EPOCH};

/// The JSON document (one line, as nutcracker writes it).
pub fn render(shared: &Shared) -> String {
    let snaps = shared.stats.load_all();
    let t = stats::totals(&snaps);
    let topo = shared.topology.load();
    let pools = stats::pools::pools(shared, &topo, &t);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let servers: usize = pools.iter().map(|p| p.servers.len()).sum();
    let mut j = String::with_capacity(1024 + pools.len() * 200 + servers * 400);
    let _ = write!(
        j,
        "{{\"service\":\"nutcracker\",\"source\":{},\"version\":{},\"uptime\":{},\
         \"timestamp\":{now},\"total_connections\":{},\"curr_connections\":{}",
        quote(&hostname()),
        quote(crate::shared::admin::MITHRIL_VERSION),
        shared.started.elapsed().as_secs(),
        shared.total_connections.load(Ordering::Relaxed),
        shared.clients.load(Ordering::Relaxed),
    );
    for p in &pools {
        let k = &p.counters;
        let _ = write!(
            j,
            ",{}:{{\"client_eof\":{},\"client_err\":{},\"client_connections\":{},\
             \"server_ejects\":{},\"forward_error\":{},\"fragments\":{}",
            quote(p.name),
            k.client_eof,
            k.client_err,
            k.client_connections,
            p.server_ejects,
            k.forward_errors,
            k.fragments,
        );
        for s in &p.servers {
            let blank;
            let n = match s.node {
                Some(n) => n,
                None => {
                    blank = stats::NodeSnap::blank(p.index, s.addr);
                    &blank
                }
            };
            let tt = &n.totals;
            let other_errors = tt.errors.saturating_sub(tt.eof + tt.timeouts);
            let _ = write!(
                j,
                ",{}:{{\"server_eof\":{},\"server_err\":{other_errors},\"server_timedout\":{},\
                 \"server_connections\":{},\"server_ejected_at\":{},\"requests\":{},\
                 \"request_bytes\":{},\"responses\":{},\"response_bytes\":{},\
                 \"in_queue\":{},\"in_queue_bytes\":{},\"out_queue\":{},\"out_queue_bytes\":{}}}",
                quote(&s.name),
                tt.eof,
                tt.timeouts,
                n.connections,
                s.ejected_at_us,
                tt.requests,
                tt.bytes_out,
                tt.responses,
                tt.bytes_in,
                n.unsent,
                n.unsent_bytes,
                n.in_flight.saturating_sub(n.unsent),
                n.awaiting_bytes,
            );
        }
        j.push('}');
    }
    j.push('}');
    j
}

/// A JSON string literal.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// This machine's name (nutcracker's `source`).
fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most `len` bytes into the buffer.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return String::new();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_escaped() {
        assert_eq!(quote("a\"b\\c\n"), "\"a\\\"b\\\\c\\u000a\"");
        assert!(!hostname().is_empty());
    }
}
