//! The frames of pub/sub: what a subscriber command is ([`Kind`]), a
//! request frame's arguments walked one `$` header at a time
//! ([`arg_at`]), the leading bulks of what a subscriber connection sends,
//! and the frames the proxy writes itself (a command to a node, a
//! confirmation to the client).
//!
//! Invariants: a frame is read where it lies; one that is not what it
//! should be reads as nothing (`None`), never as a panic.
//!
//! Never: touch a session or a connection (the worker's side is in the
//! sibling files).

use crate::resp::encode::Encoder;
use crate::resp::Proto;
use bytes::Bytes;
use std::ops::Range;

/// What a subscriber command subscribes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Channel,
    Pattern,
    Shard,
}

impl Kind {
    /// The kind of a subscriber command, and whether it unsubscribes.
    pub(super) fn of(name: &str) -> (Kind, bool) {
        let kind = if name.starts_with('p') {
            Kind::Pattern
        } else if name.starts_with("ssub") || name.starts_with("sunsub") {
            Kind::Shard
        } else {
            Kind::Channel
        };
        (kind, name.contains("unsubscribe"))
    }

    /// The first element of its confirmations.
    pub(super) fn confirmation(self, unsubscribe: bool) -> &'static [u8] {
        match (self, unsubscribe) {
            (Kind::Channel, false) => b"subscribe",
            (Kind::Channel, true) => b"unsubscribe",
            (Kind::Pattern, false) => b"psubscribe",
            (Kind::Pattern, true) => b"punsubscribe",
            (Kind::Shard, false) => b"ssubscribe",
            (Kind::Shard, true) => b"sunsubscribe",
        }
    }

    /// The command sent to a node.
    pub(super) fn command(self, unsubscribe: bool) -> &'static [u8] {
        match (self, unsubscribe) {
            (Kind::Channel, false) => b"SUBSCRIBE",
            (Kind::Channel, true) => b"UNSUBSCRIBE",
            (Kind::Pattern, false) => b"PSUBSCRIBE",
            (Kind::Pattern, true) => b"PUNSUBSCRIBE",
            (Kind::Shard, false) => b"SSUBSCRIBE",
            (Kind::Shard, true) => b"SUNSUBSCRIBE",
        }
    }
}

/// The first three bulk strings of a pub/sub frame (`*3\r\n$9\r\n
/// subscribe...` or `>3\r\n...`): its kind, then the channel (or pattern)
/// and, for a pmessage, the channel.
pub(super) fn leading_bulks(frame: &[u8]) -> [Option<&[u8]>; 3] {
    let mut out = [None; 3];
    let Some(nl) = frame.windows(2).position(|w| w == b"\r\n") else {
        return out;
    };
    let mut at = nl + 2;
    for slot in out.iter_mut() {
        match arg_at(frame, at) {
            Some((r, next)) => {
                *slot = frame.get(r);
                at = next;
            }
            None => break,
        }
    }
    out
}

pub(super) fn is_confirmation(kind: &[u8]) -> bool {
    matches!(
        kind,
        b"subscribe"
            | b"unsubscribe"
            | b"psubscribe"
            | b"punsubscribe"
            | b"ssubscribe"
            | b"sunsubscribe"
    )
}

/// The argument whose `$` header starts at `at` in a request frame: where
/// its bytes are, and where the next argument starts. `None` if the frame
/// holds no argument there (never for a frame the request scanner cut).
pub(super) fn arg_at(frame: &[u8], at: usize) -> Option<(Range<usize>, usize)> {
    let rest = frame.get(at..)?.strip_prefix(b"$")?;
    let cr = rest.iter().take(24).position(|&b| b == b'\r')?;
    let len: usize = std::str::from_utf8(&rest[..cr]).ok()?.parse().ok()?;
    let start = at + 1 + cr + 2;
    let end = start.checked_add(len)?;
    if frame.get(end..end.checked_add(2)?) != Some(&b"\r\n"[..]) {
        return None;
    }
    Some((start..end, end + 2))
}

pub(super) fn bulk_into(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(format!("${}\r\n", b.len()).as_bytes());
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
}

/// `cmd names...` as a request frame.
pub(super) fn command_frame(cmd: &[u8], names: &[&[u8]]) -> Bytes {
    let mut f = format!("*{}\r\n", names.len() + 1).into_bytes();
    bulk_into(&mut f, cmd);
    for n in names {
        bulk_into(&mut f, n);
    }
    Bytes::from(f)
}

/// A confirmation: its kind, the channel (null for a bare command that
/// found nothing) and the count.
pub(super) fn encode_confirmation(
    out: &mut Vec<u8>,
    proto: Proto,
    kind: &[u8],
    channel: Option<&[u8]>,
    count: usize,
) {
    let mut e = Encoder::new(out, proto);
    e.push(3).bulk(kind);
    match channel {
        Some(ch) => e.bulk(ch),
        None => e.null(),
    };
    e.int(count as i64);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leading_bulks_of_frames() {
        let [k, ch, _] = leading_bulks(b"*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n");
        assert_eq!((k, ch), (Some(&b"subscribe"[..]), Some(&b"a"[..])));
        let [k, p, ch] =
            leading_bulks(b">4\r\n$8\r\npmessage\r\n$1\r\n*\r\n$2\r\nab\r\n$1\r\nx\r\n");
        assert_eq!(k, Some(&b"pmessage"[..]));
        assert_eq!(p, Some(&b"*"[..]));
        assert_eq!(ch, Some(&b"ab"[..]));
        assert_eq!(leading_bulks(b":1\r\n"), [None, None, None]);
        assert!(is_confirmation(b"sunsubscribe"));
        assert!(!is_confirmation(b"smessage"));
    }

    #[test]
    fn arguments_are_walked_one_header_at_a_time() {
        let f = b"*3\r\n$11\r\nunsubscribe\r\n$1\r\na\r\n$3\r\nbcd\r\n";
        let (name, next) = arg_at(f, 4).unwrap();
        assert_eq!(&f[name], b"unsubscribe");
        let (a, next) = arg_at(f, next).unwrap();
        assert_eq!(&f[a], b"a");
        let (bcd, end) = arg_at(f, next).unwrap();
        assert_eq!(&f[bcd], b"bcd");
        assert_eq!(end, f.len());
        assert_eq!(arg_at(f, end), None);
        assert_eq!(arg_at(b"$5\r\nab\r\n", 0), None, "shorter than announced");
        assert_eq!(arg_at(b"$x\r\n", 0), None);
    }

    #[test]
    fn confirmations_are_encoded_for_both_protocols() {
        let mut out = Vec::new();
        encode_confirmation(&mut out, Proto::Resp2, b"ssubscribe", Some(b"a"), 2);
        assert_eq!(out, b"*3\r\n$10\r\nssubscribe\r\n$1\r\na\r\n:2\r\n");
        out.clear();
        encode_confirmation(&mut out, Proto::Resp3, b"sunsubscribe", None, 0);
        assert_eq!(out, b">3\r\n$12\r\nsunsubscribe\r\n_\r\n:0\r\n");
        assert_eq!(
            &command_frame(b"SSUBSCRIBE", &[b"a", b"bc"])[..],
            b"*3\r\n$10\r\nSSUBSCRIBE\r\n$1\r\na\r\n$2\r\nbc\r\n"
        );
        assert_eq!(Kind::of("sunsubscribe"), (Kind::Shard, true));
        assert_eq!(Kind::of("psubscribe"), (Kind::Pattern, false));
        assert_eq!(Kind::of("unsubscribe"), (Kind::Channel, true));
        assert_eq!(Kind::of("subscribe"), (Kind::Channel, false));
        assert_eq!(Kind::of("ssubscribe"), (Kind::Shard, false));
    }
}
