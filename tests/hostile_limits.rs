//! Process limits and containment (issue 5, items 3, 4 and 6): the
//! `maxmemory` budget, the idle `timeout`, `tcp-keepalive`, the tighter
//! bounds on clients that have not authenticated, and a panic inside one
//! session's handling.

mod hostile_support;
mod support;

use hostile_support::*;
use std::io::Write;
use std::time::{Duration, Instant};
use support::*;

const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";

/// A client holding `bytes` of one unfinished request in mithril's input
/// buffer (a SET whose value never completes).
fn hog(m: &Mithril, bytes: usize) -> std::net::TcpStream {
    let mut s = raw(m);
    let claim = bytes * 2;
    s.write_all(format!("*3\r\n$3\r\nSET\r\n$3\r\nhog\r\n${claim}\r\n").as_bytes())
        .unwrap();
    s.write_all(&vec![b'h'; bytes]).unwrap();
    s
}

fn used_memory(probe: &mut Conn) -> u64 {
    sessions(probe).0["used_memory"]
}

#[test]
fn over_maxmemory_writes_get_oom_before_any_work_and_reads_pass() {
    let (_cluster, m) = setup("threads 1\nmaxmemory 1mb");
    let mut probe = m.conn();
    let mut c = m.conn();
    let x = tagged("x");
    let n = tagged("n");
    assert_eq!(c.cmd(&["SET", &n, "5"]), Reply::Simple("OK".into()));
    // Under budget: writes pass, and EXEC's transaction is queued now.
    let mut t = m.conn();
    assert_eq!(t.cmd(&["MULTI"]), Reply::Simple("OK".into()));
    assert_eq!(t.cmd(&["INCR", &n]), Reply::Simple("QUEUED".into()));

    let h = hog(&m, 3 * 1024 * 1024);
    wait_until_explained("the budget to be exceeded", Duration::from_secs(10), || {
        let used = used_memory(&mut probe);
        if used >= 3 * 1024 * 1024 {
            Ok(())
        } else {
            Err(format!("used_memory={used}"))
        }
    });
    // denyoom commands are refused, with Redis's text, and never sent.
    assert_eq!(c.cmd(&["SET", &x, "1"]).as_error(), OOM);
    assert_eq!(c.cmd(&["INCR", &n]).as_error(), OOM);
    assert_eq!(c.cmd(&["LPUSH", &tagged("l"), "a"]).as_error(), OOM);
    // Reads and deletions still pass.
    assert_eq!(c.cmd(&["GET", &x]).as_bulk(), None, "the SET never ran");
    assert_eq!(c.cmd(&["GET", &n]).as_str(), "5", "nor the INCR");
    assert_eq!(c.cmd(&["EXISTS", &n]).as_int(), 1);
    assert_eq!(c.cmd(&["PING"]), Reply::Simple("PONG".into()));
    // Inside MULTI a refused command dooms the transaction.
    assert_eq!(c.cmd(&["MULTI"]), Reply::Simple("OK".into()));
    assert_eq!(c.cmd(&["SET", &x, "1"]).as_error(), OOM);
    assert_eq!(
        c.cmd(&["EXEC"]).as_error(),
        "EXECABORT Transaction discarded because of previous errors."
    );
    // EXEC of a transaction holding a denyoom command is refused too, and
    // the transaction discarded, as redis-server 7.0 does.
    assert_eq!(
        t.cmd(&["EXEC"]).as_error(),
        format!("EXECABORT Transaction discarded because of: {OOM}")
    );
    assert_eq!(c.cmd(&["GET", &n]).as_str(), "5");

    // The hog leaves: its bytes are given back and writes pass again.
    drop(h);
    wait_until_explained("the budget to be free", Duration::from_secs(10), || {
        // What is left: the open connections' fixed cost (about 17 KiB
        // each, a few of them).
        let used = used_memory(&mut probe);
        if used < 256 * 1024 {
            Ok(())
        } else {
            Err(format!("used_memory={used}"))
        }
    });
    assert_eq!(c.cmd(&["SET", &x, "1"]), Reply::Simple("OK".into()));
    assert_eq!(c.cmd(&["INCR", &n]).as_int(), 6);
    // The refused EXEC ended the transaction.
    assert_eq!(t.cmd(&["EXEC"]).as_error(), "ERR EXEC without MULTI");
}

/// `maxmemory 1` set by a client on one worker refuses writes of a
/// client on the other worker from its very next command, as on a node
/// (Redis's suite: "DISCARD should not fail during OOM"): with a client
/// connected the figure is never below one connection's fixed cost, and
/// the budget is read live, not copied at the next tick. INFO's
/// `used_memory` is the figure compared.
#[test]
fn maxmemory_1_refuses_writes_at_once_on_every_worker() {
    let (_cluster, m) = setup("threads 2\nplacement round-robin");
    let mut admin = m.conn();
    let mut c = m.conn();
    let id = client_id(&mut c);
    assert!(
        !sessions(&mut admin).1.iter().any(|f| f["id"] == id),
        "the two clients are on different workers"
    );
    let x = tagged("x");
    assert_eq!(c.cmd(&["SET", &x, "0"]), Reply::Simple("OK".into()));

    // Idle clients: nothing buffered, yet the figure counts them.
    let info = admin.cmd(&["INFO", "memory"]);
    let field = |name: &str| -> u64 {
        info.as_str()
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .unwrap_or_else(|| panic!("no {name} in {info:?}"))
            .trim()
            .parse()
            .unwrap()
    };
    assert!(field("used_memory") >= 2 * 16 * 1024, "{info:?}");
    assert_eq!(field("mem_not_counted_for_evict"), 0);

    assert_eq!(
        admin.cmd(&["CONFIG", "SET", "maxmemory", "1"]),
        Reply::Simple("OK".into())
    );
    assert_eq!(c.cmd(&["MULTI"]), Reply::Simple("OK".into()));
    assert_eq!(c.cmd(&["SET", &x, "1"]).as_error(), OOM, "at queue time");
    assert_eq!(
        c.cmd(&["EXEC"]).as_error(),
        "EXECABORT Transaction discarded because of previous errors."
    );
    assert_eq!(c.cmd(&["SET", &x, "1"]).as_error(), OOM);
    assert_eq!(admin.cmd(&["SET", &x, "1"]).as_error(), OOM);
    // A client that connects now is refused from its first write.
    let mut fresh = m.conn();
    assert_eq!(fresh.cmd(&["SET", &x, "1"]).as_error(), OOM);
    assert_eq!(c.cmd(&["GET", &x]).as_str(), "0", "nothing was sent");

    assert_eq!(
        admin.cmd(&["CONFIG", "SET", "maxmemory", "0"]),
        Reply::Simple("OK".into())
    );
    assert_eq!(c.cmd(&["SET", &x, "2"]), Reply::Simple("OK".into()));
    assert_eq!(c.cmd(&["MULTI"]), Reply::Simple("OK".into()));
    assert_eq!(c.cmd(&["INCR", &x]), Reply::Simple("QUEUED".into()));
    assert_eq!(c.cmd(&["EXEC"]).as_array()[0].as_int(), 3);
}

#[test]
fn without_maxmemory_the_budget_is_not_checked() {
    let (_cluster, m) = setup("threads 1");
    let mut probe = m.conn();
    let mut c = m.conn();
    let _h = hog(&m, 3 * 1024 * 1024);
    wait_until("the bytes to be counted", Duration::from_secs(10), || {
        (used_memory(&mut probe) >= 3 * 1024 * 1024).then_some(())
    });
    assert_eq!(
        c.cmd(&["SET", &tagged("x"), "1"]),
        Reply::Simple("OK".into())
    );
}

#[test]
fn idle_clients_are_closed_after_timeout_but_not_subscribers_or_blocked_ones() {
    let (_cluster, m) = setup("threads 1\ntimeout 1");
    let mut idle = m.conn();
    assert_eq!(idle.cmd(&["PING"]), Reply::Simple("PONG".into()));
    let idle_since = Instant::now();
    let mut active = m.conn();
    let mut sub = m.conn();
    assert_eq!(sub.cmd(&["SUBSCRIBE", "ch"]).as_array()[2].as_int(), 1);
    let mut blocked = m.conn();
    let list = tagged("list");
    blocked.send(&[b"BLPOP", list.as_bytes(), b"0"]);

    std::thread::sleep(Duration::from_millis(500));
    assert!(
        !idle.is_closed(Duration::from_millis(50)),
        "closed too early"
    );
    // The active client keeps talking for 3.5 s.
    while idle_since.elapsed() < Duration::from_millis(3500) {
        assert_eq!(active.cmd(&["PING"]), Reply::Simple("PONG".into()));
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        idle.is_closed(Duration::from_secs(2)),
        "idle client still open"
    );
    let (header, _) = sessions(&mut active);
    assert_eq!(header["idle_closes"], 1);
    // The subscriber and the blocked client are still there.
    assert_eq!(
        active.cmd(&["PUBLISH", "ch", "hello"]).as_int(),
        1,
        "the subscriber is still subscribed"
    );
    let msg = sub.read_reply();
    assert_eq!(msg.as_array()[2].as_str(), "hello");
    assert_eq!(active.cmd(&["LPUSH", &list, "v"]).as_int(), 1);
    let r = blocked.read_reply();
    assert_eq!(r.as_array()[1].as_str(), "v");
    assert!(m.log().contains("idle for"), "{}", m.log());
}

/// maxclients, maxmemory and timeout changed with CONFIG SET while
/// mithril runs take effect without a restart (CONFIG GET shows them).
#[test]
fn config_set_changes_the_limits_while_running() {
    let (_cluster, m) = setup("threads 2");
    let mut admin = m.conn();
    let get = |c: &mut Conn, name: &str| -> String {
        c.cmd(&["CONFIG", "GET", name]).as_array()[1]
            .as_str()
            .to_string()
    };
    let set = |c: &mut Conn, name: &str, value: &str| {
        assert_eq!(
            c.cmd(&["CONFIG", "SET", name, value]),
            Reply::Simple("OK".into()),
            "CONFIG SET {name} {value}"
        );
    };

    // maxclients below the clients already here: nobody is closed, new
    // connections are turned away; raised again, they are served.
    let mut other = m.conn();
    assert_eq!(other.cmd(&["PING"]), Reply::Simple("PONG".into()));
    set(&mut admin, "maxclients", "2");
    assert_eq!(get(&mut admin, "maxclients"), "2");
    let mut refused = m.conn();
    assert_eq!(
        refused.read_reply().as_error(),
        "ERR max number of clients reached"
    );
    assert!(refused.is_closed(Duration::from_secs(5)));
    assert_eq!(other.cmd(&["PING"]), Reply::Simple("PONG".into()));
    set(&mut admin, "maxclients", "100");
    let mut again = m.conn();
    assert_eq!(again.cmd(&["PING"]), Reply::Simple("PONG".into()));
    drop(again);

    // maxmemory: no budget at start, so a 3 MB hog changes nothing; a
    // budget set below what is buffered refuses writes from the next
    // command on, and lifting it lets them pass again at once.
    let k = tagged("live");
    let h = hog(&m, 3 * 1024 * 1024);
    wait_until_explained("the hog to be buffered", Duration::from_secs(10), || {
        let used = used_memory(&mut admin);
        if used >= 3 * 1024 * 1024 {
            Ok(())
        } else {
            Err(format!("used_memory={used}"))
        }
    });
    assert_eq!(other.cmd(&["SET", &k, "1"]), Reply::Simple("OK".into()));
    set(&mut admin, "maxmemory", "1mb");
    assert_eq!(get(&mut admin, "maxmemory"), (1024 * 1024).to_string());
    // At once, whichever worker `other` is on: the budget is read live.
    let refused_key = format!("{k}:refused");
    assert_eq!(other.cmd(&["SET", &refused_key, "2"]).as_error(), OOM);
    assert_eq!(
        other.cmd(&["GET", &refused_key]).as_bulk(),
        None,
        "never sent"
    );
    assert_eq!(other.cmd(&["GET", &k]).as_str(), "1", "reads pass");
    set(&mut admin, "maxmemory", "0");
    assert_eq!(other.cmd(&["SET", &k, "3"]), Reply::Simple("OK".into()));
    drop(h);

    // timeout: from never to 1 second; an idle client is closed.
    let mut idle = m.conn();
    assert_eq!(idle.cmd(&["PING"]), Reply::Simple("PONG".into()));
    set(&mut admin, "timeout", "1");
    assert_eq!(get(&mut admin, "timeout"), "1");
    assert!(
        idle.is_closed(Duration::from_secs(10)),
        "the idle client is still open"
    );
    // A bad value changes nothing and says why.
    let mut fresh = m.conn();
    let r = fresh.cmd(&["CONFIG", "SET", "maxclients", "0"]);
    assert!(
        r.as_error()
            .starts_with("ERR CONFIG SET failed (possibly related to argument 'maxclients') - "),
        "{r:?}"
    );
    assert_eq!(get(&mut fresh, "maxclients"), "100");
}

/// The `tr` (timer) and `tm->when` (clock ticks) fields of mithril's side
/// of the connection from client port `client` to mithril port `port`.
fn tcp_timer(pid: u32, port: u16, client: u16) -> (u32, u64) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/net/tcp")).unwrap();
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        let port_of = |a: &str| u16::from_str_radix(a.rsplit(':').next().unwrap(), 16).unwrap();
        if port_of(f[1]) == port && port_of(f[2]) == client {
            let (tr, when) = f[5].split_once(':').unwrap();
            return (
                u32::from_str_radix(tr, 16).unwrap(),
                u64::from_str_radix(when, 16).unwrap(),
            );
        }
    }
    panic!("no socket {port} <- {client} in /proc/{pid}/net/tcp");
}

#[test]
fn tcp_keepalive_arms_the_keepalive_timer_on_client_connections() {
    let cluster = RedisCluster::start(ClusterSpec::default());
    enable_hooks();
    let on = Mithril::start(bin(), &cluster.seeds(), "tcp-keepalive 7");
    let off = Mithril::start(bin(), &cluster.seeds(), "tcp-keepalive 0");
    for (m, expect_on) in [(&on, true), (&off, false)] {
        let mut c = m.conn();
        assert_eq!(c.cmd(&["PING"]), Reply::Simple("PONG".into()));
        let client = c.stream().local_addr().unwrap().port();
        let (tr, when) = tcp_timer(m.pid, m.port, client);
        if expect_on {
            // Timer 2 is the keepalive timer; it fires within 7 s (700 ticks).
            assert_eq!(tr, 2, "keepalive timer armed");
            assert!(when <= 700, "fires within tcp-keepalive seconds: {when}");
        } else {
            assert_eq!(tr, 0, "no timer on an idle connection without keepalive");
        }
    }
}

#[test]
fn unauthenticated_clients_may_send_only_small_requests() {
    let (_cluster, m) = setup_with_password("threads 1\nrequirepass secret");
    let cases: &[(Vec<u8>, &[u8])] = &[
        (
            {
                let mut v = b"*11\r\n".to_vec();
                for _ in 0..11 {
                    v.extend_from_slice(b"$1\r\na\r\n");
                }
                v
            },
            b"-ERR Protocol error: unauthenticated multibulk length\r\n",
        ),
        (
            // Refused on the header alone: the bytes never need to come.
            b"*2\r\n$4\r\nECHO\r\n$16385\r\n".to_vec(),
            b"-ERR Protocol error: unauthenticated bulk length\r\n",
        ),
    ];
    for (input, expect) in cases {
        let mut c = m.conn();
        c.write_raw(input).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&c.read_raw_until_closed(Duration::from_secs(5))),
            String::from_utf8_lossy(expect)
        );
    }
    // At the bounds: NOAUTH, and the connection stays.
    let mut c = m.conn();
    let ten: Vec<&str> = std::iter::once("MSET")
        .chain(std::iter::repeat("a").take(9))
        .collect();
    assert_eq!(c.cmd(&ten).as_error(), "NOAUTH Authentication required.");
    let bulk = "b".repeat(16384);
    assert_eq!(
        c.cmd(&["ECHO", &bulk]).as_error(),
        "NOAUTH Authentication required."
    );
    // Authenticated, the usual bounds apply.
    assert_eq!(c.cmd(&["AUTH", "secret"]), Reply::Simple("OK".into()));
    let k = |i: usize| tagged(&format!("k{i}"));
    let keys: Vec<String> = (0..5).map(k).collect();
    let mut mset: Vec<&str> = vec!["MSET"];
    for key in &keys {
        mset.push(key);
        mset.push("v");
    }
    assert_eq!(mset.len(), 11);
    assert_eq!(c.cmd(&mset), Reply::Simple("OK".into()));
    let big = "c".repeat(20_000);
    assert_eq!(c.cmd(&["ECHO", &big]).as_str(), big);
}

#[test]
fn an_unauthenticated_client_that_does_not_read_is_closed_past_17k_of_output() {
    let (_cluster, m) = setup_with_password("threads 1\nrequirepass secret");
    let mut probe = m.conn();
    assert_eq!(probe.cmd(&["AUTH", "secret"]), Reply::Simple("OK".into()));
    // Each PING earns a 34-byte NOAUTH error; the client never reads.
    let mut s = raw_with(&m, Some(4096));
    let flood = b"PING\r\n".repeat(400_000);
    let _ = write_while_taken(&mut s, &flood, Duration::from_secs(10));
    wait_until("the client to be closed", Duration::from_secs(10), || {
        (sessions(&mut probe).0["obuf_closes"] == 1).then_some(())
    });
    let (_, closed) = read_until_closed(&mut s, Duration::from_secs(20));
    assert!(closed);
    assert!(m
        .log()
        .contains("passed the output limit of an unauthenticated client"));

    // The same flood once authenticated: paused, not closed (the normal
    // class has no limit by default), and every reply is still delivered.
    let mut a = RawClient::new(raw_with(&m, Some(4096)));
    assert_eq!(a.cmd(&["AUTH", "secret"]), Reply::Simple("OK".into()));
    let id = a.cmd(&["CLIENT", "ID"]).as_int() as u64;
    // 7 MB of replies: more than the kernel's socket buffers can take
    // (tcp_wmem's maximum is 4 MB by default), so mithril must hold some
    // and pause; with fewer, the kernel may absorb them all.
    let n = 1_000_000;
    let flood = b"PING\r\n".repeat(n);
    let mut w = a.s.try_clone().unwrap();
    let writer = std::thread::spawn(move || w.write_all(&flood));
    wait_until(
        "the authenticated flooder to pause",
        Duration::from_secs(20),
        || {
            session(&mut probe, id)
                .filter(|f| f["paused"] == 1)
                .map(|_| ())
        },
    );
    for _ in 0..n {
        assert_eq!(a.read_reply(), Reply::Simple("PONG".into()));
    }
    writer.join().unwrap().unwrap();
    assert_eq!(sessions(&mut probe).0["obuf_closes"], 1);
}

#[test]
fn a_panic_in_one_session_closes_only_that_session() {
    let (_cluster, m) = setup("threads 1\nmaxclients 3");
    // Take the three slots as they become free (the harness's readiness
    // probe may still hold one for a moment).
    let take = || {
        wait_until("a client slot", Duration::from_secs(10), || {
            let mut d = m.conn();
            d.write_raw(b"PING\r\n").ok()?;
            match d.try_read_reply(Duration::from_secs(2)) {
                Ok(Reply::Simple(s)) if s == "PONG" => Some(d),
                _ => None,
            }
        })
    };
    let mut other = take();
    let mut probe = take();
    let mut victim = take();
    let id = client_id(&mut victim);
    let k = tagged("k");
    // The SET goes out before the fault; its reply finds no session.
    let mut burst = encode_command(&[b"SET", k.as_bytes(), b"before"]);
    burst.extend_from_slice(&encode_command(&[b"MITHRIL-TEST", b"PANIC"]));
    burst.extend_from_slice(&encode_command(&[b"GET", k.as_bytes()]));
    victim.write_raw(&burst).unwrap();
    let got = victim.read_raw_until_closed(Duration::from_secs(5));
    assert_eq!(got, b"", "nothing after the fault reaches the client");

    // Logged with the session's id; the worker goes on.
    wait_until("the panic to be logged", Duration::from_secs(5), || {
        m.log()
            .contains(&format!("panic while serving client {id};"))
            .then_some(())
    });
    assert_eq!(other.cmd(&["GET", &k]).as_str(), "before");
    for i in 0..200 {
        let v = i.to_string();
        assert_eq!(other.cmd(&["SET", &k, &v]), Reply::Simple("OK".into()));
        assert_eq!(other.cmd(&["GET", &k]).as_str(), v);
    }
    assert!(session(&mut probe, id).is_none(), "the session is gone");
    // Its admission ticket came back: a third client is admitted again.
    let mut again = take();
    assert_eq!(again.cmd(&["PING"]), Reply::Simple("PONG".into()));
    let info = probe.cmd(&["INFO", "clients"]);
    assert!(
        info.as_str().contains("connected_clients:3\r\n"),
        "{}",
        info.as_str()
    );
}
