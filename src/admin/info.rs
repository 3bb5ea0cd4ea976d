//! INFO for the sections the proxy can answer about itself: server,
//! clients, stats, cpu, cluster and (empty for now) keyspace.
//!
//! The text has Redis's layout: `# Section` headers, `field:value` lines,
//! CRLF line ends, a blank line between sections, sections always in
//! Redis's order whatever order they were asked in. Arguments are
//! section names in any case, or `default` / `all` / `everything`;
//! unknown names are ignored (an INFO of only unknown sections is empty).
//! RESP2 gets a bulk string, RESP3 a verbatim string, as from Redis.
//!
//! Field names are Redis's where the meaning carries over; mithril adds
//! `mithril_version` and `threads` to the server section. Counters are
//! read from the workers' relaxed atomics: a value may lag by one loop
//! turn.

use super::{built, Outcome};
use crate::command::Args;
use crate::session::Session;
use crate::shared::Shared;
use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::time::{SystemTime, UNIX_EPOCH};

struct Section {
    /// Lower-case name, as INFO takes it.
    name: &'static str,
    title: &'static str,
    /// Part of a bare INFO (and of `default`).
    default: bool,
    fill: fn(&mut String, &Shared),
}

/// In Redis's order of sections.
const SECTIONS: &[Section] = &[
    Section {
        name: "server",
        title: "Server",
        default: true,
        fill: server,
    },
    Section {
        name: "clients",
        title: "Clients",
        default: true,
        fill: clients,
    },
    Section {
        name: "stats",
        title: "Stats",
        default: true,
        fill: stats,
    },
    Section {
        name: "cpu",
        title: "CPU",
        default: true,
        fill: cpu,
    },
    Section {
        name: "cluster",
        title: "Cluster",
        default: true,
        fill: |t, _| t.push_str("cluster_enabled:1\r\n"),
    },
    Section {
        name: "keyspace",
        title: "Keyspace",
        default: true,
        fill: |_, _| {},
    },
];

pub fn info(shared: &Shared, s: &Session, args: &Args) -> Outcome {
    let asked: Vec<&[u8]> = (1..args.len()).filter_map(|i| args.get(i)).collect();
    let text = info_text(shared, &asked);
    built(
        |e| {
            e.verbatim(b"txt", text.as_bytes());
        },
        s,
    )
}

/// The INFO text for the requested section names (none: the defaults).
pub fn info_text(shared: &Shared, asked: &[&[u8]]) -> String {
    let wanted = |sec: &Section| {
        if asked.is_empty() {
            return sec.default;
        }
        asked.iter().any(|a| {
            a.eq_ignore_ascii_case(sec.name.as_bytes())
                || a.eq_ignore_ascii_case(b"all")
                || a.eq_ignore_ascii_case(b"everything")
                || (sec.default && a.eq_ignore_ascii_case(b"default"))
        })
    };
    let mut text = String::with_capacity(1024);
    let mut first = true;
    for sec in SECTIONS.iter().filter(|sec| wanted(sec)) {
        if !first {
            text.push_str("\r\n");
        }
        first = false;
        let _ = write!(text, "# {}\r\n", sec.title);
        (sec.fill)(&mut text, shared);
    }
    text
}

fn server(t: &mut String, shared: &Shared) {
    let cfg = &shared.config;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let uptime = shared.started.elapsed().as_secs();
    let exe = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let conf = cfg
        .config_file
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let _ = write!(
        t,
        "redis_version:{}\r\n\
         redis_git_sha1:00000000\r\n\
         redis_git_dirty:0\r\n\
         redis_mode:cluster\r\n\
         os:{}\r\n\
         arch_bits:{}\r\n\
         multiplexing_api:epoll\r\n\
         process_id:{}\r\n\
         process_supervised:no\r\n\
         run_id:{}\r\n\
         tcp_port:{}\r\n\
         server_time_usec:{}\r\n\
         uptime_in_seconds:{uptime}\r\n\
         uptime_in_days:{}\r\n\
         executable:{exe}\r\n\
         config_file:{conf}\r\n\
         mithril_version:{}\r\n\
         threads:{}\r\n",
        super::REDIS_VERSION,
        os_name(),
        usize::BITS,
        std::process::id(),
        shared.admin.run_id,
        cfg.port,
        now.as_micros(),
        uptime / 86_400,
        super::MITHRIL_VERSION,
        cfg.threads,
    );
}

fn clients(t: &mut String, shared: &Shared) {
    let _ = write!(
        t,
        "connected_clients:{}\r\n\
         cluster_connections:0\r\n\
         maxclients:{}\r\n\
         client_recent_max_input_buffer:0\r\n\
         client_recent_max_output_buffer:0\r\n\
         blocked_clients:{}\r\n\
         tracking_clients:0\r\n\
         clients_in_timeout_table:0\r\n",
        shared.clients.load(Ordering::Relaxed),
        shared.config.maxclients,
        shared.blocked_clients.load(Ordering::Relaxed),
    );
}

fn stats(t: &mut String, shared: &Shared) {
    let commands: u64 = shared
        .workers
        .iter()
        .map(|w| w.commands.load(Ordering::Relaxed))
        .sum();
    let _ = write!(
        t,
        "total_connections_received:{}\r\n\
         total_commands_processed:{commands}\r\n\
         instantaneous_ops_per_sec:0\r\n\
         rejected_connections:{}\r\n",
        shared.total_connections.load(Ordering::Relaxed),
        shared.rejected_connections.load(Ordering::Relaxed),
    );
}

fn cpu(t: &mut String, _shared: &Shared) {
    let (me, children) = (rusage(libc::RUSAGE_SELF), rusage(libc::RUSAGE_CHILDREN));
    let tv = |v: libc::timeval| format!("{}.{:06}", v.tv_sec, v.tv_usec);
    let _ = write!(
        t,
        "used_cpu_sys:{}\r\nused_cpu_user:{}\r\nused_cpu_sys_children:{}\r\nused_cpu_user_children:{}\r\n",
        tv(me.ru_stime),
        tv(me.ru_utime),
        tv(children.ru_stime),
        tv(children.ru_utime),
    );
}

fn rusage(who: libc::c_int) -> libc::rusage {
    // SAFETY: getrusage only writes the struct it is given; an all-zero
    // rusage is a valid value to start from (and to keep on failure).
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(who, &mut ru);
        ru
    }
}

/// `sysname release machine`, as Redis prints `os:`.
fn os_name() -> String {
    // SAFETY: uname fills the struct; its fields are NUL-terminated arrays
    // (zeroed first, so they stay terminated even if uname fails).
    unsafe {
        let mut u: libc::utsname = std::mem::zeroed();
        if libc::uname(&mut u) != 0 {
            return String::new();
        }
        let field = |f: &[libc::c_char]| {
            std::ffi::CStr::from_ptr(f.as_ptr())
                .to_string_lossy()
                .into_owned()
        };
        format!(
            "{} {} {}",
            field(&u.sysname),
            field(&u.release),
            field(&u.machine)
        )
    }
}
