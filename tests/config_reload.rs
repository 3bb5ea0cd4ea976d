//! Configuration reload (issue 29, item 4): the file mithril was started
//! with read again on SIGHUP and on CONFIG RELOAD, against a real cluster.
//! - the live directives (CONFIG SET's) take the file's new values, and an
//!   unchanged file (logrotate's SIGHUP) changes nothing;
//! - the users are replaced by the file's: a new user and a new
//!   `requirepass` work at once, a removed user's sessions are closed as
//!   after ACL DELUSER on every worker (1, 2 and 4 threads), ACL SETUSER's
//!   users are gone, every other client keeps its connection;
//! - a file that does not parse changes nothing and is reported with its
//!   file and line, in the reply and in the log;
//! - `threads` and `port` changed in the file are named as pending restart
//!   (INFO and log) and not applied, while the rest of the file is;
//! - reloads by SIGHUP and CONFIG RELOAD at once, under traffic, drop no
//!   request and no connection;
//! - a daemon started with relative paths and flags, and a proxy started
//!   from a nutcracker.yml, read their file again as at start (nothing
//!   pending for an unchanged file).

mod support;

use std::fs;
use std::time::Duration;
use support::*;

const WAIT: Duration = Duration::from_secs(10);

/// A connection to `m` logged in as `user`.
fn login(m: &Mithril, user: &str, pass: &str) -> Conn {
    let mut c = m.conn();
    assert_eq!(c.cmd(&["AUTH", user, pass]), ok(), "AUTH {user}");
    c
}

/// The value CONFIG GET shows for `name`.
fn config_get(c: &mut Conn, name: &str) -> String {
    let r = c.cmd(&["CONFIG", "GET", name]);
    let items = r.as_array();
    assert_eq!(items.len(), 2, "CONFIG GET {name}: {r:?}");
    items[1].as_str().to_string()
}

/// The configuration file with `lines` appended (a later line wins).
fn append_conf(m: &Mithril, lines: &str) -> String {
    let before = fs::read_to_string(&m.conf_path).expect("read the config");
    let after = format!("{before}{lines}");
    fs::write(&m.conf_path, &after).expect("write the config");
    before
}

/// Waits until INFO counts `n` reloads done.
fn wait_reloads(c: &mut Conn, n: u64) {
    wait_until("the reload", WAIT, || {
        let done: u64 = info_text_field(c, "server", "config_reloads")
            .parse()
            .ok()?;
        (done >= n).then_some(())
    });
}

#[test]
fn sighup_applies_the_live_directives_and_an_unchanged_file_changes_nothing() {
    let (_cluster, mut m) = cluster_and_mithril("");
    let mut c = m.conn();
    let mut idle = m.conn();
    assert_eq!(config_get(&mut c, "maxclients"), "10000");
    append_conf(
        &m,
        "maxclients 321\ntimeout 77\nslowlog-log-slower-than 5000\nslowlog-max-len 33\n\
         tracking-table-max-keys 999\n",
    );
    m.signal(libc::SIGHUP);
    wait_until("maxclients from the file", WAIT, || {
        (config_get(&mut c, "maxclients") == "321").then_some(())
    });
    assert_eq!(config_get(&mut c, "timeout"), "77");
    assert_eq!(config_get(&mut c, "slowlog-log-slower-than"), "5000");
    assert_eq!(config_get(&mut c, "slowlog-max-len"), "33");
    assert_eq!(config_get(&mut c, "tracking-table-max-keys"), "999");
    assert_eq!(info_text_field(&mut c, "clients", "maxclients"), "321");
    assert_eq!(
        info_text_field(&mut c, "server", "config_pending_restart"),
        ""
    );
    // The log file was reopened first, as before.
    assert!(m.log().contains("log file reopened"), "{}", m.log());
    assert!(m
        .log()
        .contains("SIGHUP: configuration reloaded, applied: maxclients"));
    // No client was dropped.
    assert_eq!(idle.cmd(&["PING"]), Reply::Simple("PONG".into()));

    // A CONFIG SET survives a SIGHUP that re-reads an unchanged file
    // (logrotate's): only what the file changed is applied.
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxclients", "500"]), ok());
    m.signal(libc::SIGHUP);
    wait_reloads(&mut c, 2);
    assert_eq!(config_get(&mut c, "maxclients"), "500");
    assert_eq!(config_get(&mut c, "timeout"), "77");
    assert!(m
        .log()
        .contains("SIGHUP: configuration reloaded, nothing to change"));
    assert_eq!(idle.cmd(&["PING"]), Reply::Simple("PONG".into()));
}

const USERS: &str = "\
user admin on >adminpw mode admin allchannels
user bob on >bobpw mode write
user carol on >carolpw mode write
";

const USERS_AFTER: &str = "\
user admin on >adminpw mode admin allchannels
user carol on >carolpw2 mode write
user dave on >davepw mode read
requirepass newdefault
";

#[test]
fn config_reload_replaces_the_users_on_every_worker() {
    let cluster = RedisCluster::start(ClusterSpec::default());
    for threads in [1, 2, 4] {
        let m = Mithril::start(
            bin(),
            &cluster.seeds(),
            &format!("threads {threads}\n{USERS}"),
        );
        users_replaced(&m, threads);
    }
}

fn users_replaced(m: &Mithril, threads: usize) {
    let n = 2 * threads;
    let mut admin = login(m, "admin", "adminpw");
    // Spread over the workers: the removed user's sessions, the changed
    // user's, and clients of the open default user.
    let mut bobs: Vec<Conn> = (0..n).map(|_| login(m, "bob", "bobpw")).collect();
    let mut carols: Vec<Conn> = (0..n).map(|_| login(m, "carol", "carolpw")).collect();
    let mut others: Vec<Conn> = (0..n).map(|_| m.conn()).collect();
    // Each of them a session before the reload: one still in the accept
    // queue when `requirepass` arrives would start without a login, as a
    // new client to Redis does (the test once raced that under load).
    for c in &mut others {
        assert_eq!(c.cmd(&["PING"]), Reply::Simple("PONG".into()));
    }
    let workers: std::collections::HashSet<String> = bobs.iter_mut().map(worker_of).collect();
    assert_eq!(workers.len(), threads, "bob's sessions on every worker");
    assert_eq!(
        admin.cmd(&["ACL", "SETUSER", "temp", "on", ">temppw", "~*", "+@all"]),
        ok()
    );
    assert_eq!(bobs[0].cmd(&["SET", "reload:k", "1"]), ok());

    // The file: bob gone, carol's password changed, dave new, and a
    // password for default.
    let conf = fs::read_to_string(&m.conf_path).expect("read the config");
    let conf = conf.replace(USERS, USERS_AFTER);
    fs::write(&m.conf_path, conf).expect("write the config");
    assert_eq!(admin.cmd(&["CONFIG", "RELOAD"]), ok());

    // bob's sessions are closed, idle ones included, as after ACL DELUSER.
    for b in &mut bobs {
        assert!(
            b.is_closed(WAIT),
            "bob's session closed ({threads} threads)"
        );
    }
    assert_eq!(
        m.conn().cmd(&["AUTH", "bob", "bobpw"]),
        err("WRONGPASS invalid username-password pair or user is disabled.")
    );
    // The user ACL SETUSER made is gone too (ACL LOAD's rule).
    assert_eq!(
        m.conn().cmd(&["AUTH", "temp", "temppw"]),
        err("WRONGPASS invalid username-password pair or user is disabled.")
    );
    // dave is new; carol has her new password, and her sessions (her
    // rights unchanged) and the default clients go on.
    let mut dave = login(m, "dave", "davepw");
    assert_eq!(dave.cmd(&["GET", "reload:k"]), bulk("1"));
    assert!(dave.cmd(&["SET", "reload:k", "2"]).is_error(), "read mode");
    assert_eq!(
        m.conn().cmd(&["AUTH", "carol", "carolpw"]),
        err("WRONGPASS invalid username-password pair or user is disabled.")
    );
    login(m, "carol", "carolpw2");
    for c in carols.iter_mut().chain(others.iter_mut()) {
        assert_eq!(c.cmd(&["PING"]), Reply::Simple("PONG".into()));
    }
    assert_eq!(admin.cmd(&["PING"]), Reply::Simple("PONG".into()));
    // A new client needs requirepass's password.
    let mut fresh = m.conn();
    assert!(
        fresh.cmd(&["PING"]).as_error().starts_with("NOAUTH"),
        "default needs a password now"
    );
    assert_eq!(fresh.cmd(&["AUTH", "newdefault"]), ok());
    assert_eq!(fresh.cmd(&["PING"]), Reply::Simple("PONG".into()));
    assert_eq!(
        info_text_field(&mut admin, "server", "config_pending_restart"),
        ""
    );
    assert!(m
        .log()
        .contains("CONFIG RELOAD: configuration reloaded, applied: the users"));
}

#[test]
fn a_broken_file_changes_nothing_and_names_its_line() {
    let (_cluster, mut m) = cluster_and_mithril("");
    let mut c = m.conn();
    let first = fs::read_to_string(&m.conf_path).expect("read the config");
    let good = format!("{first}maxclients 55\nuser eve on >evepw\n");
    let line = first.lines().count() + 3;
    let broken = format!("{good}no-such-directive 1\n");
    fs::write(&m.conf_path, &broken).expect("write the config");
    let r = c.cmd(&["CONFIG", "RELOAD"]);
    let text = r.as_error();
    let place = format!("{}:{line}:", m.conf_path.display());
    assert!(
        text.starts_with(&format!("ERR mithril: reload failed: {place}")),
        "{text}"
    );
    assert!(
        text.contains("unknown directive 'no-such-directive'"),
        "{text}"
    );
    // Nothing changed: neither the limit nor the users.
    assert_eq!(config_get(&mut c, "maxclients"), "10000");
    assert_eq!(
        m.conn().cmd(&["AUTH", "eve", "evepw"]),
        err("WRONGPASS invalid username-password pair or user is disabled.")
    );
    assert_eq!(
        info_text_field(&mut c, "server", "config_reload_failures"),
        "1"
    );
    assert_eq!(info_text_field(&mut c, "server", "config_reloads"), "0");
    assert!(m.log().contains(&format!(
        "CONFIG RELOAD: configuration reload failed: {place}"
    )));
    // By SIGHUP: logged with the place, the proxy goes on.
    m.signal(libc::SIGHUP);
    wait_until("the failure counted", WAIT, || {
        (info_text_field(&mut c, "server", "config_reload_failures") == "2").then_some(())
    });
    assert!(m
        .log()
        .contains(&format!("SIGHUP: configuration reload failed: {place}")));
    assert_eq!(config_get(&mut c, "maxclients"), "10000");
    // A value the parser refuses, in an include, names the include's line.
    let inc = m.dir.join("more.conf");
    fs::write(&inc, "timeout 5\nmaxclients lots\n").expect("write the include");
    fs::write(&m.conf_path, format!("{good}include {}\n", inc.display())).expect("write");
    let text = c.cmd(&["CONFIG", "RELOAD"]).as_error().to_string();
    assert!(
        text.starts_with(&format!("ERR mithril: reload failed: {}:2:", inc.display())),
        "{text}"
    );
    assert_eq!(config_get(&mut c, "timeout"), "0");
    // The file fixed: everything in it applies.
    fs::write(&m.conf_path, &good).expect("write the config");
    assert_eq!(c.cmd(&["CONFIG", "RELOAD"]), ok());
    assert_eq!(config_get(&mut c, "maxclients"), "55");
    login(&m, "eve", "evepw");
}

#[test]
fn threads_waits_for_a_restart_while_port_and_the_rest_apply() {
    let (_cluster, m) = cluster_and_mithril("threads 2\n");
    let mut c = m.conn();
    let other_port = free_port();
    let before = append_conf(&m, &format!("threads 3\nport {other_port}\ntimeout 42\n"));
    assert_eq!(c.cmd(&["CONFIG", "RELOAD"]), ok());
    // The port moved live: the new one accepts, the old one refuses, and
    // the client that came through it is drained after its reply.
    let mut c = wait_until("the new port", WAIT, || {
        Conn::try_connect(&format!("127.0.0.1:{other_port}")).ok()
    });
    assert_eq!(
        info_text_field(&mut c, "server", "config_pending_restart"),
        "threads"
    );
    assert!(m.log().contains("pending restart: threads"), "{}", m.log());
    // Not applied: the same workers.
    assert_eq!(info_text_field(&mut c, "server", "threads"), "2");
    assert_eq!(config_get(&mut c, "threads"), "2");
    wait_until("the old port refusing", WAIT, || {
        Conn::try_connect(&m.addr()).is_err().then_some(())
    });
    // The rest is.
    assert_eq!(config_get(&mut c, "timeout"), "42");
    // Put back, nothing is pending any more.
    fs::write(&m.conf_path, before).expect("write the config");
    assert_eq!(c.cmd(&["CONFIG", "RELOAD"]), ok());
    let mut c = wait_until("the first port again", WAIT, || {
        Conn::try_connect(&m.addr()).ok()
    });
    assert_eq!(
        info_text_field(&mut c, "server", "config_pending_restart"),
        ""
    );
    assert_eq!(config_get(&mut c, "timeout"), "0");
}

/// Reloads by SIGHUP and by CONFIG RELOAD at once, over and over, the file
/// switching between two versions (a user added and removed, a limit
/// changed), while clients on every worker keep writing and reading: no
/// error, no connection dropped, and every reload counted.
#[test]
fn reloads_under_traffic_drop_nothing() {
    let (_cluster, mut m) = cluster_and_mithril("threads 2\n");
    let base = fs::read_to_string(&m.conf_path).expect("read the config");
    // A limit, a user and a seed (another node of the same cluster).
    let other = format!(
        "{base}maxclients 777\nuser extra on >extrapw mode write\ncluster-nodes {}\n",
        _cluster.seeds().last().expect("a seed")
    );
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let clients: Vec<_> = (0..4)
        .map(|i| {
            let mut c = m.conn();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let key = format!("load:{i}:{}", n % 50);
                    let v = n.to_string();
                    let replies = c.pipeline(&[argv(&["SET", &key, &v]), argv(&["GET", &key])]);
                    assert_eq!(replies, vec![ok(), bulk(&v)], "client {i}");
                    n += 1;
                }
                n
            })
        })
        .collect();
    let mut admin = m.conn();
    let rounds = 20;
    for round in 0..rounds {
        // Replaced whole, by a rename, as it should be under a running
        // proxy: a reload never sees half a file.
        let text = if round % 2 == 0 { &other } else { &base };
        let next = m.dir.join("next.conf");
        fs::write(&next, text).expect("write the config");
        fs::rename(&next, &m.conf_path).expect("rename the config");
        m.signal(libc::SIGHUP);
        assert_eq!(admin.cmd(&["CONFIG", "RELOAD"]), ok());
    }
    // The last CONFIG RELOAD read `base`; a SIGHUP may still be running.
    wait_until("the signals' reloads", WAIT, || {
        let failed = info_text_field(&mut admin, "server", "config_reload_failures");
        assert_eq!(failed, "0");
        let done: u64 = info_text_field(&mut admin, "server", "config_reloads")
            .parse()
            .ok()?;
        (done > rounds).then_some(())
    });
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for c in clients {
        let n = c.join().expect("a client failed");
        assert!(n > 0);
    }
    assert_eq!(config_get(&mut admin, "maxclients"), "10000");
    assert_eq!(
        m.conn().cmd(&["AUTH", "extra", "extrapw"]),
        err("WRONGPASS invalid username-password pair or user is disabled.")
    );
    assert_eq!(
        info_text_field(&mut admin, "server", "config_pending_restart"),
        ""
    );
}

/// A daemon (`-d`, which moves to `/`) started from its own directory with
/// relative `-p` / `-o` paths and a `--port` over the file's: a reload
/// reads the file as at start (the same flags, the paths pinned to the
/// start directory), so an unchanged file leaves nothing pending.
#[test]
fn a_daemon_with_relative_paths_and_flags_reloads_an_unchanged_file_to_no_change() {
    let cluster = RedisCluster::start(ClusterSpec::default());
    let dir = make_temp_dir();
    let port = free_port();
    fs::write(
        dir.join("m.conf"),
        format!(
            "bind 127.0.0.1\nport 1\ncluster-nodes {}\nloglevel verbose\n",
            cluster.seeds().join(" ")
        ),
    )
    .expect("write the config");
    let out = std::process::Command::new(bin())
        .current_dir(&dir)
        .args(["-d", "-p", "m.pid", "-o", "m.log", "--port"])
        .arg(port.to_string())
        .args(["-c", "m.conf"])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run mithril");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let pid: i32 = fs::read_to_string(dir.join("m.pid"))
        .expect("pidfile")
        .trim()
        .parse()
        .expect("a pid");
    let _daemon = Killed(pid);
    let log = || fs::read_to_string(dir.join("m.log")).unwrap_or_default();
    // SAFETY: kill(2) on the pid the daemon wrote.
    unsafe { libc::kill(pid, libc::SIGHUP) };
    wait_until("the SIGHUP reload", WAIT, || {
        log()
            .contains("SIGHUP: configuration reloaded")
            .then_some(())
    });
    assert!(
        log().contains("SIGHUP: configuration reloaded, nothing to change"),
        "{}",
        log()
    );
    assert!(!log().contains("pending restart"), "{}", log());
    let mut c = Conn::connect(&format!("127.0.0.1:{port}"));
    assert_eq!(c.cmd(&["CONFIG", "RELOAD"]), ok());
    assert_eq!(
        info_text_field(&mut c, "server", "config_pending_restart"),
        ""
    );
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    wait_until("the daemon to stop", WAIT, || {
        (!dir.join("m.pid").exists()).then_some(())
    });
    remove_temp_dir(&dir);
}

/// A process this test started but does not reap (a daemon): killed when
/// the test ends, however it ends.
struct Killed(i32);

impl Drop for Killed {
    fn drop(&mut self) {
        // Only while that pid is still a mithril (not a reused pid).
        let cmdline = fs::read(format!("/proc/{}/cmdline", self.0)).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains("mithril") {
            // SAFETY: kill(2) on the daemon's own pid.
            unsafe { libc::kill(self.0, libc::SIGKILL) };
        }
    }
}

/// A proxy started from a nutcracker.yml reads it again through the same
/// translation: an unchanged file leaves nothing pending, a changed pool
/// is pending restart, and a broken file is named with its line.
#[test]
fn a_nutcracker_yml_is_read_again_as_at_start() {
    let set = StandaloneSet::start(2);
    let dir = make_temp_dir();
    let port = free_port();
    let yml = dir.join("nutcracker.yml");
    let text = |timeout: u32| {
        format!(
            "leaf:\n  listen: 127.0.0.1:{port}\n  hash: fnv1a_64\n  distribution: ketama\n  \
             timeout: {timeout}\n  redis: true\n  servers:\n   - 127.0.0.1:{}:1 server0\n   \
             - 127.0.0.1:{}:1 server1\n",
            set.port(0),
            set.port(1)
        )
    };
    fs::write(&yml, text(400)).expect("write the yml");
    let (child, mut c) =
        start_from_file(bin(), &yml, port, |c| c.cmd(&["SET", "nc:k", "1"]) == ok());
    assert_eq!(c.cmd(&["CONFIG", "RELOAD"]), ok());
    assert_eq!(
        info_text_field(&mut c, "server", "config_pending_restart"),
        ""
    );
    fs::write(&yml, text(900)).expect("write the yml");
    assert_eq!(c.cmd(&["CONFIG", "RELOAD"]), ok());
    assert_eq!(
        info_text_field(&mut c, "server", "config_pending_restart"),
        "pool"
    );
    fs::write(&yml, format!("{}  bogus_key: 1\n", text(400))).expect("write the yml");
    let e = c.cmd(&["CONFIG", "RELOAD"]).as_error().to_string();
    assert!(
        e.starts_with(&format!(
            "ERR mithril: reload failed: {}:10:",
            yml.display()
        )),
        "{e}"
    );
    // Still pending from the last good read; the clients still served.
    assert_eq!(
        info_text_field(&mut c, "server", "config_pending_restart"),
        "pool"
    );
    assert_eq!(c.cmd(&["GET", "nc:k"]), bulk("1"));
    drop(child);
    remove_temp_dir(&dir);
}

/// A seed added by a reload is used: mithril started on a seed where
/// nothing listens serves nothing; the file gains the cluster's real seed,
/// CONFIG RELOAD applies it live (nothing pending), and requests succeed.
#[test]
fn a_seed_added_by_a_reload_is_used() {
    let cluster = RedisCluster::start(ClusterSpec {
        masters: 1,
        ..ClusterSpec::default()
    });
    let dead = format!("127.0.0.1:{}", free_port());
    let mut m = Mithril::start(bin(), &[dead], "");
    let mut c = m.conn();
    assert!(c.cmd(&["SET", "k", "v"]).is_error(), "no map yet");
    let base = fs::read_to_string(&m.conf_path).expect("read the config");
    fs::write(
        &m.conf_path,
        format!("{base}cluster-nodes {}\n", cluster.seeds()[0]),
    )
    .expect("write the config");
    assert_eq!(c.cmd(&["CONFIG", "RELOAD"]), ok());
    wait_until("the new seed's map", WAIT, || {
        (c.cmd(&["SET", "k", "v"]) == ok()).then_some(())
    });
    assert_eq!(c.cmd(&["GET", "k"]), bulk("v"));
    assert_eq!(
        info_text_field(&mut c, "server", "config_pending_restart"),
        ""
    );
    assert!(m.log().contains("seeds now"), "{}", m.log());
    m.stop();
}

/// A SET of a `len`-byte value on a fresh connection (the acceptor spreads
/// them over the workers): its reply. Only the header is sent first: a
/// refusal comes from it (and the connection closes), an acceptance needs
/// the value.
fn big_set(m: &Mithril, len: usize) -> Reply {
    let mut c = m.conn();
    let head = format!("*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n${len}\r\n");
    c.write_raw(head.as_bytes()).expect("write the header");
    if let Ok(r) = c.try_read_reply(Duration::from_millis(200)) {
        return r;
    }
    let mut rest = vec![b'x'; len];
    rest.extend_from_slice(b"\r\n");
    // A refusal slower than the wait above closes the connection under
    // the write: its reply is read all the same.
    let _ = c.write_raw(&rest);
    c.try_read_reply(Duration::from_secs(10))
        .expect("a reply to the SET")
}

/// Limits change live on every worker: CONFIG SET lowers
/// proto-max-bulk-len and a request past it is refused as Redis refuses
/// it, on whichever worker it lands; a reload of a file that raises it
/// lets the request through again; CONFIG GET shows each value in force.
fn limits_change_live(threads: usize) {
    let (_cluster, m) = cluster_and_mithril(&format!("threads {threads}\n"));
    let mut c = m.conn();
    assert_eq!(big_set(&m, 2 << 20), ok());
    assert_eq!(c.cmd(&["CONFIG", "SET", "proto-max-bulk-len", "1mb"]), ok());
    assert_eq!(config_get(&mut c, "proto-max-bulk-len"), "1048576");
    // Taken at each worker's next tick.
    wait_until("every worker refuses", WAIT, || {
        (0..threads * 3)
            .all(|_| big_set(&m, 2 << 20) == err("ERR Protocol error: invalid bulk length"))
            .then_some(())
    });
    assert_eq!(big_set(&m, 900 << 10), ok());
    // The file says 4mb: a reload applies it (the file changed it).
    append_conf(&m, "proto-max-bulk-len 4mb\nbackend-timeout 7000\n");
    assert_eq!(c.cmd(&["CONFIG", "RELOAD"]), ok());
    assert_eq!(config_get(&mut c, "proto-max-bulk-len"), "4194304");
    assert_eq!(config_get(&mut c, "backend-timeout"), "7000");
    wait_until("every worker takes 4mb", WAIT, || {
        (0..threads * 3)
            .all(|_| big_set(&m, 2 << 20) == ok())
            .then_some(())
    });
    assert_eq!(
        big_set(&m, 5 << 20),
        err("ERR Protocol error: invalid bulk length")
    );
    assert_eq!(
        info_text_field(&mut c, "server", "config_pending_restart"),
        ""
    );
    // Several classes at once, Redis's form; the others keep theirs.
    assert_eq!(
        c.cmd(&[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "pubsub 1mb 512kb 30"
        ]),
        ok()
    );
    let v = config_get(&mut c, "client-output-buffer-limit");
    assert!(
        v.contains("pubsub 1048576 524288 30") && v.contains("normal"),
        "{v}"
    );
}

#[test]
fn limits_change_live_threads_1() {
    limits_change_live(1);
}

#[test]
fn limits_change_live_threads_2() {
    limits_change_live(2);
}

#[test]
fn limits_change_live_threads_4() {
    limits_change_live(4);
}

/// Listeners change live: a reload that moves a pool's `listen` from A to
/// B accepts on B at once, refuses on A, and drains the clients that came
/// through A (the reload's own reply arrives, then the connection closes),
/// on every worker; nothing is pending.
fn listeners_move_live(threads: usize) {
    let set = StandaloneSet::start(1);
    let a = free_port();
    let conf = format!(
        "threads {threads}\nport {a}\npool p listen 127.0.0.1:{a}\npool p server 127.0.0.1:{}:1\n",
        set.port(0)
    );
    let m = Mithril::start(bin(), &[], &conf);
    // Clients on every worker, through A.
    let mut through_a: Vec<Conn> = (0..threads * 2).map(|_| m.conn()).collect();
    for c in &mut through_a {
        assert_eq!(c.cmd(&["SET", "k", "a"]), ok());
    }
    let b = free_port();
    let text = fs::read_to_string(&m.conf_path).expect("read the config");
    fs::write(
        &m.conf_path,
        text.replace(
            &format!("pool p listen 127.0.0.1:{a}"),
            &format!("pool p listen 127.0.0.1:{b}"),
        ),
    )
    .expect("write the config");
    assert_eq!(through_a[0].cmd(&["CONFIG", "RELOAD"]), ok());
    let mut on_b = wait_until("accepting on B", WAIT, || {
        Conn::try_connect(&format!("127.0.0.1:{b}")).ok()
    });
    assert_eq!(on_b.cmd(&["GET", "k"]), bulk("a"));
    assert_eq!(
        info_text_field(&mut on_b, "server", "config_pending_restart"),
        ""
    );
    wait_until("A refusing", WAIT, || {
        Conn::try_connect(&format!("127.0.0.1:{a}"))
            .is_err()
            .then_some(())
    });
    // The clients that came through A are closed, on every worker.
    for c in &mut through_a {
        assert!(
            c.is_closed(WAIT),
            "a client of the removed listener still open"
        );
    }
}

#[test]
fn listeners_move_live_threads_1() {
    listeners_move_live(1);
}

#[test]
fn listeners_move_live_threads_2() {
    listeners_move_live(2);
}

#[test]
fn listeners_move_live_threads_4() {
    listeners_move_live(4);
}

/// GET calls `node` has served (INFO commandstats).
fn get_calls(node: &RedisNode) -> i64 {
    command_calls(&mut node.conn(), "get")
}

/// `read-from-replicas` changed by a reload, then by CONFIG SET: the GETs
/// of connections on every worker go to the replica, then back to the
/// master; a bad value is refused.
fn replica_reads_change_live(threads: usize) {
    let cluster = RedisCluster::start(ClusterSpec {
        replicas_per_master: 1,
        ..Default::default()
    });
    let m = Mithril::start(
        bin(),
        &cluster.seeds(),
        &format!("threads {threads}\nplacement round-robin\n"),
    );
    let (key, port) = cluster.key_per_master("rr").remove(0);
    let j = cluster
        .masters()
        .iter()
        .position(|n| n.port == port)
        .unwrap();
    let replica = &cluster.nodes[cluster.masters().len() + j];
    let mut conns: Vec<Conn> = (0..threads * 2).map(|_| m.conn()).collect();
    assert_eq!(conns[0].cmd(&["SET", &key, "v"]), ok());
    // GETs on every connection: how many the replica served.
    let on_replica = |conns: &mut Vec<Conn>| {
        let before = get_calls(replica);
        for c in conns.iter_mut() {
            assert!(!c.cmd(&["GET", &key]).is_error());
        }
        get_calls(replica) - before
    };
    assert_eq!(
        on_replica(&mut conns),
        0,
        "threads {threads}: masters only at first"
    );
    let mut c = m.conn();
    append_conf(&m, "read-from-replicas prefer-replica\n");
    assert_eq!(c.cmd(&["CONFIG", "RELOAD"]), ok());
    assert_eq!(config_get(&mut c, "read-from-replicas"), "prefer-replica");
    let n = conns.len() as i64;
    wait_until("every worker reading from the replica", WAIT, || {
        (on_replica(&mut conns) == n).then_some(())
    });
    assert_eq!(c.cmd(&["CONFIG", "SET", "read-from-replicas", "no"]), ok());
    wait_until("every worker back on the master", WAIT, || {
        (on_replica(&mut conns) == 0).then_some(())
    });
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "read-from-replicas", "maybe"])
            .as_error(),
        "ERR CONFIG SET failed (possibly related to argument 'read-from-replicas') - \
         read-from-replicas must be no, yes or prefer-replica"
    );
}

#[test]
fn replica_reads_change_live_threads_1() {
    replica_reads_change_live(1);
}

#[test]
fn replica_reads_change_live_threads_2() {
    replica_reads_change_live(2);
}

#[test]
fn replica_reads_change_live_threads_4() {
    replica_reads_change_live(4);
}
