//! COMMAND as mithril answers it, compared with a live Redis node.
//!
//! mithril's command table is the live 7.0 table lifted to the 7.2 / Valkey
//! 8 command set by `tools/command_overlay.json`. Every command the overlay
//! leaves alone must be described byte for byte as the live node describes
//! it, in RESP2 and RESP3; the ones it adds or patches are the deliberate
//! differences, read from the overlay itself (with python3, as the table
//! generator does). Lists whose order is a hash table's in Redis
//! (subcommands, COMMAND with no argument) are compared as sets.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;
use support::*;

/// A connection that keeps every reply's raw bytes.
struct Raw {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Raw {
    fn new(addr: &str, proto: u8) -> Raw {
        let s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("{addr}: {e}"));
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut r = Raw { s, buf: Vec::new() };
        if proto == 3 {
            let (hello, _) = r.call(&["HELLO", "3"]);
            assert!(
                matches!(hello, Reply::Map(_)),
                "HELLO 3 on {addr}: {hello:?}"
            );
        }
        r
    }

    fn call(&mut self, args: &[&str]) -> (Reply, Vec<u8>) {
        let parts: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.s.write_all(&encode_command(&parts)).unwrap();
        loop {
            if let Some((reply, used)) = parse_reply(&self.buf).unwrap() {
                let raw: Vec<u8> = self.buf.drain(..used).collect();
                return (reply, raw);
            }
            let mut chunk = [0u8; 65536];
            let n = self.s.read(&mut chunk).unwrap();
            assert!(n > 0, "connection closed during {args:?}");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    fn reply(&mut self, args: &[&str]) -> Reply {
        self.call(args).0
    }
}

/// What the overlay changes: names it adds, and names it patches.
struct Overlay {
    added: BTreeSet<String>,
    patched: BTreeSet<String>,
}

impl Overlay {
    fn read() -> Overlay {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/command_overlay.json");
        let script = "import json,sys\n\
                      o=json.load(open(sys.argv[1]))\n\
                      print(' '.join(sorted(o['add'])))\n\
                      print(' '.join(sorted(k for k in o['patch'] if not k.startswith('_'))))\n";
        let out = std::process::Command::new("python3")
            .arg("-c")
            .arg(script)
            .arg(&path)
            .output()
            .expect("python3 is needed to read tools/command_overlay.json");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        let mut lines = text.lines();
        let words = |l: Option<&str>| -> BTreeSet<String> {
            l.unwrap_or("")
                .split_whitespace()
                .map(str::to_string)
                .collect()
        };
        let added = words(lines.next());
        let patched = words(lines.next());
        assert!(added.contains("waitaof") && patched.contains("zrank"));
        Overlay { added, patched }
    }

    /// A name whose description differs from 7.0's on purpose.
    fn changed(&self, name: &str) -> bool {
        self.added.contains(name) || self.patched.contains(name)
    }
}

fn name_of(entry: &Reply) -> String {
    entry.as_array()[0].as_str().to_string()
}

/// A COMMAND INFO entry with its subcommands sorted by name and the
/// overlay's subcommands left out.
fn normalize_info(entry: &Reply, ov: &Overlay) -> Reply {
    let mut parts = entry.as_array().to_vec();
    let subs = match &parts[9] {
        Reply::Array(Some(v)) => Some(v.clone()),
        _ => None,
    };
    if let Some(mut v) = subs {
        v.retain(|s| !ov.changed(&name_of(s)));
        v.sort_by_key(name_of);
        parts[9] = Reply::Array(Some(v));
    }
    Reply::Array(Some(parts))
}

/// A COMMAND DOCS entry (a map, or its RESP2 array) with its "subcommands"
/// map sorted and the overlay's subcommands left out.
fn normalize_docs(doc: &Reply, ov: &Overlay) -> Vec<(Reply, Reply)> {
    let mut pairs = pairs_of(doc);
    for (k, v) in pairs.iter_mut() {
        if k.as_str() == "subcommands" {
            let mut subs: Vec<(Reply, Reply)> = pairs_of(v)
                .into_iter()
                .filter(|(n, _)| !ov.changed(n.as_str()))
                .collect();
            subs.sort_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
            *v = Reply::Map(subs);
        }
    }
    pairs
}

/// Key/value pairs of a RESP3 map or of the flat RESP2 array it becomes.
fn pairs_of(r: &Reply) -> Vec<(Reply, Reply)> {
    match r {
        Reply::Map(kv) => kv.clone(),
        Reply::Array(Some(v)) => v.chunks(2).map(|c| (c[0].clone(), c[1].clone())).collect(),
        other => panic!("expected a map, got {other:?}"),
    }
}

fn setup() -> (RedisCluster, Mithril) {
    let cluster = RedisCluster::start(ClusterSpec {
        masters: 1,
        ..ClusterSpec::default()
    });
    let m = Mithril::start(bin(), &cluster.seeds(), "");
    (cluster, m)
}

#[test]
fn command_info_docs_count_and_list_match_the_live_server() {
    let (cluster, m) = setup();
    let ov = Overlay::read();
    let live_addr = cluster.nodes[0].addr();
    let names: Vec<String> = {
        let mut c = Raw::new(&live_addr, 2);
        c.reply(&["COMMAND", "LIST"])
            .as_array()
            .iter()
            .map(|r| r.as_str().to_string())
            .collect()
    };
    assert!(names.len() > 300, "live COMMAND LIST: {}", names.len());
    let compared = names.iter().filter(|n| !ov.changed(n)).count();
    assert!(compared > 300, "only {compared} names to compare");

    for proto in [2u8, 3] {
        let mut live = Raw::new(&live_addr, proto);
        let mut ours = Raw::new(&m.addr(), proto);
        let mut byte_equal = 0;
        for name in names.iter().filter(|n| !ov.changed(n)) {
            for sub in ["INFO", "DOCS"] {
                let (lr, lraw) = live.call(&["COMMAND", sub, name]);
                let (or, oraw) = ours.call(&["COMMAND", sub, name]);
                if lraw == oraw {
                    byte_equal += 1;
                    continue;
                }
                // Only containers may differ, by subcommand order or by the
                // overlay's subcommands.
                let has_subs = match sub {
                    "INFO" => {
                        matches!(&lr.as_array()[0].as_array()[9], Reply::Array(Some(v)) if !v.is_empty())
                    }
                    _ => pairs_of(&pairs_of(&lr)[0].1)
                        .iter()
                        .any(|(k, _)| k.as_str() == "subcommands"),
                };
                assert!(
                    has_subs,
                    "RESP{proto} COMMAND {sub} {name} differs:\n live: {:?}\n ours: {:?}",
                    String::from_utf8_lossy(&lraw),
                    String::from_utf8_lossy(&oraw)
                );
                match sub {
                    "INFO" => assert_eq!(
                        normalize_info(&or.as_array()[0], &ov),
                        normalize_info(&lr.as_array()[0], &ov),
                        "RESP{proto} COMMAND INFO {name}"
                    ),
                    _ => assert_eq!(
                        normalize_docs(&pairs_of(&or)[0].1, &ov),
                        normalize_docs(&pairs_of(&lr)[0].1, &ov),
                        "RESP{proto} COMMAND DOCS {name}"
                    ),
                }
            }
        }
        // Leaves and subcommands (the great majority) are byte-identical.
        assert!(
            byte_equal > 2 * compared - 40,
            "RESP{proto}: {byte_equal} byte-equal"
        );

        // Several names at once, an unknown one among them.
        let args = [
            "COMMAND",
            "INFO",
            "get",
            "nosuchcommand",
            "client|id",
            "client|nosuch",
        ];
        assert_eq!(ours.call(&args).1, live.call(&args).1, "RESP{proto}");
        let args = ["COMMAND", "DOCS", "nosuchcommand", "get", "client|id"];
        assert_eq!(ours.call(&args).1, live.call(&args).1, "RESP{proto}");

        // COMMAND with no argument: every command, in some order.
        for args in [&["COMMAND"][..], &["COMMAND", "INFO"][..]] {
            let index = |r: &Reply| -> BTreeMap<String, Reply> {
                r.as_array()
                    .iter()
                    .map(|e| (name_of(e), normalize_info(e, &ov)))
                    .collect()
            };
            let l = index(&live.reply(args));
            let o = index(&ours.reply(args));
            for (name, entry) in &l {
                if !ov.changed(name) {
                    assert_eq!(o.get(name), Some(entry), "RESP{proto} {args:?}: {name}");
                }
            }
            let extra: BTreeSet<&String> = o.keys().filter(|n| !l.contains_key(*n)).collect();
            let expected: BTreeSet<&String> =
                ov.added.iter().filter(|n| !n.contains('|')).collect();
            assert_eq!(
                extra, expected,
                "RESP{proto} {args:?}: commands only mithril lists"
            );
        }
        let l: BTreeMap<String, Vec<(Reply, Reply)>> = pairs_of(&live.reply(&["COMMAND", "DOCS"]))
            .into_iter()
            .map(|(k, v)| (k.as_str().to_string(), normalize_docs(&v, &ov)))
            .collect();
        let o: BTreeMap<String, Vec<(Reply, Reply)>> = pairs_of(&ours.reply(&["COMMAND", "DOCS"]))
            .into_iter()
            .map(|(k, v)| (k.as_str().to_string(), normalize_docs(&v, &ov)))
            .collect();
        for (name, doc) in &l {
            if !ov.changed(name) {
                assert_eq!(o.get(name), Some(doc), "RESP{proto} COMMAND DOCS: {name}");
            }
        }
    }

    // COUNT and LIST: the live set plus what the overlay adds.
    let mut live = Raw::new(&live_addr, 2);
    let mut ours = Raw::new(&m.addr(), 2);
    let top_added = ov.added.iter().filter(|n| !n.contains('|')).count() as i64;
    assert_eq!(
        ours.reply(&["COMMAND", "COUNT"]).as_int(),
        live.reply(&["COMMAND", "COUNT"]).as_int() + top_added
    );
    let set = |r: Reply| -> BTreeSet<String> {
        r.as_array()
            .iter()
            .map(|n| n.as_str().to_string())
            .collect()
    };
    for filter in [
        &["COMMAND", "LIST"][..],
        &["COMMAND", "LIST", "FILTERBY", "PATTERN", "cl*"],
        &["COMMAND", "LIST", "FILTERBY", "pattern", "*GET*"],
        &["COMMAND", "LIST", "FILTERBY", "ACLCAT", "geo"],
        &["COMMAND", "LIST", "FILTERBY", "aclcat", "CONNECTION"],
        &["COMMAND", "LIST", "FILTERBY", "ACLCAT", "nosuchcategory"],
        &["COMMAND", "LIST", "FILTERBY", "MODULE", "anything"],
    ] {
        let l = set(live.reply(filter));
        let o = set(ours.reply(filter));
        let extra: BTreeSet<&String> = o.difference(&l).collect();
        assert!(
            extra.iter().all(|n| ov.added.contains(*n)),
            "{filter:?}: only mithril lists {extra:?}"
        );
        let missing: Vec<&String> = l.difference(&o).collect();
        assert!(missing.is_empty(), "{filter:?}: mithril misses {missing:?}");
    }
    for bad in [
        &["COMMAND", "LIST", "FILTERBY"][..],
        &["COMMAND", "LIST", "FILTERBY", "PATTERN"],
        &["COMMAND", "LIST", "FILTERBY", "NOSUCH", "x"],
        &["COMMAND", "LIST", "FILTERBY", "MODULE", "x", "extra"],
        &["COMMAND", "LIST", "extra"],
    ] {
        assert_eq!(ours.call(bad).1, live.call(bad).1, "{bad:?}");
    }
}

#[test]
fn getkeys_matches_the_live_server() {
    let (cluster, m) = setup();
    let calls: &[&[&str]] = &[
        &["get", "a"],
        &["GET", "a"],
        &["set", "k", "v"],
        &["set", "k", "v", "GET"],
        &["set", "k", "v", "ex", "10"],
        &["mset", "a", "1", "b", "2"],
        &["del", "a", "b", "c"],
        &["lmove", "a", "b", "left", "right"],
        &["rename", "a", "b"],
        &["zunionstore", "d", "2", "a", "b", "weights", "1", "2"],
        &["zunionstore", "d", "2abc", "a", "b"],
        &["zunionstore", "d", "5", "a"],
        &["eval", "return 1", "0"],
        &["eval", "return 1", "2", "k1", "k2", "arg"],
        &["eval", "x", "2abc", "a", "b"],
        &["fcall", "f", "1", "k"],
        &["sort", "k"],
        &["sort", "k", "by", "w*", "store", "d"],
        &["sort_ro", "k", "by", "w*"],
        &["bitfield", "k", "get", "u8", "0"],
        &["bitfield", "k", "incrby", "u8", "0", "1"],
        &["bitfield_ro", "k", "get", "u8", "0"],
        &["migrate", "h", "1", "", "0", "5", "keys", "a", "b"],
        &["migrate", "h", "1", "k", "0", "5"],
        &["georadius", "k", "0", "0", "1", "m", "store", "d"],
        &["georadius", "k", "0", "0", "1", "m", "storedist", "d"],
        &["xread", "count", "1", "streams", "a", "b", "0", "0"],
        &["xread", "streams", "a", "b"],
        &["xreadgroup", "group", "g", "c", "streams", "a", "1"],
        &["lmpop", "2", "a", "b", "left"],
        &["blmpop", "0", "2", "a", "b", "left"],
        &["sintercard", "2", "a", "b", "limit", "1"],
        &["memory", "usage", "k"],
        &["object", "encoding", "k"],
        &["xinfo", "stream", "s"],
        &["pfcount", "a", "b"],
        &["ping", "x"],
        &["client", "setname", "x"],
        &["client", "nosuch"],
        &["nosuchcommand", "a"],
        &["get", "a", "b"],
        &["spublish", "c", "m"],
        &["publish", "c", "m"],
        &["client|setname", "x"],
    ];
    for proto in [2u8, 3] {
        let mut live = Raw::new(&cluster.nodes[0].addr(), proto);
        let mut ours = Raw::new(&m.addr(), proto);
        // mithril takes GETKEYS with a bare command name (7.2's arity, -3)
        // where 7.0 wants at least one argument after it.
        assert_eq!(
            ours.reply(&["COMMAND", "GETKEYS", "ping"]),
            Reply::Error("ERR The command has no key arguments".into())
        );
        assert_eq!(
            ours.reply(&["COMMAND", "GETKEYS", "get"]),
            Reply::Error("ERR Invalid number of arguments specified for command".into())
        );
        for call in calls {
            for sub in ["GETKEYS", "GETKEYSANDFLAGS"] {
                let mut args = vec!["COMMAND", sub];
                args.extend_from_slice(call);
                let (lr, lraw) = live.call(&args);
                let (_, oraw) = ours.call(&args);
                assert_eq!(
                    String::from_utf8_lossy(&oraw),
                    String::from_utf8_lossy(&lraw),
                    "RESP{proto} {args:?} (live: {lr:?})"
                );
            }
        }
    }
}
