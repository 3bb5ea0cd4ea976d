//! Logging of backend trouble (issue 8): a node going down and coming back
//! is logged at notice with the worker id, and the repeated connection
//! failures in between are sampled (one line a second per node, with a
//! count of the lines held back). The counters see every failure.

mod support;

use std::time::{Duration, Instant};
use support::*;

#[test]
fn node_down_and_up_are_logged_and_failures_sampled() {
    let mut cluster = RedisCluster::start(ClusterSpec::default());
    let m = Mithril::start(bin(), &cluster.seeds(), "threads 1\nloglevel notice\n");
    let mut c = m.conn();
    let key = "logged:key";
    assert_eq!(c.cmd(&["SET", key, "v"]).as_str(), "OK");
    let port = cluster.port_for_slot(key_slot(key.as_bytes()));
    let idx = cluster.nodes.iter().position(|n| n.port == port).unwrap();
    let node = format!("127.0.0.1:{port}");

    cluster.kill(idx);
    // Two seconds of requests to the dead node: every one fails fast, and
    // the proxy keeps trying to reconnect (backing off).
    let until = Instant::now() + Duration::from_millis(2500);
    let mut errors = 0;
    while Instant::now() < until {
        if c.cmd(&["GET", key]).is_error() {
            errors += 1;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(errors > 100, "{errors}");
    let down = wait_until("the node-down notice", Duration::from_secs(5), || {
        let log = m.log();
        log.lines()
            .find(|l| l.contains(&format!("worker 0: node {node} is down")))
            .map(str::to_string)
    });
    assert!(down.contains(" * "), "logged at notice: {down}");

    let log = m.log();
    let failed: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(&format!("connection to {node} failed")))
        .collect();
    // Failed connects (one per backoff period) in 2.5 s: logged at most
    // once a second, so a handful of lines at most.
    assert!(!failed.is_empty(), "{log}");
    assert!(failed.len() <= 4, "{failed:#?}");
    let stats = c.cmd(&["INFO", "stats"]).as_str().to_string();
    let backend_errors: u64 = stats
        .lines()
        .find_map(|l| l.strip_prefix("backend_errors:"))
        .unwrap()
        .parse()
        .unwrap();
    assert!(backend_errors >= 1, "{stats}");
    let logged_or_held: u64 = failed
        .iter()
        .map(|l| {
            l.split(" (")
                .last()
                .and_then(|t| t.split(' ').next())
                .and_then(|n| n.parse::<u64>().ok())
                .map_or(1, |n| n + 1)
        })
        .sum();
    assert!(
        logged_or_held <= backend_errors,
        "{logged_or_held} > {backend_errors}: {failed:#?}"
    );

    cluster.restart(idx);
    // (The node keeps nothing on disk: the key is gone, the slot served.)
    wait_until("the node to serve again", Duration::from_secs(20), || {
        (!c.cmd(&["GET", key]).is_error()).then_some(())
    });
    wait_until("the node-up notice", Duration::from_secs(5), || {
        m.log()
            .contains(&format!("worker 0: node {node} is up again"))
            .then_some(())
    });
    let backends = c.cmd(&["INFO", "backends"]).as_str().to_string();
    let line = backends
        .lines()
        .find(|l| l.contains(&format!("addr={node},")))
        .unwrap();
    assert!(line.contains(",reconnects=1,"), "{line}");
    assert!(!line.contains(",errors=0,"), "{line}");
}
