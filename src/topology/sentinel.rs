//! A pool of master-replica groups (predixy's standalone and Sentinel
//! pools): the groups' masters and replicas, fixed or learnt from
//! Sentinel, and the watchers that hear a failover as it happens.
//!
//! ```text
//!  sentinels ◄──SENTINEL get-master-addr-by-name / slaves── poll() (every refresh-interval)
//!      │
//!      └──PSUBSCRIBE *──► watcher thread (one per sentinel) ──Msg::Sentinel──► event()
//!                                                     refresher thread ──► part() ──► the map
//! ```
//!
//! The failover rule: when a sentinel announces that it is about to
//! promote a replica of group G (`+failover-state-send-slaveof-noone`),
//! G is published without a master (a *failover wait*), so no write reaches the old master
//! once the new one can take writes (a write the old master acknowledged
//! after the promotion would be lost when it is turned into a replica).
//! Requests for G get a clear error until `+switch-master` names the new
//! master, which is published at once, without waiting for a poll;
//! `-failover-abort-*`, a poll that finds another master, or
//! [`FAILOVER_WAIT`] ends the wait.
//!
//! Owns: what it learnt of each group. Runs on the topology thread only
//! (the watchers only forward what they hear). Never: touch a worker.

use super::probe::{self, Auth};
use super::snapshot::Topology;
use crate::config::ReadFrom;
use crate::hashkit::GroupHash;
use crate::resp::value::Value;
use crate::tls::nodes::NodeTls;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};

use std::time::{Duration, Instant};

/// Longest a group stays without a master after a sentinel said it
/// starts a failover, when nothing says how it ended.
pub const FAILOVER_WAIT: Duration = Duration::from_secs(10);

/// Most sentinels one pool asks and watches (those in the file, then
/// those learnt).
pub const MAX_SENTINELS: usize = 16;

/// A watcher's wait between two attempts to reach its sentinel.
const WATCH_RETRY: Duration = Duration::from_millis(500);

/// What the refresher needs of one group pool.
pub struct GroupsSource {
    pub name: String,
    /// Each group's name (Sentinel's master name) and written addresses.
    pub groups: Vec<(String, Vec<String>)>,
    pub sentinels: Vec<String>,
    pub sentinel_auth: Option<Auth>,
    pub hash: GroupHash,
    pub tag: Option<[u8; 2]>,
    pub random: bool,
    /// Where reads go, from the read priorities.
    pub reads: ReadFrom,
    pub interval: Duration,
    masters: Vec<Option<SocketAddr>>,
    replicas: Vec<Vec<SocketAddr>>,
    /// A failover under way: until when, and the master it replaces.
    failing: Vec<Option<(Instant, Option<SocketAddr>)>>,
    /// When the sentinels were last asked.
    pub last_poll: Option<Instant>,
    /// Sentinels learnt from `SENTINEL sentinels` that have no watcher yet.
    pub fresh: Vec<String>,
}

/// The read rule of predixy's priorities: reads go to the highest
/// (0: never there); equal ones share the reads.
pub fn read_mode(master: u32, replica: u32) -> ReadFrom {
    if replica == 0 || replica < master {
        ReadFrom::No
    } else if replica == master {
        ReadFrom::Yes
    } else {
        ReadFrom::PreferReplica
    }
}

fn resolve(hostport: &str) -> Option<SocketAddr> {
    probe::resolve(hostport).ok()?.into_iter().next()
}

impl GroupsSource {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        name: String,
        groups: Vec<(String, Vec<String>)>,
        sentinels: Vec<String>,
        sentinel_auth: Option<Auth>,
        hash: GroupHash,
        tag: Option<[u8; 2]>,
        random: bool,
        reads: ReadFrom,
        interval: Duration,
    ) -> GroupsSource {
        let n = groups.len();
        let mut s = GroupsSource {
            name,
            groups,
            sentinels,
            sentinel_auth,
            hash,
            tag,
            random,
            reads,
            interval,
            masters: vec![None; n],
            replicas: vec![Vec::new(); n],
            failing: vec![None; n],
            last_poll: None,
            fresh: Vec::new(),
        };
        // The written addresses: a fixed pool's whole truth, a Sentinel
        // pool's first guess.
        for (i, (_, addrs)) in s.groups.iter().enumerate() {
            let mut it = addrs.iter().filter_map(|a| resolve(a));
            s.masters[i] = it.next();
            s.replicas[i] = it.collect();
        }
        s
    }

    pub fn uses_sentinel(&self) -> bool {
        !self.sentinels.is_empty()
    }

    /// The pool's part of the map as last learnt.
    pub fn part(&self) -> Topology {
        let now = Instant::now();
        let failing = |i: usize| self.failing[i].is_some_and(|(until, _)| until > now);
        let groups: Vec<(String, Option<SocketAddr>, Vec<SocketAddr>)> = (0..self.groups.len())
            .map(|i| {
                let master = if failing(i) { None } else { self.masters[i] };
                (self.groups[i].0.clone(), master, self.replicas[i].clone())
            })
            .collect();
        let failing_over = (0..self.groups.len())
            .filter(|&i| failing(i))
            .map(|i| i as u16)
            .collect();
        Topology::groups(
            &self.name,
            &groups,
            failing_over,
            self.hash,
            self.tag,
            self.random,
            self.reads,
        )
    }

    fn group(&self, name: &str) -> Option<usize> {
        self.groups.iter().position(|(g, _)| g == name)
    }

    /// Ask the sentinels for every group's master and replicas (the first
    /// sentinel that answers about a group is believed). True when
    /// something changed.
    pub fn poll(&mut self, timeout: Duration, tls: Option<&NodeTls>) -> bool {
        self.last_poll = Some(Instant::now());
        let mut changed = false;
        let sentinels: Vec<SocketAddr> = self.sentinels.iter().filter_map(|s| resolve(s)).collect();
        for i in 0..self.groups.len() {
            let name = self.groups[i].0.clone();
            let ask = |args: &[&[u8]]| -> Option<Value> {
                sentinels.iter().find_map(|&addr| {
                    match probe::query(addr, timeout, self.sentinel_auth.as_ref(), tls, args) {
                        Ok(Value::Error(e)) => {
                            log::debug!(target: "mithril::topology", "pool {}: sentinel {addr}: {}", self.name, String::from_utf8_lossy(&e));
                            None
                        }
                        Ok(v) => Some(v),
                        Err(e) => {
                            log::debug!(target: "mithril::topology", "pool {}: sentinel {addr}: {e}", self.name);
                            None
                        }
                    }
                })
            };
            let Some(m) = ask(&[b"SENTINEL", b"get-master-addr-by-name", name.as_bytes()]) else {
                log::warn!(target: "mithril::topology", "pool {}: no sentinel answers about group {name}", self.name);
                continue;
            };
            let master = m.as_array().and_then(|a| match a {
                [ip, port] => {
                    let ip = String::from_utf8_lossy(ip.as_bytes()?).into_owned();
                    let port = String::from_utf8_lossy(port.as_bytes()?).into_owned();
                    resolve(&host_port(&ip, &port))
                }
                _ => None,
            });
            if master.is_none() {
                log::warn!(target: "mithril::topology", "pool {}: the sentinels monitor no master named {name}", self.name);
            }
            let replicas = ask(&[b"SENTINEL", b"slaves", name.as_bytes()])
                .map(|v| serving_replicas(&v))
                .unwrap_or_else(|| self.replicas[i].clone());
            if let Some((until, old)) = self.failing[i] {
                if master != old || Instant::now() >= until {
                    self.failing[i] = None;
                    changed = true;
                }
            }
            if master != self.masters[i] {
                log::info!(target: "mithril::topology", "pool {}: group {name} master {} (Sentinel)", self.name, master.map_or("unknown".into(), |a| a.to_string()));
            }
            changed |= master != self.masters[i] || replicas != self.replicas[i];
            self.masters[i] = master;
            self.replicas[i] = replicas;
            // The other sentinels watching this master, as predixy learns
            // them: asked too from now on, and watched.
            if let Some(v) = ask(&[b"SENTINEL", b"sentinels", name.as_bytes()]) {
                for s in announced(&v) {
                    if !self.sentinels.contains(&s) && self.sentinels.len() < MAX_SENTINELS {
                        log::info!(target: "mithril::topology", "pool {}: sentinel {s} learnt from the others", self.name);
                        self.sentinels.push(s.clone());
                        self.fresh.push(s);
                    }
                }
            }
        }
        changed
    }

    /// One sentinel event (`channel`, `payload`). Returns (the map
    /// changed, the sentinels should be asked now).
    pub fn event(&mut self, channel: &str, payload: &str) -> (bool, bool) {
        let words: Vec<&str> = payload.split_ascii_whitespace().collect();
        // "<type> <name> <ip> <port> @ <master> <ip> <port>" names the
        // master after '@'; a master's own event names it second.
        let master_name = match words.iter().position(|w| *w == "@") {
            Some(at) => words.get(at + 1).copied(),
            None => words.get(1).copied(),
        };
        match channel {
            "+switch-master" => {
                // "<master> <old ip> <old port> <new ip> <new port>"
                let (Some(i), [_, _, _, ip, port, ..]) =
                    (words.first().and_then(|n| self.group(n)), words.as_slice())
                else {
                    return (false, false);
                };
                let new = resolve(&host_port(ip, port));
                self.failing[i] = None;
                if new.is_some() && new != self.masters[i] {
                    log::info!(target: "mithril::topology", "pool {}: group {} switched to master {ip}:{port} (+switch-master)", self.name, self.groups[i].0);
                    self.masters[i] = new;
                    self.replicas[i].retain(|r| Some(*r) != new);
                }
                (true, true)
            }
            "+failover-state-send-slaveof-noone" => {
                let Some(i) = master_name.and_then(|n| self.group(n)) else {
                    return (false, false);
                };
                log::info!(target: "mithril::topology", "pool {}: group {} fails over: writes wait for the new master", self.name, self.groups[i].0);
                self.failing[i] = Some((Instant::now() + FAILOVER_WAIT, self.masters[i]));
                (true, false)
            }
            c if c.starts_with("-failover-abort") => {
                let Some(i) = master_name.and_then(|n| self.group(n)) else {
                    return (false, false);
                };
                (self.failing[i].take().is_some(), true)
            }
            "+sdown"
            | "-sdown"
            | "+odown"
            | "-odown"
            | "+slave"
            | "+convert-to-slave"
            | "+reboot"
            | "-slave-restart-as-master" => {
                (false, master_name.is_some_and(|n| self.group(n).is_some()))
            }
            _ => (false, false),
        }
    }

    /// When a group's failover wait should be looked at again (its wait
    /// ends), if one is under way.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.failing.iter().flatten().map(|(until, _)| *until).min()
    }
}

fn host_port(ip: &str, port: &str) -> String {
    if ip.contains(':') {
        format!("[{ip}]:{port}")
    } else {
        format!("{ip}:{port}")
    }
}

/// The replicas of a `SENTINEL slaves` reply that can serve reads: not
/// down, not disconnected, and in sync with their master.
fn serving_replicas(reply: &Value) -> Vec<SocketAddr> {
    let mut out: Vec<SocketAddr> = reply
        .as_array()
        .unwrap_or(&[])
        .iter()
        .filter(|r| !is_down(r) && field(r, "master-link-status").map_or(true, |s| s == "ok"))
        .filter_map(|r| resolve(&host_port(&field(r, "ip")?, &field(r, "port")?)))
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// The sentinels a `SENTINEL sentinels` reply names (those not down), as
/// `HOST:PORT`.
fn announced(reply: &Value) -> Vec<String> {
    reply
        .as_array()
        .unwrap_or(&[])
        .iter()
        .filter(|r| !is_down(r))
        .filter_map(|r| Some(host_port(&field(r, "ip")?, &field(r, "port")?)))
        .collect()
}

/// Field `k` of one entry of a `SENTINEL slaves` / `sentinels` reply, as
/// text.
fn field(entry: &Value, k: &str) -> Option<String> {
    entry
        .get(k)
        .and_then(Value::as_bytes)
        .map(|b| String::from_utf8_lossy(b).into_owned())
}

/// Whether the entry's flags say it is down or disconnected.
fn is_down(entry: &Value) -> bool {
    field(entry, "flags")
        .unwrap_or_default()
        .split(',')
        .any(|f| matches!(f, "s_down" | "o_down" | "disconnected"))
}

/// The refusal a sentinel gives to `sentinel-password`, worded.
pub fn refused(e: &[u8]) -> String {
    format!(
        "the sentinel refuses sentinel-password ({})",
        String::from_utf8_lossy(e)
    )
}

/// Watch one sentinel's events for pool `pool`: connect (over TLS with
/// `tls`, `tls-sentinel yes`), authenticate, `PSUBSCRIBE *`, and hand
/// each message to `deliver`; reconnect after a failure; stop once `stop`
/// says so (within a second).
pub fn watch(
    addr: String,
    auth: Option<Auth>,
    tls: Option<&NodeTls>,
    stop: impl Fn() -> bool,
    deliver: impl Fn(String, String),
) {
    while !stop() {
        if let Err(e) = watch_once(&addr, auth.as_ref(), tls, &stop, &deliver) {
            log::debug!(target: "mithril::topology", "sentinel {addr}: events lost ({e}); reconnecting");
        }
        std::thread::sleep(WATCH_RETRY);
    }
}

fn watch_once(
    addr: &str,
    auth: Option<&Auth>,
    tls: Option<&NodeTls>,
    stop: &impl Fn() -> bool,
    deliver: &impl Fn(String, String),
) -> io::Result<()> {
    let to = resolve(addr).ok_or_else(|| io::Error::other("does not resolve"))?;
    let s = TcpStream::connect_timeout(&to, Duration::from_secs(1))?;
    s.set_nodelay(true)?;
    // Reads wake every second to look at `stop`.
    s.set_read_timeout(Some(Duration::from_secs(1)))?;
    match tls {
        None => subscribed(s, auth, stop, deliver),
        Some(t) => {
            let conn = t
                .connect(to)
                .map_err(|e| io::Error::other(format!("TLS: {e}")))?;
            subscribed(rustls::StreamOwned::new(conn, s), auth, stop, deliver)
        }
    }
}

/// `watch_once` on a connected stream.
fn subscribed(
    mut s: impl Read + Write,
    auth: Option<&Auth>,
    stop: &impl Fn() -> bool,
    deliver: &impl Fn(String, String),
) -> io::Result<()> {
    let mut req = Vec::new();
    if let Some(a) = auth {
        req.extend_from_slice(&a.frame);
    }
    crate::resp::encode::request(&mut req, &[b"PSUBSCRIBE", b"*"]);
    s.write_all(&req)?;
    let mut buf = Vec::new();
    if auth.is_some() {
        if let Value::Error(e) = probe::read_reply(&mut s, &mut buf)? {
            return Err(io::Error::other(refused(&e)));
        }
    }
    while !stop() {
        let v = match probe::read_reply(&mut s, &mut buf) {
            Ok(v) => v,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                continue
            }
            Err(e) => return Err(e),
        };
        // ["pmessage", pattern, channel, payload]
        if let Some([kind, _, channel, payload]) = v.as_array() {
            if kind.as_bytes() == Some(b"pmessage") {
                let t =
                    |v: &Value| String::from_utf8_lossy(v.as_bytes().unwrap_or(b"")).into_owned();
                deliver(t(channel), t(payload));
            }
        }
    }
    Ok(())
}
