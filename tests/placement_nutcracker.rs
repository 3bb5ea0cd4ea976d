//! Key placement by `mithril::hashkit` against twemproxy itself: nutcracker
//! 0.5.0 in front of plain redis-servers decides where each key goes
//! (pipelined SETs through it, the value naming the key), every server is
//! then read directly (KEYS *), and each key must sit on the server
//! `Ring::locate` names. Covers the twelve hashes under ketama and under
//! modula, weights, explicit names that sort apart from port order, 25
//! servers (156 ketama points each), hash tags, binary keys, the empty key,
//! a one-server pool, and a server ejected and taken back; and the server
//! names and their order, from nutcracker's stats.
//!
//! Needs `nutcracker` (Debian: `apt-get install nutcracker`) besides
//! `redis-server`. `random` is left out: nutcracker picks with `random()`.

mod support;

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use mithril::hashkit::{server_name, sorted_order, tagged, Distribution, HashFn, Ring};
use support::*;

/// Keys written per pipeline.
const BATCH: usize = 1000;

/// One `servers:` line of a pool: which server of the set, its weight, its
/// explicit name.
#[derive(Clone)]
struct Line {
    server: usize,
    weight: u32,
    name: Option<&'static str>,
}

fn equal_lines(n: usize) -> Vec<Line> {
    (0..n)
        .map(|server| Line {
            server,
            weight: 1,
            name: None,
        })
        .collect()
}

/// One pool and the keys written through it.
struct Case<'a> {
    label: String,
    hash: HashFn,
    dist: Distribution,
    tag: Option<[u8; 2]>,
    lines: Vec<Line>,
    keys: &'a [Vec<u8>],
    /// More pool directives (`auto_eject_hosts`, ...).
    extra: Vec<(String, String)>,
}

impl<'a> Case<'a> {
    fn new(
        label: &str,
        hash: HashFn,
        dist: Distribution,
        lines: Vec<Line>,
        keys: &'a [Vec<u8>],
    ) -> Self {
        Case {
            label: label.to_string(),
            hash,
            dist,
            tag: None,
            lines,
            keys,
            extra: Vec::new(),
        }
    }

    fn pool(&self, set: &StandaloneSet) -> NutPool {
        NutPool {
            hash: Some(self.hash.name().to_string()),
            distribution: Some(self.dist.name().to_string()),
            hash_tag: self.tag.map(|t| String::from_utf8_lossy(&t).into_owned()),
            servers: self
                .lines
                .iter()
                .map(|l| {
                    let base = format!("127.0.0.1:{}:{}", set.port(l.server), l.weight);
                    match l.name {
                        Some(name) => format!("{base} {name}"),
                        None => base,
                    }
                })
                .collect(),
            extra: self.extra.clone(),
        }
    }
}

/// hashkit's view of a pool: the ring over the sorted servers, and which
/// server of the set each sorted position is.
struct Model {
    ring: Ring,
    set_index: Vec<usize>,
    names: Vec<String>,
}

impl Model {
    /// `live[i]` is line `i`'s liveness.
    fn new(set: &StandaloneSet, case: &Case, live: &[bool]) -> Model {
        let names: Vec<String> = case
            .lines
            .iter()
            .map(|l| server_name("127.0.0.1", set.port(l.server), l.name))
            .collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let order = sorted_order(&refs);
        let servers: Vec<(&str, u32)> = order
            .iter()
            .map(|&i| (refs[i], case.lines[i].weight))
            .collect();
        let live: Vec<bool> = order.iter().map(|&i| live[i]).collect();
        Model {
            ring: Ring::build(case.dist, &servers, &live),
            set_index: order.iter().map(|&i| case.lines[i].server).collect(),
            names: order.iter().map(|&i| names[i].clone()).collect(),
        }
    }

    /// The set index of the server hashkit picks for `key`.
    fn server_of(&self, case: &Case, key: &[u8]) -> Option<usize> {
        let pos = self.ring.locate(case.hash, case.tag, key, 0)?;
        Some(self.set_index[pos])
    }
}

/// SETs every key to itself through `conn`, pipelined; the first reply
/// that is not +OK is the error.
fn write_keys(conn: &mut Conn, keys: &[Vec<u8>]) -> Result<(), String> {
    for chunk in keys.chunks(BATCH) {
        let cmds: Vec<Vec<Vec<u8>>> = chunk
            .iter()
            .map(|k| vec![b"SET".to_vec(), k.clone(), k.clone()])
            .collect();
        let replies = conn
            .try_pipeline(&cmds)
            .map_err(|e| format!("pipeline: {e}"))?;
        for (k, r) in chunk.iter().zip(&replies) {
            if !matches!(r, Reply::Simple(s) if s == "OK") {
                return Err(format!(
                    "SET {:?} answered {r:?}",
                    k.escape_ascii().to_string()
                ));
            }
        }
    }
    Ok(())
}

/// Where each key is: read from every running server of the case.
fn placement(set: &StandaloneSet, case: &Case) -> HashMap<Vec<u8>, usize> {
    let mut at: HashMap<Vec<u8>, usize> = HashMap::new();
    let servers: HashSet<usize> = case.lines.iter().map(|l| l.server).collect();
    for &s in &servers {
        if !set.servers[s].is_running() {
            continue;
        }
        for key in set.servers[s].keys() {
            if let Some(other) = at.insert(key.clone(), s) {
                panic!(
                    "{}: key {:?} is on servers {other} and {s}",
                    case.label,
                    key.escape_ascii().to_string()
                );
            }
        }
    }
    at
}

/// Asserts that every key of the case is where the model puts it;
/// returns how many keys were compared.
fn compare(set: &StandaloneSet, case: &Case, model: &Model) -> usize {
    let at = placement(set, case);
    let mut wrong = Vec::new();
    for key in case.keys {
        let theirs = at.get(key).copied();
        let ours = model.server_of(case, key);
        if theirs != ours {
            wrong.push((key, theirs, ours));
        }
    }
    if !wrong.is_empty() {
        let name_of = |s: Option<usize>| match s {
            Some(s) => {
                let pos = model.set_index.iter().position(|&x| x == s).unwrap_or(0);
                format!("{} (server {s})", model.names[pos])
            }
            None => "nowhere".to_string(),
        };
        let mut text = String::new();
        for (key, theirs, ours) in wrong.iter().take(10) {
            let part = tagged(key, case.tag);
            text.push_str(&format!(
                "\n  key {:?}: hashed part {:?} = {:#010x}; nutcracker put it on {}, hashkit says {}",
                key.escape_ascii().to_string(),
                part.escape_ascii().to_string(),
                if part.is_empty() { 0 } else { case.hash.hash(part) },
                name_of(*theirs),
                name_of(*ours),
            ));
        }
        panic!(
            "{}: {} of {} keys placed differently (sorted servers {:?}):{text}",
            case.label,
            wrong.len(),
            case.keys.len(),
            model.names
        );
    }
    assert_eq!(
        at.len(),
        case.keys.len(),
        "{}: stray keys on the servers",
        case.label
    );
    case.keys.len()
}

/// Runs one case on a fresh nutcracker with every server live: flush,
/// write, read back, compare. Returns the keys checked.
fn check(set: &StandaloneSet, case: &Case) -> usize {
    set.flush_all();
    let nut = Nutcracker::start(&case.pool(set).body());
    let mut conn = nut.conn();
    if let Err(e) = write_keys(&mut conn, case.keys) {
        panic!("{}: writing through nutcracker failed: {e}", case.label);
    }
    let model = Model::new(set, case, &vec![true; case.lines.len()]);
    compare(set, case, &model)
}

/// Deduplicated, in first-seen order.
fn unique(keys: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    let mut seen = HashSet::new();
    keys.into_iter()
        .filter(|k| seen.insert(k.clone()))
        .collect()
}

/// About `n` keys: text keys, binary keys over every byte value, keys
/// of bytes 0x80 and up only, and the empty key.
fn mixed_keys(seed: u64, n: usize) -> Vec<Vec<u8>> {
    let mut rng = Rng(seed);
    let mut keys = vec![Vec::new()];
    for i in 0..n / 2 {
        keys.push(format!("key:{i}").into_bytes());
    }
    for _ in 0..n / 4 {
        let len = 1 + rng.below(32) as usize;
        keys.push((0..len).map(|_| rng.below(256) as u8).collect());
    }
    for _ in 0..n / 4 {
        let len = 1 + rng.below(16) as usize;
        keys.push((0..len).map(|_| 0x80 + rng.below(128) as u8).collect());
    }
    unique(keys)
}

/// Keys for hash tag `[open, close]`: tags around text and binary,
/// empty tags, tags never closed, several tags, no tag at all.
fn tag_keys(seed: u64, n: usize, [open, close]: [u8; 2]) -> Vec<Vec<u8>> {
    let mut rng = Rng(seed);
    let mut keys = vec![Vec::new(), vec![open], vec![open, close], vec![close, open]];
    let wrap = |inner: &[u8], before: &[u8], after: &[u8]| {
        let mut k = before.to_vec();
        k.push(open);
        k.extend_from_slice(inner);
        k.push(close);
        k.extend_from_slice(after);
        k
    };
    for i in 0..n {
        let user = format!("user:{}", i % (n / 8).max(1)).into_bytes();
        let field = format!(".f{i}").into_bytes();
        let k = match i % 8 {
            0 => wrap(&user, b"", &field),
            1 => wrap(&user, format!("pre{i}").as_bytes(), b""),
            2 => wrap(b"", b"", &field),
            3 => {
                let mut k = vec![open];
                k.extend_from_slice(&user);
                k.extend_from_slice(&field);
                k
            }
            4 => {
                let mut k = wrap(b"", &field, b"");
                k.extend_from_slice(&wrap(&user, b"", b""));
                k
            }
            5 => {
                let len = 1 + rng.below(8) as usize;
                let inner: Vec<u8> = (0..len).map(|_| 0x80 + rng.below(128) as u8).collect();
                wrap(&inner, b"\xff", &field)
            }
            6 => {
                let mut k = wrap(&user, b"", &field);
                k.extend_from_slice(&wrap(b"other", b"", b""));
                k
            }
            _ => format!("plain:{i}").into_bytes(),
        };
        keys.push(k);
    }
    unique(keys)
}

fn summary(test: &str, cases: usize, keys: usize, started: Instant) {
    println!(
        "placement_nutcracker {test}: {cases} cases, {keys} keys checked, {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn ketama_with_each_of_the_twelve_hashes_places_keys_as_nutcracker_does() {
    let started = Instant::now();
    let set = StandaloneSet::start(5);
    let keys = mixed_keys(0x6b65_7461, 2000);
    let mut checked = 0;
    for hash in HashFn::ALL {
        let label = format!("ketama/{}", hash.name());
        let case = Case::new(&label, hash, Distribution::Ketama, equal_lines(5), &keys);
        checked += check(&set, &case);
    }
    summary("ketama", HashFn::ALL.len(), checked, started);
}

#[test]
fn modula_with_each_of_the_twelve_hashes_and_weights_places_keys_as_nutcracker_does() {
    let started = Instant::now();
    let set = StandaloneSet::start(4);
    let keys = mixed_keys(0x6d6f_6475, 2000);
    let mut lines = equal_lines(4);
    for (l, w) in lines.iter_mut().zip([1, 2, 3, 1]) {
        l.weight = w;
    }
    let mut checked = 0;
    for hash in HashFn::ALL {
        let label = format!("modula/{} weights 1,2,3,1", hash.name());
        let case = Case::new(&label, hash, Distribution::Modula, lines.clone(), &keys);
        checked += check(&set, &case);
    }
    summary("modula", HashFn::ALL.len(), checked, started);
}

#[test]
fn weights_and_explicit_names_order_the_ring_as_nutcracker_does() {
    let started = Instant::now();
    let set = StandaloneSet::start(4);
    let keys = mixed_keys(0x6e61_6d65, 2000);
    // By name: "mid" (3 bytes), "zeta" (4), "alpha" (5), then the unnamed
    // "127.0.0.1:<port>"; not the order of the lines or of the ports.
    let named = vec![
        Line {
            server: 0,
            weight: 1,
            name: Some("zeta"),
        },
        Line {
            server: 1,
            weight: 2,
            name: Some("alpha"),
        },
        Line {
            server: 2,
            weight: 3,
            name: None,
        },
        Line {
            server: 3,
            weight: 1,
            name: Some("mid"),
        },
    ];
    let mut weighted = equal_lines(3);
    for (l, w) in weighted.iter_mut().zip([1, 2, 3]) {
        l.weight = w;
    }
    let cases = [
        (
            "ketama/fnv1a_64 named",
            HashFn::Fnv1a_64,
            Distribution::Ketama,
            &named,
        ),
        (
            "ketama/md5 named",
            HashFn::Md5,
            Distribution::Ketama,
            &named,
        ),
        (
            "ketama/murmur named",
            HashFn::Murmur,
            Distribution::Ketama,
            &named,
        ),
        (
            "modula/crc32a named",
            HashFn::Crc32a,
            Distribution::Modula,
            &named,
        ),
        (
            "ketama/fnv1a_64 weights 1,2,3",
            HashFn::Fnv1a_64,
            Distribution::Ketama,
            &weighted,
        ),
        (
            "ketama/hsieh weights 1,2,3",
            HashFn::Hsieh,
            Distribution::Ketama,
            &weighted,
        ),
    ];
    let mut checked = 0;
    for (label, hash, dist, lines) in cases {
        let case = Case::new(label, hash, dist, lines.clone(), &keys);
        checked += check(&set, &case);
    }
    summary("names and weights", cases.len(), checked, started);
}

#[test]
fn twenty_five_servers_get_156_points_each_as_in_nutcracker() {
    // Equal weights over 25 servers give 156 ketama points a server, not
    // 160 (float rounding in ketama_update); with 160 some 2% of the keys
    // would land elsewhere.
    let started = Instant::now();
    let set = StandaloneSet::start(25);
    let keys = mixed_keys(0x3235_7376, 3000);
    let mut checked = 0;
    for hash in [HashFn::Fnv1a_64, HashFn::Md5] {
        let label = format!("ketama/{} 25 servers", hash.name());
        let case = Case::new(&label, hash, Distribution::Ketama, equal_lines(25), &keys);
        checked += check(&set, &case);
    }
    summary("25 servers", 2, checked, started);
}

#[test]
fn hash_tags_binary_keys_and_the_empty_key_land_where_nutcracker_puts_them() {
    let started = Instant::now();
    let set = StandaloneSet::start(5);
    let mut checked = 0;
    let mut cases = 0;
    for (tag, hash, dist) in [
        (*b"{}", HashFn::Fnv1a_64, Distribution::Ketama),
        (*b"{}", HashFn::Hsieh, Distribution::Ketama),
        (*b"{}", HashFn::Crc32, Distribution::Ketama),
        (*b"{}", HashFn::OneAtATime, Distribution::Modula),
        (*b"$$", HashFn::Murmur, Distribution::Ketama),
        (*b"[]", HashFn::Jenkins, Distribution::Ketama),
        (*b"[]", HashFn::Fnv1_32, Distribution::Modula),
    ] {
        let keys = tag_keys(u64::from(u16::from_le_bytes(tag)) + 17, 1500, tag);
        let label = format!(
            "{}/{} hash_tag {}",
            dist.name(),
            hash.name(),
            String::from_utf8_lossy(&tag)
        );
        let mut case = Case::new(&label, hash, dist, equal_lines(5), &keys);
        case.tag = Some(tag);
        checked += check(&set, &case);
        cases += 1;
    }
    // A pool of one server takes every key without hashing.
    let keys = mixed_keys(0x006f_6e65, 300);
    let case = Case::new(
        "ketama/md5 one server",
        HashFn::Md5,
        Distribution::Ketama,
        equal_lines(1),
        &keys,
    );
    checked += check(&set, &case);
    summary("tags, binary and empty keys", cases + 1, checked, started);
}

#[test]
fn server_names_and_their_order_are_the_ones_nutcracker_uses() {
    // Nutcracker's stats list a pool's servers under their names, in the
    // order it indexes them. Nothing listens behind these lines, and
    // nutcracker connects only when a request needs a server.
    let lines: [(&str, u16, Option<&str>, u32); 7] = [
        ("/tmp/mithril-placement-test.sock", 0, None, 1),
        ("127.0.0.1", 11211, None, 1),
        ("127.0.0.1", 6379, None, 3),
        ("127.0.0.1", 12, None, 1),
        ("127.0.0.1", 7000, Some("zeta"), 2),
        ("127.0.0.1", 7001, Some("alpha"), 1),
        ("127.0.0.1", 7002, Some("mid"), 1),
    ];
    let pool = NutPool {
        servers: lines
            .iter()
            .map(|&(host, port, name, weight)| {
                let addr = if host.starts_with('/') {
                    format!("{host}:{weight}")
                } else {
                    format!("{host}:{port}:{weight}")
                };
                match name {
                    Some(n) => format!("{addr} {n}"),
                    None => addr,
                }
            })
            .collect(),
        ..NutPool::default()
    };
    let nut = Nutcracker::start(&pool.body());
    let names: Vec<String> = lines
        .iter()
        .map(|&(host, port, name, _)| server_name(host, port, name))
        .collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let sorted: Vec<&str> = sorted_order(&refs).into_iter().map(|i| refs[i]).collect();
    assert_eq!(
        sorted,
        [
            "mid",
            "zeta",
            "alpha",
            "127.0.0.1",
            "127.0.0.1:12",
            "127.0.0.1:6379",
            "/tmp/mithril-placement-test.sock:",
        ]
    );
    let stats = nut.stats();
    let at: Vec<usize> = sorted
        .iter()
        .map(|n| {
            stats
                .find(&format!("\"{n}\":"))
                .unwrap_or_else(|| panic!("no server {n:?} in nutcracker's stats: {stats}"))
        })
        .collect();
    assert!(
        at.windows(2).all(|w| w[0] < w[1]),
        "nutcracker lists its servers in another order: {stats}"
    );
}

/// Sends GET for `probe` through `conn` until nutcracker answers without
/// an error (it answers errors for an unreachable server until it ejects
/// it); reconnects if nutcracker closed the connection.
fn wait_for_ejection(nut: &Nutcracker, conn: &mut Conn, probe: &[u8]) {
    let mut last = String::new();
    let done = poll_until(Duration::from_secs(15), || {
        match conn.try_pipeline(&[vec![b"GET".to_vec(), probe.to_vec()]]) {
            Ok(replies) if replies.iter().all(|r| !r.is_error()) => Some(()),
            Ok(replies) => {
                last = format!("{replies:?}");
                None
            }
            Err(e) => {
                last = format!("{e}");
                *conn = nut.conn();
                None
            }
        }
    });
    if done.is_none() {
        panic!("nutcracker kept failing GET of the dead server's key: {last}");
    }
}

#[test]
fn an_ejected_server_leaves_the_ring_and_comes_back_as_nutcracker_rebuilds_it() {
    let started = Instant::now();
    let mut set = StandaloneSet::start(5);
    let keys = mixed_keys(0x656a_6563, 1000);
    let victim = 2;
    let mut checked = 0;
    for (hash, dist, weights) in [
        (HashFn::Fnv1a_64, Distribution::Ketama, [1, 1, 1, 1, 1]),
        (HashFn::Md5, Distribution::Modula, [1, 2, 1, 3, 1]),
    ] {
        let mut lines = equal_lines(5);
        for (l, w) in lines.iter_mut().zip(weights) {
            l.weight = w;
        }
        let label = format!("{}/{} ejection", dist.name(), hash.name());
        let mut case = Case::new(&label, hash, dist, lines, &keys);
        case.extra = [
            ("auto_eject_hosts", "true"),
            ("server_failure_limit", "1"),
            ("server_retry_timeout", "2000"),
            ("timeout", "2000"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();

        // All live: the whole ring (and nutcracker connected to all).
        set.flush_all();
        let nut = Nutcracker::start(&case.pool(&set).body());
        let mut conn = nut.conn();
        write_keys(&mut conn, &keys).unwrap_or_else(|e| panic!("{label}: {e}"));
        let all_live = vec![true; 5];
        let full = Model::new(&set, &case, &all_live);
        checked += compare(&set, &case, &full);
        let probe = keys
            .iter()
            .find(|k| full.server_of(&case, k) == Some(victim))
            .unwrap_or_else(|| panic!("{label}: no key maps to server {victim}"))
            .clone();

        // The victim dies: once nutcracker has ejected it, keys land on
        // the ring rebuilt without it. The ejection lasts 2 s; a batch
        // that straddles its end meets errors and is written again.
        set.kill(victim);
        let mut without = vec![true; 5];
        without[victim] = false;
        let ejected = Model::new(&set, &case, &without);
        let mut attempts = 0;
        loop {
            attempts += 1;
            wait_for_ejection(&nut, &mut conn, &probe);
            set.flush_all();
            match write_keys(&mut conn, &keys) {
                Ok(()) => break,
                Err(e) if attempts < 10 => {
                    eprintln!("{label}: the ejection ended during the batch ({e}); again");
                    conn = nut.conn();
                }
                Err(e) => panic!("{label}: no batch fit in an ejection window: {e}"),
            }
        }
        checked += compare(&set, &case, &ejected);

        // Back: after the retry timeout nutcracker tries the server again,
        // finds it answering and rebuilds the whole ring.
        set.restart(victim);
        let what = format!("{label}: nutcracker to put the restarted server back");
        wait_until(&what, Duration::from_secs(20), || {
            let mut c = nut.conn();
            let set_ok = matches!(
                c.try_pipeline(&[vec![b"SET".to_vec(), probe.clone(), probe.clone()]]),
                Ok(r) if matches!(r.first(), Some(Reply::Simple(s)) if s == "OK")
            );
            let there = set.conn(victim).cmd_bytes(&[b"EXISTS", &probe]);
            (set_ok && there == Reply::Int(1)).then_some(())
        });
        set.flush_all();
        let mut conn = nut.conn();
        write_keys(&mut conn, &keys).unwrap_or_else(|e| panic!("{label}: {e}"));
        checked += compare(&set, &case, &full);
    }
    summary("ejection", 2, checked, started);
}
