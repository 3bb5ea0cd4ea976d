//! twemproxy's stats document, for the stats port: the same top-level
//! fields as `nutcracker -s` (service, source, version, uptime, timestamp,
//! total_connections, curr_connections), then one pool (`mithril`) with
//! nutcracker's pool counters and one object per cluster node with its
//! server counters, under their nutcracker names.
//!
//! Mapping: `client_eof` clients that closed their side, `client_err`
//! clients lost to a read or write error, `client_connections` open
//! clients, `server_ejects` nodes whose pool is backing off after failed
//! connects, `forward_error` requests answered with an error because their
//! node was unreachable, `fragments` parts of split multi-key requests.
//! Per node: `server_eof` / `server_err` / `server_timedout` lost
//! connections (closed by the node / any cause / backend-timeout),
//! `server_connections` open ones, `requests` / `responses` and their
//! bytes, `in_queue` requests not written yet, `out_queue` written and
//! unanswered. `service` is "nutcracker" so tools that check it still work.

use crate::shared::Shared;
use crate::stats;
use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::time::{SystemTime, UNIX_EPOCH};

/// The JSON document (one line, as nutcracker writes it).
pub fn render(shared: &Shared) -> String {
    let snaps = shared.stats.load_all();
    let t = stats::totals(&snaps);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let mut j = String::with_capacity(1024 + t.nodes.len() * 400);
    let _ = write!(
        j,
        "{{\"service\":\"nutcracker\",\"source\":{},\"version\":{},\"uptime\":{},\
         \"timestamp\":{now},\"total_connections\":{},\"curr_connections\":{},",
        quote(&hostname()),
        quote(crate::shared::admin::MITHRIL_VERSION),
        shared.started.elapsed().as_secs(),
        shared.total_connections.load(Ordering::Relaxed),
        shared.clients.load(Ordering::Relaxed),
    );
    let k = t.all_pools();
    let ejects = t.nodes.iter().filter(|n| n.down).count();
    let _ = write!(
        j,
        "\"mithril\":{{\"client_eof\":{},\"client_err\":{},\"client_connections\":{},\
         \"server_ejects\":{ejects},\"forward_error\":{},\"fragments\":{}",
        k.client_eof,
        k.client_err,
        shared.clients.load(Ordering::Relaxed),
        k.forward_errors,
        k.fragments,
    );
    for n in &t.nodes {
        let tt = &n.totals;
        let _ = write!(
            j,
            ",{}:{{\"server_eof\":{},\"server_err\":{},\"server_timedout\":{},\
             \"server_connections\":{},\"server_ejected_at\":0,\"requests\":{},\
             \"request_bytes\":{},\"responses\":{},\"response_bytes\":{},\
             \"in_queue\":{},\"in_queue_bytes\":0,\"out_queue\":{},\"out_queue_bytes\":0}}",
            quote(&n.addr.to_string()),
            tt.eof,
            tt.errors,
            tt.timeouts,
            n.connections,
            tt.requests,
            tt.bytes_out,
            tt.responses,
            tt.bytes_in,
            n.unsent,
            n.in_flight - n.unsent.min(n.in_flight),
        );
    }
    j.push_str("}}");
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
