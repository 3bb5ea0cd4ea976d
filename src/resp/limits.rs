//! Size bounds the request scanner enforces on client input.
//!
//! Owns: the three numbers that cap what one client frame may claim or hold.
//! Invariant: every bound is checked before the scanner trusts a length or
//! waits for more bytes, so a client can never make the proxy buffer or
//! reserve more than these allow for a single header or inline line.
//! Never: this module does not read configuration itself; the config layer
//! builds a `Limits` and hands it to the sessions.

/// Bounds applied while scanning client requests.
///
/// The defaults are the ones a stock Redis server uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest argument count a multibulk header may announce.
    pub max_multibulk_len: usize,
    /// Largest length a bulk argument header may announce.
    pub max_bulk_len: usize,
    /// Longest inline command line, and the longest a `*` or `$` header line
    /// may grow before its CRLF shows up.
    pub max_inline_len: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_multibulk_len: 1_048_576,
            max_bulk_len: 512 * 1024 * 1024,
            max_inline_len: 64 * 1024,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Limits;

    #[test]
    fn defaults_match_redis() {
        let l = Limits::default();
        assert_eq!(l.max_multibulk_len, 1_048_576);
        assert_eq!(l.max_bulk_len, 536_870_912);
        assert_eq!(l.max_inline_len, 65_536);
    }
}
