//! Sampled logging for errors that repeat: at most one line per kind per
//! second, the next line carrying how many were held back.
//!
//! A kind is a short static name plus an optional address (a node that
//! keeps refusing connections is one kind; a second node failing is
//! another). Each worker owns its sampler: no lock, no atomic.
//!
//! Bound: at most [`MAX_KINDS`] kinds are remembered; past that the oldest
//! is forgotten (its suppressed count is lost, the next line is printed).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Lines of one kind printed at most this often.
pub const PERIOD: Duration = Duration::from_secs(1);
/// Kinds remembered at once.
pub const MAX_KINDS: usize = 64;

struct Entry {
    kind: &'static str,
    addr: Option<SocketAddr>,
    last: Instant,
    suppressed: u64,
}

#[derive(Default)]
pub struct Sampler {
    kinds: Vec<Entry>,
}

impl Sampler {
    pub fn new() -> Sampler {
        Sampler::default()
    }

    /// Whether a line of this kind may be printed at `now`. `Some(n)`: yes,
    /// and `n` lines were held back since the last one; `None`: hold this
    /// one back too.
    pub fn allow(
        &mut self,
        kind: &'static str,
        addr: Option<SocketAddr>,
        now: Instant,
    ) -> Option<u64> {
        if let Some(e) = self
            .kinds
            .iter_mut()
            .find(|e| e.kind == kind && e.addr == addr)
        {
            if now.saturating_duration_since(e.last) < PERIOD {
                e.suppressed += 1;
                return None;
            }
            e.last = now;
            return Some(std::mem::take(&mut e.suppressed));
        }
        if self.kinds.len() >= MAX_KINDS {
            if let Some(oldest) = (0..self.kinds.len()).min_by_key(|&i| self.kinds[i].last) {
                self.kinds.swap_remove(oldest);
            }
        }
        self.kinds.push(Entry {
            kind,
            addr,
            last: now,
            suppressed: 0,
        });
        Some(0)
    }
}

/// `" (N similar lines suppressed)"`, or nothing when none were.
pub fn note(suppressed: u64) -> String {
    match suppressed {
        0 => String::new(),
        1 => " (1 similar line suppressed)".to_string(),
        n => format!(" ({n} similar lines suppressed)"),
    }
}

thread_local! {
    /// The sampler of [`debug_sampled!`] lines: one per thread, each call
    /// site a kind.
    static SITES: std::cell::RefCell<Sampler> = std::cell::RefCell::default();
}

/// Whether the line at call site `site` may be written now, on this
/// thread; what [`Sampler::allow`] answers.
pub fn allow_site(site: &'static str) -> Option<u64> {
    SITES.with(|s| s.borrow_mut().allow(site, None, Instant::now()))
}

/// `log::debug!` for a line a client can cause once per request (a
/// refused AUTH, a MOVED, a retry): one line per call site, thread and
/// [`PERIOD`] at most, the next one written saying how many were held
/// back. When debug lines are off it costs what `log::debug!` costs.
#[macro_export]
macro_rules! debug_sampled {
    (target: $target:expr, $($arg:tt)+) => {{
        if log::log_enabled!(target: $target, log::Level::Debug) {
            if let Some(n) = $crate::stats::sample::allow_site(concat!(file!(), ":", line!())) {
                log::debug!(
                    target: $target,
                    "{}{}",
                    format_args!($($arg)+),
                    $crate::stats::sample::note(n)
                );
            }
        }
    }};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_second_per_kind() {
        let mut s = Sampler::new();
        let t = Instant::now();
        let a: SocketAddr = "127.0.0.1:7000".parse().unwrap();
        let b: SocketAddr = "127.0.0.1:7001".parse().unwrap();
        assert_eq!(s.allow("down", Some(a), t), Some(0));
        assert_eq!(s.allow("down", Some(a), t), None);
        assert_eq!(
            s.allow("down", Some(a), t + Duration::from_millis(999)),
            None
        );
        assert_eq!(s.allow("down", Some(b), t), Some(0), "another node");
        assert_eq!(s.allow("other", Some(a), t), Some(0), "another kind");
        assert_eq!(s.allow("down", Some(a), t + PERIOD), Some(2));
        assert_eq!(s.allow("down", Some(a), t + PERIOD), None);
        assert_eq!(note(0), "");
        assert_eq!(note(2), " (2 similar lines suppressed)");
        for i in 0..(MAX_KINDS as u16 + 10) {
            let addr = SocketAddr::from(([127, 0, 0, 1], 1000 + i));
            s.allow("flood", Some(addr), t);
        }
        assert!(s.kinds.len() <= MAX_KINDS);
    }

    #[test]
    fn each_call_site_is_its_own_kind() {
        let site = |i: usize| allow_site(["a.rs:1", "a.rs:2"][i]);
        assert_eq!(site(0), Some(0));
        assert_eq!(site(0), None);
        assert_eq!(site(0), None);
        assert_eq!(site(1), Some(0), "another line");
        assert_eq!(site(1), None);
    }
}
