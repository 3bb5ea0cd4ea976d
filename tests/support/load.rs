//! A pipelined writer and reader for resilience tests and the soak: it
//! writes counters, set members and cross-slot MSET batches over keys in
//! chosen ("hot") slots and elsewhere, checks every reply against its own
//! model of what it wrote, and can verify afterwards that every
//! acknowledged write is on the node that owns its slot.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::cluster::RedisCluster;
use super::resp::{encode_command, Conn};
use super::slots::{key_for_slot, key_slot};
use super::wait_until;

/// A client that keeps sending a SET and a GET of one of 100 keys, on
/// one connection, until stopped; any error reply fails its thread.
pub struct Steady {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<u64>,
}

impl Steady {
    pub fn start(mut c: Conn) -> Steady {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let key = format!("steady{}", n % 100);
                    let r = c.pipeline(&[
                        super::resp::argv(&["SET", &key, "v"]),
                        super::resp::argv(&["GET", &key]),
                    ]);
                    assert_eq!(r[0], super::resp::ok(), "SET {key}");
                    assert!(!r[1].is_error(), "GET {key}: {:?}", r[1]);
                    n += 1;
                }
                n
            })
        };
        Steady { stop, thread }
    }

    /// Stops it: how many pairs it sent (panics if its thread failed).
    pub fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().expect("the steady client failed")
    }
}

/// Every one of `clients` still answers PING on its connection, and
/// `steady` sent without an error until now.
pub fn all_kept(clients: &mut [Conn], steady: Steady) {
    for c in clients {
        assert_eq!(c.cmd(&["PING"]), super::resp::Reply::Simple("PONG".into()));
    }
    assert!(steady.stop() > 0, "the steady client sent nothing");
}

/// What one writer believes the cluster holds: only it writes these keys.
#[derive(Default)]
pub struct Model {
    pub counters: HashMap<String, i64>,
    pub sets: HashMap<String, HashSet<String>>,
    pub strings: HashMap<String, String>,
    /// Keys whose last write failed with an unknown outcome (the node may
    /// or may not have applied it): their value is not checked exactly.
    pub uncertain: HashSet<String>,
    /// Some reply was an error (or missing).
    pub had_errors: bool,
}

pub struct Outcome {
    pub model: Model,
    pub ops: u64,
    pub errors: Vec<String>,
    /// Pipelines whose replies were all good after the last error.
    pub clean_after_last_error: u64,
}

impl Outcome {
    /// The load saw no error at all (the first five are shown if it did).
    pub fn assert_no_errors(&self) {
        assert!(
            self.errors.is_empty(),
            "{} errors, first: {:?}",
            self.errors.len(),
            &self.errors[..self.errors.len().min(5)]
        );
    }
}

/// A pipelined writer and reader: counters, set members, cross-slot MSET
/// and MGET batches, over keys in `hot` slots (being moved) and elsewhere.
pub fn run_load(
    addr: String,
    hot: Vec<u16>,
    stop: Arc<AtomicBool>,
    tolerate_errors: bool,
) -> JoinHandle<Outcome> {
    run_load_named(addr, hot, stop, tolerate_errors, "h")
}

/// `run_load` with its own key prefix (several writers side by side).
pub fn run_load_named(
    addr: String,
    hot: Vec<u16>,
    stop: Arc<AtomicBool>,
    tolerate_errors: bool,
    prefix: &str,
) -> JoinHandle<Outcome> {
    let tags: Vec<String> = hot.iter().map(|&s| key_for_slot(s, prefix)).collect();
    let cold = format!("{prefix}:cold");
    let progress = Arc::new(AtomicU64::new(0));
    let seen = progress.clone();
    let handle = std::thread::spawn(move || {
        let mut c = Conn::connect(&addr);
        let mut m = Model::default();
        let mut errors = Vec::new();
        let mut ops = 0u64;
        let mut clean = 0u64;
        let mut round = 0u64;
        while !stop.load(Ordering::Relaxed) {
            round += 1;
            let mut cmds: Vec<Vec<Vec<u8>>> = Vec::new();
            let mut expect: Vec<Expect> = Vec::new();
            for (t, tag) in tags.iter().enumerate() {
                // Two keys per hot slot, plus one elsewhere.
                for k in [
                    format!("{{{tag}}}c1"),
                    format!("{{{tag}}}c2"),
                    format!("{cold}:c{t}"),
                ] {
                    cmds.push(vec![b"INCR".to_vec(), k.clone().into_bytes()]);
                    expect.push(Expect::Counter(k));
                }
                let set = format!("{{{tag}}}s");
                let member = format!("m{round}");
                cmds.push(vec![
                    b"SADD".to_vec(),
                    set.clone().into_bytes(),
                    member.clone().into_bytes(),
                ]);
                expect.push(Expect::Added(set, member));
            }
            // A cross-slot MSET with several keys per hot slot, then MGET.
            let mut mset = vec![b"MSET".to_vec()];
            let mut written = Vec::new();
            for tag in &tags {
                for j in 0..3 {
                    let k = format!("{{{tag}}}str{j}");
                    let v = format!("r{round}j{j}");
                    mset.push(k.clone().into_bytes());
                    mset.push(v.clone().into_bytes());
                    written.push((k, v));
                }
            }
            cmds.push(mset);
            expect.push(Expect::Mset(written.clone()));
            let mut mget = vec![b"MGET".to_vec()];
            mget.extend(written.iter().map(|(k, _)| k.clone().into_bytes()));
            cmds.push(mget);
            expect.push(Expect::Mget(
                written.iter().map(|(_, v)| v.clone()).collect(),
            ));
            // Then, per hot slot, an inline GET of a key the MSET just
            // wrote: an inline request must wait behind the MSET's part in
            // that slot (its slot gate) exactly like a multibulk one.
            let mut frames: Vec<Vec<u8>> = cmds
                .iter()
                .map(|c| {
                    let args: Vec<&[u8]> = c.iter().map(Vec::as_slice).collect();
                    encode_command(&args)
                })
                .collect();
            for tag in &tags {
                let (k, v) = written
                    .iter()
                    .find(|(k, _)| k.starts_with(&format!("{{{tag}}}")))
                    .expect("the MSET wrote a key in every hot slot");
                frames.push(format!("GET {k}\r\n").into_bytes());
                expect.push(Expect::Value(k.clone(), v.clone()));
            }
            let replies = match c.try_pipeline_frames(&frames) {
                Ok(r) => r,
                Err(e) => {
                    m.had_errors = true;
                    for x in &expect {
                        if let Expect::Mset(written) = x {
                            m.uncertain.extend(written.iter().map(|(k, _)| k.clone()));
                        }
                    }
                    errors.push(format!("round {round}: {e}"));
                    if !tolerate_errors {
                        break;
                    }
                    c = Conn::connect(&addr);
                    continue;
                }
            };
            let before = errors.len();
            for (r, e) in replies.into_iter().zip(expect) {
                ops += 1;
                if r.is_error() {
                    m.had_errors = true;
                    errors.push(format!("round {round}: {:?} -> {}", e, r.as_error()));
                    if let Expect::Mset(written) = &e {
                        m.uncertain.extend(written.iter().map(|(k, _)| k.clone()));
                    }
                    continue;
                }
                match e {
                    Expect::Counter(k) => {
                        let n = r.as_int();
                        let prev = m.counters.get(&k).copied().unwrap_or(0);
                        if n != prev + 1 && !tolerate_errors {
                            errors.push(format!(
                                "round {round}: INCR {k} gave {n}, expected {}",
                                prev + 1
                            ));
                        }
                        m.counters.insert(k, n);
                    }
                    Expect::Added(set, member) => {
                        m.sets.entry(set).or_default().insert(member);
                    }
                    Expect::Mset(written) => {
                        for (k, v) in written {
                            m.uncertain.remove(&k);
                            m.strings.insert(k, v);
                        }
                    }
                    Expect::Value(k, want) => {
                        let got = r.as_bulk().map(|b| String::from_utf8_lossy(b).into_owned());
                        if got.as_deref() != Some(want.as_str()) && !tolerate_errors {
                            errors.push(format!(
                                "round {round}: inline GET {k} gave {got:?}, expected {want:?}"
                            ));
                        }
                    }
                    Expect::Mget(values) => {
                        let got: Vec<Option<String>> = r
                            .as_array()
                            .iter()
                            .map(|x| x.as_bulk().map(|b| String::from_utf8_lossy(b).into_owned()))
                            .collect();
                        let want: Vec<Option<String>> = values.into_iter().map(Some).collect();
                        if got != want && !tolerate_errors {
                            errors.push(format!(
                                "round {round}: MGET gave {got:?}, expected {want:?}"
                            ));
                        }
                    }
                }
            }
            if errors.len() == before {
                clean += 1;
            } else {
                clean = 0;
            }
            progress.store(ops, Ordering::Relaxed);
        }
        Outcome {
            model: m,
            ops,
            errors,
            clean_after_last_error: clean,
        }
    });
    // Start changing the cluster only once traffic flows and the hot slots
    // hold data.
    wait_until("the load is running", Duration::from_secs(20), || {
        (seen.load(Ordering::Relaxed) > 200).then_some(())
    });
    handle
}

#[derive(Debug)]
enum Expect {
    Counter(String),
    Added(String, String),
    Mset(Vec<(String, String)>),
    Mget(Vec<String>),
    /// An inline GET right after the MSET that wrote the key.
    Value(String, String),
}

/// Every acknowledged write is on the node that owns its slot.
pub fn verify(cluster: &RedisCluster, m: &Model) {
    let (checked, lost) = check_writes(cluster, m);
    assert!(
        lost.is_empty(),
        "{} of {checked} acknowledged writes missing: {:?}",
        lost.len(),
        &lost[..lost.len().min(5)]
    );
}

/// Every acknowledged write, looked up on the node that owns its slot:
/// how many were checked, and a description of each one missing. A
/// counter may be higher than acknowledged (an increment whose reply was
/// lost), never lower.
pub fn check_writes(cluster: &RedisCluster, m: &Model) -> (usize, Vec<String>) {
    cluster.wait_healthy(Duration::from_secs(30));
    let owner = |k: &str| {
        let port = cluster.port_for_slot(key_slot(k.as_bytes()));
        Conn::connect(&format!("127.0.0.1:{port}"))
    };
    let mut lost = Vec::new();
    let mut checked = 0;
    for (k, n) in &m.counters {
        checked += 1;
        let got: i64 = owner(k).cmd(&["GET", k]).as_str().parse().unwrap_or(-1);
        // With no error seen, every increment was acknowledged: exact.
        if got < *n || (!m.had_errors && got != *n) {
            lost.push(format!("counter {k}: {got} < acknowledged {n}"));
        }
    }
    for (k, members) in &m.sets {
        let got: HashSet<String> = owner(k)
            .cmd(&["SMEMBERS", k])
            .as_array()
            .iter()
            .map(|x| x.as_str().to_string())
            .collect();
        checked += members.len();
        for missing in members.difference(&got) {
            lost.push(format!("set {k}: member {missing}"));
        }
    }
    for (k, v) in &m.strings {
        checked += 1;
        let got = owner(k).cmd(&["GET", k]);
        let got = got
            .as_bulk()
            .map(|b| String::from_utf8_lossy(b).into_owned());
        if got.as_deref() != Some(v.as_str()) && !m.uncertain.contains(k) {
            lost.push(format!("string {k}: {got:?}, acknowledged {v}"));
        }
    }
    (checked, lost)
}
