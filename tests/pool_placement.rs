//! A pool of standalone servers placed by mithril exactly as nutcracker
//! (twemproxy 0.5.0) places it, checked with both proxies running side by
//! side on the same redis-servers: keys written through nutcracker are read
//! back through mithril, and keys written through mithril are read back
//! through nutcracker. Covers the twelve hashes under ketama, modula with
//! several of them, weights, explicit names, 25 servers (156 ketama points
//! each), hash tags, binary keys with bytes >= 0x80 and the empty key; then
//! a server killed and brought back under `auto_eject_hosts`, where both
//! proxies must send its keys to the same survivor, and take it back;
//! then a server added to the pool by a reload, and another removed,
//! under clients that keep their connections (1, 2 and 4 threads): new
//! requests placed as nutcracker places them with the new list at once,
//! keys written before found (or not) exactly where nutcracker with the
//! new list finds them, the removed server's connections closed.
//!
//! Needs `nutcracker` (Debian: `apt-get install nutcracker`; `make test`
//! installs it) besides `redis-server`.

mod support;

use std::time::Duration;

use mithril::hashkit::{Distribution, HashFn};
use support::*;

/// One `servers:` line: which server of the set, its weight, its name.
#[derive(Clone)]
struct Line {
    server: usize,
    weight: u32,
    name: Option<&'static str>,
}

fn equal(n: usize) -> Vec<Line> {
    (0..n)
        .map(|server| Line {
            server,
            weight: 1,
            name: None,
        })
        .collect()
}

/// One pool, as both proxies are given it.
struct Pool {
    label: String,
    hash: HashFn,
    dist: Distribution,
    tag: Option<&'static str>,
    lines: Vec<Line>,
    /// (nutcracker key, mithril setting, value) of further settings.
    extra: Vec<(&'static str, &'static str, String)>,
}

impl Pool {
    fn new(label: &str, hash: HashFn, dist: Distribution, lines: Vec<Line>) -> Pool {
        Pool {
            label: label.to_string(),
            hash,
            dist,
            tag: None,
            lines,
            extra: Vec::new(),
        }
    }

    fn server_text(&self, set: &StandaloneSet, l: &Line) -> String {
        let base = format!("127.0.0.1:{}:{}", set.port(l.server), l.weight);
        match l.name {
            Some(name) => format!("{base} {name}"),
            None => base,
        }
    }

    fn nutcracker(&self, set: &StandaloneSet) -> Nutcracker {
        Nutcracker::start(
            &NutPool {
                hash: Some(self.hash.name().to_string()),
                distribution: Some(self.dist.name().to_string()),
                hash_tag: self.tag.map(str::to_string),
                servers: self
                    .lines
                    .iter()
                    .map(|l| self.server_text(set, l))
                    .collect(),
                extra: self
                    .extra
                    .iter()
                    .map(|(k, _, v)| (k.to_string(), v.clone()))
                    .collect(),
            }
            .body(),
        )
    }

    /// mithril with the same pool, written in its own syntax.
    fn mithril(&self, set: &StandaloneSet) -> Mithril {
        self.mithril_with(set, "")
    }

    /// Like `mithril`, with the top-level lines `top` first.
    fn mithril_with(&self, set: &StandaloneSet, top: &str) -> Mithril {
        let port = free_port();
        let mut conf = format!(
            "{top}port {port}\npool p listen 127.0.0.1:{port}\npool p hash {}\npool p distribution {}\n",
            self.hash.name(),
            self.dist.name()
        );
        if let Some(t) = self.tag {
            conf.push_str(&format!("pool p hash-tag \"{t}\"\n"));
        }
        for l in &self.lines {
            conf.push_str(&format!("pool p server {}\n", self.server_text(set, l)));
        }
        for (_, setting, v) in &self.extra {
            conf.push_str(&format!("pool p {setting} {v}\n"));
        }
        Mithril::start(bin(), &[], &conf)
    }
}

/// Keys of every shape placement cares about: text, tagged (with the
/// pool's tag characters and others), binary with bytes >= 0x80, and the
/// empty key.
fn keys(n: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut rng = Rng(seed | 1);
    let mut out: Vec<Vec<u8>> = vec![Vec::new(), b"{}".to_vec(), b"{".to_vec(), b"}{".to_vec()];
    for i in 0..n {
        let k = match i % 6 {
            0 => format!("user:{i}").into_bytes(),
            1 => format!("{{tag{}}}:{i}", i % 17).into_bytes(),
            2 => format!("[t{}]x{i}", i % 5).into_bytes(),
            3 => (0..1 + rng.below(12))
                .map(|_| rng.below(256) as u8)
                .collect(),
            4 => (0..1 + rng.below(8))
                .map(|_| 0x80 + rng.below(128) as u8)
                .collect(),
            _ => format!("$h{}$:{i}", i % 7).into_bytes(),
        };
        if !out.contains(&k) {
            out.push(k);
        }
    }
    out
}

/// SETs each key to `prefix` + key through `conn`, pipelined; panics on a
/// reply other than +OK.
fn write(conn: &mut Conn, keys: &[Vec<u8>], prefix: &[u8], who: &str) {
    for chunk in keys.chunks(500) {
        let cmds: Vec<Vec<Vec<u8>>> = chunk
            .iter()
            .map(|k| vec![b"SET".to_vec(), k.clone(), [prefix, k].concat()])
            .collect();
        for (k, r) in chunk.iter().zip(conn.pipeline(&cmds)) {
            assert!(
                matches!(&r, Reply::Simple(s) if s == "OK"),
                "{who}: SET {:?} answered {r:?}",
                k.escape_ascii().to_string()
            );
        }
    }
}

/// GETs every key through `conn`: how many did not answer `prefix` + key
/// (the first few described).
fn misplaced(conn: &mut Conn, keys: &[Vec<u8>], prefix: &[u8]) -> (usize, Vec<String>) {
    let mut wrong = 0;
    let mut shown = Vec::new();
    for chunk in keys.chunks(500) {
        let cmds: Vec<Vec<Vec<u8>>> = chunk
            .iter()
            .map(|k| vec![b"GET".to_vec(), k.clone()])
            .collect();
        for (k, r) in chunk.iter().zip(conn.pipeline(&cmds)) {
            let want = [prefix, k].concat();
            if r.as_bulk() != Some(&want[..]) {
                wrong += 1;
                if shown.len() < 5 {
                    shown.push(format!("{:?} -> {r:?}", k.escape_ascii().to_string()));
                }
            }
        }
    }
    (wrong, shown)
}

/// Both ways round on one pool: nutcracker writes, mithril reads; mithril
/// writes, nutcracker reads. Returns the keys checked.
fn both_ways(set: &StandaloneSet, pool: &Pool, keys: &[Vec<u8>]) -> usize {
    set.flush_all();
    let nut = pool.nutcracker(set);
    let m = pool.mithril(set);
    let (mut n, mut c) = (nut.conn(), m.conn());
    write(&mut n, keys, b"n:", "nutcracker");
    let (wrong, shown) = misplaced(&mut c, keys, b"n:");
    assert_eq!(
        wrong, 0,
        "{}: keys nutcracker wrote that mithril does not find: {shown:?}",
        pool.label
    );
    write(&mut c, keys, b"m:", "mithril");
    let (wrong, shown) = misplaced(&mut n, keys, b"m:");
    assert_eq!(
        wrong, 0,
        "{}: keys mithril wrote that nutcracker does not find: {shown:?}",
        pool.label
    );
    keys.len() * 2
}

#[test]
fn every_hash_under_ketama_and_several_under_modula_place_as_nutcracker_does() {
    let set = StandaloneSet::start(4);
    let keys = keys(1500, 7);
    let mut checked = 0;
    for hash in HashFn::ALL {
        let pool = Pool::new(
            &format!("ketama/{}", hash.name()),
            hash,
            Distribution::Ketama,
            equal(4),
        );
        checked += both_ways(&set, &pool, &keys);
    }
    for hash in [
        HashFn::Fnv1a_64,
        HashFn::Md5,
        HashFn::Crc32a,
        HashFn::Murmur,
        HashFn::OneAtATime,
        HashFn::Hsieh,
    ] {
        let mut lines = equal(4);
        lines[1].weight = 2;
        lines[3].weight = 3;
        let pool = Pool::new(
            &format!("modula/{}", hash.name()),
            hash,
            Distribution::Modula,
            lines,
        );
        checked += both_ways(&set, &pool, &keys);
    }
    println!("placement: {checked} reads agreed across 18 pools");
}

#[test]
fn weights_names_and_hash_tags_place_as_nutcracker_does() {
    let set = StandaloneSet::start(4);
    let keys = keys(1500, 11);
    let named = vec![
        Line {
            server: 0,
            weight: 1,
            name: Some("zeta"),
        },
        Line {
            server: 1,
            weight: 3,
            name: Some("alpha"),
        },
        Line {
            server: 2,
            weight: 2,
            name: Some("mid"),
        },
        Line {
            server: 3,
            weight: 1,
            name: None,
        },
    ];
    let mut checked = 0;
    for dist in [Distribution::Ketama, Distribution::Modula] {
        let pool = Pool::new(
            &format!("named/{}", dist.name()),
            HashFn::Fnv1a_64,
            dist,
            named.clone(),
        );
        checked += both_ways(&set, &pool, &keys);
    }
    for tag in ["{}", "$$", "[]"] {
        let mut pool = Pool::new(
            &format!("tag {tag}"),
            HashFn::Murmur,
            Distribution::Ketama,
            equal(4),
        );
        pool.tag = Some(tag);
        checked += both_ways(&set, &pool, &keys);
    }
    println!("placement: {checked} reads agreed (names, weights, tags)");
}

#[test]
fn a_pool_of_25_servers_places_as_nutcracker_does() {
    // 25 equal servers get 156 ketama points each, not 160.
    let set = StandaloneSet::start(25);
    let keys = keys(2500, 13);
    let mut checked = 0;
    for hash in [HashFn::Fnv1a_64, HashFn::Md5] {
        let pool = Pool::new(
            &format!("25 servers/{}", hash.name()),
            hash,
            Distribution::Ketama,
            equal(25),
        );
        checked += both_ways(&set, &pool, &keys);
    }
    println!("placement: {checked} reads agreed over 25 servers");
}

/// Which server of the set holds `key` (read directly).
fn holder(set: &StandaloneSet, servers: usize, key: &[u8]) -> Option<usize> {
    (0..servers).find(|&i| {
        set.servers[i].is_running() && set.conn(i).cmd_bytes(&[b"EXISTS", key]).as_int().eq(&1)
    })
}

#[test]
fn an_ejected_server_sends_its_keys_where_nutcracker_sends_them_and_comes_back() {
    let mut set = StandaloneSet::start(3);
    let mut pool = Pool::new("eject", HashFn::Fnv1a_64, Distribution::Ketama, equal(3));
    pool.extra = vec![
        ("auto_eject_hosts", "auto-eject-hosts", "true".to_string()),
        (
            "server_retry_timeout",
            "server-retry-timeout",
            "2000".to_string(),
        ),
        (
            "server_failure_limit",
            "server-failure-limit",
            "1".to_string(),
        ),
    ];
    let nut = pool.nutcracker(&set);
    let m = pool.mithril(&set);
    let (mut n, mut c) = (nut.conn(), m.conn());
    let keys: Vec<Vec<u8>> = (0..300).map(|i| format!("k{i}").into_bytes()).collect();
    write(&mut c, &keys, b"a:", "mithril");
    // The victim is the server holding most of the keys: with
    // fnv1a_64 (twemproxy's, which keeps 32 bits) and short keys alike,
    // the ring can leave one of three servers none of these 300 keys for
    // about one port choice in seven.
    let held: Vec<Option<usize>> = keys.iter().map(|k| holder(&set, 3, k)).collect();
    let v = (0..3)
        .max_by_key(|&i| held.iter().filter(|h| **h == Some(i)).count())
        .unwrap();
    let victims: Vec<Vec<u8>> = keys
        .iter()
        .zip(&held)
        .filter(|(_, h)| **h == Some(v))
        .map(|(k, _)| k.clone())
        .collect();
    assert!(!victims.is_empty(), "server {v} holds some keys");
    set.kill(v);
    // mithril notices by itself (its own health check), without a client
    // request failing first.
    wait_until(
        "mithril to eject the dead server",
        Duration::from_secs(10),
        || {
            let log = m.log();
            let at = log.find("ejected")?;
            log[at..].contains("2 nodes healthy").then_some(())
        },
    );
    // nutcracker ejects on its first failed request.
    let _ = n.cmd_bytes(&[b"GET", &victims[0]]);
    let _ = n.cmd_bytes(&[b"GET", &victims[0]]);
    for k in &victims {
        let r = c.cmd_bytes(&[b"SET", k, b"via-m"]);
        assert!(matches!(&r, Reply::Simple(s) if s == "OK"), "{r:?}");
        let there = holder(&set, 3, k);
        let r = n.cmd_bytes(&[b"GET", k]);
        assert_eq!(
            r.as_bulk(),
            Some(&b"via-m"[..]),
            "{:?}: mithril put it on server {there:?}, nutcracker reads {r:?}",
            String::from_utf8_lossy(k)
        );
    }
    // Back after the retry time, in both rings.
    set.restart(v);
    // (The survivors keep the copies written meanwhile: the victim's own
    // value is what tells.)
    let on_v = |k: &[u8], val: &[u8]| set.conn(v).cmd_bytes(&[b"GET", k]).as_bulk() == Some(val);
    wait_until(
        "mithril to take the victim back",
        Duration::from_secs(15),
        || {
            let r = c.cmd_bytes(&[b"SET", &victims[0], b"home"]);
            (!r.is_error() && on_v(&victims[0], b"home")).then_some(())
        },
    );
    wait_until(
        "nutcracker to take the victim back",
        Duration::from_secs(15),
        || (n.cmd_bytes(&[b"GET", &victims[0]]).as_bulk() == Some(&b"home"[..])).then_some(()),
    );
    for k in &victims {
        let r = c.cmd_bytes(&[b"SET", k, b"again"]);
        assert!(!r.is_error(), "{r:?}");
        assert!(on_v(k, b"again"), "{}", String::from_utf8_lossy(k));
    }
}

/// Each client writes its share of `keys` as `prefix` + key, on its own
/// connection (the clients are spread over the workers).
fn write_spread(clients: &mut [Conn], keys: &[Vec<u8>], prefix: &[u8], who: &str) {
    let share = keys.len().div_ceil(clients.len());
    for (c, chunk) in clients.iter_mut().zip(keys.chunks(share)) {
        write(c, chunk, prefix, who);
    }
}

/// The configuration reloaded with the pool's servers now `lines`, once
/// the new ring is in force.
fn reload_servers(
    m: &Mithril,
    set: &StandaloneSet,
    pool: &mut Pool,
    lines: Vec<Line>,
    c: &mut Conn,
) {
    pool.lines = lines;
    let servers: Vec<String> = pool
        .lines
        .iter()
        .map(|l| format!("pool p server {}", pool.server_text(set, l)))
        .collect();
    m.reload_lines(c, "pool p server ", &servers, "servers now");
}

/// A ring pool's servers changed by a reload: a server added, then
/// another removed, while clients on every worker keep their connections.
fn servers_change_live(threads: usize) {
    let set = StandaloneSet::start(3);
    let mut pool = Pool::new("reload", HashFn::Md5, Distribution::Ketama, equal(2));
    let m = pool.mithril_with(&set, &format!("threads {threads}\n"));
    let mut clients: Vec<Conn> = (0..2 * threads).map(|_| m.conn()).collect();
    let named =
        |p: &str| -> Vec<Vec<u8>> { (0..400).map(|i| format!("{p}{i}").into_bytes()).collect() };
    let (before, after, last) = (named("a"), named("b"), named("c"));
    write_spread(&mut clients, &before, b"1:", "before");
    // And one that keeps sending across both reloads: never an error.
    let steady = load::Steady::start(m.conn());

    // Server 2 added.
    reload_servers(&m, &set, &mut pool, equal(3), &mut clients[0]);
    write_spread(&mut clients, &after, b"2:", "after the add");
    let nut = pool.nutcracker(&set);
    let mut n = nut.conn();
    let (wrong, shown) = misplaced(&mut n, &after, b"2:");
    assert_eq!(wrong, 0, "threads {threads}: written after the add, not where nutcracker with 3 servers reads: {shown:?}");
    // Written before: each found through mithril exactly when nutcracker
    // with the new list finds it (the keys the new server took are not).
    let (moved, _) = misplaced(&mut n, &before, b"1:");
    assert!(
        moved > 0 && moved < before.len(),
        "threads {threads}: {moved} keys moved"
    );
    for c in &mut clients {
        let (wrong, _) = misplaced(c, &before, b"1:");
        assert_eq!(
            wrong, moved,
            "threads {threads}: mithril and nutcracker differ on the old keys"
        );
    }
    drop(n);
    drop(nut);

    // Server 0 removed: its connections are closed, and the ring is
    // nutcracker's for servers 1 and 2.
    let lines = equal(3).into_iter().skip(1).collect();
    reload_servers(&m, &set, &mut pool, lines, &mut clients[0]);
    write_spread(&mut clients, &last, b"3:", "after the removal");
    let nut = pool.nutcracker(&set);
    let (wrong, shown) = misplaced(&mut nut.conn(), &last, b"3:");
    assert_eq!(wrong, 0, "threads {threads}: after the removal: {shown:?}");
    set.wait_no_clients(0, "mithril's connections to the server 0 closed");
    load::all_kept(&mut clients, steady);
}

#[test]
fn servers_change_live_threads_1() {
    servers_change_live(1);
}

#[test]
fn servers_change_live_threads_2() {
    servers_change_live(2);
}

#[test]
fn servers_change_live_threads_4() {
    servers_change_live(4);
}
