//! Regression for redirects that name a host instead of an IP: nodes
//! started with `cluster-announce-hostname` and
//! `cluster-preferred-endpoint-type hostname` answer `-MOVED 3999
//! localhost:7001` and `-ASK ...` with the name. mithril resolves the name
//! through the topology's address book and follows the redirect; the client
//! never sees it. Before the fix the redirect reached the client verbatim.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::load::{run_load, verify};
use support::*;

fn hostname_cluster() -> RedisCluster {
    RedisCluster::start(ClusterSpec {
        extra_redis_conf: vec![
            "cluster-announce-hostname localhost".into(),
            "cluster-preferred-endpoint-type hostname".into(),
        ],
        ..ClusterSpec::default()
    })
}

#[test]
fn redirects_naming_a_hostname_are_followed_during_a_migration() {
    let cluster = hostname_cluster();
    // The nodes really redirect by name.
    let slot = 5600u16;
    let key = key_for_slot(slot, "probe");
    let wrong = cluster
        .masters()
        .into_iter()
        .find(|n| n.port != cluster.port_for_slot(slot))
        .expect("another master")
        .clone();
    match wrong.conn().cmd(&["GET", &key]) {
        Reply::Error(e) => assert!(e.starts_with("MOVED 5600 localhost:"), "{e}"),
        other => panic!("expected a MOVED by hostname, got {other:?}"),
    }

    let m = Mithril::start(bin(), &cluster.seeds(), "");
    let hot = vec![100, slot, 11000];
    let stop = Arc::new(AtomicBool::new(false));
    let load = run_load(m.addr(), hot.clone(), stop.clone(), false);
    let mut moved = 0;
    for (i, &s) in hot.iter().enumerate() {
        // Paced, so requests meet the slot half-migrated (ASK by name) and
        // then moved (MOVED by name) before the topology catches up.
        moved += cluster.migrate_slot_paced(s, (i + 1) % 3, 1, Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let out = load.join().unwrap();
    out.assert_no_errors();
    assert!(moved > 0 && out.ops > 500, "moved {moved}, {} ops", out.ops);
    verify(&cluster, &out.model);

    // A single client reading a key of a moved slot, with mithril's map
    // stale for that slot, still gets the value.
    let mut c = m.conn();
    assert_eq!(c.cmd(&["SET", &key, "v1"]), Reply::Simple("OK".into()));
    cluster.migrate_slot(slot, 0, 10);
    assert_eq!(c.cmd(&["GET", &key]), Reply::Bulk(Some(b"v1".to_vec())));
}
