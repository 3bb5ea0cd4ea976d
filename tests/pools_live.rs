//! Issue 29: pools added, removed and renamed by a reload, while clients
//! of the other pools keep their connections (at 1, 2 and 4 threads).
//!
//! - A pool added: its listener opens once its map is in force; keys
//!   written through it land where nutcracker with the same pool (hash,
//!   servers, `redis_db`) reads them, from connections on every worker.
//! - A pool removed: its listener closes, its idle clients are closed,
//!   and once `shutdown-timeout` passed mithril's connections to its
//!   servers are closed too; a steady client of another pool never sees
//!   an error.
//! - A pool renamed at the same address with another hash: the listener
//!   is handed over (never refused), the old pool's clients drain, new
//!   connections are placed by the new pool's hash (nutcracker's again).
//! - A pool's hash changed in place: pending restart, nothing moves.
//!
//! Needs `nutcracker` besides `redis-server` (`make test` installs it).

mod support;

use std::time::Duration;
use support::*;

/// `pool NAME` lines: a ketama ring of `servers` of `set` with `hash`, on
/// `port`, using database `db`.
fn pool_lines(
    name: &str,
    port: u16,
    hash: &str,
    db: u32,
    set: &StandaloneSet,
    servers: &[usize],
) -> Vec<String> {
    let mut out = vec![
        format!("pool {name} listen 127.0.0.1:{port}"),
        format!("pool {name} hash {hash}"),
        format!("pool {name} distribution ketama"),
        format!("pool {name} db {db}"),
    ];
    for &s in servers {
        out.push(format!("pool {name} server 127.0.0.1:{}:1", set.port(s)));
    }
    out
}

/// nutcracker with the same ring: the oracle of where keys go.
fn nutcracker(hash: &str, db: u32, set: &StandaloneSet, servers: &[usize]) -> Nutcracker {
    Nutcracker::start(
        &NutPool {
            hash: Some(hash.to_string()),
            distribution: Some("ketama".to_string()),
            hash_tag: None,
            servers: servers
                .iter()
                .map(|&s| format!("127.0.0.1:{}:1", set.port(s)))
                .collect(),
            extra: vec![("redis_db".to_string(), db.to_string())],
        }
        .body(),
    )
}

/// SET `prefix:key` for 300 keys, spread over `clients`.
fn write(clients: &mut [Conn], prefix: &str) -> Vec<String> {
    let keys: Vec<String> = (0..300).map(|i| format!("{prefix}:{i}")).collect();
    let share = keys.len().div_ceil(clients.len());
    for (c, chunk) in clients.iter_mut().zip(keys.chunks(share)) {
        let cmds: Vec<Vec<Vec<u8>>> = chunk.iter().map(|k| argv(&["SET", k, k])).collect();
        for (k, r) in chunk.iter().zip(c.pipeline(&cmds)) {
            assert_eq!(r, ok(), "SET {k}");
        }
    }
    keys
}

/// Every key read back through `c` with its own name as value.
fn all_found(c: &mut Conn, keys: &[String], who: &str) {
    let cmds: Vec<Vec<Vec<u8>>> = keys.iter().map(|k| argv(&["GET", k])).collect();
    let wrong: Vec<&String> = keys
        .iter()
        .zip(c.pipeline(&cmds))
        .filter(|(k, r)| r.as_bulk() != Some(k.as_bytes()))
        .map(|(k, _)| k)
        .collect();
    assert!(
        wrong.is_empty(),
        "{who}: {} keys not found, first {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(5)]
    );
}

/// The file's `pool` lines replaced by `lines`, reloaded through `c`;
/// waits for the log's `marker` (then a map published after it), and
/// asks a new connection to `port` whether anything is pending (`c` may
/// be a client of a pool the reload removes).
fn reload(m: &Mithril, c: &mut Conn, lines: &[String], marker: &str, port: u16) {
    let text = std::fs::read_to_string(&m.conf_path).expect("read the config");
    let kept = text.lines().filter(|l| !l.starts_with("pool "));
    let next: Vec<String> = kept
        .map(str::to_string)
        .chain(lines.iter().cloned())
        .collect();
    let tmp = m.dir.join("next.conf");
    std::fs::write(&tmp, next.join("\n") + "\n").expect("write the config");
    std::fs::rename(&tmp, &m.conf_path).expect("rename the config");
    let seen = m.log().matches(marker).count();
    assert_eq!(c.cmd(&["CONFIG", "RELOAD"]), ok());
    wait_until("the change published", Duration::from_secs(10), || {
        let log = m.log();
        let (at, _) = log.match_indices(marker).nth(seen)?;
        log[at..].contains("topology epoch").then_some(())
    });
    let mut fresh = Conn::connect(&format!("127.0.0.1:{port}"));
    assert_eq!(
        info_text_field(&mut fresh, "server", "config_pending_restart"),
        ""
    );
}

/// Clients of the pool on `port` (two per worker) write keys named
/// after `pool`; nutcracker with the pool's ring (`hash` over servers 2
/// and 3, database 2) reads every one back.
fn served_as_nutcracker(
    threads: usize,
    port: u16,
    pool: &str,
    hash: &str,
    set: &StandaloneSet,
) -> (Vec<Conn>, Vec<String>) {
    let mut clients: Vec<Conn> = (0..2 * threads)
        .map(|_| Conn::connect(&format!("127.0.0.1:{port}")))
        .collect();
    let keys = write(&mut clients, pool);
    let nut = nutcracker(hash, 2, set, &[2, 3]);
    let who = format!("threads {threads}: pool {pool}'s keys read by nutcracker");
    all_found(&mut nut.conn(), &keys, &who);
    (clients, keys)
}

fn refused(port: u16) -> bool {
    std::net::TcpStream::connect(("127.0.0.1", port)).is_err()
}

fn pools_change_live(threads: usize) {
    let set = StandaloneSet::start(4);
    let (a_port, b_port) = (free_port(), free_port());
    let a = pool_lines("a", a_port, "md5", 0, &set, &[0, 1]);
    let conf = format!(
        "threads {threads}\nport {a_port}\nshutdown-timeout 1\n{}\n",
        a.join("\n")
    );
    let m = Mithril::start(bin(), &[], &conf);
    let mut a_clients: Vec<Conn> = (0..2 * threads).map(|_| m.conn()).collect();
    let a_keys = write(&mut a_clients, "a");

    // Pool b added: its own servers, hash and database.
    let b = pool_lines("b", b_port, "fnv1a_64", 2, &set, &[2, 3]);
    let both: Vec<String> = a.iter().chain(&b).cloned().collect();
    reload(
        &m,
        &mut a_clients[0],
        &both,
        "pool b: added by a reload",
        a_port,
    );
    let (mut b_clients, b_keys) = served_as_nutcracker(threads, b_port, "b", "fnv1a_64", &set);
    for s in [0, 1] {
        let mut direct = set.conn(s);
        direct.cmd(&["SELECT", "2"]);
        assert_eq!(
            direct.cmd(&["DBSIZE"]),
            Reply::Int(0),
            "threads {threads}: pool b wrote on server {s}"
        );
    }
    // The other pool did not notice.
    all_found(
        &mut a_clients[0],
        &a_keys,
        &format!("threads {threads}: pool a after the add"),
    );

    // Pool a removed, under a steady client of pool b.
    let steady = load::Steady::start(Conn::connect(&format!("127.0.0.1:{b_port}")));
    reload(
        &m,
        &mut b_clients[0],
        &b,
        "pool a: removed by a reload",
        b_port,
    );
    wait_until("pool a's listener closed", Duration::from_secs(10), || {
        refused(a_port).then_some(())
    });
    for c in &mut a_clients {
        assert!(
            c.try_read_reply(Duration::from_secs(5)).is_err(),
            "threads {threads}: a client of the removed pool is closed"
        );
    }
    set.wait_no_clients(0, "mithril's connections to pool a's server 0 closed");
    set.wait_no_clients(1, "mithril's connections to pool a's server 1 closed");
    all_found(
        &mut b_clients[0],
        &b_keys,
        &format!("threads {threads}: pool b after the removal"),
    );
    assert!(
        steady.stop() > 0,
        "threads {threads}: the steady client sent nothing"
    );

    // Pool b renamed c on the same address, with another hash: the
    // address keeps accepting, b's clients drain, c places by murmur.
    let c_lines = pool_lines("c", b_port, "murmur", 2, &set, &[2, 3]);
    reload(
        &m,
        &mut b_clients[0],
        &c_lines,
        "pool c: added by a reload",
        b_port,
    );
    assert!(
        !refused(b_port),
        "threads {threads}: the renamed pool's address kept accepting"
    );
    let (mut c_clients, c_keys) = served_as_nutcracker(threads, b_port, "c", "murmur", &set);
    for c in &mut b_clients {
        assert!(
            c.try_read_reply(Duration::from_secs(5)).is_err(),
            "threads {threads}: a client of the renamed pool is closed"
        );
    }

    // Pool c's hash changed in place: pending, nothing moves.
    let pending = pool_lines("c", b_port, "crc32a", 2, &set, &[2, 3]);
    let text = std::fs::read_to_string(&m.conf_path).unwrap();
    let kept: Vec<&str> = text.lines().filter(|l| !l.starts_with("pool ")).collect();
    let next = kept
        .iter()
        .map(|s| s.to_string())
        .chain(pending)
        .collect::<Vec<_>>()
        .join("\n")
        + "\n";
    std::fs::write(&m.conf_path, next).unwrap();
    let mut c0 = c_clients.remove(0);
    assert_eq!(c0.cmd(&["CONFIG", "RELOAD"]), ok());
    assert_eq!(
        info_text_field(&mut c0, "server", "config_pending_restart"),
        "pool"
    );
    all_found(
        &mut c0,
        &c_keys,
        &format!("threads {threads}: pool c after a pending change"),
    );
}

#[test]
fn pools_change_live_threads_1() {
    pools_change_live(1);
}

#[test]
fn pools_change_live_threads_2() {
    pools_change_live(2);
}

#[test]
fn pools_change_live_threads_4() {
    pools_change_live(4);
}

/// `preconnect yes` (twemproxy's `preconnect: true`): with no client yet,
/// every worker holds `server-connections` connections to each server of
/// the pool; a pool without it holds none; a preconnect pool added by a
/// reload is connected to as soon as its map is in force.
fn preconnect_connects_every_worker(threads: usize) {
    let set = StandaloneSet::start(3);
    let (a_port, b_port, c_port) = (free_port(), free_port(), free_port());
    let mut a = pool_lines("a", a_port, "md5", 0, &set, &[0, 1]);
    a.push("pool a preconnect yes".into());
    a.push("pool a server-connections 2".into());
    let b = pool_lines("b", b_port, "md5", 0, &set, &[2]);
    let conf = format!(
        "threads {threads}\nport {a_port}\n{}\n{}\n",
        a.join("\n"),
        b.join("\n")
    );
    let m = Mithril::start(bin(), &[], &conf);
    // The asking connection counts itself.
    let clients = |s: usize| {
        info_text_field(&mut set.conn(s), "clients", "connected_clients")
            .parse::<usize>()
            .unwrap_or(0)
            - 1
    };
    let want = threads * 2;
    for s in [0, 1] {
        wait_until(
            &format!("threads {threads}: {want} connections to server {s}"),
            Duration::from_secs(10),
            || (clients(s) == want).then_some(()),
        );
    }
    assert_eq!(clients(2), 0, "threads {threads}: pool b has no preconnect");

    let mut c_lines = pool_lines("c", c_port, "md5", 0, &set, &[2]);
    c_lines.push("pool c preconnect yes".into());
    let all: Vec<String> = a.iter().chain(&b).chain(&c_lines).cloned().collect();
    reload(&m, &mut m.conn(), &all, "pool c: added by a reload", a_port);
    wait_until(
        &format!("threads {threads}: pool c's server connected by every worker"),
        Duration::from_secs(10),
        || (clients(2) == threads).then_some(()),
    );
}

#[test]
fn preconnect_connects_every_worker_threads_1() {
    preconnect_connects_every_worker(1);
}

#[test]
fn preconnect_connects_every_worker_threads_2() {
    preconnect_connects_every_worker(2);
}

#[test]
fn preconnect_connects_every_worker_threads_4() {
    preconnect_connects_every_worker(4);
}
