//! The credentials mithril presents to cluster nodes (`backend-user`,
//! `backend-password`) and how a node's refusal of them is worded.
//!
//! Used by every connection a worker opens (the AUTH request goes first,
//! before HELLO 3 and READONLY) and, through [`for_probe`], by the
//! topology thread's probe, which is built with the same request.
//!
//! Never: log or echo the password; the refusal texts quote the node's
//! reply only.

use crate::config::Config;
use crate::topology::probe;
use bytes::Bytes;

/// The AUTH request mithril sends first on every connection it opens to a
/// cluster node, when `backend-password` is set.
pub fn frame(cfg: &Config) -> Option<Bytes> {
    if cfg.backend_password.is_empty() {
        return None;
    }
    let mut out = Vec::with_capacity(32 + cfg.backend_user.len() + cfg.backend_password.len());
    let pass = cfg.backend_password.as_bytes();
    if cfg.backend_user.is_empty() {
        crate::resp::encode::request(&mut out, &[b"AUTH", pass]);
    } else {
        crate::resp::encode::request(&mut out, &[b"AUTH", cfg.backend_user.as_bytes(), pass]);
    }
    Some(Bytes::from(out))
}

/// What the topology probe sends ahead of every query, and how it words a
/// refusal: the same request and texts as the workers' connections.
pub fn for_probe(cfg: &Config) -> Option<probe::Auth> {
    frame(cfg).map(|frame| probe::Auth {
        frame,
        refused: setup_failure,
    })
}

/// The reason to log and answer when a connection set-up command (AUTH,
/// HELLO 3, READONLY) was refused by the node: credential problems are
/// named as such.
pub fn setup_failure(reply: &[u8]) -> String {
    let text = String::from_utf8_lossy(reply);
    let text = text.trim_start_matches('-').trim_end();
    if is_auth_refusal(text) {
        format!(
            "the node refused mithril's credentials (check backend-user and \
             backend-password): {text}"
        )
    } else {
        format!("set-up command failed: {text}")
    }
}

/// Whether an error text (without the leading '-') is a node refusing
/// authentication or asking for it.
pub fn is_auth_refusal(text: &str) -> bool {
    text.starts_with("WRONGPASS")
        || text.starts_with("NOAUTH")
        || text.starts_with("ERR AUTH")
        || text.starts_with("ERR invalid password")
        || text.starts_with("ERR Client sent AUTH")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backend_auth_frame() {
        let cfg = crate::config::parse_str("backend-password p\n", "t").unwrap();
        assert_eq!(
            &frame(&cfg).unwrap()[..],
            b"*2\r\n$4\r\nAUTH\r\n$1\r\np\r\n"
        );
        let cfg = crate::config::parse_str("backend-user u\nbackend-password p\n", "t").unwrap();
        assert_eq!(
            &frame(&cfg).unwrap()[..],
            b"*3\r\n$4\r\nAUTH\r\n$1\r\nu\r\n$1\r\np\r\n"
        );
        assert!(frame(&crate::config::Config::default()).is_none());
        assert!(setup_failure(
            b"-WRONGPASS invalid username-password pair or user is disabled.\r\n"
        )
        .starts_with("the node refused mithril's credentials"));
        assert!(
            setup_failure(b"-ERR AUTH <password> called without any password configured")
                .contains("backend-password")
        );
        assert_eq!(
            setup_failure(b"-ERR unknown\r\n"),
            "set-up command failed: ERR unknown"
        );
    }
}
