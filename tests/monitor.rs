//! Issue 14, item 8: MONITOR produced by mithril. The feed of every
//! client's commands on every worker in a node's line format and quoting
//! (compared with a node's own MONITOR), what is not fed, what a
//! monitoring client may still send, RESET, NOPERM for a user without
//! admin rights, MONITOR inside MULTI, and a monitor that never reads
//! cut off at the pubsub output limit while the others keep working;
//! the feed beside the shared pipes.

mod support;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use support::*;

/// One feed line, parsed: the timestamp, the client's address and the
/// quoted arguments as they stand on the line.
#[derive(Debug)]
struct Line {
    secs: u64,
    micros: String,
    addr: String,
    args: String,
}

fn parse_line(r: &Reply) -> Line {
    let Reply::Simple(text) = r else {
        panic!("not a feed line: {r:?}")
    };
    let (stamp, rest) = text.split_once(' ').expect("stamp");
    let (secs, micros) = stamp.split_once('.').expect("seconds.micros");
    let rest = rest.strip_prefix("[0 ").expect("[0 ");
    let (addr, args) = rest.split_once("] ").expect("] ");
    Line {
        secs: secs.parse().expect("seconds"),
        micros: micros.to_string(),
        addr: addr.to_string(),
        args: args.to_string(),
    }
}

/// The next feed line on a monitor (within the I/O timeout).
fn next_line(m: &mut Conn) -> Line {
    parse_line(&m.read_reply())
}

/// Feed lines up to (not including) the one whose arguments are `end`.
fn lines_until(m: &mut Conn, end: &str) -> Vec<Line> {
    let mut out = Vec::new();
    loop {
        let l = next_line(m);
        if l.args == end {
            return out;
        }
        out.push(l);
    }
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// A field of the connection's own CLIENT INFO line (`worker`, `flags`).
fn own_field(c: &mut Conn, name: &str) -> String {
    let info = c.cmd(&["CLIENT", "INFO"]);
    let prefix = format!("{name}=");
    info.as_str()
        .split(' ')
        .find_map(|f| f.strip_prefix(prefix.as_str()))
        .map(str::to_string)
        .unwrap_or_else(|| panic!("no {name} in {info:?}"))
}

fn local_addr(c: &Conn) -> String {
    c.stream().local_addr().unwrap().to_string()
}

fn monitor(c: &mut Conn) {
    assert_eq!(c.cmd(&["MONITOR"]), ok());
}

/// Arguments with quotes, backslashes, control and non-ASCII bytes.
fn awkward_value() -> Vec<u8> {
    b"a\"b\\c\n\r\t\x07\x08\x00\x01\xff \xc3\xa9 'q' ~".to_vec()
}

/// One master behind mithril started with `conf`.
fn one_master(conf: &str) -> (RedisCluster, Mithril) {
    let cluster = RedisCluster::start(ClusterSpec {
        masters: 1,
        ..ClusterSpec::default()
    });
    let m = Mithril::start(bin(), &cluster.seeds(), conf);
    (cluster, m)
}

/// Two workers, clients placed on them in turn.
const TWO_WORKERS: &str = "threads 2\nplacement round-robin\n";

#[test]
fn clients_on_two_workers_fed_in_a_nodes_format() {
    let cluster = RedisCluster::start(ClusterSpec::default());
    let m = Mithril::start(bin(), &cluster.seeds(), TWO_WORKERS);
    let mut mon = m.conn();
    let mon_worker = own_field(&mut mon, "worker");
    monitor(&mut mon);
    // One client on each worker.
    let mut a = m.conn();
    let mut b = m.conn();
    let (wa, wb) = (own_field(&mut a, "worker"), own_field(&mut b, "worker"));
    assert_ne!(wa, wb, "round-robin placement gives two workers");
    assert!(wa == mon_worker || wb == mon_worker);
    // Those CLIENT INFO were fed too (they are not admin commands).
    let key = key_for_slot(7000, "mon");
    let value = awkward_value();
    let t0 = now_secs();
    assert_eq!(
        a.cmd_bytes(&[b"SET", key.as_bytes(), &value, b"EX", b"100"]),
        ok()
    );
    assert_eq!(b.cmd(&["GET", "missing{x}"]), Reply::Bulk(None));
    assert_eq!(a.cmd(&["ECHO", "end"]), bulk("end"));
    let lines = lines_until(&mut mon, "\"ECHO\" \"end\"");
    let t1 = now_secs();
    let set = lines
        .iter()
        .find(|l| l.args.starts_with("\"SET\""))
        .expect("SET fed");
    let get = lines
        .iter()
        .find(|l| l.args.starts_with("\"GET\""))
        .expect("GET fed");
    assert_eq!(set.addr, local_addr(&a));
    assert_eq!(get.addr, local_addr(&b));
    for l in [set, get] {
        assert!((t0..=t1).contains(&l.secs), "{l:?} not in {t0}..={t1}");
        assert_eq!(l.micros.len(), 6, "{l:?}");
        assert!(l.micros.bytes().all(|c| c.is_ascii_digit()), "{l:?}");
    }
    assert_eq!(
        set.args,
        format!(r#""SET" "{key}" "a\"b\\c\n\r\t\a\b\x00\x01\xff \xc3\xa9 'q' ~" "EX" "100""#)
    );
    assert_eq!(get.args, r#""GET" "missing{x}""#);

    // The same command on a node's own MONITOR: the same arguments.
    let node = cluster.node_for_slot(7000);
    let mut node_mon = node.conn();
    assert_eq!(node_mon.cmd(&["MONITOR"]), ok());
    let mut direct = node.conn();
    assert_eq!(
        direct.cmd_bytes(&[b"SET", key.as_bytes(), &value, b"EX", b"100"]),
        ok()
    );
    // The node also sees mithril's own traffic (topology refreshes):
    // its line for the direct client's SET is the one to compare.
    let direct_addr = local_addr(&direct);
    let theirs = wait_until("the node's line", Duration::from_secs(10), || {
        let l = next_line(&mut node_mon);
        (l.addr == direct_addr).then_some(l)
    });
    assert_eq!(theirs.args, set.args);
}

#[test]
fn what_is_fed_and_what_is_not() {
    let (_cluster, m) = one_master("threads 2\n");
    let mut mon = m.conn();
    monitor(&mut mon);
    let mut c = m.conn();
    // Not fed: admin commands, unknown names, wrong arity, MONITOR.
    assert!(c.cmd(&["CONFIG", "GET", "maxclients"]).as_array().len() == 2);
    assert!(c.cmd(&["CLIENT", "LIST"]).as_str().contains("flags=O"));
    assert!(c.cmd(&["NOSUCH", "x"]).is_error());
    assert!(c.cmd(&["GET"]).is_error());
    // Fed, credentials redacted as a node redacts them.
    assert!(c.cmd(&["AUTH", "secret"]).is_error());
    assert!(c.cmd(&["AUTH", "user", "secret"]).is_error());
    assert!(!c.cmd(&["HELLO", "2", "SETNAME", "me"]).is_error());
    assert!(c.cmd(&["HELLO", "2", "AUTH", "user", "secret"]).is_error());
    // A transaction: MULTI, its commands at EXEC, then EXEC.
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["SET", "k{t}", "v"]), Reply::Simple("QUEUED".into()));
    assert_eq!(c.cmd(&["GET", "k{t}"]), Reply::Simple("QUEUED".into()));
    assert_eq!(c.cmd(&["EXEC"]).as_array().len(), 2);
    // An aborted one: only EXEC.
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert!(c.cmd(&["SET", "k{t}"]).is_error());
    assert!(c.cmd(&["EXEC"]).as_error().starts_with("EXECABORT"));
    // EVAL feeds itself.
    assert_eq!(c.cmd(&["EVAL", "return 1", "0"]), Reply::Int(1));
    assert_eq!(c.cmd(&["ECHO", "end"]), bulk("end"));
    let got: Vec<String> = lines_until(&mut mon, "\"ECHO\" \"end\"")
        .into_iter()
        .map(|l| l.args)
        .collect();
    let want = [
        r#""AUTH" "(redacted)""#,
        r#""AUTH" "(redacted)" "(redacted)""#,
        r#""HELLO" "2" "SETNAME" "me""#,
        r#""HELLO" "2" "AUTH" "(redacted)" "(redacted)""#,
        r#""MULTI""#,
        r#""SET" "k{t}" "v""#,
        r#""GET" "k{t}""#,
        r#""EXEC""#,
        r#""MULTI""#,
        r#""EXEC""#,
        r#""EVAL" "return 1" "0""#,
    ];
    assert_eq!(got, want);

    // What the monitor itself may send: no keyspace command (a node's
    // answer to a replica), the rest with its own line after the reply;
    // a second MONITOR is not answered.
    assert_eq!(
        mon.cmd(&["GET", "k{t}"]).as_error(),
        "ERR Replica can't interact with the keyspace"
    );
    mon.send(&[b"MONITOR"]);
    assert_eq!(mon.cmd(&["PING"]), Reply::Simple("PONG".into()));
    assert_eq!(next_line(&mut mon).args, r#""PING""#);
    // Pipelined, each line after its own reply, as on a node.
    let frames: Vec<u8> = [&[&b"PING"[..]][..], &[b"ECHO", b"x"], &[b"PING"]]
        .iter()
        .flat_map(|a| encode_command(a))
        .collect();
    mon.write_raw(&frames).unwrap();
    assert_eq!(mon.read_reply(), Reply::Simple("PONG".into()));
    assert_eq!(next_line(&mut mon).args, r#""PING""#);
    assert_eq!(mon.read_reply(), bulk("x"));
    assert_eq!(next_line(&mut mon).args, r#""ECHO" "x""#);
    assert_eq!(mon.read_reply(), Reply::Simple("PONG".into()));
    assert_eq!(next_line(&mut mon).args, r#""PING""#);
    assert_eq!(own_field(&mut mon, "flags"), "O");
    assert_eq!(next_line(&mut mon).args, r#""CLIENT" "INFO""#);
    // RESET pipelined: no line of its own, nor of what follows.
    let frames: Vec<u8> = [&[&b"RESET"[..]][..], &[b"PING"]]
        .iter()
        .flat_map(|a| encode_command(a))
        .collect();
    mon.write_raw(&frames).unwrap();
    assert_eq!(mon.read_reply(), Reply::Simple("RESET".into()));
    assert_eq!(mon.read_reply(), Reply::Simple("PONG".into()));
    assert_eq!(own_field(&mut mon, "flags"), "N");
}

#[test]
fn reset_ends_the_feed() {
    let (_cluster, m) = one_master(TWO_WORKERS);
    let mut mon = m.conn();
    let mut other = m.conn();
    monitor(&mut mon);
    monitor(&mut other);
    let mut c = m.conn();
    assert_eq!(c.cmd(&["SET", "a", "1"]), ok());
    for x in [&mut mon, &mut other] {
        assert_eq!(next_line(x).args, r#""SET" "a" "1""#);
    }
    assert_eq!(mon.cmd(&["RESET"]), Reply::Simple("RESET".into()));
    // The other monitor saw RESET; then a command and a marker.
    assert_eq!(next_line(&mut other).args, r#""RESET""#);
    assert_eq!(c.cmd(&["SET", "a", "2"]), ok());
    assert_eq!(c.cmd(&["ECHO", "end"]), bulk("end"));
    assert_eq!(lines_until(&mut other, "\"ECHO\" \"end\"").len(), 1);
    // Nothing for the one that left (a marker reached the other).
    assert!(matches!(
        mon.try_read_reply(Duration::from_millis(300)),
        Err(e) if e.kind() == std::io::ErrorKind::TimedOut
    ));
    assert_eq!(mon.cmd(&["PING"]), Reply::Simple("PONG".into()));
    // CLIENT LIST: `O` for the one still monitoring only.
    let list = c.cmd(&["CLIENT", "LIST"]).as_str().to_string();
    let flagged: Vec<&str> = list.lines().filter(|l| l.contains(" flags=O ")).collect();
    assert_eq!(flagged.len(), 1, "{list}");
    assert!(flagged[0].contains(&format!("addr={} ", local_addr(&other))));
}

#[test]
fn noperm_without_admin_rights_and_inside_multi() {
    let (cluster, m) = one_master("user writer on >w-pw mode write\n");
    let mut w = m.conn();
    assert_eq!(w.cmd(&["AUTH", "writer", "w-pw"]), ok());
    // The node's answer to the same user (no admin commands).
    let mut node = cluster.nodes[0].conn();
    let setuser = "ACL SETUSER writer on >w-pw ~* &* +@all -@admin -@dangerous";
    assert_eq!(node.cmd(&setuser.split(' ').collect::<Vec<_>>()), ok());
    let mut live = cluster.nodes[0].conn();
    assert_eq!(live.cmd(&["AUTH", "writer", "w-pw"]), ok());
    let ours = w.cmd(&["MONITOR"]);
    assert_eq!(
        ours.as_error(),
        "NOPERM this user has no permissions to run the 'monitor' command"
    );
    assert_eq!(ours, live.cmd(&["MONITOR"]));
    // Still an ordinary client.
    assert_eq!(w.cmd(&["SET", "k", "v"]), ok());

    // Inside MULTI it is queued, and EXEC answers what a node answers.
    let mut c = m.conn();
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["MONITOR"]), Reply::Simple("QUEUED".into()));
    let ours = c.cmd(&["EXEC"]);
    assert_eq!(
        ours,
        Reply::Array(Some(vec![err(
            "ERR MONITOR isn't allowed for DENY BLOCKING client"
        )]))
    );
    assert_eq!(node.cmd(&["MULTI"]), ok());
    assert_eq!(node.cmd(&["MONITOR"]), Reply::Simple("QUEUED".into()));
    assert_eq!(node.cmd(&["EXEC"]), ours);
    // No feed started by it.
    assert_eq!(own_field(&mut c, "flags"), "N");
}

#[test]
fn a_monitor_that_never_reads_is_cut_off_at_the_limit() {
    let (_cluster, m) =
        one_master("threads 2\nplacement round-robin\nclient-output-buffer-limit pubsub 1mb 0 0\n");
    let mut slow = m.conn();
    monitor(&mut slow);
    let mut c = m.conn();
    let mut d = m.conn();
    let evicted = |c: &mut Conn| {
        let info = c.cmd(&["INFO", "stats"]).as_str().to_string();
        info.lines()
            .find_map(|l| l.strip_prefix("evicted_clients_output_buffer:"))
            .unwrap()
            .trim()
            .parse::<u64>()
            .unwrap()
    };
    assert_eq!(evicted(&mut c), 0);
    // 10 KB lines, until the monitor is cut (the kernel's buffers take
    // some megabytes first).
    let value = "x".repeat(10_000);
    let batch: Vec<Vec<Vec<u8>>> = (0..100)
        .map(|i| argv(&["SET", &format!("k{i}"), &value]))
        .collect();
    let start = Instant::now();
    while evicted(&mut c) == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the monitor was never cut off"
        );
        assert!(c.pipeline(&batch).iter().all(|r| *r == ok()));
    }
    assert_eq!(evicted(&mut c), 1);
    // It is gone (what it had in its socket buffers, then the close).
    let got = slow.read_raw_until_closed(Duration::from_secs(10));
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with('+'), "{:?}", &text[..text.len().min(60)]);
    assert!(text.contains("\"SET\" \"k0\" \"xxx"));
    assert!(slow.is_closed(Duration::from_secs(1)));
    // The others never noticed.
    assert_eq!(d.cmd(&["GET", "k1"]), bulk(&value));
    assert_eq!(c.cmd(&["PING"]), Reply::Simple("PONG".into()));
    let list = c.cmd(&["CLIENT", "LIST"]).as_str().to_string();
    assert!(!list.contains(" flags=O "), "{list}");
}

/// With the shared pipes on, the feed shares the workers' inboxes with
/// the pipes' requests and replies: every command of two pipelining
/// clients on two workers is fed once, in each client's order, and
/// every reply is right.
#[test]
fn the_feed_beside_the_shared_pipes() {
    let (_cluster, m) = one_master(&format!("{TWO_WORKERS}backend-sharding yes\n"));
    let mut mon = m.conn();
    monitor(&mut mon);
    let mut a = m.conn();
    let mut b = m.conn();
    assert_ne!(own_field(&mut a, "worker"), own_field(&mut b, "worker"));
    // 300 SETs in one write, not read yet.
    let send_batch = |c: &mut Conn, who: &str| {
        let key = format!("{who}{{p}}");
        let bytes: Vec<u8> = (0..300)
            .flat_map(|i: i32| {
                let v = i.to_string();
                encode_command(&[b"SET", key.as_bytes(), v.as_bytes()])
            })
            .collect();
        c.write_raw(&bytes).unwrap();
    };
    for _ in 0..3 {
        send_batch(&mut a, "a");
        send_batch(&mut b, "b");
        for c in [&mut a, &mut b] {
            for _ in 0..300 {
                assert_eq!(c.read_reply(), ok());
            }
        }
    }
    assert_eq!(a.cmd(&["ECHO", "end"]), bulk("end"));
    let lines = lines_until(&mut mon, "\"ECHO\" \"end\"");
    for (who, addr) in [("a", local_addr(&a)), ("b", local_addr(&b))] {
        let values: Vec<String> = lines
            .iter()
            .filter(|l| l.args.starts_with(&format!("\"SET\" \"{who}{{p}}\"")))
            .inspect(|l| assert_eq!(l.addr, addr))
            .map(|l| {
                l.args
                    .rsplit(' ')
                    .next()
                    .unwrap()
                    .trim_matches('"')
                    .to_string()
            })
            .collect();
        let want: Vec<String> = (0..3)
            .flat_map(|_| (0..300).map(|i| i.to_string()))
            .collect();
        assert_eq!(values, want, "{who}");
    }
}
