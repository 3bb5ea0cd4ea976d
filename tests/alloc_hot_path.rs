//! The hot path allocates nothing per request once warm: mithril runs in
//! this process under a counting global allocator, and 100,000 pipelined
//! GETs (and SETs) through it may add only a small constant number of heap
//! allocations, not one per request; the same with `reply-cache yes`, where
//! the GETs are cache hits and the SETs hold their key.
//!
//! The client side of the test allocates nothing while counting: requests
//! are written from a prebuilt buffer and replies are counted in a fixed
//! buffer.

mod support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::*;

struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY: every method only counts, then hands the caller's request,
// with the caller's guarantees, to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's guarantees for `layout`, passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, which is System's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as for `dealloc`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Send `rounds` pipelines of `batch` copies of `req`, reading until every
/// reply (each ends with one CRLF-terminated line for GET of a 3-byte
/// value: `$3\r\nval\r\n`, or `+OK\r\n` for SET) has arrived.
fn drive(s: &mut TcpStream, pipeline: &[u8], reply_len: usize, batch: usize, rounds: usize) {
    let mut buf = [0u8; 64 * 1024];
    for _ in 0..rounds {
        s.write_all(pipeline).unwrap();
        let mut want = reply_len * batch;
        while want > 0 {
            let n = s.read(&mut buf[..want.min(64 * 1024)]).unwrap();
            assert!(n > 0, "mithril closed the connection");
            want -= n;
        }
    }
}

#[test]
fn a_hundred_thousand_pipelined_gets_allocate_nothing_per_request() {
    let cluster = RedisCluster::start(ClusterSpec::default());
    let conf = format!(
        "bind 127.0.0.1\nport {}\ncluster-nodes {}\nthreads 1\ntopology-refresh-secs 3600\nloglevel warning\nslowlog-log-slower-than -1\n",
        free_port(),
        cluster.seeds().join(" ")
    );
    // (The slow log is off: an entry copies its request's arguments, and a
    // debug build under load makes some requests slow.)
    let cfg = mithril::config::parse_str(&conf, "test").unwrap();
    let port = cfg.port;
    // The proxy runs in this process (its threads are counted too); it is
    // never stopped: the test process ends with it.
    std::thread::spawn(move || mithril::server::run_with(cfg, Arc::new(mithril::server::Quiet)));
    let addr = format!("127.0.0.1:{port}");
    wait_until("mithril answers", Duration::from_secs(20), || {
        let mut c = Conn::try_connect(&addr).ok()?;
        (c.cmd(&["SET", "hot", "val"]) == Reply::Simple("OK".into())).then_some(())
    });
    let mut s = TcpStream::connect(&addr).unwrap();
    s.set_nodelay(true).unwrap();
    const BATCH: usize = 100;
    let get = encode_command(&[b"GET", b"hot"]).repeat(BATCH);
    let set = encode_command(&[b"SET", b"hot", b"val"]).repeat(BATCH);
    // Warm up: buffers, rings and queues reach their working sizes.
    drive(&mut s, &get, b"$3\r\nval\r\n".len(), BATCH, 2000);
    drive(&mut s, &set, b"+OK\r\n".len(), BATCH, 200);
    // Per-tick work (statistics snapshots every 100 ms) allocates a little
    // whatever the traffic: measure that over an idle stretch as long as
    // each run, and count only what the requests add on top. (This sleep
    // is the measurement, not a wait for a condition.)
    let idle = |d: std::time::Duration| {
        let a = ALLOCS.load(Ordering::Relaxed);
        std::thread::sleep(d);
        ALLOCS.load(Ordering::Relaxed) - a
    };
    let t = std::time::Instant::now();
    let before = ALLOCS.load(Ordering::Relaxed);
    drive(&mut s, &get, b"$3\r\nval\r\n".len(), BATCH, 1000);
    let gets = ALLOCS.load(Ordering::Relaxed) - before;
    let get_time = t.elapsed();
    let get_idle = idle(get_time);
    let t = std::time::Instant::now();
    let before = ALLOCS.load(Ordering::Relaxed);
    drive(&mut s, &set, b"+OK\r\n".len(), BATCH, 1000);
    let sets = ALLOCS.load(Ordering::Relaxed) - before;
    let set_idle = idle(t.elapsed());
    eprintln!(
        "allocations: {gets} over 100,000 GETs ({get_idle} in as long idle), {sets} over 100,000 SETs ({set_idle} idle)"
    );
    // What the requests themselves add: a small constant allowance for an
    // occasional buffer regrowth and the noise of the idle estimate: at most
    // one per thousand requests, where a per-request allocation would add
    // 100,000.
    assert!(
        gets.saturating_sub(get_idle) <= 100,
        "{gets} allocations over 100,000 GETs, {get_idle} idle"
    );
    assert!(
        sets.saturating_sub(set_idle) <= 100,
        "{sets} allocations over 100,000 SETs, {set_idle} idle"
    );

    // The same with the reply cache on: GETs are hits (a clone of the
    // cached frame), SETs forget and hold their key.
    let mut c = Conn::connect(&addr);
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "reply-cache", "yes"]),
        Reply::Simple("OK".into())
    );
    wait_until("the cache to fill", Duration::from_secs(20), || {
        c.cmd(&["GET", "hot"]);
        let r = c.cmd(&["INFO", "replycache"]);
        let text = String::from_utf8_lossy(r.as_bulk().unwrap_or_default()).to_string();
        text.lines()
            .any(|l| l.starts_with("reply_cache_hits:") && l != "reply_cache_hits:0")
            .then_some(())
    });
    drive(&mut s, &get, b"$3\r\nval\r\n".len(), BATCH, 2000);
    drive(&mut s, &set, b"+OK\r\n".len(), BATCH, 200);
    // A SET makes the next GET a miss (and a fill): one GET to refill,
    // then the hits.
    drive(
        &mut s,
        &get[..get.len() / BATCH],
        b"$3\r\nval\r\n".len(),
        1,
        1,
    );
    let t = std::time::Instant::now();
    let before = ALLOCS.load(Ordering::Relaxed);
    drive(&mut s, &get, b"$3\r\nval\r\n".len(), BATCH, 1000);
    let hits = ALLOCS.load(Ordering::Relaxed) - before;
    let hit_idle = idle(t.elapsed());
    let t = std::time::Instant::now();
    let before = ALLOCS.load(Ordering::Relaxed);
    drive(&mut s, &set, b"+OK\r\n".len(), BATCH, 1000);
    let held = ALLOCS.load(Ordering::Relaxed) - before;
    let held_idle = idle(t.elapsed());
    eprintln!(
        "reply-cache yes: {hits} over 100,000 GET hits ({hit_idle} idle), {held} over 100,000 SETs ({held_idle} idle)"
    );
    assert!(
        hits.saturating_sub(hit_idle) <= 100,
        "{hits} allocations over 100,000 cache hits, {hit_idle} idle"
    );
    assert!(
        held.saturating_sub(held_idle) <= 100,
        "{held} allocations over 100,000 SETs with the cache on, {held_idle} idle"
    );

    // An MGET of one slot whose keys all hit is answered from the cache
    // too: its merged reply is built in the session's reused buffer.
    for k in ["{h}a", "{h}b", "{h}c"] {
        assert_eq!(c.cmd(&["SET", k, "val"]), Reply::Simple("OK".into()));
    }
    let mget = encode_command(&[b"MGET", b"{h}a", b"{h}b", b"{h}c"]).repeat(BATCH);
    let mget_reply = b"*3\r\n$3\r\nval\r\n$3\r\nval\r\n$3\r\nval\r\n".len();
    let one = &mget[..mget.len() / BATCH];
    wait_until("the MGET to be cached", Duration::from_secs(20), || {
        let hits = |c: &mut Conn| {
            let r = c.cmd(&["INFO", "replycache"]);
            let text = String::from_utf8_lossy(r.as_bulk().unwrap_or_default()).to_string();
            text.lines().find_map(|l| {
                l.strip_prefix("reply_cache_hits:")?
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
        };
        let before = hits(&mut c)?;
        drive(&mut s, one, mget_reply, 1, 1);
        (hits(&mut c)? >= before + 3).then_some(())
    });
    drive(&mut s, &mget, mget_reply, BATCH, 200);
    let t = std::time::Instant::now();
    let before = ALLOCS.load(Ordering::Relaxed);
    drive(&mut s, &mget, mget_reply, BATCH, 1000);
    let mgets = ALLOCS.load(Ordering::Relaxed) - before;
    let mget_idle = idle(t.elapsed());
    eprintln!("reply-cache yes: {mgets} over 100,000 MGET hits ({mget_idle} idle)");
    assert!(
        mgets.saturating_sub(mget_idle) <= 100,
        "{mgets} allocations over 100,000 MGET hits, {mget_idle} idle"
    );
}
