//! The cluster placement's tables: slots to masters and replicas, MOVED's
//! overrides until the next epoch, pools retired when the map drops them.

use super::*;
use crate::topology::{Node, Role, Shard};

fn topo() -> Topology {
    let node = |port: u16, role| Node {
        id: port.to_string(),
        addr: SocketAddr::from(([127, 0, 0, 1], port)),
        role,
        healthy: true,
    };
    Topology::new(
        vec![
            node(7000, Role::Master),
            node(7001, Role::Master),
            node(7002, Role::Replica),
        ],
        vec![
            Shard {
                master: 0,
                replicas: vec![2],
                ranges: vec![(0, 8191)],
            },
            Shard {
                master: 1,
                replicas: vec![],
                ranges: vec![(8192, 16383)],
            },
        ],
    )
}

fn placement(conns: usize, read_from: ReadFrom, map: Topology) -> Placement {
    Placement::new(Arc::new(map), vec![conns], vec![0], read_from, 7, 0)
}

#[test]
fn maps_slots_overrides_and_replicas() {
    let t = topo();
    let mut p = placement(2, ReadFrom::PreferReplica, t.clone());
    let a = p.master(5, Proto::Resp2).unwrap();
    assert_eq!(p.conns.sets[a].key.addr.port(), 7000);
    let a3 = p.master(5, Proto::Resp3).unwrap();
    assert_ne!(a, a3);
    assert_eq!(p.conns.sets[a3].key.proto, Proto::Resp3);
    let now = Instant::now();
    let r = p.reader(5, true, Proto::Resp2, 0, now).unwrap();
    assert!(p.conns.sets[r].key.readonly);
    assert_eq!(p.replica(9000, Proto::Resp2, 0, now), None);
    assert_eq!(
        p.reader(9000, true, Proto::Resp2, 0, now),
        p.master(9000, Proto::Resp2)
    );
    p.conns.mark_failed(r, now, "down".into());
    assert!(p.conns.is_down(r, now));
    assert_eq!(p.replica(5, Proto::Resp2, 0, now), None);
    assert_eq!(p.reader(5, true, Proto::Resp2, 0, now), Some(a));
    p.learn_moved(5, SocketAddr::from(([127, 0, 0, 1], 7001)));
    let moved = p.master(5, Proto::Resp2).unwrap();
    assert_eq!(p.conns.sets[moved].key.addr.port(), 7001);
    p.install(Arc::new(t));
    assert_eq!(
        p.master(5, Proto::Resp2),
        Some(a),
        "a new epoch clears overrides"
    );
    assert_eq!(p.conns.sets[a].conns.len(), 2);
}

#[test]
fn pools_the_map_no_longer_names_are_retired_and_their_slots_reused() {
    let t = topo();
    let mut p = placement(1, ReadFrom::No, t);
    let gone = p.master(9000, Proto::Resp2).unwrap();
    assert_eq!(p.conns.sets[gone].key.addr.port(), 7001);
    let conn = Key { index: 5, gen: 1 };
    p.conns.set_conn(gone, 0, conn);
    // 7001 leaves: shard 0 takes every slot.
    let mut shrunk = topo();
    shrunk.shards.truncate(1);
    shrunk.shards[0].ranges = vec![(0, 16383)];
    let t2 = Topology::new(shrunk.nodes.clone(), shrunk.shards.clone());
    let closed = p.install(Arc::new(t2.clone()));
    assert_eq!(closed, [conn], "its connection is handed back");
    assert!(p.conns.sets[gone].retired);
    assert_eq!(p.conns.slot_key(gone, 0), Key::NONE);
    assert_eq!(
        p.master(9000, Proto::Resp2)
            .map(|i| p.conns.sets[i].key.addr.port()),
        Some(7000)
    );
    // Retired once only; its slot goes to the next pool made (a MOVED
    // to 7001 again, say), fresh.
    assert!(p.install(Arc::new(t2)).is_empty());
    let again = p.at(SocketAddr::from(([127, 0, 0, 1], 7001)), Proto::Resp3, 0);
    assert!(again == gone || p.conns.sets[gone].retired);
    assert!(!p.conns.sets[again].retired);
    assert_eq!(p.conns.sets[again].key.proto, Proto::Resp3);
    assert_eq!(p.conns.sets.iter().filter(|x| !x.retired).count(), 3);
}

#[test]
fn keyless_commands_rotate_over_the_masters_and_home_is_the_first() {
    let mut p = placement(1, ReadFrom::No, topo());
    let picks: Vec<usize> = (0..4).filter_map(|_| p.any_master(0)).collect();
    assert_eq!(picks, [1, 0, 1, 0]);
    assert_eq!(p.home(0), Some(0));
    assert_eq!(p.masters(0), 0..2);
    let mut empty = placement(1, ReadFrom::No, Topology::empty());
    assert_eq!(empty.any_master(0), None);
    assert_eq!(empty.home(0), None);
}
