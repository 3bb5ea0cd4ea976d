//! Client-side caching through the proxy: a client's CLIENT TRACKING
//! state ([`ClientTracking`]), the parsing of CLIENT TRACKING with Redis's
//! checks and error texts ([`parse`]), the per-worker table of which
//! sessions read which key ([`TrackingTable`]), and the invalidation
//! frames a client receives ([`frame`]).
//!
//! The table is bounded like Redis's `tracking-table-max-keys`: past the
//! bound the oldest keys are evicted, and their sessions must be sent the
//! invalidation as if the keys had changed (the caller does; this module
//! performs no I/O and knows sessions only as opaque copyable ids).
//! Every operation is O(1) amortized per key, except that a key's list of
//! sessions is searched linearly when one more session reads it (a key is
//! read by few tracking clients of one worker in practice; the list is
//! bounded by the worker's sessions).

use super::Seeded;
use bytes::Bytes;
use std::collections::{HashMap, VecDeque};

/// One client's CLIENT TRACKING state (only while tracking is on).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientTracking {
    /// REDIRECT's client id (0: the client's own connection).
    pub redirect: u64,
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    pub noloop: bool,
    /// CLIENT CACHING YES (OPTIN) or NO (OPTOUT) was given for the next
    /// command (or the next transaction).
    pub caching: bool,
    /// An invalidation found the redirect target gone.
    pub broken_redirect: bool,
    /// Reads were remembered inside the open transaction: its EXEC goes
    /// with the opt-in.
    pub txn_reads: bool,
    /// Keys it read and writes inside the open transaction: told behind
    /// EXEC's reply (the writes run then), not behind QUEUED.
    pub txn_own: Vec<Bytes>,
    /// BCAST prefixes, sorted ("" when BCAST named none: every key).
    pub prefixes: Vec<Vec<u8>>,
    /// No command since the last flush (null invalidation) it was sent: a
    /// second one would say nothing new.
    pub clean: bool,
    /// A command that is not a write since tracking went on or since the
    /// last null: it may have read something a tracker did not hear of
    /// (see `Worker::tracking_flush_bcast`). A write caches nothing.
    pub read_since_null: bool,
}

impl ClientTracking {
    /// Whether the keys the next read command names are remembered for
    /// this client (Redis's `trackingRememberKeys`).
    #[inline]
    pub fn remembers(&self) -> bool {
        let skipped = (self.optin && !self.caching) || (self.optout && self.caching);
        !self.bcast && !skipped
    }

    /// Whether a change of `key` concerns this client in BCAST mode.
    pub fn matches(&self, key: &[u8]) -> bool {
        self.prefix_of(key).is_some()
    }

    /// Under BCAST, the index of the prefix `key` falls under (Redis
    /// refuses overlapping prefixes: at most one).
    pub fn prefix_of(&self, key: &[u8]) -> Option<usize> {
        if !self.bcast {
            return None;
        }
        self.prefixes.iter().position(|p| key.starts_with(p))
    }
}

/// What CLIENT TRACKING asked for.
#[derive(Debug, PartialEq, Eq)]
pub enum Request {
    On(ClientTracking),
    Off,
}

pub const ERR_NO_REDIRECT_TARGET: &[u8] =
    b"-ERR The client ID you want redirect to does not exist\r\n";
const ERR_SYNTAX: &[u8] = b"-ERR syntax error\r\n";
const ERR_NOT_INTEGER: &[u8] = b"-ERR value is not an integer or out of range\r\n";

fn err(msg: &str) -> Bytes {
    Bytes::from(format!("-ERR {msg}\r\n"))
}

fn overlap(a: &[u8], b: &[u8]) -> bool {
    let n = a.len().min(b.len());
    a[..n] == b[..n]
}

/// CLIENT TRACKING's arguments after the subcommand (`on|off` first),
/// checked in Redis's order against the client's `current` state;
/// `exists` says whether a client id may be redirected to. An error is
/// the reply to give.
pub fn parse(
    args: &[&[u8]],
    current: Option<&ClientTracking>,
    exists: impl Fn(u64) -> bool,
) -> Result<Request, Bytes> {
    let mut t = ClientTracking::default();
    let mut prefixes: Vec<&[u8]> = Vec::new();
    let mut j = 1;
    while j < args.len() {
        let a = args[j];
        let more = j + 1 < args.len();
        if a.eq_ignore_ascii_case(b"redirect") && more {
            j += 1;
            if t.redirect != 0 {
                return Err(err("A client can only redirect to a single other client"));
            }
            let id = std::str::from_utf8(args[j])
                .ok()
                .and_then(|s| s.parse::<i64>().ok())
                .ok_or(Bytes::from_static(ERR_NOT_INTEGER))?;
            if id <= 0 || !exists(id as u64) {
                return Err(Bytes::from_static(ERR_NO_REDIRECT_TARGET));
            }
            t.redirect = id as u64;
        } else if a.eq_ignore_ascii_case(b"bcast") {
            t.bcast = true;
        } else if a.eq_ignore_ascii_case(b"optin") {
            t.optin = true;
        } else if a.eq_ignore_ascii_case(b"optout") {
            t.optout = true;
        } else if a.eq_ignore_ascii_case(b"noloop") {
            t.noloop = true;
        } else if a.eq_ignore_ascii_case(b"prefix") && more {
            j += 1;
            prefixes.push(args[j]);
        } else {
            return Err(Bytes::from_static(ERR_SYNTAX));
        }
        j += 1;
    }
    let mode = args.first().copied().unwrap_or_default();
    if mode.eq_ignore_ascii_case(b"off") {
        return Ok(Request::Off);
    }
    if !mode.eq_ignore_ascii_case(b"on") {
        return Err(Bytes::from_static(ERR_SYNTAX));
    }
    if !t.bcast && !prefixes.is_empty() {
        return Err(err("PREFIX option requires BCAST mode to be enabled"));
    }
    if let Some(c) = current {
        if c.bcast != t.bcast {
            return Err(err(
                "You can't switch BCAST mode on/off before disabling tracking for this client, \
                 and then re-enabling it with a different mode.",
            ));
        }
    }
    if t.bcast && (t.optin || t.optout) {
        return Err(err("OPTIN and OPTOUT are not compatible with BCAST"));
    }
    if t.optin && t.optout {
        return Err(err("You can't specify both OPTIN mode and OPTOUT mode"));
    }
    if let Some(c) = current {
        if (t.optin && c.optout) || (t.optout && c.optin) {
            return Err(err(
                "You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, \
                 and then re-enabling it with a different mode.",
            ));
        }
    }
    let mut have: Vec<Vec<u8>> = current
        .filter(|c| c.bcast)
        .map(|c| c.prefixes.clone())
        .unwrap_or_default();
    if t.bcast {
        for (i, p) in prefixes.iter().enumerate() {
            if let Some(e) = have.iter().find(|e| overlap(e, p)) {
                return Err(err(&format!(
                    "Prefix '{}' overlaps with an existing prefix '{}'. \
                     Prefixes for a single client must not overlap.",
                    String::from_utf8_lossy(p),
                    String::from_utf8_lossy(e)
                )));
            }
            if let Some(q) = prefixes[i + 1..].iter().find(|q| overlap(p, q)) {
                return Err(err(&format!(
                    "Prefix '{}' overlaps with another provided prefix '{}'. \
                     Prefixes for a single client must not overlap.",
                    String::from_utf8_lossy(p),
                    String::from_utf8_lossy(q)
                )));
            }
        }
        if prefixes.is_empty() && !have.iter().any(|e| e.is_empty()) {
            have.push(Vec::new());
        }
        for p in prefixes {
            if !have.iter().any(|e| e == p) {
                have.push(p.to_vec());
            }
        }
        have.sort_unstable();
        t.prefixes = have;
    }
    Ok(Request::On(t))
}

/// A frame of invalidations: for a RESP3 connection, the push
/// `invalidate [keys]` (`keys` None: the null that means "everything");
/// for a RESP2 one in pub/sub mode, the message on `__redis__:invalidate`.
/// `null` is the null the tracking client's own protocol writes.
pub fn frame(resp3: bool, keys: Option<&[&[u8]]>, null: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(64 + keys.map_or(0, |k| k.iter().map(|k| k.len() + 16).sum()));
    if resp3 {
        out.extend_from_slice(b">2\r\n$10\r\ninvalidate\r\n");
    } else {
        out.extend_from_slice(b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n");
    }
    match keys {
        Some(keys) => {
            crate::resp::encode::array_into(&mut out, keys.len());
            for k in keys {
                crate::resp::encode::bulk_into(&mut out, k);
            }
        }
        None => out.extend_from_slice(null),
    }
    Bytes::from(out)
}

/// Whether a command (by its table name) runs a script or a function:
/// its declared keys are tracked by a node only if it calls a read
/// command.
pub fn is_script(name: &str) -> bool {
    matches!(
        name,
        "eval" | "eval_ro" | "evalsha" | "evalsha_ro" | "fcall" | "fcall_ro"
    )
}

/// Whether a write command (by its table name) gives its key a time to
/// live: SETEX, PSETEX, the EXPIRE family, SET or GETEX with EX / PX /
/// EXAT / PXAT.
pub fn sets_expiry(name: &str, args: &crate::command::Args) -> bool {
    let options = match name {
        "setex" | "psetex" | "expire" | "pexpire" | "expireat" | "pexpireat" => return true,
        "set" => 3,
        "getex" => 2,
        _ => return false,
    };
    (options..args.len()).any(|i| {
        args.get(i).is_some_and(|a| {
            [&b"ex"[..], b"px", b"exat", b"pxat"]
                .iter()
                .any(|o| a.eq_ignore_ascii_case(o))
        })
    })
}

/// The push telling a RESP3 client its redirect target is gone.
pub fn redir_broken(id: u64) -> Bytes {
    Bytes::from(format!(">2\r\n$21\r\ntracking-redir-broken\r\n:{id}\r\n"))
}

struct Interest<S> {
    /// Its place in the eviction order.
    born: u64,
    sessions: Vec<S>,
}

/// Which sessions read which key, per worker, at most `max_keys` keys
/// (0: no bound), the oldest evicted first.
pub struct TrackingTable<S> {
    keys: HashMap<Bytes, Interest<S>, Seeded>,
    /// Keys in the order they entered (stale entries skipped lazily).
    order: VecDeque<(Bytes, u64)>,
    next: u64,
    pub max_keys: usize,
    /// Keys evicted to stay within the bound (INFO).
    pub evicted: u64,
    /// (key, session) pairs held: INFO's `tracking_total_items`.
    items: usize,
}

impl<S: Copy + PartialEq> TrackingTable<S> {
    pub fn new(max_keys: usize, seed: u64) -> Self {
        TrackingTable {
            keys: HashMap::with_hasher(Seeded(seed | 1)),
            order: VecDeque::new(),
            next: 0,
            max_keys,
            evicted: 0,
            items: 0,
        }
    }

    /// How many (key, session) pairs the table holds.
    pub fn items(&self) -> usize {
        self.items
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// `session` read `key`. Keys evicted to stay within the bound are
    /// handed to `evict` with their sessions.
    pub fn remember(&mut self, key: &[u8], session: S, evict: impl FnMut(Bytes, Vec<S>)) {
        if let Some(i) = self.keys.get_mut(key) {
            if !i.sessions.contains(&session) {
                i.sessions.push(session);
                self.items += 1;
            }
            return;
        }
        self.items += 1;
        let k = Bytes::copy_from_slice(key);
        let born = self.next;
        self.next += 1;
        self.order.push_back((k.clone(), born));
        self.keys.insert(
            k,
            Interest {
                born,
                sessions: vec![session],
            },
        );
        self.trim(evict);
    }

    /// A new bound (CONFIG SET): the oldest keys past it are handed to
    /// `evict` with their sessions.
    pub fn set_max(&mut self, max_keys: usize, evict: impl FnMut(Bytes, Vec<S>)) {
        self.max_keys = max_keys;
        self.trim(evict);
    }

    fn trim(&mut self, mut evict: impl FnMut(Bytes, Vec<S>)) {
        while self.max_keys > 0 && self.keys.len() > self.max_keys {
            let Some((k, b)) = self.order.pop_front() else {
                break;
            };
            if self.keys.get(&k).is_some_and(|i| i.born == b) {
                if let Some(i) = self.keys.remove(&k) {
                    self.evicted += 1;
                    self.items -= i.sessions.len();
                    evict(k, i.sessions);
                }
            }
        }
        // Entries of keys already invalidated: compact once they are most
        // of the order, so it stays within twice the table.
        if self.order.len() > 2 * self.keys.len() + 64 {
            let keys = &self.keys;
            self.order
                .retain(|(k, b)| keys.get(k).is_some_and(|i| i.born == *b));
        }
    }

    /// `key` changed: the sessions that read it, who read it no more.
    pub fn take(&mut self, key: &[u8]) -> Option<Vec<S>> {
        let i = self.keys.remove(key)?;
        self.items -= i.sessions.len();
        Some(i.sessions)
    }

    /// Forget everything (every session was sent the null invalidation).
    pub fn clear(&mut self) {
        self.keys.clear();
        self.order.clear();
        self.items = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on(args: &[&str], cur: Option<&ClientTracking>) -> Result<ClientTracking, String> {
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        match parse(&a, cur, |id| id == 7) {
            Ok(Request::On(t)) => Ok(t),
            Ok(Request::Off) => Err("off".into()),
            Err(e) => Err(String::from_utf8_lossy(&e).trim_end().to_string()),
        }
    }

    #[test]
    fn tracking_arguments_are_checked_as_redis_does() {
        assert_eq!(on(&["on"], None).unwrap(), ClientTracking::default());
        let t = on(&["ON", "redirect", "7", "optin", "noloop"], None).unwrap();
        assert!(t.optin && t.noloop && t.redirect == 7);
        assert_eq!(
            on(&["on", "redirect", "8"], None).unwrap_err(),
            "-ERR The client ID you want redirect to does not exist"
        );
        assert_eq!(
            on(&["on", "redirect", "x"], None).unwrap_err(),
            "-ERR value is not an integer or out of range"
        );
        assert_eq!(on(&["on", "bogus"], None).unwrap_err(), "-ERR syntax error");
        assert_eq!(on(&["maybe"], None).unwrap_err(), "-ERR syntax error");
        assert_eq!(
            on(&["on", "prefix", "a"], None).unwrap_err(),
            "-ERR PREFIX option requires BCAST mode to be enabled"
        );
        assert_eq!(
            on(&["on", "optin", "bcast"], None).unwrap_err(),
            "-ERR OPTIN and OPTOUT are not compatible with BCAST"
        );
        assert_eq!(
            on(&["on", "optin", "optout"], None).unwrap_err(),
            "-ERR You can't specify both OPTIN mode and OPTOUT mode"
        );
        assert_eq!(
            on(&["on", "bcast", "prefix", "a", "prefix", "ab"], None).unwrap_err(),
            "-ERR Prefix 'a' overlaps with another provided prefix 'ab'. \
             Prefixes for a single client must not overlap."
        );
        let b = on(&["on", "bcast", "prefix", "b", "noloop"], None).unwrap();
        assert_eq!(b.prefixes, [b"b".to_vec()]);
        let b2 = on(&["on", "bcast", "prefix", "a"], Some(&b)).unwrap();
        assert_eq!(b2.prefixes, [b"a".to_vec(), b"b".to_vec()]);
        assert!(!b2.noloop, "flags are set anew");
        assert_eq!(
            on(&["on", "bcast", "prefix", "bc"], Some(&b)).unwrap_err(),
            "-ERR Prefix 'bc' overlaps with an existing prefix 'b'. \
             Prefixes for a single client must not overlap."
        );
        assert!(on(&["on"], Some(&b)).unwrap_err().contains("switch BCAST"));
        let i = on(&["on", "optin"], None).unwrap();
        assert!(on(&["on", "optout"], Some(&i))
            .unwrap_err()
            .contains("switch OPTIN/OPTOUT"));
        assert_eq!(on(&["on", "bcast"], None).unwrap().prefixes, [Vec::new()]);
        let a: Vec<&[u8]> = vec![b"off", b"bogus"];
        assert!(
            parse(&a, None, |_| true).is_err(),
            "options are parsed first"
        );
    }

    #[test]
    fn the_table_is_bounded_and_evicts_the_oldest_keys() {
        let mut t: TrackingTable<u32> = TrackingTable::new(3, 1);
        let mut gone = Vec::new();
        for (k, s) in [("a", 1), ("b", 1), ("a", 2), ("c", 3)] {
            t.remember(k.as_bytes(), s, |k, s| gone.push((k, s)));
        }
        assert!(gone.is_empty());
        t.remember(b"d", 4, |k, s| gone.push((k, s)));
        assert_eq!(gone, [(Bytes::from_static(b"a"), vec![1, 2])]);
        assert_eq!(t.take(b"b"), Some(vec![1]));
        assert_eq!(t.take(b"b"), None);
        assert_eq!(t.len(), 2);
        // Invalidated keys leave the order too, in time.
        for i in 0..1000u32 {
            t.remember(format!("k{i}").as_bytes(), i, |_, _| {});
            t.take(format!("k{i}").as_bytes());
        }
        assert!(t.order.len() <= 2 * t.len() + 65);
        t.clear();
        assert!(t.is_empty());
    }

    #[test]
    fn invalidation_frames_are_redis_s() {
        assert_eq!(
            &frame(true, Some(&[b"k"]), b"")[..],
            b">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n"
        );
        assert_eq!(
            &frame(false, None, b"$-1\r\n")[..],
            b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n$-1\r\n"
        );
        assert_eq!(
            &redir_broken(12)[..],
            b">2\r\n$21\r\ntracking-redir-broken\r\n:12\r\n"
        );
    }
}
