//! The command table against a live server.
//!
//! Each test starts its own standalone `redis-server` on a free loopback port
//! (killed by PID when the guard drops, panics included) and speaks RESP2 to
//! it over a plain `TcpStream`: no client crate needed. Checked here:
//! - every command and subcommand the server knows is in the table (none is
//!   excluded today; see `EXCLUDED`), with the same arity, legacy key triple,
//!   key spec count, visible flags and ACL categories, apart from the listed
//!   changes of the newer generation the table follows (`UPGRADED_*`);
//! - `keys()` agrees with the server's `COMMAND GETKEYS`, on hand-picked calls
//!   and on calls synthesized for every command;
//! - the error replies for wrong arity, unknown commands and unknown
//!   subcommands are byte-identical to the server's.
//!
//! Also here, because it needs its own global allocator: lookup and key
//! extraction allocate nothing (a counting allocator, per thread).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::{BufRead, BufReader, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::ops::Range;
use std::process::{Child, Command as Process, Stdio};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

use mithril::command::{self as table, Args, Command};

// ------------------------------------------------------------ allocation counter

struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

fn count_one() {
    let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
}

// SAFETY: every method only counts, then hands the caller's request,
// with the caller's guarantees, to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_one();
        // SAFETY: the caller's guarantees for `layout`, passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count_one();
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_one();
        // SAFETY: `ptr` came from this allocator, which is System's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as for `realloc`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations() -> u64 {
    ALLOCS.with(Cell::get)
}

// ------------------------------------------------------------ what may differ

/// Commands of the live server deliberately left out of the table, with why.
const EXCLUDED: &[(&str, &str)] = &[];

/// Added by Redis 7.2 / Valkey 8.0 (an older live server lacks them), and
/// mithril's own CONFIG RELOAD, which no server has.
const ADDED: &[&str] = &[
    "client|capa",
    "client|no-touch",
    "client|setinfo",
    "cluster|myshardid",
    "cluster|slot-stats",
    "config|reload",
    "script|show",
    "waitaof",
];

/// Arity changed by the newer generation: (name, the Redis 7.0 arity).
const UPGRADED_ARITY: &[(&str, i64)] = &[
    ("zrank", 3),
    ("zrevrank", 3),
    ("command|getkeys", -4),
    ("command|getkeysandflags", -4),
];

/// Visible flags (and so maybe ACL categories) changed by the newer generation.
const UPGRADED_FLAGS: &[&str] = &[
    "blmove",
    "blpop",
    "brpop",
    "brpoplpush",
    "bzpopmax",
    "bzpopmin",
    "wait",
    "multi",
    "watch",
    "cluster|info",
    "cluster|myid",
    "cluster|nodes",
    "cluster|shards",
    "cluster|slots",
];

// ------------------------------------------------------------ the server

struct Server {
    child: Child,
    port: u16,
}

static NEXT_PORT: AtomicU16 = AtomicU16::new(0);

impl Server {
    fn start() -> Server {
        let base = 23000 + (std::process::id() % 500) as u16 * 40;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            assert!(Instant::now() < deadline, "no free port for redis-server");
            let port = base + NEXT_PORT.fetch_add(1, Ordering::Relaxed) % 40;
            if TcpListener::bind(("127.0.0.1", port)).is_err() {
                continue;
            }
            let child = Process::new("redis-server")
                .args(["--port", &port.to_string()])
                .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
                .args(["--daemonize", "no", "--loglevel", "warning"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("cannot run redis-server (is it installed?): {e}"));
            let mut server = Server { child, port };
            if server.wait_ready(deadline) {
                return server;
            }
            // Lost a race for the port, or the server died: try the next one.
        }
    }

    /// Polls with PING until the server answers, it exits, or the deadline passes.
    fn wait_ready(&mut self, deadline: Instant) -> bool {
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return false;
            }
            if let Ok(mut conn) = Conn::open(self.port) {
                if conn.call(&[b"PING"]).ok() == Some(Resp::Simple("PONG".into())) {
                    return true;
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    fn conn(&self) -> Conn {
        Conn::open(self.port).expect("connect to redis-server")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ------------------------------------------------------------ RESP2 client

#[derive(Debug, Clone, PartialEq)]
enum Resp {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Resp>>),
}

impl Resp {
    fn int(&self) -> i64 {
        match self {
            Resp::Int(i) => *i,
            other => panic!("expected an integer, got {other:?}"),
        }
    }
    fn items(&self) -> &[Resp] {
        match self {
            Resp::Array(Some(v)) => v,
            other => panic!("expected an array, got {other:?}"),
        }
    }
    fn text(&self) -> String {
        match self {
            Resp::Simple(s) => s.clone(),
            Resp::Bulk(Some(b)) => String::from_utf8_lossy(b).into_owned(),
            other => panic!("expected a string, got {other:?}"),
        }
    }
}

struct Conn {
    rd: BufReader<TcpStream>,
    wr: TcpStream,
}

impl Conn {
    fn open(port: u16) -> std::io::Result<Conn> {
        let wr = TcpStream::connect(("127.0.0.1", port))?;
        wr.set_read_timeout(Some(Duration::from_secs(10)))?;
        Ok(Conn {
            rd: BufReader::new(wr.try_clone()?),
            wr,
        })
    }

    fn send(&mut self, argv: &[&[u8]]) -> std::io::Result<()> {
        let mut out = format!("*{}\r\n", argv.len()).into_bytes();
        for a in argv {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
        self.wr.write_all(&out)
    }

    fn call(&mut self, argv: &[&[u8]]) -> std::io::Result<Resp> {
        self.send(argv)?;
        self.read()
    }

    /// The raw bytes of a one-line reply (errors, simple strings).
    fn call_raw_line(&mut self, argv: &[&[u8]]) -> Vec<u8> {
        self.send(argv).expect("send");
        let mut line = Vec::new();
        self.rd.read_until(b'\n', &mut line).expect("reply");
        line
    }

    fn line(&mut self) -> std::io::Result<String> {
        let mut line = Vec::new();
        self.rd.read_until(b'\n', &mut line)?;
        if !line.ends_with(b"\r\n") {
            return Err(std::io::Error::other("connection closed mid-reply"));
        }
        line.truncate(line.len() - 2);
        Ok(String::from_utf8_lossy(&line).into_owned())
    }

    fn read(&mut self) -> std::io::Result<Resp> {
        let line = self.line()?;
        let (kind, rest) = line.split_at(1);
        let num = || rest.parse::<i64>().map_err(std::io::Error::other);
        Ok(match kind {
            "+" => Resp::Simple(rest.to_string()),
            "-" => Resp::Error(rest.to_string()),
            ":" => Resp::Int(num()?),
            "$" => {
                let n = num()?;
                if n < 0 {
                    Resp::Bulk(None)
                } else {
                    let mut buf = vec![0; n as usize + 2];
                    std::io::Read::read_exact(&mut self.rd, &mut buf)?;
                    buf.truncate(n as usize);
                    Resp::Bulk(Some(buf))
                }
            }
            "*" => {
                let n = num()?;
                if n < 0 {
                    Resp::Array(None)
                } else {
                    Resp::Array(Some((0..n).map(|_| self.read()).collect::<Result<_, _>>()?))
                }
            }
            other => return Err(std::io::Error::other(format!("bad RESP type {other}"))),
        })
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        let _ = self.wr.shutdown(Shutdown::Both);
    }
}

// ------------------------------------------------------------ helpers

/// Owns the bytes behind an [`Args`] view.
struct Call {
    buf: Vec<u8>,
    ranges: Vec<Range<usize>>,
}

impl Call {
    fn new<A: AsRef<[u8]>>(argv: &[A]) -> Call {
        let mut buf = Vec::new();
        let mut ranges = Vec::new();
        for a in argv {
            let start = buf.len();
            buf.extend_from_slice(a.as_ref());
            ranges.push(start..buf.len());
        }
        Call { buf, ranges }
    }
    fn args(&self) -> Args<'_> {
        Args {
            buf: &self.buf,
            ranges: &self.ranges,
        }
    }
}

fn entry(name: &str) -> Option<&'static Command> {
    table::lookup_full(name.as_bytes())
}

/// Names of set bits, using the table's own name functions.
fn flag_names(bits: u32) -> Vec<String> {
    (0..32)
        .map(|i| 1u32 << i)
        .filter(|b| bits & b != 0 && table::flags::HIDDEN & b == 0)
        .map(|b| table::flags::name(b).to_string())
        .collect()
}

fn acl_names(bits: u64) -> Vec<String> {
    (0..64)
        .map(|i| 1u64 << i)
        .filter(|b| bits & b != 0)
        .map(|b| format!("@{}", table::acl::name(b)))
        .collect()
}

/// Our keys of `argv`, as the argument bytes.
fn our_keys(argv: &[Vec<u8>]) -> Option<Vec<Vec<u8>>> {
    let call = Call::new(argv);
    let args = call.args();
    let cmd = table::resolve(&args).ok()?;
    Some(table::keys(cmd, &args).map(|i| argv[i].clone()).collect())
}

/// The server's keys of `argv`; None when it refuses the arity.
fn live_keys(conn: &mut Conn, argv: &[Vec<u8>]) -> Option<Vec<Vec<u8>>> {
    let mut full: Vec<&[u8]> = vec![b"COMMAND", b"GETKEYS"];
    full.extend(argv.iter().map(Vec::as_slice));
    match conn.call(&full).expect("COMMAND GETKEYS") {
        Resp::Array(Some(v)) => Some(
            v.into_iter()
                .map(|r| match r {
                    Resp::Bulk(Some(b)) => b,
                    other => panic!("GETKEYS item {other:?}"),
                })
                .collect(),
        ),
        Resp::Error(e)
            if e.contains("Invalid number of arguments")
                || e.contains("arguments for 'command|getkeys'") =>
        {
            None
        }
        Resp::Error(e) if e.contains("Invalid command specified") => {
            let name = String::from_utf8_lossy(&argv[0]).to_ascii_lowercase();
            let sub = argv
                .get(1)
                .map(|s| String::from_utf8_lossy(s).to_ascii_lowercase());
            let known_gap = ADDED
                .iter()
                .any(|a| *a == name || sub.as_ref().is_some_and(|s| *a == format!("{name}|{s}")));
            assert!(known_gap, "{}: unknown to the server", show(argv));
            None
        }
        Resp::Error(e)
            if e.contains("Invalid arguments specified") || e.contains("no key arguments") =>
        {
            Some(Vec::new())
        }
        other => panic!("GETKEYS {:?}: {other:?}", show(argv)),
    }
}

fn show(argv: &[Vec<u8>]) -> String {
    argv.iter()
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

fn words(s: &str) -> Vec<Vec<u8>> {
    s.split(' ').map(|w| w.as_bytes().to_vec()).collect()
}

// ------------------------------------------------------------ tests

#[test]
fn table_covers_the_live_server() {
    let server = Server::start();
    let mut conn = server.conn();
    let infos = conn.call(&[b"COMMAND", b"INFO"]).expect("COMMAND INFO");
    let mut seen = Vec::new();
    let mut checked = 0;
    let mut problems = Vec::new();
    for info in infos.items() {
        let mut all = vec![info.clone()];
        all.extend(info.items()[9].items().iter().cloned());
        for info in all {
            let item = info.items();
            let name = item[0].text();
            seen.push(name.clone());
            if EXCLUDED.iter().any(|(n, _)| *n == name) {
                continue;
            }
            let Some(ours) = entry(&name) else {
                problems.push(format!("{name}: missing from the table"));
                continue;
            };
            checked += 1;
            let arity = item[1].int();
            let old_arity = UPGRADED_ARITY.iter().find(|(n, _)| *n == name);
            if i64::from(ours.arity) != arity && old_arity.map(|o| o.1) != Some(arity) {
                problems.push(format!("{name}: arity {} vs live {arity}", ours.arity));
            }
            let legacy = (item[3].int(), item[4].int(), item[5].int());
            let (f, l, s) = ours.legacy_keys;
            if (i64::from(f), i64::from(l), i64::from(s)) != legacy {
                problems.push(format!(
                    "{name}: legacy keys {:?} vs live {legacy:?}",
                    ours.legacy_keys
                ));
            }
            if ours.key_specs.len() != item[8].items().len() {
                problems.push(format!(
                    "{name}: {} key specs vs live {}",
                    ours.key_specs.len(),
                    item[8].items().len()
                ));
            }
            let live_sub_count = item.get(9).map_or(0, |s| s.items().len());
            if !name.contains('|') && ours.subcommands.len() < live_sub_count {
                problems.push(format!("{name}: fewer subcommands than live"));
            }
            if !UPGRADED_FLAGS.contains(&name.as_str()) {
                let live_flags: Vec<String> = item[2].items().iter().map(Resp::text).collect();
                if flag_names(ours.flags) != live_flags {
                    problems.push(format!(
                        "{name}: flags {:?} vs live {live_flags:?}",
                        flag_names(ours.flags)
                    ));
                }
                let live_acl: Vec<String> = item[6].items().iter().map(Resp::text).collect();
                if acl_names(ours.acl) != live_acl {
                    problems.push(format!(
                        "{name}: acl {:?} vs live {live_acl:?}",
                        acl_names(ours.acl)
                    ));
                }
            }
        }
    }
    // Everything in the table is on the server, or is one of the additions.
    for c in table::all() {
        for e in std::iter::once(c).chain(c.subcommands) {
            if !seen.iter().any(|n| n == e.name) && !ADDED.contains(&e.name) {
                problems.push(format!("{}: in the table, unknown to the server", e.name));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(checked >= 360, "only {checked} commands checked");
}

#[test]
fn keys_agree_with_command_getkeys() {
    let server = Server::start();
    let mut conn = server.conn();
    let mut calls: Vec<Vec<Vec<u8>>> = [
        "GET k",
        "MSET a 1 b 2",
        "MSET a 1 b",
        "DEL a b c",
        "ZUNIONSTORE dst 2 a b WEIGHTS 1 2",
        "ZUNIONSTORE d abc a",
        "ZUNIONSTORE d 2x a b",
        "ZUNIONSTORE d 99999999999999999999999 a",
        "ZINTERCARD 2 a b LIMIT 3",
        "ZDIFF 2 a b WITHSCORES",
        "EVAL s 2 a b x",
        "EVAL s 0",
        "EVAL s -1 a",
        "EVAL s 3 a b",
        "EVAL s 4294967297 a b",
        "EVAL_RO s 1 a",
        "FCALL f 1 k",
        "FCALL_RO f 2 k j",
        "XREAD COUNT 1 STREAMS a b 0 0",
        "XREAD STREAMS a b 0",
        "XREAD COUNT streams STREAMS a 0",
        "XREADGROUP GROUP g c STREAMS s1 s2 > >",
        "XREADGROUP GROUP g c COUNT 1 BLOCK 0 NOACK STREAMS s1 >",
        "SORT k STORE d",
        "SORT k BY w GET g STORE d",
        "SORT k STORE",
        "SORT k LIMIT 0 1 STORE d STORE e",
        "SORT k store get x",
        "SORT k LIMIT 0 STORE d",
        "SORT k GET STORE d",
        "SORT k BY STORE STORE d",
        "ZUNIONSTORE d 4294967298 a b",
        "SORT_RO k BY x GET y",
        "GEORADIUS k 0 0 10 km STORE d",
        "GEORADIUS k 0 0 10 km STORE d STOREDIST e",
        "GEORADIUS_RO k 0 0 10 km",
        "GEORADIUSBYMEMBER k m 10 km STOREDIST d",
        "GEOSEARCHSTORE d s FROMMEMBER m BYRADIUS 1 km",
        "MIGRATE h p k 0 5",
        "MIGRATE h p k 0 5 KEYS a",
        "MIGRATE h p k 0 5 COPY REPLACE AUTH pw",
        "LMPOP 2 a b LEFT",
        "LMPOP 5 a b LEFT",
        "BLMPOP 0 2 a b LEFT",
        "ZMPOP 1 z MIN",
        "BZMPOP 0 1 z MAX",
        "SINTERCARD 2 a b LIMIT 1",
        "SINTERCARD 0 a",
        "OBJECT ENCODING k",
        "OBJECT FREQ k",
        "MEMORY USAGE k",
        "XINFO STREAM s FULL",
        "XGROUP CREATE s g $",
        "SET k v GET",
        "SET k v EX 10",
        "BITFIELD k GET u8 0",
        "BITFIELD_RO k GET u8 0",
        "BITOP AND d a b",
        "PFMERGE d a b",
        "RENAME a b",
        "SMOVE a b m",
        "LMOVE a b LEFT RIGHT",
        "COPY a b",
        "LCS a b",
        "ZRANGESTORE d s 0 -1",
        "PUBLISH c m",
        "SPUBLISH c m",
        "SSUBSCRIBE a b",
        "WATCH a b",
        "PING",
    ]
    .iter()
    .map(|s| words(s))
    .collect();
    calls.push(vec![
        b"MIGRATE".to_vec(),
        b"h".to_vec(),
        b"p".to_vec(),
        Vec::new(),
        b"0".to_vec(),
        b"5".to_vec(),
        b"AUTH2".to_vec(),
        b"u".to_vec(),
        b"pw".to_vec(),
        b"KEYS".to_vec(),
        b"a".to_vec(),
        b"b".to_vec(),
    ]);
    calls.push(vec![
        b"SORT".to_vec(),
        b"k".to_vec(),
        b"sto\0re".to_vec(),
        b"d".to_vec(),
        b"store\0x".to_vec(),
        b"e".to_vec(),
    ]);

    // Synthesized: every command and subcommand, at its arity and a little
    // beyond, with distinct words, with a count ("2") at positions 1-3, and
    // with its spec keywords at every position.
    for c in table::all() {
        for e in std::iter::once(c).chain(c.subcommands) {
            if !e.subcommands.is_empty() {
                continue;
            }
            let prefix: Vec<Vec<u8>> = e.name.split('|').map(|p| p.as_bytes().to_vec()).collect();
            let min = e.arity.unsigned_abs() as usize;
            let max = if e.arity < 0 { min + 4 } else { min };
            for argc in min.max(prefix.len())..=max {
                for count_at in [0, 1, 2, 3] {
                    let mut argv = prefix.clone();
                    for i in argv.len()..argc {
                        if i == count_at {
                            argv.push(b"2".to_vec());
                        } else {
                            argv.push(format!("w{i}").into_bytes());
                        }
                    }
                    calls.push(argv);
                }
                // The spec keywords (STREAMS, STORE, KEYS, ...) at every position.
                for spec in e.key_specs {
                    if let table::BeginSearch::Keyword { keyword, .. } = spec.begin {
                        for at in prefix.len()..argc {
                            let mut argv = prefix.clone();
                            for i in argv.len()..argc {
                                argv.push(format!("w{i}").into_bytes());
                            }
                            argv[at] = keyword.as_bytes().to_vec();
                            calls.push(argv);
                        }
                    }
                }
            }
        }
    }

    let mut compared = 0;
    let mut problems = Vec::new();
    for argv in &calls {
        let Some(live) = live_keys(&mut conn, argv) else {
            continue;
        };
        let Some(ours) = our_keys(argv) else {
            // Only the table's newer arities may refuse what this server takes.
            let name = String::from_utf8_lossy(&argv[0]).to_ascii_lowercase();
            let sub = argv
                .get(1)
                .map(|s| String::from_utf8_lossy(s).to_ascii_lowercase());
            let full = sub.map(|s| format!("{name}|{s}"));
            let upgraded = UPGRADED_ARITY
                .iter()
                .any(|(n, _)| *n == name || Some(n.to_string()) == full);
            if !upgraded {
                problems.push(format!("{}: refused by the table", show(argv)));
            }
            continue;
        };
        compared += 1;
        if ours != live {
            problems.push(format!(
                "{}: ours {:?} live {:?}",
                show(argv),
                show(&ours),
                show(&live)
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    println!(
        "COMMAND GETKEYS: {compared} of {} calls compared",
        calls.len()
    );
    assert!(compared >= 800, "only {compared} calls compared");
}

#[test]
fn error_replies_are_byte_identical() {
    let server = Server::start();
    let mut conn = server.conn();
    let mut compared = 0;

    // Wrong arity, for every command and subcommand that can get it wrong.
    for c in table::all() {
        for e in std::iter::once(c).chain(c.subcommands) {
            if ADDED.contains(&e.name) || UPGRADED_ARITY.iter().any(|(n, _)| *n == e.name) {
                continue;
            }
            let prefix: Vec<&[u8]> = e.name.split('|').map(str::as_bytes).collect();
            let argc = if e.arity > 0 {
                e.arity as usize + 1
            } else if e.arity < -1 {
                e.arity.unsigned_abs() as usize - 1
            } else {
                continue;
            };
            if argc < prefix.len() {
                continue;
            }
            let mut argv = prefix.clone();
            argv.resize(argc, b"x");
            let call = Call::new(&argv);
            assert!(!table::arity_ok(e, argc), "{}", e.name);
            let live = conn.call_raw_line(&argv);
            assert_eq!(
                String::from_utf8_lossy(&table::wrong_arity_reply(e)),
                String::from_utf8_lossy(&live),
                "{}",
                e.name
            );
            let rejected = table::resolve(&call.args()).expect_err("arity");
            assert_eq!(rejected.reply(&call.args()), live, "{}", e.name);
            compared += 1;
        }
    }

    // Unknown subcommands of every container.
    for c in table::all().iter().filter(|c| !c.subcommands.is_empty()) {
        for sub in [&b"nosuch"[..], b"x\r\ny", &[b's'; 200]] {
            let argv: Vec<&[u8]> = vec![c.name.as_bytes(), sub];
            let live = conn.call_raw_line(&argv);
            assert_eq!(table::unknown_subcommand_reply(c, sub), live, "{}", c.name);
            let call = Call::new(&argv);
            assert_eq!(
                table::resolve(&call.args())
                    .expect_err("sub")
                    .reply(&call.args()),
                live
            );
            compared += 1;
        }
    }

    // Unknown commands with all kinds of arguments.
    let long = vec![b'q'; 300];
    let shapes: Vec<Vec<&[u8]>> = vec![
        vec![b"nosuch"],
        vec![b"nosuch", b"a", b"b"],
        vec![b"NoSuch", b"a\r\nb", b"\n"],
        vec![b"no\0such", b"x\0y", b"z"],
        vec![&long, &long],
        vec![b"nosuch", &long[..100], &long[..20], &long[..5], b"tail"],
        vec![b"nosuch", &long[..125], b"abcdef"],
        vec![b"nosuch", &long[..126], b"", b"c"],
        vec![b"client|setname", b"x"],
        vec![b"", b"x"],
    ];
    for argv in &shapes {
        let live = conn.call_raw_line(argv);
        let call = Call::new(argv);
        assert_eq!(
            String::from_utf8_lossy(&table::unknown_command_reply(&call.args())),
            String::from_utf8_lossy(&live)
        );
        assert_eq!(
            table::resolve(&call.args()),
            Err(table::Rejection::UnknownCommand)
        );
        compared += 1;
    }
    assert!(compared >= 300, "only {compared} replies compared");
}

#[test]
fn lookup_and_key_extraction_do_not_allocate() {
    let names: Vec<&[u8]> = vec![
        b"GET",
        b"get",
        b"Set",
        b"MGET",
        b"zunionstore",
        b"XREADGROUP",
        b"nosuchcommand",
        b"",
        b"client",
        b"GEORADIUSBYMEMBER_RO",
        &[b'z'; 64],
    ];
    let calls: Vec<Call> = [
        "GET k",
        "MSET a 1 b 2 c 3",
        "ZUNIONSTORE dst 2 a b WEIGHTS 1 2",
        "EVAL s 2 a b x",
        "XREAD COUNT 1 BLOCK 0 STREAMS a b 0 0",
        "SORT k BY w GET g STORE d",
        "MIGRATE h p k 0 5 KEYS a",
        "OBJECT ENCODING k",
        "CLIENT SETNAME x",
    ]
    .iter()
    .map(|s| Call::new(&s.split(' ').collect::<Vec<_>>()))
    .collect();
    let client = table::lookup(b"client").expect("client");

    let rounds = 20_000u32;
    let before = allocations();
    let start = Instant::now();
    let mut found = 0usize;
    for _ in 0..rounds {
        for n in &names {
            found += usize::from(table::lookup(std::hint::black_box(n)).is_some());
        }
        found += usize::from(table::lookup_sub(client, b"SetName").is_some());
    }
    let lookups = start.elapsed();
    let start = Instant::now();
    let mut key_sum = 0usize;
    for _ in 0..rounds {
        for c in &calls {
            let args = std::hint::black_box(c.args());
            if let Ok(cmd) = table::resolve(&args) {
                key_sum += table::keys(cmd, &args).sum::<usize>();
                key_sum += usize::from(table::is_blocking_call(cmd, &args));
                key_sum += table::first_key(cmd, &args).unwrap_or(0);
            }
        }
    }
    let extractions = start.elapsed();
    let allocated = allocations() - before;
    assert_eq!(allocated, 0, "{allocated} allocations on the lookup path");
    assert_eq!(found, rounds as usize * 9);
    // Per call: key positions summed, + 1 if blocking, + the first key:
    // GET 1+1, MSET 9+1, ZUNIONSTORE 8+1, EVAL 7+3, XREAD 13+1+6, SORT 8+1,
    // MIGRATE 0, OBJECT 2+2, CLIENT 0.
    assert_eq!(key_sum, rounds as usize * 64);
    let per = |d: Duration, n: usize| d.as_nanos() / (u128::from(rounds) * n as u128);
    println!(
        "command table: lookup ~{} ns; resolve + keys + first_key + is_blocking_call ~{} ns per call \
         (a debug build is several times slower)",
        per(lookups, names.len() + 1),
        per(extractions, calls.len())
    );
}
