//! Keyspace notifications: a channel starting with `__keyspace@` or
//! `__keyevent@`, and a pattern that could match one, are published only
//! on the node where the key lives, so a session that subscribes to one
//! holds it on every master serving slots as well as at home, following
//! the map ([`Worker::keyspace_everywhere`]).
//!
//! Invariants: a connection holds the keyspace subscriptions exactly
//! while its node is a master serving slots as far as the map says (its
//! `everywhere` flag); home keeps its patterns whatever the map says, as
//! they serve every other channel too.
//!
//! Never: tell the client; these subscriptions are the proxy's own and
//! their confirmations are swallowed.

use crate::worker::{Timer, Worker};
use reactor::{Context, Key};
use std::net::SocketAddr;

const KEYSPACE: &[u8] = b"__keyspace@";
const KEYEVENT: &[u8] = b"__keyevent@";

/// A keyspace or keyevent notification channel: published only on the
/// node where the key lives.
pub(super) fn keyspace_channel(ch: &[u8]) -> bool {
    ch.starts_with(KEYSPACE) || ch.starts_with(KEYEVENT)
}

/// A pattern that could match a keyspace or keyevent channel.
pub(super) fn keyspace_pattern(p: &[u8]) -> bool {
    could_match_prefix(p, KEYSPACE) || could_match_prefix(p, KEYEVENT)
}

/// Whether glob `p` (Redis's syntax: `*`, `?`, `[...]` with `^` and
/// ranges, `\` escapes) could match some string starting with `prefix`:
/// it matches the prefix up to a `*`, or all of it with pattern left.
fn could_match_prefix(p: &[u8], prefix: &[u8]) -> bool {
    let mut i = 0;
    for &c in prefix {
        let Some(&head) = p.get(i) else {
            return false; // the pattern ends inside the prefix
        };
        match head {
            b'*' => return true,
            b'?' => i += 1,
            b'[' => {
                let mut k = i + 1;
                let negate = p.get(k) == Some(&b'^');
                if negate {
                    k += 1;
                }
                let mut hit = false;
                loop {
                    match p.get(k) {
                        None => break,
                        Some(b']') => {
                            k += 1;
                            break;
                        }
                        Some(b'\\') if k + 1 < p.len() => {
                            hit |= p[k + 1] == c;
                            k += 2;
                        }
                        Some(&a) if p.get(k + 1) == Some(&b'-') && k + 2 < p.len() => {
                            let b = p[k + 2];
                            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                            hit |= (lo..=hi).contains(&c);
                            k += 3;
                        }
                        Some(&a) => {
                            hit |= a == c;
                            k += 1;
                        }
                    }
                }
                if hit == negate {
                    return false;
                }
                i = k;
            }
            b'\\' if i + 1 < p.len() => {
                if p[i + 1] != c {
                    return false;
                }
                i += 2;
            }
            lit => {
                if lit != c {
                    return false;
                }
                i += 1;
            }
        }
    }
    true
}

impl Worker {
    /// Make `key`'s keyspace subscriptions on every master the map names
    /// serving slots (and only there): a master that lacks them gets them,
    /// a node that is no longer one loses them (a master left without
    /// slots has no keys; one the map still calls a master of no slots
    /// after a failover is a replica, which applies the writes too, and
    /// would repeat every event). Unseen by the client.
    pub(super) fn keyspace_everywhere(&mut self, cx: &mut Context<'_, Timer>, key: Key) {
        let masters: Vec<SocketAddr> = self.place.serving_masters(self.pool_of(key)).collect();
        let Some(sub) = self.sessions.get_mut(key).and_then(|s| s.sub.as_mut()) else {
            return;
        };
        sub.everywhere = true;
        if masters.is_empty() {
            // No master known healthy: keep what is held until the map
            // names one again.
            return;
        }
        let channels: Vec<Vec<u8>> = sub
            .channels
            .iter()
            .filter(|c| keyspace_channel(c))
            .cloned()
            .collect();
        let patterns: Vec<Vec<u8>> = sub
            .patterns
            .iter()
            .filter(|p| keyspace_pattern(p))
            .cloned()
            .collect();
        let channels: Vec<&[u8]> = channels.iter().map(|c| &c[..]).collect();
        let patterns: Vec<&[u8]> = patterns.iter().map(|c| &c[..]).collect();
        // Nodes that are masters no more: their copies go (home keeps its
        // patterns, which serve every other channel too).
        let gone: Vec<usize> = (0..sub.conns.len())
            .filter(|&i| sub.conns[i].everywhere && !masters.contains(&sub.conns[i].addr))
            .collect();
        for &i in &gone {
            sub.conns[i].everywhere = false;
        }
        for i in gone {
            self.hidden(key, i, b"UNSUBSCRIBE", &channels, None, 0);
            if i != 0 {
                self.hidden(key, i, b"PUNSUBSCRIBE", &patterns, None, 0);
            }
        }
        for addr in masters {
            let Some(i) = self.sub_conn(cx, key, addr) else {
                continue;
            };
            let Some(sub) = self.sessions.get_mut(key).and_then(|s| s.sub.as_mut()) else {
                return;
            };
            if sub.conns[i].everywhere {
                continue;
            }
            sub.conns[i].everywhere = true;
            self.hidden(key, i, b"SUBSCRIBE", &channels, None, 0);
            if i != 0 {
                self.hidden(key, i, b"PSUBSCRIBE", &patterns, None, 0);
            }
        }
        self.retry_later(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyspace_channels_and_the_patterns_that_could_match_them() {
        assert!(keyspace_channel(b"__keyspace@0__:foo"));
        assert!(keyspace_channel(b"__keyevent@0__:set"));
        assert!(!keyspace_channel(b"__keyspac"));
        assert!(!keyspace_channel(b"news"));
        for p in [
            "*",
            "__key*",
            "__key*__:*",
            "__keyspace@0__:*",
            "__keyevent@*",
            "_?keyspace@*",
            "__key[se]*",
            "__key[^x]pace@*",
            "__keyspace@",
            "\\_\\_keyspace@*",
            "[_]*",
        ] {
            assert!(keyspace_pattern(p.as_bytes()), "{p}");
        }
        for p in [
            "news.*",
            "__key",
            "__keyspace",
            "__key[^se]*",
            "?",
            "a*",
            "__keyx*",
            "",
        ] {
            assert!(!keyspace_pattern(p.as_bytes()), "{p}");
        }
    }
}
