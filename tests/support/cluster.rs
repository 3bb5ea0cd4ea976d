//! A real Redis Cluster made of `redis-server` processes on 127.0.0.1.
//!
//! ```text
//!  start: spawn every node ──> each answers INFO with our PID
//!         masters: SET-CONFIG-EPOCH i+1, ADDSLOTSRANGE (even split)
//!         node 0: CLUSTER MEET every other node
//!         replicas: CLUSTER REPLICATE <master> (retried until it knows it)
//!         wait: every node ok, knows every node, same roles, same slot map
//!               (stalled for 8 s: every node MEETs every other, again)
//! ```
//!
//! With `ClusterSpec::tls`, every node also listens for TLS on its
//! `tls_port` and speaks TLS to the other nodes (`tls-cluster yes`: the
//! cluster bus is on tls_port + 10000, so MEET and MIGRATE name
//! `peer_port`) and to its master (`tls-replication yes`). Its plain port
//! stays open: the harness itself talks plain RESP to it, and over a plain
//! connection CLUSTER SLOTS / NODES and MOVED name the plain ports (over a
//! TLS one, the TLS ports).
//!
//! Owns: its temp dir and every node process (one dir per node with
//! `redis.conf`, `nodes.conf`, `redis.log`). Invariants: `children[i]` is
//! `Some` exactly while node `i` runs; each node sits in its own process group
//! so a terminal's Ctrl-C does not reach it; the cluster is configured with
//! plain RESP over TCP (no redis-cli). Never: signal a PID it did not start,
//! or return from `start` before the cluster is whole.

use std::fmt::Write as _;
use std::fs::{self, File};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::process::{kill_and_reap, spawn_child, terminate_all};
use super::resp::{Conn, Reply};
use super::slots::{key_slot, SLOTS};
use super::{free_port, make_temp_dir, redis_server_path, remove_temp_dir, tail_file};
use super::{poll_until, wait_until_explained};

const FORM_DEADLINE: Duration = Duration::from_secs(45);
/// How long formation may stall before every node meets every other.
const REMEET_AFTER: Duration = Duration::from_secs(8);
const BOOT_DEADLINE: Duration = Duration::from_secs(15);
const STOP_GRACE: Duration = Duration::from_secs(3);
const PORT_ATTEMPTS: usize = 5;

/// What to start.
#[derive(Clone, Debug)]
pub struct ClusterSpec {
    pub masters: usize,
    pub replicas_per_master: usize,
    pub node_timeout_ms: u64,
    /// Extra `redis.conf` lines, appended last (so they win).
    pub extra_redis_conf: Vec<String>,
    /// Ports to use, node by node (empty: free ports). A port in use is
    /// then an error, not a reason to pick another.
    pub ports: Vec<u16>,
    /// TLS beside the plain port, toward clients, peers and masters
    /// (`None`: plain only). `Certs::node_tls` makes one.
    pub tls: Option<NodeTls>,
}

/// The TLS side of every node: `tls-port` (a free port), `tls-cluster
/// yes`, `tls-replication yes`, these files and `tls-auth-clients`.
#[derive(Clone, Debug)]
pub struct NodeTls {
    /// What the node presents, to clients and to its peers (its extended
    /// key usage must allow clientAuth too: the cluster bus asks for it).
    pub cert_file: String,
    pub key_file: String,
    /// The CA that verifies the peers, and clients that show a certificate.
    pub ca_cert_file: String,
    pub auth_clients: AuthClients,
}

/// `tls-auth-clients`: whether a client must show a certificate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum AuthClients {
    No,
    Optional,
    Yes,
}

impl AuthClients {
    pub fn as_str(self) -> &'static str {
        match self {
            AuthClients::No => "no",
            AuthClients::Optional => "optional",
            AuthClients::Yes => "yes",
        }
    }
}

impl Default for ClusterSpec {
    fn default() -> Self {
        ClusterSpec {
            masters: 3,
            replicas_per_master: 0,
            node_timeout_ms: 2000,
            extra_redis_conf: Vec::new(),
            ports: Vec::new(),
            tls: None,
        }
    }
}

/// One node as started. `master_of` is the role given at start; after a
/// failover call `RedisCluster::refresh_roles` to bring it up to date.
#[derive(Clone, Debug, PartialEq)]
pub struct RedisNode {
    pub port: u16,
    /// Its TLS port (`ClusterSpec::tls`).
    pub tls_port: Option<u16>,
    pub pid: u32,
    /// The 40-hex node id.
    pub id: String,
    /// The id of its master; `None` for a master.
    pub master_of: Option<String>,
}

impl RedisNode {
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn conn(&self) -> Conn {
        Conn::connect(&self.addr())
    }

    /// `127.0.0.1:TLS_PORT`; panics on a node without TLS.
    pub fn tls_addr(&self) -> String {
        let port = self.tls_port.expect("a node started with ClusterSpec::tls");
        format!("127.0.0.1:{port}")
    }

    /// The port the other nodes know it by: its TLS port under
    /// `tls-cluster yes` (its cluster bus is that + 10000), else its port.
    pub fn peer_port(&self) -> u16 {
        self.tls_port.unwrap_or(self.port)
    }
}

pub struct RedisCluster {
    /// Masters first, then replicas (replica `k` of master `j` is at
    /// `masters + j * replicas_per_master + k`).
    pub nodes: Vec<RedisNode>,
    pub dir: PathBuf,
    children: Vec<Option<Child>>,
    node_dirs: Vec<PathBuf>,
    spec: ClusterSpec,
    formed: bool,
}

/// `(node id, its master's id)` for each node, in `live` order.
type Roles = Vec<(String, Option<String>)>;
/// `(first slot, last slot, master id)`, sorted.
type SlotOwners = Vec<(u16, u16, String)>;

/// What one node says about the cluster.
struct View {
    state_ok: bool,
    /// The `cluster_slots_*`, `cluster_known_nodes` and `cluster_size`
    /// lines of `CLUSTER INFO`, for the explanation when the state is off.
    info_summary: String,
    lines: Vec<NodeLine>,
    slots: SlotOwners,
}

struct NodeLine {
    id: String,
    port: u16,
    flags: Vec<String>,
    master: Option<String>,
    connected: bool,
}

enum BootError {
    PortInUse,
    Failed(String),
}

impl RedisCluster {
    /// Starts the nodes, builds the cluster and waits (30 s) until it is whole.
    pub fn start(spec: ClusterSpec) -> RedisCluster {
        assert!(
            (1..=usize::from(SLOTS)).contains(&spec.masters),
            "ClusterSpec: masters must be 1..=16384"
        );
        let total = spec.masters * (1 + spec.replicas_per_master);
        let mut cluster = RedisCluster {
            nodes: Vec::with_capacity(total),
            dir: make_temp_dir(),
            children: Vec::with_capacity(total),
            node_dirs: Vec::with_capacity(total),
            spec,
            formed: false,
        };
        // From here on a panic drops `cluster`, which stops what was started.
        for i in 0..total {
            let node_dir = cluster.dir.join(format!("node{i}"));
            fs::create_dir_all(&node_dir)
                .unwrap_or_else(|e| panic!("cannot create {}: {e}", node_dir.display()));
            cluster.node_dirs.push(node_dir);
            let port = cluster.spec.ports.get(i).copied().unwrap_or_else(free_port);
            let tls_port = cluster.spec.tls.as_ref().map(|_| free_port());
            let child = cluster.spawn_node(i, port, tls_port);
            cluster.nodes.push(RedisNode {
                port,
                tls_port,
                pid: child.id(),
                id: String::new(),
                master_of: None,
            });
            cluster.children.push(Some(child));
        }
        for i in 0..total {
            cluster.boot_with_port_retries(i);
        }
        cluster.build();
        cluster.formed = true;
        cluster
    }

    fn conf_path(&self, idx: usize) -> PathBuf {
        self.node_dirs[idx].join("redis.conf")
    }

    pub fn log_path(&self, idx: usize) -> PathBuf {
        self.node_dirs[idx].join("redis.log")
    }

    fn write_conf(&self, idx: usize, port: u16, tls_port: Option<u16>) {
        let node_dir = &self.node_dirs[idx];
        let mut conf = String::new();
        let _ = writeln!(conf, "port {port}");
        if let (Some(tls), Some(tls_port)) = (&self.spec.tls, tls_port) {
            let _ = writeln!(conf, "tls-port {tls_port}");
            conf.push_str("tls-cluster yes\ntls-replication yes\n");
            let _ = writeln!(conf, "tls-cert-file {:?}", tls.cert_file);
            let _ = writeln!(conf, "tls-key-file {:?}", tls.key_file);
            let _ = writeln!(conf, "tls-ca-cert-file {:?}", tls.ca_cert_file);
            let _ = writeln!(conf, "tls-auth-clients {}", tls.auth_clients.as_str());
        }
        conf.push_str("bind 127.0.0.1\nprotected-mode no\ndaemonize no\n");
        conf.push_str("cluster-enabled yes\ncluster-config-file nodes.conf\n");
        let _ = writeln!(conf, "cluster-node-timeout {}", self.spec.node_timeout_ms);
        conf.push_str("save \"\"\nappendonly no\n");
        // Start replica syncs at once instead of waiting to batch replicas.
        conf.push_str("repl-diskless-sync-delay 0\n");
        let _ = writeln!(conf, "dir {:?}", node_dir.display().to_string());
        let _ = writeln!(
            conf,
            "logfile {:?}",
            self.log_path(idx).display().to_string()
        );
        for line in &self.spec.extra_redis_conf {
            conf.push_str(line);
            conf.push('\n');
        }
        let path = self.conf_path(idx);
        fs::write(&path, conf).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    }

    /// Writes the node's config for its ports and starts it (in its own
    /// group).
    fn spawn_node(&self, idx: usize, port: u16, tls_port: Option<u16>) -> Child {
        self.write_conf(idx, port, tls_port);
        self.launch(idx)
    }

    /// Starts node `idx` from its existing config.
    fn launch(&self, idx: usize) -> Child {
        use std::os::unix::process::CommandExt;
        let node_dir = &self.node_dirs[idx];
        let stdio_path = node_dir.join("stdio.log");
        let open = || {
            File::options()
                .create(true)
                .append(true)
                .open(&stdio_path)
                .unwrap_or_else(|e| panic!("cannot open {}: {e}", stdio_path.display()))
        };
        let mut cmd = Command::new(redis_server_path());
        cmd.arg(self.conf_path(idx))
            .current_dir(node_dir)
            .stdin(Stdio::null())
            .stdout(open())
            .stderr(open())
            .process_group(0);
        spawn_child(cmd)
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", redis_server_path().display()))
    }

    /// Waits until node `idx` answers and reports our child's PID (so a
    /// stranger on the same port is never mistaken for it).
    fn boot(&mut self, idx: usize) -> Result<(), BootError> {
        let port = self.nodes[idx].port;
        let log = self.log_path(idx);
        let stdio = self.node_dirs[idx].join("stdio.log");
        let Some(child) = self.children[idx].as_mut() else {
            return Err(BootError::Failed("node is not running".into()));
        };
        let pid = child.id();
        let want = format!("process_id:{pid}\r\n");
        let outcome = poll_until(BOOT_DEADLINE, || {
            if let Ok(Some(status)) = child.try_wait() {
                let text = format!("{}\n{}", tail_file(&log, 20), tail_file(&stdio, 20));
                return Some(if text.contains("already in use") {
                    Err(BootError::PortInUse)
                } else {
                    Err(BootError::Failed(format!(
                        "redis-server on port {port} exited ({status}); log:\n{text}"
                    )))
                });
            }
            let mut c = Conn::try_connect(&format!("127.0.0.1:{port}")).ok()?;
            c.send(&[b"INFO", b"server"]);
            match c.try_read_reply(Duration::from_secs(2)).ok()? {
                Reply::Bulk(Some(info)) if String::from_utf8_lossy(&info).contains(&want) => {
                    Some(Ok(()))
                }
                _ => None,
            }
        });
        outcome.unwrap_or_else(|| {
            Err(BootError::Failed(format!(
                "redis-server on port {port} did not answer within {BOOT_DEADLINE:?}; log:\n{}",
                tail_file(&log, 20)
            )))
        })
    }

    fn boot_with_port_retries(&mut self, idx: usize) {
        for _ in 0..PORT_ATTEMPTS {
            match self.boot(idx) {
                Ok(()) => return,
                Err(BootError::Failed(why)) => panic!("{why}"),
                Err(BootError::PortInUse) if !self.spec.ports.is_empty() => {
                    panic!("node {idx}: port {} is in use", self.nodes[idx].port)
                }
                Err(BootError::PortInUse) => {
                    // Someone took the port between free_port and bind.
                    if let Some(mut old) = self.children[idx].take() {
                        kill_and_reap(&mut old);
                    }
                    let port = free_port();
                    let tls_port = self.spec.tls.as_ref().map(|_| free_port());
                    let child = self.spawn_node(idx, port, tls_port);
                    self.nodes[idx].port = port;
                    self.nodes[idx].tls_port = tls_port;
                    self.nodes[idx].pid = child.id();
                    self.children[idx] = Some(child);
                }
            }
        }
        panic!("node {idx}: every port tried was taken by another process");
    }

    /// Assigns slots, introduces the nodes, attaches replicas, waits.
    fn build(&mut self) {
        let masters = self.spec.masters;
        for n in &mut self.nodes {
            let id = n.conn().cmd(&["CLUSTER", "MYID"]);
            n.id = id.as_str().to_string();
        }
        for (j, n) in self.nodes.iter().take(masters).enumerate() {
            let first = j * usize::from(SLOTS) / masters;
            let last = (j + 1) * usize::from(SLOTS) / masters - 1;
            let mut c = n.conn();
            let epoch = (j + 1).to_string();
            expect_ok(&c.cmd(&["CLUSTER", "SET-CONFIG-EPOCH", &epoch]), n.port);
            let (first, last) = (first.to_string(), last.to_string());
            expect_ok(&c.cmd(&["CLUSTER", "ADDSLOTSRANGE", &first, &last]), n.port);
        }
        let mut first = self.nodes[0].conn();
        for n in &self.nodes[1..] {
            let port = n.peer_port().to_string();
            expect_ok(&first.cmd(&["CLUSTER", "MEET", "127.0.0.1", &port]), n.port);
        }
        let per = self.spec.replicas_per_master;
        for idx in masters..self.nodes.len() {
            let master_id = self.nodes[(idx - masters) / per].id.clone();
            let mut c = self.nodes[idx].conn();
            let what = format!("node {idx} to accept CLUSTER REPLICATE {master_id}");
            wait_until_explained(&what, FORM_DEADLINE, || {
                match c.cmd(&["CLUSTER", "REPLICATE", &master_id]) {
                    Reply::Simple(s) if s == "OK" => Ok(()),
                    other => Err(format!("{other:?}")),
                }
            });
            self.nodes[idx].master_of = Some(master_id);
        }
        let live: Vec<usize> = (0..self.nodes.len()).collect();
        // Gossip normally spreads node 0's introductions within a second or
        // two. On a loaded machine a node has been seen to sit in a failed
        // cluster state for the whole deadline, so a formation that stalls
        // gets every node introduced to every other directly (a MEET of a
        // known node is harmless: Redis folds the handshake into it).
        let mut next_meet = Instant::now() + REMEET_AFTER;
        wait_until_explained("the new cluster to be whole", FORM_DEADLINE, || {
            let verdict = self.check(&live, true);
            if let (Err(why), true) = (&verdict, Instant::now() >= next_meet) {
                eprintln!("cluster formation stalled ({why}): every node meets every other");
                self.meet_everyone();
                next_meet = Instant::now() + REMEET_AFTER;
            }
            verdict
        });
    }

    /// Every node sends CLUSTER MEET for every other one (errors ignored:
    /// this is a nudge, and the caller goes on checking the outcome).
    fn meet_everyone(&self) {
        for (i, n) in self.nodes.iter().enumerate() {
            if !self.is_running(i) {
                continue;
            }
            for (j, other) in self.nodes.iter().enumerate() {
                if i != j && self.is_running(j) {
                    let port = other.peer_port().to_string();
                    let _ = try_cmd(n.port, &["CLUSTER", "MEET", "127.0.0.1", &port]);
                }
            }
        }
    }

    /// `"127.0.0.1:PORT"` of every node (running or not).
    pub fn seeds(&self) -> Vec<String> {
        self.nodes.iter().map(RedisNode::addr).collect()
    }

    /// `"127.0.0.1:TLS_PORT"` of every node (`ClusterSpec::tls`).
    pub fn tls_seeds(&self) -> Vec<String> {
        self.nodes.iter().map(RedisNode::tls_addr).collect()
    }

    /// The running nodes that are masters by the roles given at start (or
    /// read by the last `refresh_roles`).
    pub fn masters(&self) -> Vec<&RedisNode> {
        self.nodes
            .iter()
            .enumerate()
            .filter(|&(i, n)| n.master_of.is_none() && self.is_running(i))
            .map(|(_, n)| n)
            .collect()
    }

    pub fn is_running(&self, idx: usize) -> bool {
        self.children.get(idx).is_some_and(Option::is_some)
    }

    /// `(first slot, last slot, master port)` as a running node reports it.
    pub fn slot_map(&self) -> Vec<(u16, u16, u16)> {
        let mut last_err = String::from("no node is running");
        for (idx, n) in self.nodes.iter().enumerate() {
            if !self.is_running(idx) {
                continue;
            }
            match cluster_slots(n.port) {
                Ok(v) => return v.into_iter().map(|(a, b, _, port)| (a, b, port)).collect(),
                Err(e) => last_err = e,
            }
        }
        panic!("cannot read CLUSTER SLOTS from any node: {last_err}");
    }

    /// A key of the first slot of each master's range (`prefix` then
    /// digits), with that master's port: one key on every master.
    pub fn key_per_master(&self, prefix: &str) -> Vec<(String, u16)> {
        self.slot_map()
            .into_iter()
            .map(|(first, _, port)| (super::slots::key_for_slot(first, prefix), port))
            .collect()
    }

    /// The port of the master that serves `slot`, as the cluster says.
    pub fn port_for_slot(&self, slot: u16) -> u16 {
        self.try_port_for_slot(slot)
            .unwrap_or_else(|| panic!("no node serves slot {slot}"))
    }

    /// `port_for_slot`, or `None` while no node serves it (mid-failover,
    /// a failed master's slots are missing from CLUSTER SLOTS until its
    /// replica is promoted): what a wait on a failover polls.
    pub fn try_port_for_slot(&self, slot: u16) -> Option<u16> {
        self.slot_map()
            .into_iter()
            .find(|&(a, b, _)| (a..=b).contains(&slot))
            .map(|(_, _, port)| port)
    }

    /// The node that serves `slot`, as the cluster says.
    pub fn node_for_slot(&self, slot: u16) -> &RedisNode {
        let port = self.port_for_slot(slot);
        self.nodes
            .iter()
            .find(|n| n.port == port)
            .unwrap_or_else(|| panic!("slot {slot} is served on port {port}, by no node of ours"))
    }

    /// A running master other than the one that serves `slot` (a target to
    /// move the slot to); panics with a single master.
    pub fn other_master(&self, slot: u16) -> &RedisNode {
        let port = self.port_for_slot(slot);
        self.masters()
            .into_iter()
            .find(|n| n.port != port)
            .unwrap_or_else(|| panic!("no master besides the one on port {port}"))
    }

    /// A direct connection to the master serving `key`'s slot.
    pub fn owner_conn(&self, key: &str) -> Conn {
        self.node_for_slot(key_slot(key.as_bytes())).conn()
    }

    /// Fails the master serving `slot` over to its replica (CLUSTER
    /// FAILOVER on the replica, a graceful hand-over), waits until the
    /// cluster says the replica serves it, and returns the new master.
    pub fn fail_over(&mut self, slot: u16) -> usize {
        let master = self.node_for_slot(slot).id.clone();
        let replica = self
            .nodes
            .iter()
            .position(|n| n.master_of.as_deref() == Some(master.as_str()))
            .expect("the master has a replica");
        let port = self.nodes[replica].port;
        let r = self.nodes[replica].conn().cmd(&["CLUSTER", "FAILOVER"]);
        assert_eq!(r, Reply::Simple("OK".into()), "CLUSTER FAILOVER on :{port}");
        // The map read mid-failover may leave the slot unserved for a
        // moment: look, never panic, until the deadline.
        super::wait_until("the replica took over", Duration::from_secs(20), || {
            let map = self.slot_map();
            map.iter()
                .any(|&(a, b, p)| (a..=b).contains(&slot) && p == port)
                .then_some(())
        });
        self.refresh_roles();
        replica
    }

    /// Leaves `slot` half migrated: IMPORTING on another master, MIGRATING
    /// on its owner, and only `keys` moved across, so a command on the
    /// slot's other keys meets ASK or TRYAGAIN. Returns (owner, target).
    pub fn split_slot(&self, slot: u16, keys: &[&str]) -> (&RedisNode, &RedisNode) {
        let from = self.node_for_slot(slot);
        let to = self.other_master(slot);
        let s = slot.to_string();
        expect_ok(
            &to.conn()
                .cmd(&["CLUSTER", "SETSLOT", &s, "IMPORTING", &from.id]),
            to.port,
        );
        expect_ok(
            &from
                .conn()
                .cmd(&["CLUSTER", "SETSLOT", &s, "MIGRATING", &to.id]),
            from.port,
        );
        let port = to.peer_port().to_string();
        let mut args = vec!["MIGRATE", "127.0.0.1", &port, "", "0", "5000", "KEYS"];
        args.extend_from_slice(keys);
        expect_ok(&from.conn().cmd(&args), from.port);
        (from, to)
    }

    /// SIGKILLs node `idx` and reaps it (its `pid` field keeps the old PID).
    pub fn kill(&mut self, idx: usize) {
        let Some(mut child) = self.children[idx].take() else {
            panic!("kill: node {idx} is not running");
        };
        kill_and_reap(&mut child);
    }

    /// Starts node `idx` again on the same port with the same config and
    /// `nodes.conf`, and waits until it answers (not until the cluster is
    /// healthy: call `wait_healthy` for that).
    pub fn restart(&mut self, idx: usize) {
        assert!(
            !self.is_running(idx),
            "restart: node {idx} is still running"
        );
        let child = self.launch(idx);
        self.nodes[idx].pid = child.id();
        self.children[idx] = Some(child);
        match self.boot(idx) {
            Ok(()) => {}
            Err(BootError::PortInUse) => panic!(
                "restart: port {} of node {idx} was taken meanwhile",
                self.nodes[idx].port
            ),
            Err(BootError::Failed(why)) => panic!("restart: {why}"),
        }
    }

    /// Waits until every running node says cluster_state:ok, sees the other
    /// running nodes as connected and healthy, and all agree on roles and on
    /// a slot map whose owners are all running (so after killing a master
    /// this waits for its replica to take over); replicas of running masters
    /// must have their link up.
    pub fn wait_healthy(&self, timeout: Duration) {
        let live: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| self.is_running(i))
            .collect();
        wait_until_explained("the cluster to be healthy", timeout, || {
            self.check(&live, false)
        });
    }

    /// Starts one more node, empty, introduces it to the cluster as a
    /// master without slots, waits until every node knows it; returns its
    /// index.
    pub fn add_master(&mut self) -> usize {
        let idx = self.nodes.len();
        let node_dir = self.dir.join(format!("node{idx}"));
        fs::create_dir_all(&node_dir)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", node_dir.display()));
        self.node_dirs.push(node_dir);
        let port = free_port();
        let tls_port = self.spec.tls.as_ref().map(|_| free_port());
        let child = self.spawn_node(idx, port, tls_port);
        self.nodes.push(RedisNode {
            port,
            tls_port,
            pid: child.id(),
            id: String::new(),
            master_of: None,
        });
        self.children.push(Some(child));
        self.boot_with_port_retries(idx);
        let id = self.nodes[idx].conn().cmd(&["CLUSTER", "MYID"]);
        self.nodes[idx].id = id.as_str().to_string();
        let introducer = (0..idx)
            .find(|&i| self.is_running(i))
            .expect("a running node");
        let p = self.nodes[idx].peer_port().to_string();
        expect_ok(
            &self.nodes[introducer]
                .conn()
                .cmd(&["CLUSTER", "MEET", "127.0.0.1", &p]),
            self.nodes[introducer].port,
        );
        self.wait_healthy(FORM_DEADLINE);
        idx
    }

    /// Moves `slot` to node `to` the way `redis-cli --cluster reshard` does:
    /// IMPORTING on the target, MIGRATING on the source, MIGRATE the keys
    /// `batch` at a time, then SETSLOT NODE on the target, the source and
    /// every other master. Returns the number of keys moved.
    pub fn migrate_slot(&self, slot: u16, to: usize, batch: usize) -> usize {
        self.migrate_slot_paced(slot, to, batch, Duration::ZERO)
    }

    /// `migrate_slot` with a pause after each MIGRATE, so the slot stays
    /// split between the two nodes for a while (what a large slot does).
    pub fn migrate_slot_paced(&self, slot: u16, to: usize, batch: usize, pause: Duration) -> usize {
        // Gossip from an earlier move may still be settling: start from a
        // slot map every node agrees on.
        self.wait_healthy(FORM_DEADLINE);
        let from_port = self.port_for_slot(slot);
        let from = self
            .nodes
            .iter()
            .find(|n| n.port == from_port)
            .expect("the slot's owner")
            .clone();
        let target = self.nodes[to].clone();
        if from.id == target.id {
            return 0;
        }
        let s = slot.to_string();
        expect_ok(
            &target
                .conn()
                .cmd(&["CLUSTER", "SETSLOT", &s, "IMPORTING", &from.id]),
            target.port,
        );
        expect_ok(
            &from
                .conn()
                .cmd(&["CLUSTER", "SETSLOT", &s, "MIGRATING", &target.id]),
            from.port,
        );
        let mut src = from.conn();
        // The node's own connection: TLS under tls-cluster.
        let tport = target.peer_port().to_string();
        let count = batch.max(1).to_string();
        let mut moved = 0;
        loop {
            let keys = src.cmd(&["CLUSTER", "GETKEYSINSLOT", &s, &count]);
            let keys: Vec<String> = match &keys {
                Reply::Array(Some(k)) => k.iter().map(|k| k.as_str().to_string()).collect(),
                other => panic!("GETKEYSINSLOT on :{}: {other:?}", from.port),
            };
            if keys.is_empty() {
                break;
            }
            let mut args = vec![
                "MIGRATE",
                "127.0.0.1",
                tport.as_str(),
                "",
                "0",
                "10000",
                "REPLACE",
                "KEYS",
            ];
            args.extend(keys.iter().map(String::as_str));
            let r = src.cmd(&args);
            assert!(
                matches!(&r, Reply::Simple(s) if s == "OK" || s == "NOKEY"),
                "MIGRATE on :{}: {r:?}",
                from.port
            );
            moved += keys.len();
            if !pause.is_zero() {
                std::thread::sleep(pause);
            }
        }
        expect_ok(
            &target
                .conn()
                .cmd(&["CLUSTER", "SETSLOT", &s, "NODE", &target.id]),
            target.port,
        );
        expect_ok(
            &from
                .conn()
                .cmd(&["CLUSTER", "SETSLOT", &s, "NODE", &target.id]),
            from.port,
        );
        for (i, n) in self.nodes.iter().enumerate() {
            if self.is_running(i) && n.master_of.is_none() && n.id != from.id && n.id != target.id {
                let _ = n
                    .conn()
                    .cmd(&["CLUSTER", "SETSLOT", &s, "NODE", &target.id]);
            }
        }
        moved
    }

    /// Re-reads who is master of whom (after a failover), from a running node.
    pub fn refresh_roles(&mut self) {
        let idx = (0..self.nodes.len())
            .find(|&i| self.is_running(i))
            .unwrap_or_else(|| panic!("refresh_roles: no node is running"));
        let view = observe(self.nodes[idx].port).unwrap_or_else(|e| panic!("{e}"));
        for n in &mut self.nodes {
            if let Some(line) = view.lines.iter().find(|l| l.id == n.id) {
                n.master_of = line.master.clone();
            }
        }
    }

    /// `Ok` when the nodes in `live` form a healthy cluster; otherwise why not.
    /// `initial`: also require the roles given at start and that every node
    /// knows exactly the nodes we started.
    fn check(&self, live: &[usize], initial: bool) -> Result<(), String> {
        let mut agreed: Option<(Roles, SlotOwners)> = None;
        for &i in live {
            let me = &self.nodes[i];
            let view = observe(me.port)?;
            let mut roles = Vec::new();
            for &j in live {
                let other = &self.nodes[j];
                let Some(line) = view.lines.iter().find(|l| l.id == other.id) else {
                    return Err(format!(":{} does not know :{}", me.port, other.port));
                };
                let bad = ["handshake", "noaddr", "fail", "fail?"];
                if let Some(f) = line.flags.iter().find(|f| bad.contains(&f.as_str())) {
                    return Err(format!(":{} flags :{} as {f}", me.port, other.port));
                }
                if i != j && !line.connected {
                    return Err(format!(":{} has no link to :{}", me.port, other.port));
                }
                if line.port != other.port {
                    return Err(format!(
                        ":{} lists {} on port {}",
                        me.port, other.id, line.port
                    ));
                }
                roles.push((other.id.clone(), line.master.clone()));
            }
            if initial {
                if view.lines.len() != self.nodes.len() {
                    return Err(format!(":{} knows {} nodes", me.port, view.lines.len()));
                }
                for (n, (_, master)) in self.nodes.iter().zip(&roles) {
                    if *master != n.master_of {
                        return Err(format!(
                            ":{} sees :{} as replica of {master:?}",
                            me.port, n.port
                        ));
                    }
                }
            }
            if !view.state_ok {
                return Err(format!(
                    "node :{} has cluster_state other than ok ({})",
                    me.port, view.info_summary
                ));
            }
            let covered: usize = view
                .slots
                .iter()
                .map(|&(a, b, _)| usize::from(b) - usize::from(a) + 1)
                .sum();
            if covered != usize::from(SLOTS) {
                return Err(format!(":{} maps {covered} slots", me.port));
            }
            // After a kill, the slots of the dead master must have moved on.
            for (a, b, owner) in &view.slots {
                if !live.iter().any(|&j| self.nodes[j].id == *owner) {
                    return Err(format!(":{} maps {a}-{b} to stopped node {owner}", me.port));
                }
            }
            match &agreed {
                None => agreed = Some((roles, view.slots)),
                Some((r, s)) => {
                    if *r != roles {
                        return Err(format!(":{} disagrees on roles", me.port));
                    }
                    if *s != view.slots {
                        return Err(format!(":{} disagrees on the slot map", me.port));
                    }
                }
            }
        }
        let Some((roles, _)) = agreed else {
            return Err("no node is running".into());
        };
        for (id, master) in &roles {
            let Some(master) = master else { continue };
            let master_live = live.iter().any(|&j| self.nodes[j].id == *master);
            let Some(&idx) = live.iter().find(|&&j| self.nodes[j].id == *id) else {
                continue;
            };
            if master_live && !replication_up(self.nodes[idx].port)? {
                return Err(format!(
                    ":{} replication link is not up",
                    self.nodes[idx].port
                ));
            }
        }
        Ok(())
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        let mut running: Vec<&mut Child> = self.children.iter_mut().flatten().collect();
        terminate_all(&mut running, STOP_GRACE);
        if std::thread::panicking() && !self.formed {
            for i in 0..self.node_dirs.len() {
                eprintln!(
                    "--- redis node {i} (:{}) log tail ---\n{}",
                    self.nodes.get(i).map_or(0, |n| n.port),
                    tail_file(&self.log_path(i), 15)
                );
            }
        }
        remove_temp_dir(&self.dir);
    }
}

fn expect_ok(r: &Reply, port: u16) {
    assert!(
        matches!(r, Reply::Simple(s) if s == "OK"),
        "node :{port} answered {r:?} while building the cluster"
    );
}

fn try_cmd(port: u16, args: &[&str]) -> Result<Reply, String> {
    let mut c =
        Conn::try_connect(&format!("127.0.0.1:{port}")).map_err(|e| format!(":{port}: {e}"))?;
    let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    c.send(&bytes);
    let r = c
        .try_read_reply(Duration::from_secs(5))
        .map_err(|e| format!(":{port}: {e}"))?;
    if r.is_error() {
        return Err(format!(":{port} answered {args:?} with {r:?}"));
    }
    Ok(r)
}

fn bulk_text(r: &Reply, port: u16) -> Result<String, String> {
    match r {
        Reply::Bulk(Some(b)) => Ok(String::from_utf8_lossy(b).into_owned()),
        Reply::Verbatim(s) => Ok(s.get(4..).unwrap_or("").to_string()),
        other => Err(format!(":{port}: expected text, got {other:?}")),
    }
}

fn replication_up(port: u16) -> Result<bool, String> {
    let info = bulk_text(&try_cmd(port, &["INFO", "replication"])?, port)?;
    Ok(info.contains("master_link_status:up"))
}

/// `(first, last, master id, master port)` from CLUSTER SLOTS, sorted.
fn cluster_slots(port: u16) -> Result<Vec<(u16, u16, String, u16)>, String> {
    let r = try_cmd(port, &["CLUSTER", "SLOTS"])?;
    let Reply::Array(Some(entries)) = &r else {
        return Err(format!(":{port}: CLUSTER SLOTS gave {r:?}"));
    };
    let mut out = Vec::new();
    for e in entries {
        let bad = || format!(":{port}: odd CLUSTER SLOTS entry {e:?}");
        let Reply::Array(Some(parts)) = e else {
            return Err(bad());
        };
        let (Some(Reply::Int(a)), Some(Reply::Int(b)), Some(Reply::Array(Some(m)))) =
            (parts.first(), parts.get(1), parts.get(2))
        else {
            return Err(bad());
        };
        let (Some(Reply::Int(mport)), id) = (m.get(1), m.get(2)) else {
            return Err(bad());
        };
        let id = match id {
            Some(Reply::Bulk(Some(b))) => String::from_utf8_lossy(b).into_owned(),
            _ => mport.to_string(),
        };
        let conv = |n: &i64| u16::try_from(*n).map_err(|_| bad());
        out.push((conv(a)?, conv(b)?, id, conv(mport)?));
    }
    out.sort();
    Ok(out)
}

/// CLUSTER INFO + NODES + SLOTS of one node.
fn observe(port: u16) -> Result<View, String> {
    let info = bulk_text(&try_cmd(port, &["CLUSTER", "INFO"])?, port)?;
    let nodes = bulk_text(&try_cmd(port, &["CLUSTER", "NODES"])?, port)?;
    let mut lines = Vec::new();
    for l in nodes.lines().filter(|l| !l.trim().is_empty()) {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() < 8 {
            return Err(format!(":{port}: odd CLUSTER NODES line {l:?}"));
        }
        let node_port = f[1]
            .rsplit_once(':')
            .and_then(|(_, rest)| rest.split(['@', ',']).next())
            .and_then(|p| p.parse().ok())
            .unwrap_or(0);
        lines.push(NodeLine {
            id: f[0].to_string(),
            port: node_port,
            flags: f[2].split(',').map(str::to_string).collect(),
            master: (f[3] != "-").then(|| f[3].to_string()),
            connected: f[7] == "connected",
        });
    }
    let slots = cluster_slots(port)?
        .into_iter()
        .map(|(a, b, id, _)| (a, b, id))
        .collect();
    let info_summary = info
        .lines()
        .filter(|l| {
            l.starts_with("cluster_slots_")
                || l.starts_with("cluster_known_nodes")
                || l.starts_with("cluster_size")
        })
        .collect::<Vec<_>>()
        .join(" ");
    Ok(View {
        state_ok: info.contains("cluster_state:ok"),
        info_summary,
        lines,
        slots,
    })
}
