//! The sections INFO fills with the proxy's own figures, one function
//! each (`server`, `clients`, ... `backends`), in the order and under the
//! names `SECTIONS` (`mod.rs`) gives them; each reads what it shows from
//! the [`Ctx`] it is given, the masters' merged parts included.
//!
//! Invariants: a section writes `field:value` lines with CRLF ends and
//! nothing else (the header and the blank line between sections are the
//! caller's); field names are Redis's where the meaning carries over.
//!
//! Never: block, or read a worker's live counters (only the snapshots'
//! totals in the `Ctx`).

use super::Ctx;
use crate::stats::{self, rss_bytes};
use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::time::{SystemTime, UNIX_EPOCH};

/// `1.30M`-style sizes, as Redis's `*_human` fields.
pub(super) fn human(bytes: u64) -> String {
    let b = bytes as f64;
    let units = [
        (1u64 << 40, 'T'),
        (1 << 30, 'G'),
        (1 << 20, 'M'),
        (1 << 10, 'K'),
    ];
    for (size, unit) in units {
        if bytes >= size {
            return format!("{:.2}{unit}", b / size as f64);
        }
    }
    format!("{bytes}B")
}

pub(super) fn server(t: &mut String, cx: &Ctx) {
    let shared = cx.shared;
    let cfg = &shared.config;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let uptime = shared.started.elapsed().as_secs();
    let all = cx.seen == super::Seen::All;
    let exe = std::env::current_exe()
        .ok()
        .filter(|_| all)
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let conf = cfg
        .config_file
        .as_ref()
        .filter(|_| all)
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let _ = write!(
        t,
        "redis_version:{}\r\n\
         redis_git_sha1:00000000\r\n\
         redis_git_dirty:0\r\n\
         redis_mode:{}\r\n\
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
         threads:{}\r\n\
         config_reloads:{}\r\n\
         config_reload_failures:{}\r\n\
         config_pending_restart:{}\r\n",
        crate::local::reported_version(shared),
        // A ring of standalone servers is one standalone server to its
        // clients (HELLO says so too).
        if cx.ring() { "standalone" } else { "cluster" },
        os_name(),
        usize::BITS,
        std::process::id(),
        shared.admin.run_id,
        cx.port(),
        now.as_micros(),
        uptime / 86_400,
        crate::local::MITHRIL_VERSION,
        cfg.threads,
        shared.reload.done.load(Ordering::Relaxed),
        shared.reload.failed.load(Ordering::Relaxed),
        shared.reload.pending(),
    );
}

pub(super) fn clients(t: &mut String, cx: &Ctx) {
    let c = &cx.totals.clients;
    let backends: u64 = cx.totals.nodes.iter().map(|n| n.connections).sum();
    let _ = write!(
        t,
        "connected_clients:{}\r\n\
         cluster_connections:0\r\n\
         maxclients:{}\r\n\
         client_recent_max_input_buffer:{}\r\n\
         client_recent_max_output_buffer:{}\r\n\
         blocked_clients:{}\r\n\
         tracking_clients:{}\r\n\
         watching_clients:{}\r\n\
         pubsub_clients:{}\r\n\
         clients_in_timeout_table:0\r\n\
         backend_connections:{backends}\r\n",
        cx.shared.clients.load(Ordering::Relaxed),
        cx.shared.live.maxclients.load(Ordering::Relaxed),
        c.qbuf_max,
        c.out_max,
        // What is blocked where it blocks: at the nodes (a lease's command
        // counts once the node holds it, as the suite's waits expect).
        cx.node_blocked.unwrap_or(c.blocked),
        c.tracking,
        c.watching,
        c.pubsub,
    );
}

pub(super) fn memory(t: &mut String, cx: &Ctx) {
    let c = &cx.totals.clients;
    let rss = rss_bytes();
    // What the maxmemory check compares (every buffer the workers count
    // and each connection's fixed cost, summed each tick and as sessions
    // open and close), and the budget itself. Nothing in it is left out
    // of the comparison: mem_not_counted_for_evict is 0 (a node leaves
    // its replicas' output and AOF buffers out; mithril's replication
    // feeds and monitors are sessions whose output counts as any
    // client's).
    let used = cx.shared.overload.used_memory.load(Ordering::Relaxed);
    let maxmemory: u64 = cx.shared.live.maxmemory.load(Ordering::Relaxed);
    let _ = write!(
        t,
        "used_memory:{used}\r\n\
         used_memory_human:{}\r\n\
         used_memory_rss:{rss}\r\n\
         used_memory_rss_human:{}\r\n\
         maxmemory:{maxmemory}\r\n\
         maxmemory_human:{}\r\n\
         maxmemory_policy:noeviction\r\n\
         mem_not_counted_for_evict:0\r\n\
         mem_clients_normal:{used}\r\n\
         client_query_buffers:{}\r\n\
         client_output_buffers:{}\r\n\
         replies_outstanding:{}\r\n",
        human(used),
        human(rss),
        human(maxmemory),
        c.qbuf,
        c.out,
        c.outstanding,
    );
    // The script registry (crate::script): what it holds of its budget.
    // Redis's counts are the registry's too: the scripts an EVALSHA
    // through mithril runs, the libraries (and their functions) it loads.
    let r = cx.shared.scripts.figures();
    let _ = write!(
        t,
        "number_of_cached_scripts:{}\r\n\
         number_of_functions:{}\r\n\
         number_of_libraries:{}\r\n\
         script_registry_size:{}\r\n\
         script_registry_scripts:{}\r\n\
         script_registry_script_bytes:{}\r\n\
         script_registry_libraries:{}\r\n\
         script_registry_library_bytes:{}\r\n",
        r.scripts,
        r.functions,
        r.libraries,
        r.budget,
        r.scripts,
        r.script_bytes,
        r.libraries,
        r.library_bytes,
    );
    t.push_str(cx.data_memory);
}

pub(super) fn stats(t: &mut String, cx: &Ctx) {
    let tt = &cx.totals;
    let k = &tt.counters;
    let every = tt.all_pools();
    let failed: u64 = tt.cmds.iter().map(|c| c.failed).sum();
    let reconnects: u64 = tt.nodes.iter().map(|n| n.reconnects).sum();
    // Clients closed by a limit (overload control keeps these counters).
    let ov = &cx.shared.overload;
    let qbuf_evicted = ov.query_limit_disconnections.load(Ordering::Relaxed);
    let out_evicted = ov.output_limit_disconnections.load(Ordering::Relaxed);
    let idle_evicted = ov.idle_disconnections.load(Ordering::Relaxed);
    let _ = write!(
        t,
        "total_connections_received:{}\r\n\
         total_commands_processed:{}\r\n\
         instantaneous_ops_per_sec:{}\r\n\
         total_net_input_bytes:{}\r\n\
         total_net_output_bytes:{}\r\n\
         instantaneous_input_kbps:{:.2}\r\n\
         instantaneous_output_kbps:{:.2}\r\n\
         rejected_connections:{}\r\n\
         evicted_clients:{}\r\n\
         total_error_replies:{}\r\n\
         total_rejected_commands:{}\r\n\
         evicted_clients_query_buffer:{}\r\n\
         evicted_clients_output_buffer:{}\r\n\
         evicted_clients_idle:{}\r\n\
         redirects_moved:{}\r\n\
         redirects_ask:{}\r\n\
         tryagain_retries:{}\r\n\
         clusterdown_retries:{}\r\n\
         key_by_key_splits:{}\r\n\
         fanout_parts:{}\r\n\
         backend_errors:{}\r\n\
         backend_timeouts:{}\r\n\
         backend_reconnects:{reconnects}\r\n\
         forward_errors:{}\r\n\
         slowlog_entries_written:{}\r\n\
         slowlog_entries_skipped:{}\r\n\
         tracking_total_keys:{}\r\n\
         tracking_total_items:{}\r\n\
         tracking_total_prefixes:{}\r\n",
        cx.shared.total_connections.load(Ordering::Relaxed),
        tt.commands,
        tt.ops_per_sec.round() as u64,
        tt.net_in,
        tt.net_out,
        tt.in_kbps,
        tt.out_kbps,
        cx.shared.rejected_connections.load(Ordering::Relaxed),
        out_evicted + idle_evicted + qbuf_evicted,
        failed + k.rejected,
        k.rejected,
        qbuf_evicted,
        out_evicted,
        idle_evicted,
        k.moved,
        k.ask,
        k.tryagain,
        k.clusterdown,
        k.splits,
        every.fragments,
        k.backend_errors,
        k.backend_timeouts,
        every.forward_errors,
        k.slow_entries,
        k.slow_skipped,
        // Per worker, summed (a key read on two workers counts twice).
        tt.clients.tracking_keys,
        tt.clients.tracking_items,
        tt.clients.tracking_prefixes,
    );
    let denied = &cx.shared.admin.acl.denied;
    let _ = write!(
        t,
        "acl_access_denied_auth:{}\r\nacl_access_denied_cmd:{}\r\n\
         acl_access_denied_key:{}\r\nacl_access_denied_channel:{}\r\n",
        denied.auth.load(Ordering::Relaxed),
        denied.cmd.load(Ordering::Relaxed),
        denied.key.load(Ordering::Relaxed),
        denied.channel.load(Ordering::Relaxed),
    );
    // Scripts and libraries loaded again on a node that lacked them.
    let r = cx.shared.scripts.figures();
    let _ = write!(
        t,
        "script_reloads:{}\r\nfunction_reloads:{}\r\nscript_registry_evictions:{}\r\n",
        r.script_reloads, r.function_reloads, r.evictions,
    );
    t.push_str(cx.data_stats);
}

pub(super) fn cpu(t: &mut String, _cx: &Ctx) {
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

pub(super) fn commandstats(t: &mut String, cx: &Ctx) {
    for c in &cx.totals.cmds {
        let Some(cmd) = c.command() else { continue };
        let per_call = if c.calls > 0 {
            c.usec as f64 / c.calls as f64
        } else {
            0.0
        };
        let _ = write!(
            t,
            "cmdstat_{}:calls={},usec={},usec_per_call={per_call:.2},rejected_calls={},failed_calls={}\r\n",
            cmd.name, c.calls, c.usec, c.rejected, c.failed
        );
    }
}

/// Error replies sent to clients, by code (`stats::error_code`): the
/// nodes' errors relayed and the proxy's own, as Redis counts its replies.
/// Errors inside an EXEC reply are not counted (as in
/// `total_error_replies`).
pub(super) fn errorstats(t: &mut String, cx: &Ctx) {
    for (code, n) in &cx.totals.errors {
        let _ = write!(
            t,
            "errorstat_{}:count={n}\r\n",
            String::from_utf8_lossy(code)
        );
    }
}

/// The percentiles latencystats reports, as Redis's default
/// `latency-tracking-info-percentiles`.
const PERCENTILES: [(&str, f64); 3] = [("p50", 50.0), ("p99", 99.0), ("p99.9", 99.9)];

pub(super) fn latencystats(t: &mut String, cx: &Ctx) {
    for c in &cx.totals.cmds {
        let (Some(cmd), Some(h)) = (c.command(), c.hist.as_ref()) else {
            continue;
        };
        if h.count() == 0 {
            continue;
        }
        let _ = write!(t, "latency_percentiles_usec_{}:", cmd.name);
        for (i, (label, p)) in PERCENTILES.iter().enumerate() {
            if i > 0 {
                t.push(',');
            }
            let _ = write!(t, "{label}={:.3}", h.percentile(*p) as f64);
        }
        t.push_str("\r\n");
    }
}

/// The asking session's pool: a cluster's part of the map, or
/// `cluster_enabled:0` for a ring (as a standalone server says), then the
/// refresher's figures, which are the whole map's.
pub(super) fn cluster(t: &mut String, cx: &Ctx) {
    let topo = cx.shared.topology.load();
    if cx.ring() {
        let _ = write!(t, "cluster_enabled:0\r\ntopology_epoch:{}\r\n", topo.epoch);
    } else {
        let (masters, replicas, served) = stats::pools::map_counts(&topo, cx.pool);
        let _ = write!(
            t,
            "cluster_enabled:1\r\n\
             topology_epoch:{}\r\n\
             cluster_masters:{masters}\r\n\
             cluster_replicas:{replicas}\r\n\
             cluster_slots_served:{served}\r\n",
            topo.epoch,
        );
    }
    let last = cx.shared.topology.last_ok_ms();
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let _ = write!(
        t,
        "topology_refreshes:{}\r\n\
         topology_last_refresh_ms:{last}\r\n\
         topology_refresh_age_ms:{}\r\n",
        cx.shared.topology.refresh_count(),
        if last == 0 {
            0
        } else {
            now_ms.saturating_sub(last)
        },
    );
}

/// `backend-sharding`: the mode, `auto`'s state and last decision, and
/// per worker its sample and its sessions on the shared pipes.
pub(super) fn pipes(t: &mut String, cx: &Ctx) {
    let p = &cx.shared.pipes;
    let (state, reason) = p
        .status
        .lock()
        .map(|s| (s.0, s.1.clone()))
        .unwrap_or(("local", String::new()));
    let mode = cx.shared.config.backend_sharding;
    let state = match mode {
        crate::config::Sharding::No => "local",
        crate::config::Sharding::Yes => "shared",
        crate::config::Sharding::Auto => state,
    };
    let (mut frames, mut writes, mut sessions, mut served, mut move_waits) = (0, 0, 0, 0, 0);
    for w in &cx.shared.workers {
        move_waits += w.pipe.move_waits.load(Ordering::Relaxed);
        served += w.pipe.served.load(Ordering::Relaxed);
        frames += w.pipe.frames.load(Ordering::Relaxed);
        writes += w.pipe.writes.load(Ordering::Relaxed);
        sessions += w.pipe.sessions.load(Ordering::Relaxed);
    }
    let _ = write!(
        t,
        "backend_sharding:{mode}\r\npipes_state:{state}\r\npipes_last_decision:{}\r\n\
         pipes_sessions:{sessions}\r\npipes_remote_requests:{served}\r\npipes_held_moves:{move_waits}\r\nbackend_frames:{frames}\r\nbackend_writes:{writes}\r\n",
        if mode == crate::config::Sharding::Auto { reason.as_str() } else { "fixed by backend-sharding" },
    );
    for (i, w) in cx.shared.workers.iter().enumerate() {
        let s = w.pipe.sample();
        let _ = write!(
            t,
            "pipes_worker{i}:busy={:.2},ran={:.2},waited={:.2},frames_per_write={:.1},sessions_on_pipes={}\r\n",
            s.busy,
            s.ran,
            s.waited,
            s.frames_per_write,
            w.pipe.sessions.load(Ordering::Relaxed)
        );
    }
}

/// The reply cache (`reply-cache`), summed over workers.
pub(super) fn replycache(t: &mut String, cx: &Ctx) {
    let c = &cx.totals.cache;
    let on = cx
        .shared
        .live
        .reply_cache
        .load(std::sync::atomic::Ordering::Relaxed);
    let ratio = if c.lookups > 0 {
        c.hits as f64 / c.lookups as f64
    } else {
        0.0
    };
    let _ = write!(
        t,
        "reply_cache:{}\r\n\
         reply_cache_lookups:{}\r\nreply_cache_hits:{}\r\nreply_cache_misses:{}\r\n\
         reply_cache_hit_ratio:{ratio:.4}\r\n\
         reply_cache_fills_admitted:{}\r\nreply_cache_fills_refused:{}\r\nreply_cache_fills_stored:{}\r\n\
         reply_cache_invalidations:{}\r\nreply_cache_write_invalidations:{}\r\n\
         reply_cache_poisoned_fills:{}\r\nreply_cache_flushes:{}\r\nreply_cache_flips:{}\r\n\
         reply_cache_bytes_current:{}\r\nreply_cache_bytes_old:{}\r\n\
         reply_cache_entries_current:{}\r\nreply_cache_entries_old:{}\r\n",
        if on { "yes" } else { "no" },
        c.lookups,
        c.hits,
        c.misses,
        c.fills_admitted,
        c.fills_refused,
        c.fills_stored,
        c.invalidations,
        c.write_invalidations,
        c.poisoned,
        c.flushes,
        c.flips,
        c.bytes_current,
        c.bytes_old,
        c.entries_current,
        c.entries_old,
    );
}

/// One line per server pool (`pool0`, ...: its name, kind, listeners,
/// servers live and in all, twemproxy's `server_ejects` and its clients),
/// then one per node the workers counted (`backend0`, ...), each with its
/// pool.
pub(super) fn backends(t: &mut String, cx: &Ctx) {
    let topo = cx.shared.topology.load();
    let pools = stats::pools::pools(cx.shared, &topo, &cx.totals);
    for p in &pools {
        let _ = write!(
            t,
            "pool{}:name={},kind={},listen={},servers={},servers_live={},server_ejects={},clients={}\r\n",
            p.index,
            p.name,
            p.kind(),
            p.listen.join(" "),
            p.servers.len(),
            p.live(),
            p.server_ejects,
            p.counters.client_connections,
        );
    }
    for (i, n) in cx.totals.nodes.iter().enumerate() {
        let role = pools
            .get(n.pool)
            .and_then(|p| p.servers.iter().find(|s| s.addr == n.addr))
            .map_or("unknown", |s| s.role_name());
        let tt = &n.totals;
        let avg = if tt.rtt_count > 0 {
            tt.rtt_sum_us as f64 / tt.rtt_count as f64
        } else {
            0.0
        };
        let _ = write!(
            t,
            "backend{i}:addr={},role={role},connections={},in_flight={},requests={},responses={},\
             errors={},timeouts={},reconnects={},down={},avg_latency_usec={avg:.2},pool={}\r\n",
            n.addr,
            n.connections,
            n.in_flight,
            tt.requests,
            tt.responses,
            tt.errors,
            tt.timeouts,
            n.reconnects,
            u8::from(n.down),
            pools.get(n.pool).map_or("", |p| p.name),
        );
    }
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
