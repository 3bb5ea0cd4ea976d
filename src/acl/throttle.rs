//! Making password guessing expensive: the caps on failed AUTH.
//!
//! - Per connection (`auth-max-failures`): the session counts its failed
//!   AUTH / HELLO AUTH; the one that reaches the cap is answered and the
//!   connection closed, and nothing it pipelined after is read.
//! - Per source address (`auth-failures-per-source`): failures are
//!   counted per client IP address and per second (process-wide, every
//!   worker); once an address reached the cap in the current second, its
//!   AUTH attempts are refused without looking at the password
//!   ([`ERR_THROTTLED`]) until the second ends.
//!
//! Bounds: at most [`MAX_SOURCES`] addresses are remembered; when the
//! table is full, the entries of earlier seconds are dropped, and if none
//! is, the table starts over (so a flood of addresses costs memory no
//! more than that, and loses at most one second's counts).
//!
//! Only failures touch the table (one lock per failed attempt); a
//! successful AUTH asks [`Throttle::refused`] once, which with the cap
//! off is a test of a number.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Instant;

/// Addresses remembered at once.
pub const MAX_SOURCES: usize = 4096;

/// The answer to an AUTH from an address over its cap this second.
pub const ERR_THROTTLED: &[u8] =
    b"-ERR mithril: too many failed AUTH attempts from this address, try again later\r\n";

#[derive(Debug)]
pub struct Throttle {
    /// `auth-max-failures` (0: no cap).
    pub per_conn: u64,
    /// `auth-failures-per-source` (0: no cap).
    per_source: u64,
    start: Instant,
    /// Address -> (second since `start`, failures in it).
    sources: Mutex<HashMap<IpAddr, (u64, u64)>>,
}

impl Throttle {
    pub fn new(per_conn: u64, per_source: u64) -> Throttle {
        Throttle {
            per_conn,
            per_source,
            start: Instant::now(),
            sources: Mutex::new(HashMap::new()),
        }
    }

    fn second(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.start).as_secs()
    }

    /// Whether `ip` is over its cap in the current second: its AUTH is
    /// then answered [`ERR_THROTTLED`] without being checked.
    pub fn refused(&self, ip: IpAddr, now: Instant) -> bool {
        if self.per_source == 0 {
            return false;
        }
        let sec = self.second(now);
        let sources = self.sources.lock().unwrap_or_else(|p| p.into_inner());
        sources
            .get(&ip)
            .is_some_and(|&(s, n)| s == sec && n >= self.per_source)
    }

    /// Counts one failed AUTH from `ip`.
    pub fn failed(&self, ip: IpAddr, now: Instant) {
        if self.per_source == 0 {
            return;
        }
        let sec = self.second(now);
        let mut sources = self.sources.lock().unwrap_or_else(|p| p.into_inner());
        if sources.len() >= MAX_SOURCES && !sources.contains_key(&ip) {
            sources.retain(|_, &mut (s, _)| s == sec);
            if sources.len() >= MAX_SOURCES {
                sources.clear();
            }
        }
        let e = sources.entry(ip).or_insert((sec, 0));
        if e.0 != sec {
            *e = (sec, 0);
        }
        e.1 += 1;
    }

    /// Whether a connection with `failures` failed attempts is to be
    /// closed.
    pub fn conn_spent(&self, failures: u64) -> bool {
        self.per_conn != 0 && failures >= self.per_conn
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn an_address_is_refused_for_the_rest_of_the_second_after_its_cap() {
        let t = Throttle::new(3, 2);
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        let other: IpAddr = "10.0.0.2".parse().unwrap();
        let now = t.start + Duration::from_millis(10);
        assert!(!t.refused(ip, now));
        t.failed(ip, now);
        assert!(!t.refused(ip, now));
        t.failed(ip, now);
        assert!(t.refused(ip, now));
        assert!(!t.refused(other, now));
        // The next second starts afresh.
        assert!(!t.refused(ip, now + Duration::from_secs(1)));
        assert!(!t.conn_spent(2));
        assert!(t.conn_spent(3));
        assert!(!Throttle::new(0, 0).conn_spent(1_000_000));
    }

    #[test]
    fn the_table_stays_bounded() {
        let t = Throttle::new(0, 5);
        let now = t.start;
        for i in 0..(MAX_SOURCES as u32 * 2 + 7) {
            t.failed(IpAddr::from(i.to_be_bytes()), now);
        }
        assert!(t.sources.lock().unwrap().len() <= MAX_SOURCES);
    }
}
