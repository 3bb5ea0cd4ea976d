//! Regression tests for the correctness issue, one per item fixed: a
//! transaction the node answers while it is still being written (item
//! 10), a half-closed client with a blocking command pending (item 11),
//! the hard output limit checked where output is appended (item 8), a
//! blocking lease that must have one owner at a time (item 2), one slow
//! log and one client list for the whole process (item 13), new
//! connections visible to the next CLIENT LIST / KILL / INFO (item 14),
//! a transaction refused with TRYAGAIN retried whole (item 5), and
//! slot marks and key-by-key resends of a migration (item 6), and a
//! CLUSTERDOWN outlasting the TRYAGAIN waits, alone or pipelined (item
//! 15).
//!
//! Each test starts its own cluster and mithril (test hooks on: some look
//! at the worker's state through `MITHRIL-TEST SESSIONS`).

mod hostile_support;
mod support;

use hostile_support::*;
use std::io::Write;
use std::time::{Duration, Instant};
use support::*;

fn ok() -> Reply {
    Reply::Simple("OK".into())
}

/// Item 10: MULTI, 1,000,000 queued INCRs (27 MB) and EXEC in one write.
/// The node answers +OK and +QUEUED while mithril is still writing the
/// transaction to it; those replies belong to the request being written,
/// not to "a request that was never sent".
#[test]
fn item10_a_transaction_answered_while_being_written_runs_whole() {
    let (_cluster, m) = setup("threads 1");
    const N: usize = 1_000_000;
    let key = "{m9}ctr";
    let incr = encode_command(&[b"INCR", key.as_bytes()]);
    let mut pipe = encode_command(&[b"MULTI"]);
    pipe.reserve(incr.len() * N + 64);
    for _ in 0..N {
        pipe.extend_from_slice(&incr);
    }
    pipe.extend_from_slice(&encode_command(&[b"EXEC"]));
    let mut c = m.conn();
    // mithril answers +QUEUED as it reads (9 MB of them): read them while
    // another thread writes, or both sides' buffers fill up.
    let mut w = c.stream().try_clone().unwrap();
    w.set_write_timeout(Some(Duration::from_secs(60))).unwrap();
    let writer = std::thread::spawn(move || w.write_all(&pipe));
    assert_eq!(c.read_reply(), ok(), "MULTI");
    for i in 0..N {
        let r = c.read_reply();
        assert_eq!(r, Reply::Simple("QUEUED".into()), "queued command {i}");
    }
    writer.join().unwrap().expect("the transaction was written");
    let exec = c
        .try_read_reply(Duration::from_secs(120))
        .expect("EXEC's reply");
    let items = match &exec {
        Reply::Array(Some(items)) => items,
        other => panic!("EXEC answered {:?}", short(other)),
    };
    assert_eq!(items.len(), N, "EXEC's array");
    for (i, r) in items.iter().enumerate() {
        assert_eq!(*r, Reply::Int(i as i64 + 1), "EXEC item {i}");
    }
    assert_eq!(c.cmd(&["GET", key]).as_str(), N.to_string());
}

/// Item 10, the other shape: one 50 MB request the node can only answer
/// once all of it is there.
#[test]
fn item10_a_single_huge_request_is_answered_after_its_last_byte() {
    let (_cluster, m) = setup("threads 1");
    let key = "{m9}huge";
    let value: Vec<u8> = (0..50 * 1024 * 1024)
        .map(|i| b'a' + (i % 26) as u8)
        .collect();
    let mut c = m.conn();
    let mut w = c.stream().try_clone().unwrap();
    w.set_write_timeout(Some(Duration::from_secs(60))).unwrap();
    let frame = encode_command(&[b"SET", key.as_bytes(), &value]);
    let writer = std::thread::spawn(move || w.write_all(&frame));
    let r = c
        .try_read_reply(Duration::from_secs(60))
        .expect("SET's reply");
    writer.join().unwrap().expect("the SET was written");
    assert_eq!(r, ok());
    assert_eq!(c.cmd(&["STRLEN", key]), Reply::Int(value.len() as i64));
    let got = c.cmd(&["GET", key]);
    assert!(
        got.as_bulk() == Some(&value[..]),
        "GET gives the value back"
    );
}

/// A reply, shortened for a panic message.
fn short(r: &Reply) -> String {
    let s = format!("{r:?}");
    s.chars().take(300).collect()
}

/// `INFO clients` field `name` of the node at `port`.
fn node_info_field(port: u16, name: &str) -> i64 {
    let mut c = Conn::connect(&format!("127.0.0.1:{port}"));
    let info = c.cmd(&["INFO", "clients"]);
    info.as_str()
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':')?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in INFO clients of :{port}"))
}

/// Parses `bytes` as a sequence of replies (panics on a partial one).
fn replies_in(bytes: &[u8]) -> Vec<Reply> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        match parse_reply(&bytes[at..]).unwrap() {
            Some((r, used)) => {
                out.push(r);
                at += used;
            }
            None => panic!("a partial reply at byte {at} of {}", bytes.len()),
        }
    }
    out
}

/// Item 11: SET, GET, ... then BLPOP and a half-close (SHUT_WR). Redis
/// answers every request before the blocked one, then closes the client
/// when it reads the EOF (cancelling the block). The replies from other
/// nodes may still be on their way when mithril reads that EOF.
#[test]
fn item11_a_half_closed_client_blocked_in_blpop_gets_every_earlier_reply() {
    let (cluster, m) = setup("threads 1");
    let list = "{hc}list";
    // Keys on every master, so earlier replies come from other nodes than
    // the blocking command's and arrive at different times.
    let keys: Vec<String> = (0..12).map(|i| format!("hc:{i}")).collect();
    for round in 0..50 {
        let mut pipe = Vec::new();
        let mut expect = Vec::new();
        for (i, k) in keys.iter().enumerate() {
            let v = format!("{round}-{i}");
            pipe.extend_from_slice(&encode_command(&[b"SET", k.as_bytes(), v.as_bytes()]));
            expect.push(ok());
            pipe.extend_from_slice(&encode_command(&[b"GET", k.as_bytes()]));
            expect.push(Reply::Bulk(Some(v.into_bytes())));
        }
        pipe.extend_from_slice(&encode_command(&[b"BLPOP", list.as_bytes(), b"0"]));
        let mut s = raw(&m);
        s.write_all(&pipe).unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
        let (bytes, closed) = read_until_closed(&mut s, Duration::from_secs(10));
        let got = replies_in(&bytes);
        assert_eq!(got, expect, "round {round}: the replies before BLPOP");
        assert!(closed, "round {round}: closed once they were written");
    }
    // No block is left behind on the node, and nothing pops a value
    // pushed now.
    let port = cluster.port_for_slot(key_slot(list.as_bytes()));
    wait_until(
        "the node's blocks to be cancelled",
        Duration::from_secs(10),
        || (node_info_field(port, "blocked_clients") == 0).then_some(()),
    );
    let mut c = m.conn();
    assert_eq!(c.cmd(&["LPUSH", list, "v"]), Reply::Int(1));
    assert_eq!(c.cmd(&["LLEN", list]), Reply::Int(1));
}

/// `evicted_clients_output_buffer` from mithril's INFO stats.
fn output_evictions(m: &Mithril) -> i64 {
    let info = m.conn().cmd(&["INFO", "stats"]);
    info.as_str()
        .lines()
        .find_map(|l| {
            l.strip_prefix("evicted_clients_output_buffer:")?
                .trim()
                .parse()
                .ok()
        })
        .expect("evicted_clients_output_buffer in INFO stats")
}

/// Item 8: replies that pile up in one turn past the hard limit close the
/// client when they arrive, as Redis checks its limits as each reply is
/// added. Here they wait behind an earlier request to a paused node, so
/// nothing can be written: a check made only when the session writes
/// would not see them until that node answers.
#[test]
fn item8_the_hard_output_limit_is_checked_as_replies_arrive() {
    let (cluster, m) = setup("threads 1\nclient-output-buffer-limit normal 1mb 0 0");
    let slow_key = "{item8-slow}k";
    let slow_port = cluster.port_for_slot(key_slot(slow_key.as_bytes()));
    // A key on another master, holding 200 KB.
    let big = (0..)
        .map(|i| format!("{{item8-big-{i}}}v"))
        .find(|k| cluster.port_for_slot(key_slot(k.as_bytes())) != slow_port)
        .unwrap();
    let value = vec![b'v'; 200 * 1024];
    let mut c = m.conn();
    assert_eq!(c.cmd_bytes(&[b"SET", big.as_bytes(), &value]), ok());
    assert_eq!(c.cmd(&["SET", slow_key, "x"]), ok());
    assert_eq!(output_evictions(&m), 0);
    // The slow key's node stops answering for 4 s.
    let mut slow = Conn::connect(&format!("127.0.0.1:{slow_port}"));
    assert_eq!(slow.cmd(&["CLIENT", "PAUSE", "4000", "ALL"]), ok());
    let paused_at = Instant::now();
    // 1 request to the paused node, then 15 replies of 200 KB (3 MB, the
    // first window's worth) that must wait behind it.
    let mut pipe = encode_command(&[b"GET", slow_key.as_bytes()]);
    for _ in 0..15 {
        pipe.extend_from_slice(&encode_command(&[b"GET", big.as_bytes()]));
    }
    c.write_raw(&pipe).unwrap();
    // Watched on the socket and the log, not INFO: INFO stats carries the
    // masters' figures too, and one of them is paused.
    assert!(c.is_closed(Duration::from_secs(2)), "the client was closed");
    assert!(
        paused_at.elapsed() < Duration::from_secs(4),
        "caught while the node was still paused"
    );
    let got = c.read_raw_until_closed(Duration::from_secs(1));
    assert!(got.is_empty(), "nothing was written: {} bytes", got.len());
    assert!(
        m.log()
            .contains("passed the client-output-buffer-limit (hard)"),
        "{}",
        m.log()
    );
    assert_eq!(slow.cmd(&["CLIENT", "UNPAUSE"]), ok());
    assert_eq!(output_evictions(&m), 1, "counted once");
    // Everyone else is still served, the slow node's keys included.
    assert_eq!(m.conn().cmd(&["GET", slow_key]).as_str(), "x");
}

/// `name` from mithril's INFO `section`.
fn m_info_field(m: &Mithril, section: &str, name: &str) -> i64 {
    let info = m.conn().cmd(&["INFO", section]);
    info.as_str()
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':')?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in mithril's INFO {section}"))
}

/// Item 2: a blocking command answered CLUSTERDOWN gives its lease back
/// to the idle list while its session waits to retry; another session
/// takes that lease for its own BLPOP; the first client leaves during
/// the wait. Its lease handle must not close the other session's lease:
/// every client still there is answered when values are pushed.
#[test]
fn item2_a_lease_given_back_during_a_retry_wait_is_not_closed_by_its_last_holder() {
    enable_hooks();
    let cluster = RedisCluster::start(ClusterSpec {
        // One slot left unassigned must not fail the whole node.
        extra_redis_conf: vec!["cluster-require-full-coverage no".into()],
        ..ClusterSpec::default()
    });
    let m = Mithril::start(bin(), &cluster.seeds(), "threads 1");
    let mut probe = m.conn();
    // Two slots on one master: A's is made unserved for a moment (its
    // blocked clients get CLUSTERDOWN), B's stays served.
    let a_tag = "{item2-a}";
    let slot_a = key_slot(a_tag.as_bytes());
    let port = cluster.port_for_slot(slot_a);
    let b_tag = (0..)
        .map(|i| format!("{{item2-b-{i}}}"))
        .find(|t| {
            let s = key_slot(t.as_bytes());
            s != slot_a && cluster.port_for_slot(s) == port
        })
        .unwrap();
    let mut node = Conn::connect(&format!("127.0.0.1:{port}"));
    let blocked_on_node = |n: i64| {
        let what = format!("{n} clients blocked on the node");
        wait_until(&what, Duration::from_secs(10), || {
            (node_info_field(port, "blocked_clients") == n).then_some(())
        })
    };
    // 16 A clients blocked (16 leases: all fit in the idle list later).
    const N: usize = 16;
    let mut a: Vec<Option<Conn>> = (0..N)
        .map(|i| {
            let mut c = m.conn();
            c.send(&[b"BLPOP", format!("{a_tag}q{i}").as_bytes(), b"0"]);
            Some(c)
        })
        .collect();
    blocked_on_node(N as i64);
    // Their retries wait 3 s, so the next steps happen inside the wait.
    assert_eq!(probe.cmd(&["MITHRIL-TEST", "RETRY-WAIT", "3000"]), ok());
    let slot_arg = slot_a.to_string();
    assert_eq!(node.cmd(&["CLUSTER", "DELSLOTS", &slot_arg]), ok());
    wait_until(
        "every A client's BLPOP to be answered CLUSTERDOWN",
        Duration::from_secs(10),
        || (m_info_field(&m, "stats", "clusterdown_retries") >= N as i64).then_some(()),
    );
    // 16 B clients block, on the leases the A clients gave back.
    let mut b: Vec<Conn> = (0..N)
        .map(|j| {
            let mut c = m.conn();
            c.send(&[b"BLPOP", format!("{b_tag}q{j}").as_bytes(), b"0"]);
            c
        })
        .collect();
    blocked_on_node(N as i64);
    // Half the A clients leave during their wait.
    let clients = m_info_field(&m, "clients", "connected_clients");
    for c in a.iter_mut().step_by(2) {
        *c = None;
    }
    wait_until(
        "the leaving clients to be gone",
        Duration::from_secs(10),
        || {
            (m_info_field(&m, "clients", "connected_clients") <= clients - N as i64 / 2)
                .then_some(())
        },
    );
    assert_eq!(node.cmd(&["CLUSTER", "ADDSLOTS", &slot_arg]), ok());
    assert_eq!(probe.cmd(&["MITHRIL-TEST", "RETRY-WAIT", "0"]), ok());
    // Every client still there gets its value (the A clients once their
    // wait is over and the retry finds the slot served again).
    let mut pusher = m.conn();
    let mut unanswered = Vec::new();
    let mut expect = Vec::new();
    for j in 0..N {
        expect.push((format!("B{j}"), format!("{b_tag}q{j}")));
    }
    for (i, c) in a.iter().enumerate() {
        if c.is_some() {
            expect.push((format!("A{i}"), format!("{a_tag}q{i}")));
        }
    }
    for (_, key) in &expect {
        assert_eq!(pusher.cmd(&["LPUSH", key, "v"]), Reply::Int(1));
    }
    let mut waiting: Vec<&mut Conn> = b.iter_mut().collect();
    waiting.extend(a.iter_mut().flatten());
    for ((who, key), c) in expect.iter().zip(waiting) {
        match c.try_read_reply(Duration::from_secs(10)) {
            Ok(Reply::Array(Some(kv))) if kv.len() == 2 && kv[0].as_str() == key => {}
            Ok(other) => unanswered.push(format!("{who} got {other:?}")),
            Err(e) => unanswered.push(format!("{who}: {e}")),
        }
    }
    assert!(unanswered.is_empty(), "not answered: {unanswered:?}");
}

/// Item 15: a CLUSTERDOWN lasting longer than the TRYAGAIN waits (126 ms,
/// as a failover's window does) is waited out, within backend-timeout,
/// instead of reaching the client. The node serving the key loses a slot
/// (DELSLOTS; with full coverage required its whole cluster state fails,
/// so it answers CLUSTERDOWN for every key) and gets it back a second
/// later: the GET and the SET sent in between get their real answers.
#[test]
fn item15_a_clusterdown_outlasting_the_tryagain_waits_is_waited_out() {
    let cluster = RedisCluster::start(ClusterSpec {
        extra_redis_conf: vec!["cluster-require-full-coverage yes".into()],
        ..ClusterSpec::default()
    });
    let m = Mithril::start(bin(), &cluster.seeds(), "threads 1");
    let key = "{item15}k";
    let mut c = m.conn();
    assert_eq!(c.cmd(&["SET", key, "before"]), ok());
    let port = cluster.port_for_slot(key_slot(key.as_bytes()));
    let mut node = Conn::connect(&format!("127.0.0.1:{port}"));
    // Another slot of the same node, so the key's own slot stays put.
    let other = (0u16..16384)
        .find(|&s| s != key_slot(key.as_bytes()) && cluster.port_for_slot(s) == port)
        .unwrap()
        .to_string();
    assert_eq!(node.cmd(&["CLUSTER", "DELSLOTS", &other]), ok());
    wait_until(
        "the node to report the cluster down",
        Duration::from_secs(5),
        || {
            matches!(node.cmd(&["GET", key]), Reply::Error(e) if e.starts_with("CLUSTERDOWN"))
                .then_some(())
        },
    );
    // One request in flight at a time: the case mithril can retry without
    // a later request of the session overtaking it.
    let t = Instant::now();
    c.send(&[b"GET", key.as_bytes()]);
    let mut d = Conn::connect(&m.addr());
    d.send(&[b"SET", key.as_bytes(), b"after"]);
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(node.cmd(&["CLUSTER", "ADDSLOTS", &other]), ok());
    assert_eq!(c.read_reply(), Reply::Bulk(Some(b"before".to_vec())));
    assert_eq!(d.read_reply(), ok());
    assert!(
        t.elapsed() >= Duration::from_millis(900),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(
        node.cmd(&["GET", key]),
        Reply::Bulk(Some(b"after".to_vec()))
    );
}

/// The arguments of each entry of a SLOWLOG GET reply, newest first, and
/// the entries' ids.
fn slowlog_entries(r: &Reply) -> (Vec<Vec<String>>, Vec<i64>) {
    let entries = r.as_array();
    let args = entries
        .iter()
        .map(|e| {
            e.as_array()[3]
                .as_array()
                .iter()
                .map(|a| a.as_str().to_string())
                .collect()
        })
        .collect();
    let ids = entries.iter().map(|e| e.as_array()[0].as_int()).collect();
    (args, ids)
}

/// Item 13: with two workers the slow log is one, as on a Redis node:
/// `CONFIG SET slowlog-log-slower-than 0` holds at once on every worker,
/// SLOWLOG commands are logged themselves (after they ran, so RESET
/// leaves its own entry and GET and LEN do not see theirs), and GET, LEN
/// and RESET answer for the whole process, whichever workers the commands
/// ran on.
#[test]
fn item13_the_slow_log_is_one_for_the_whole_process() {
    let cluster = RedisCluster::start(ClusterSpec {
        masters: 1,
        ..ClusterSpec::default()
    });
    let m = Mithril::start(
        bin(),
        &cluster.seeds(),
        "threads 2\nplacement round-robin\nslowlog-log-slower-than -1\n",
    );
    let mut conns: Vec<Conn> = (0..4).map(|_| m.conn()).collect();
    let workers: Vec<String> = conns.iter_mut().map(worker_of).collect();
    let mut distinct = workers.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(
        distinct.len(),
        2,
        "connections on both workers: {workers:?}"
    );
    let names = |v: &[&[&str]]| -> Vec<Vec<String>> {
        v.iter()
            .map(|a| a.iter().map(|s| s.to_string()).collect())
            .collect()
    };
    for round in 0..10 {
        // Over one connection.
        let c = &mut conns[round % 4];
        assert_eq!(
            c.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]),
            ok(),
            "round {round}"
        );
        assert_eq!(c.cmd(&["SLOWLOG", "RESET"]), ok());
        assert_eq!(c.cmd(&["SET", "k", "v"]), ok());
        assert_eq!(c.cmd(&["GET", "k"]).as_str(), "v");
        assert_eq!(
            c.cmd(&["SLOWLOG", "LEN"]),
            Reply::Int(3),
            "round {round}: one connection"
        );
        let (got, ids) = slowlog_entries(&c.cmd(&["SLOWLOG", "GET"]));
        assert_eq!(
            got,
            names(&[
                &["SLOWLOG", "LEN"],
                &["GET", "k"],
                &["SET", "k", "v"],
                &["SLOWLOG", "RESET"]
            ]),
            "round {round}: one connection"
        );
        assert!(ids.windows(2).all(|w| w[0] > w[1]), "{ids:?}");
        assert_eq!(
            c.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "-1"]),
            ok()
        );

        // Over separate connections, on both workers.
        let [a, b, c, d] = &mut conns[..] else {
            unreachable!()
        };
        assert_eq!(
            a.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]),
            ok()
        );
        assert_eq!(b.cmd(&["SLOWLOG", "RESET"]), ok());
        assert_eq!(c.cmd(&["SET", "k", "w"]), ok());
        assert_eq!(d.cmd(&["GET", "k"]).as_str(), "w");
        assert_eq!(
            a.cmd(&["SLOWLOG", "LEN"]),
            Reply::Int(3),
            "round {round}: separate connections"
        );
        // The n newest overall, across workers.
        let (got, _) = slowlog_entries(&b.cmd(&["SLOWLOG", "GET", "2"]));
        assert_eq!(got, names(&[&["SLOWLOG", "LEN"], &["GET", "k"]]));
        let (got, ids) = slowlog_entries(&c.cmd(&["SLOWLOG", "GET", "-1"]));
        assert_eq!(
            got,
            names(&[
                &["SLOWLOG", "GET", "2"],
                &["SLOWLOG", "LEN"],
                &["GET", "k"],
                &["SET", "k", "w"],
                &["SLOWLOG", "RESET"]
            ]),
            "round {round}: separate connections"
        );
        assert!(ids.windows(2).all(|w| w[0] > w[1]), "{ids:?}");
        assert_eq!(
            d.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "-1"]),
            ok()
        );
    }
}

/// Item 13, transactions: EXEC is flagged skip_slowlog, so the proxy does
/// not log it when it runs it; the transaction is logged once, as EXEC,
/// when the node's reply comes (MULTI is logged like any command).
#[test]
fn item13_a_transaction_is_logged_once() {
    let cluster = RedisCluster::start(ClusterSpec {
        masters: 1,
        ..ClusterSpec::default()
    });
    let m = Mithril::start(bin(), &cluster.seeds(), "slowlog-log-slower-than 0\n");
    let mut c = m.conn();
    assert_eq!(c.cmd(&["SLOWLOG", "RESET"]), ok());
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["SET", "t", "1"]), Reply::Simple("QUEUED".into()));
    assert_eq!(c.cmd(&["EXEC"]), Reply::Array(Some(vec![ok()])));
    // EXEC without MULTI: answered here, not logged (skip_slowlog).
    assert!(c.cmd(&["EXEC"]).is_error());
    let (got, _) = slowlog_entries(&c.cmd(&["SLOWLOG", "GET"]));
    let want: Vec<Vec<String>> = [&["EXEC"][..], &["MULTI"], &["SLOWLOG", "RESET"]]
        .iter()
        .map(|a| a.iter().map(|s| s.to_string()).collect())
        .collect();
    assert_eq!(got, want);
}

/// The `name=` of every line of a CLIENT LIST reply.
fn listed_names(c: &mut Conn) -> Vec<String> {
    let text = c.cmd(&["CLIENT", "LIST"]).as_str().to_string();
    text.lines()
        .filter_map(|l| {
            l.split_whitespace()
                .find_map(|f| f.strip_prefix("name="))
                .map(str::to_string)
        })
        .collect()
}

/// Item 13, CLIENT: a client CLIENT KILL closed is gone from CLIENT LIST
/// as soon as the kill is answered, whichever worker it lived on and
/// whichever worker lists: by ADDR (as redis-py's test kills), by ID, in
/// the old form, by USER, and the caller itself (SKIPME no), whose
/// connection closes once its reply is written.
#[test]
fn item13_a_killed_client_is_gone_once_the_kill_is_answered() {
    let cluster = RedisCluster::start(ClusterSpec {
        masters: 1,
        ..ClusterSpec::default()
    });
    let m = Mithril::start(
        bin(),
        &cluster.seeds(),
        "threads 2\nplacement round-robin\n",
    );
    let mut killer = m.conn();
    let mut lister = m.conn();
    assert_ne!(worker_of(&mut killer), worker_of(&mut lister));
    assert_eq!(killer.cmd(&["CLIENT", "SETNAME", "killer"]), ok());
    assert_eq!(lister.cmd(&["CLIENT", "SETNAME", "lister"]), ok());
    for round in 0..50 {
        // Four victims, two on each worker, each seen (named) first.
        let mut victims: Vec<Conn> = (0..4).map(|_| m.conn()).collect();
        let mut ids = Vec::new();
        for (i, v) in victims.iter_mut().enumerate() {
            assert_eq!(v.cmd(&["CLIENT", "SETNAME", &format!("v{i}")]), ok());
            ids.push(v.cmd(&["CLIENT", "ID"]).as_int().to_string());
        }
        let addr = |v: &Conn| v.stream().local_addr().unwrap().to_string();
        let kill: [Vec<String>; 4] = [
            vec!["ADDR".into(), addr(&victims[0])],
            vec!["ID".into(), ids[1].clone()],
            vec![addr(&victims[2])],
            vec!["ID".into(), ids[3].clone(), "USER".into(), "default".into()],
        ];
        for (i, how) in kill.iter().enumerate() {
            let mut a = vec!["CLIENT", "KILL"];
            a.extend(how.iter().map(String::as_str));
            let r = killer.cmd(&a);
            let want = if how.len() == 1 { ok() } else { Reply::Int(1) };
            assert_eq!(r, want, "round {round}: CLIENT KILL {how:?}");
            let gone = format!("v{i}");
            for (who, c) in [("killer", &mut killer), ("lister", &mut lister)] {
                let names = listed_names(c);
                assert!(
                    !names.contains(&gone),
                    "round {round}: {gone} killed by {how:?}, still in {who}'s list {names:?}"
                );
            }
        }
        for v in victims.iter_mut() {
            assert!(v.is_closed(Duration::from_secs(5)));
        }
        // The caller itself: answered, then gone.
        let mut me = m.conn();
        assert_eq!(me.cmd(&["CLIENT", "SETNAME", "me"]), ok());
        let id = me.cmd(&["CLIENT", "ID"]).as_int().to_string();
        assert_eq!(
            me.cmd(&["CLIENT", "KILL", "ID", &id, "SKIPME", "no"]),
            Reply::Int(1)
        );
        assert!(me.is_closed(Duration::from_secs(5)));
        let mut names = listed_names(&mut lister);
        names.sort();
        assert_eq!(names, ["killer", "lister"], "round {round}");
    }
}

/// The lines of a CLIENT LIST reply.
fn client_lines(c: &mut Conn) -> usize {
    c.cmd(&["CLIENT", "LIST"]).as_str().lines().count()
}

/// Item 14: a connection the client already has is a client of the proxy,
/// as a Redis node sees a client from the moment it is accepted: CLIENT
/// LIST, CLIENT KILL and INFO asked right after the connect (no sleep, no
/// command on the new connections) count every one of them, whether the
/// acceptor has handed them to a worker yet or not.
#[test]
fn item14_new_connections_are_seen_by_the_next_question() {
    let cluster = RedisCluster::start(ClusterSpec {
        masters: 1,
        ..ClusterSpec::default()
    });
    let m = Mithril::start(bin(), &cluster.seeds(), "threads 2\n");
    let mut o = m.conn();
    assert_eq!(client_lines(&mut o), 1);
    const N: usize = 8;
    for round in 0..150 {
        let fresh: Vec<Conn> = (0..N).map(|_| m.conn()).collect();
        let listed = match round % 3 {
            0 => client_lines(&mut o),
            1 => {
                let info = o.cmd(&["INFO", "clients"]).as_str().to_string();
                info.lines()
                    .find_map(|l| l.strip_prefix("connected_clients:"))
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0)
            }
            _ => N + 1,
        };
        assert_eq!(listed, N + 1, "round {round}: listed right after connect");
        assert_eq!(
            o.cmd(&["CLIENT", "KILL", "USER", "default"]),
            Reply::Int(N as i64),
            "round {round}: killed right after connect"
        );
        for mut c in fresh {
            assert!(c.is_closed(Duration::from_secs(5)), "round {round}");
        }
        assert_eq!(client_lines(&mut o), 1, "round {round}: after the kill");
    }
}

/// Index of the node listening on `port`.
fn node_index(cluster: &RedisCluster, port: u16) -> usize {
    cluster
        .nodes
        .iter()
        .position(|n| n.port == port)
        .unwrap_or_else(|| panic!("no node on port {port}"))
}

/// Item 5: a queued command the node refuses with TRYAGAIN (a multi-key
/// command on a slot half migrated) dooms the transaction on the node,
/// which answers EXEC with EXECABORT; nothing of it ran. mithril retries
/// the whole transaction with a single-slot command's waits, so once the
/// migration is over EXEC gives the real results.
#[test]
fn item5_a_transaction_refused_with_tryagain_is_retried_whole() {
    let (cluster, m) = setup("threads 1");
    let (a, b) = ("{item5}a", "{item5}b");
    let slot = key_slot(a.as_bytes());
    let mut c = m.conn();
    assert_eq!(c.cmd(&["SET", a, "1"]), ok());
    assert_eq!(c.cmd(&["SET", b, "2"]), ok());
    // `a` moves, `b` stays: MGET of both is refused with TRYAGAIN.
    let (_, to) = cluster.split_slot(slot, &[a]);
    let to = node_index(&cluster, to.port);
    // Long waits, so the migration can be finished during them.
    assert_eq!(c.cmd(&["MITHRIL-TEST", "RETRY-WAIT", "500"]), ok());
    let tryagain_before = m_info_field(&m, "stats", "tryagain_retries");
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["MGET", a, b]), Reply::Simple("QUEUED".into()));
    assert_eq!(c.cmd(&["INCR", b]), Reply::Simple("QUEUED".into()));
    c.send(&[b"EXEC"]);
    let retried = poll_until(Duration::from_secs(5), || {
        (m_info_field(&m, "stats", "tryagain_retries") > tryagain_before).then_some(())
    });
    if retried.is_none() {
        let r = c.try_read_reply(Duration::from_secs(1));
        panic!("the transaction's TRYAGAIN was not retried; EXEC answered {r:?}");
    }
    cluster.migrate_slot(slot, to, 10);
    let exec = c
        .try_read_reply(Duration::from_secs(10))
        .expect("EXEC's reply");
    assert_eq!(
        exec,
        Reply::Array(Some(vec![
            Reply::Array(Some(vec![bulk("1"), bulk("2")])),
            Reply::Int(3),
        ])),
        "EXEC after the migration"
    );
    assert_eq!(c.cmd(&["MITHRIL-TEST", "RETRY-WAIT", "0"]), ok());
    assert_eq!(c.cmd(&["GET", b]).as_str(), "3");
}

/// mithril's INFO cluster `topology_epoch`.
fn m_epoch(m: &Mithril) -> i64 {
    m_info_field(m, "cluster", "topology_epoch")
}

/// Waits until mithril has a topology epoch past `after`.
fn wait_epoch_past(m: &Mithril, after: i64) {
    wait_until(
        "mithril to load the new map",
        Duration::from_secs(15),
        || (m_epoch(m) > after).then_some(()),
    );
}

/// A tag (`{...}`) whose slot `ok` accepts.
fn tag_where(prefix: &str, ok: impl Fn(u16) -> bool) -> String {
    (0..)
        .map(|i| format!("{{{prefix}-{i}}}"))
        .find(|t| ok(key_slot(t.as_bytes())))
        .unwrap()
}

/// Item 6, the mark: a slot whose TRYAGAIN had to reach the client stays
/// marked (its multi-key commands take the gated fan-out path) until that
/// slot's owner changes, whatever else the topology does; and a new mark
/// does not bring back one whose slot has moved since.
#[test]
fn item6_a_tainted_slot_is_cleared_by_its_owner_changing_only() {
    let (cluster, m) = setup("threads 1\ntopology-refresh-secs 1");
    let s = "{item6s}";
    let slot_s = key_slot(s.as_bytes());
    let (k1, k2) = (format!("{s}1"), format!("{s}2"));
    let s2 = tag_where("item6s2", |x| x != slot_s);
    let slot_s2 = key_slot(s2.as_bytes());
    let t = tag_where("item6t", |x| x != slot_s && x != slot_s2);
    let slot_t = key_slot(t.as_bytes());
    let other = format!(
        "{}x",
        tag_where("item6o", |x| ![slot_s, slot_s2, slot_t].contains(&x))
    );
    let (j1, j2) = (format!("{s2}1"), format!("{s2}2"));
    let mut c = m.conn();
    for (k, v) in [
        (&k1, "v1"),
        (&k2, "v2"),
        (&other, "o"),
        (&format!("{t}k"), "t"),
    ] {
        assert_eq!(c.cmd(&["SET", k, v]), ok());
    }
    assert_eq!(c.cmd(&["SADD", &j1, "a"]), Reply::Int(1));
    assert_eq!(c.cmd(&["SADD", &j2, "b"]), Reply::Int(1));
    let mget = || argv(&["MGET", &k1, &k2]);
    let get_other = || argv(&["GET", &other]);
    let values = Reply::Array(Some(vec![bulk("v1"), bulk("v2")]));

    let (_, to) = cluster.split_slot(slot_s, &[&k1]);
    let to_s = node_index(&cluster, to.port);
    // Something dispatched after the MGET: its TRYAGAIN goes to the
    // client, and the slot is marked.
    let r = c.pipeline(&[mget(), get_other()]);
    assert!(
        r[0].is_error() && r[0].as_error().starts_with("TRYAGAIN"),
        "{r:?}"
    );
    // Marked: the same pipeline now goes the gated fan-out way.
    assert_eq!(
        c.pipeline(&[mget(), get_other()]),
        [values.clone(), bulk("o")]
    );

    // Another slot moves: a new map, the marked slot's owner unchanged.
    let epoch = m_epoch(&m);
    let owner_t = cluster.port_for_slot(slot_t);
    let to_t = cluster
        .masters()
        .iter()
        .find(|n| n.port != owner_t)
        .map(|n| node_index(&cluster, n.port))
        .unwrap();
    cluster.migrate_slot(slot_t, to_t, 10);
    wait_epoch_past(&m, epoch);
    assert_eq!(
        c.pipeline(&[mget(), get_other()]),
        [values.clone(), bulk("o")],
        "still marked after an unrelated topology change"
    );

    // The marked slot's migration ends: its owner changed.
    let epoch = m_epoch(&m);
    cluster.migrate_slot(slot_s, to_s, 10);
    wait_epoch_past(&m, epoch);
    // Another slot is marked by a multi-key command that is not a fan-out
    // (SUNION), without looking at the marks first.
    cluster.split_slot(slot_s2, &[&j1]);
    let r = c.pipeline(&[argv(&["SUNION", &j1, &j2]), get_other()]);
    assert!(
        r[0].is_error() && r[0].as_error().starts_with("TRYAGAIN"),
        "{r:?}"
    );
    // The first slot's mark is gone: its MGET goes to its node as it is.
    let parts = m_info_field(&m, "stats", "fanout_parts");
    assert_eq!(c.pipeline(&[mget(), get_other()]), [values, bulk("o")]);
    assert_eq!(
        m_info_field(&m, "stats", "fanout_parts"),
        parts,
        "the moved slot's MGET was fanned out: its old mark came back"
    );
}

/// Item 6, the resend address: two parts of one MGET, on two slots half
/// migrated away from two different masters, both split key by key with
/// more keys than may be in flight at once: each part's queued resends go
/// to its own node (no MOVED on the way), and every value comes back.
#[test]
fn item6_each_split_part_resends_to_its_own_node() {
    let (cluster, m) = setup("threads 1");
    let a = "{item6a}";
    let slot_a = key_slot(a.as_bytes());
    let port_a = cluster.port_for_slot(slot_a);
    let b = tag_where("item6b", |x| cluster.port_for_slot(x) != port_a);
    let slot_b = key_slot(b.as_bytes());
    const N: usize = 1000;
    let keys: Vec<String> = (0..N)
        .map(|i| format!("{a}{i}"))
        .chain((0..N).map(|i| format!("{b}{i}")))
        .collect();
    let mut c = m.conn();
    let mut mset = vec!["MSET".to_string()];
    for k in &keys {
        mset.push(k.clone());
        mset.push(format!("val-{k}"));
    }
    let refs: Vec<&str> = mset.iter().map(String::as_str).collect();
    assert_eq!(c.cmd(&refs), ok());
    // Half of each slot's keys move: every MGET part meets TRYAGAIN until
    // it is split.
    let moved_a: Vec<&str> = keys[..N].iter().step_by(2).map(String::as_str).collect();
    let moved_b: Vec<&str> = keys[N..].iter().step_by(2).map(String::as_str).collect();
    cluster.split_slot(slot_a, &moved_a);
    cluster.split_slot(slot_b, &moved_b);
    let moved_before = m_info_field(&m, "stats", "redirects_moved");
    let splits_before = m_info_field(&m, "stats", "key_by_key_splits");
    let mut mget = vec!["MGET"];
    mget.extend(keys.iter().map(String::as_str));
    let got = c.cmd(&mget);
    let want: Vec<Reply> = keys.iter().map(|k| bulk(&format!("val-{k}"))).collect();
    assert!(got == Reply::Array(Some(want)), "MGET's values");
    assert_eq!(
        m_info_field(&m, "stats", "key_by_key_splits") - splits_before,
        2,
        "both parts split"
    );
    assert_eq!(
        m_info_field(&m, "stats", "redirects_moved") - moved_before,
        0,
        "resends sent to the other part's node"
    );
}

/// Item 15, pipelined: a CLUSTERDOWN answered to a request that has later
/// requests of its session in flight is waited out too, in order. A
/// pipeline of INCRs on two slots of a node whose cluster state failed
/// (as in the test above), interleaved with INCRs on another node's slot,
/// is sent while the node refuses, and one more INCR of the first slot
/// half a second later; the node is made whole a second later. Every INCR
/// is answered with its count, in the order sent: the retried ones did not
/// overtake each other and the late one waited behind them.
#[test]
fn item15_a_pipelined_clusterdown_is_waited_out_in_order() {
    let cluster = RedisCluster::start(ClusterSpec {
        extra_redis_conf: vec!["cluster-require-full-coverage yes".into()],
        ..ClusterSpec::default()
    });
    let m = Mithril::start(bin(), &cluster.seeds(), "threads 1");
    let k = "{item15p}k";
    let slot_k = key_slot(k.as_bytes());
    let port = cluster.port_for_slot(slot_k);
    // Another slot of the same node, and a slot of another node.
    let j = format!(
        "{}j",
        tag_where("item15j", |s| s != slot_k
            && cluster.port_for_slot(s) == port)
    );
    let z = format!(
        "{}z",
        tag_where("item15z", |s| cluster.port_for_slot(s) != port)
    );
    let other = (0u16..16384)
        .find(|&s| s != slot_k && s != key_slot(j.as_bytes()) && cluster.port_for_slot(s) == port)
        .unwrap()
        .to_string();
    let mut node = Conn::connect(&format!("127.0.0.1:{port}"));
    assert_eq!(node.cmd(&["CLUSTER", "DELSLOTS", &other]), ok());
    wait_until(
        "the node to report the cluster down",
        Duration::from_secs(5),
        || {
            matches!(node.cmd(&["GET", k]), Reply::Error(e) if e.starts_with("CLUSTERDOWN"))
                .then_some(())
        },
    );
    const N: i64 = 100;
    let mut c = m.conn();
    // One reply out first: the dispatch window is sized from it (16
    // until then), so all of the pipeline is dispatched.
    assert_eq!(c.cmd(&["GET", &z]), Reply::Bulk(None));
    let mut sent = Vec::new();
    for _ in 0..N {
        for key in [k, j.as_str(), z.as_str()] {
            sent.push(key.to_string());
            c.send(&[b"INCR", key.as_bytes()]);
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    // Sent while its slot's earlier INCRs wait: it waits behind them.
    sent.push(k.to_string());
    c.send(&[b"INCR", k.as_bytes()]);
    // The other node's slot is served meanwhile only for what was
    // dispatched before the first refusal came back: a later request of
    // the waiting slot stops the session's dispatch at its gate (head of
    // line), and on a loaded machine that may come before the end of the
    // pipeline. So this only waits a moment; the order is checked below.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(node.cmd(&["CLUSTER", "ADDSLOTS", &other]), ok());
    let mut counts: std::collections::HashMap<String, i64> = Default::default();
    let mut wrong = Vec::new();
    for (i, key) in sent.iter().enumerate() {
        let r = c.read_reply();
        let n = counts.entry(key.clone()).or_insert(0);
        *n += 1;
        if r != Reply::Int(*n) {
            wrong.push(format!("#{i} INCR {key}: {r:?}, expected {n}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} replies wrong, first: {:?}",
        wrong.len(),
        sent.len(),
        &wrong[..wrong.len().min(8)]
    );
    assert_eq!(node_or(&cluster, k), (N + 1).to_string(), "{k} on its node");
    for key in [j.as_str(), z.as_str()] {
        assert_eq!(node_or(&cluster, key), N.to_string(), "{key} on its node");
    }
}

/// GET `key` on the node that owns its slot, as a string.
fn node_or(cluster: &RedisCluster, key: &str) -> String {
    let port = cluster.port_for_slot(key_slot(key.as_bytes()));
    Conn::connect(&format!("127.0.0.1:{port}"))
        .cmd(&["GET", key])
        .as_str()
        .to_string()
}
