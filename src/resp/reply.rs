//! The backend reply scanner: finds where each reply frame ends in a
//! backend connection's read buffer, for every RESP2 and RESP3 type, without
//! building values.
//!
//! Owns: the resumable parse state of the one reply at the front of a
//! backend's input buffer: an explicit stack of open aggregates (no
//! recursion, so nesting depth costs heap, never call stack).
//!
//! Contract with the caller (same as the request scanner): the buffer passed
//! to [`ReplyScanner::scan`] starts at the reply's first byte and only grows
//! between calls. Offsets are absolute, each element is examined once, and a
//! line's terminator search resumes where it stopped, so a reply of a million
//! elements arriving in small reads is scanned in linear time.
//!
//! What makes one reply: a value of any type; an aggregate with all its
//! elements (maps and attributes count two elements per entry); a leading
//! attribute (`|`) together with the value it annotates. `head` is the type
//! byte of that value, after any leading attributes. Attributes nested in an
//! aggregate annotate the element after them and do not count as elements.
//!
//! Invariants: every line and every bulk payload must end in CRLF; length
//! and count lines, integers, booleans and nulls must end within 32 bytes;
//! simple strings, errors, doubles and big numbers are not length-limited
//! (the backend is trusted that far). Streamed strings and aggregates (`$?`,
//! `*?`, ...) are refused. Any malformed byte gives `ReplyScan::Error`: the
//! caller must drop the connection, since its frame boundaries are lost.
//!
//! Never: no allocation per reply once the stack has grown to the deepest
//! nesting seen; no values materialized (see `value` for that).

use super::error::ReplyError;
use super::num::{find_line, parse_i64, quick_header, Line};

/// Longest a length, count, integer, boolean or null line may be.
const MAX_HEADER: usize = 32;

/// What one call to [`ReplyScanner::scan`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplyScan {
    /// More bytes are needed; progress is kept in the scanner.
    Incomplete,
    /// One whole reply occupies `buf[..len]`; `head` is its type byte (after
    /// any leading attribute).
    Complete { len: usize, head: u8 },
    /// The stream is malformed; drop the connection.
    Error(ReplyError),
}

/// An aggregate still waiting for elements.
#[derive(Debug, Clone, Copy)]
struct Open {
    /// Elements still to come (map and attribute entries count two).
    remaining: u64,
    /// An attribute: its completion does not count as an element.
    attribute: bool,
}

/// Resumable scanner for backend replies. One per backend connection.
#[derive(Debug, Default)]
pub struct ReplyScanner {
    /// Start of the next element, or of the pending bulk payload.
    pos: usize,
    /// How far the terminator search of the line at `pos` has got.
    searched: usize,
    /// Set while waiting for a bulk payload: where the payload ends.
    bulk_end: Option<usize>,
    /// Open aggregates, innermost last.
    stack: Vec<Open>,
    /// Type byte of the reply proper (0 until seen).
    head: u8,
    /// Units of work done, to prove resumption is linear.
    #[cfg(test)]
    work: u64,
}

impl ReplyScanner {
    pub fn new() -> Self {
        ReplyScanner::default()
    }

    /// Scans the reply at the front of `buf`, resuming where the previous
    /// call stopped.
    pub fn scan(&mut self, buf: &[u8]) -> ReplyScan {
        // An empty buffer holds no partial reply either (bytes leave the
        // buffer only as whole frames): the common end of a read's batch.
        if buf.is_empty() {
            return ReplyScan::Incomplete;
        }
        // Fast path: a whole bulk string or non-negative integer at the
        // start of a fresh scan (GET, INCR, ...), decided in one look. Any
        // other shape, and a bulk not yet whole, takes the general path,
        // which agrees with every answer given here.
        if self.pos == 0 && self.bulk_end.is_none() && self.stack.is_empty() {
            if let Some((len, head)) = whole_bulk_or_integer(buf) {
                // A header that arrived in pieces may have left `searched`
                // behind: the next frame starts clean.
                self.searched = 0;
                return ReplyScan::Complete { len, head };
            }
        }
        let out = self.step(buf);
        if out != ReplyScan::Incomplete {
            self.reset();
        }
        out
    }

    /// After `Incomplete` inside a bulk string that is the whole reply (not
    /// an element of an aggregate): the reply's length, so the caller can
    /// make room for it once. `None` otherwise.
    pub fn pending_hint(&self) -> Option<usize> {
        match self.bulk_end {
            Some(end) if self.stack.is_empty() => end.checked_add(2),
            _ => None,
        }
    }

    /// Forgets any partial reply (keeps the stack's capacity).
    pub fn reset(&mut self) {
        self.pos = 0;
        self.searched = 0;
        self.bulk_end = None;
        self.stack.clear();
        self.head = 0;
    }

    #[cfg(test)]
    pub(crate) fn work(&self) -> u64 {
        self.work
    }

    /// The general path. Never inlined: `scan`'s fast path (a GET's
    /// bulk, an integer) then saves and restores only the few registers
    /// it uses; inlined, whether it was depended on how the compiler split
    /// the crate, and a GET's reply cost 14 instructions more when it was.
    #[inline(never)]
    fn step(&mut self, buf: &[u8]) -> ReplyScan {
        loop {
            #[cfg(test)]
            {
                self.work += 1;
            }
            if let Some(end) = self.bulk_end {
                match buf.get(end) {
                    None => return ReplyScan::Incomplete,
                    Some(b'\r') => {}
                    Some(_) => return ReplyScan::Error(ReplyError::BadLineEnd),
                }
                match buf.get(end + 1) {
                    None => return ReplyScan::Incomplete,
                    Some(b'\n') => {}
                    Some(_) => return ReplyScan::Error(ReplyError::BadLineEnd),
                }
                self.bulk_end = None;
                self.pos = end + 2;
                self.searched = self.pos;
                if self.element_done() {
                    return self.complete();
                }
                continue;
            }

            let Some(&kind) = buf.get(self.pos) else {
                return ReplyScan::Incomplete;
            };
            let max = match kind {
                b'+' | b'-' | b',' | b'(' => usize::MAX,
                b'$' | b'!' | b'=' | b'*' | b'%' | b'~' | b'>' | b'|' | b':' | b'#' | b'_' => {
                    MAX_HEADER
                }
                other => return ReplyScan::Error(ReplyError::UnknownType(other)),
            };
            // Lengths, counts and integers usually take the quick path.
            let quick = match kind {
                b'$' | b'!' | b'=' | b'*' | b'%' | b'~' | b'>' | b'|' | b':' => {
                    quick_header(buf, self.pos)
                }
                _ => None,
            };
            let (cr, quick) = match quick {
                Some((n, cr)) => (cr, Some(n)),
                None => {
                    #[cfg(test)]
                    let before = self.searched.max(self.pos);
                    let found = find_line(buf, self.pos, &mut self.searched, b'\r', max);
                    #[cfg(test)]
                    {
                        self.work += self.searched.saturating_sub(before) as u64;
                    }
                    let cr = match found {
                        Line::Found(cr) => cr,
                        Line::Incomplete => return ReplyScan::Incomplete,
                        Line::TooLong => return ReplyScan::Error(ReplyError::HeaderTooLong),
                    };
                    match buf.get(cr + 1) {
                        None => return ReplyScan::Incomplete,
                        Some(b'\n') => {}
                        Some(_) => return ReplyScan::Error(ReplyError::BadLineEnd),
                    }
                    (cr, None)
                }
            };
            let line = buf.get(self.pos + 1..cr).unwrap_or_default();
            if self.stack.is_empty() && kind != b'|' {
                self.head = kind;
            }
            self.pos = cr + 2;
            self.searched = self.pos;

            match kind {
                b'+' | b'-' | b',' | b'(' => {}
                b':' => {
                    if quick.is_none() && parse_i64(line).is_none() {
                        return ReplyScan::Error(ReplyError::BadInteger);
                    }
                }
                b'#' => {
                    if line != b"t" && line != b"f" {
                        return ReplyScan::Error(ReplyError::BadBoolean);
                    }
                }
                b'_' => {
                    if !line.is_empty() {
                        return ReplyScan::Error(ReplyError::BadNull);
                    }
                }
                b'$' | b'!' | b'=' => match quick.map_or_else(|| length(line), |n| Ok(Some(n))) {
                    Err(e) => return ReplyScan::Error(e),
                    Ok(None) if kind == b'$' => {}
                    Ok(None) => return ReplyScan::Error(ReplyError::BadLength),
                    Ok(Some(n)) => match usize::try_from(n)
                        .ok()
                        .and_then(|n| self.pos.checked_add(n))
                    {
                        Some(end) => {
                            self.bulk_end = Some(end);
                            continue;
                        }
                        None => return ReplyScan::Error(ReplyError::BadLength),
                    },
                },
                // Aggregates: `*`, `%`, `~`, `>`, `|`.
                _ => {
                    let n = match quick.map_or_else(|| length(line), |n| Ok(Some(n))) {
                        Err(e) => return ReplyScan::Error(e),
                        Ok(None) if kind == b'*' => {
                            // `*-1`: the RESP2 null array, a plain element.
                            if self.element_done() {
                                return self.complete();
                            }
                            continue;
                        }
                        Ok(None) => return ReplyScan::Error(ReplyError::BadLength),
                        Ok(Some(n)) => n,
                    };
                    let pairs = matches!(kind, b'%' | b'|');
                    let Some(count) = (if pairs { n.checked_mul(2) } else { Some(n) }) else {
                        return ReplyScan::Error(ReplyError::BadLength);
                    };
                    let attribute = kind == b'|';
                    if count > 0 {
                        self.stack.push(Open {
                            remaining: count,
                            attribute,
                        });
                        continue;
                    }
                    if attribute {
                        // An empty attribute annotates the next element and
                        // is not one itself.
                        continue;
                    }
                }
            }
            if self.element_done() {
                return self.complete();
            }
        }
    }

    /// Records one finished element. Returns true when that finished the
    /// whole reply.
    fn element_done(&mut self) -> bool {
        loop {
            let Some(top) = self.stack.last_mut() else {
                return true;
            };
            top.remaining = top.remaining.saturating_sub(1);
            if top.remaining > 0 {
                return false;
            }
            let attribute = top.attribute;
            self.stack.pop();
            if attribute {
                // A finished attribute is not an element of its parent; the
                // element it annotates is still to come.
                return false;
            }
        }
    }

    fn complete(&self) -> ReplyScan {
        ReplyScan::Complete {
            len: self.pos,
            head: self.head,
        }
    }
}

/// The length and type byte of the `$<n>\r\n<n bytes>\r\n` or `:<n>\r\n`
/// frame `buf` starts with, when it is whole and in the plain shape
/// `quick_header` reads; `None` otherwise.
#[inline]
fn whole_bulk_or_integer(buf: &[u8]) -> Option<(usize, u8)> {
    let kind = *buf.first()?;
    if kind != b'$' && kind != b':' {
        return None;
    }
    let (n, cr) = quick_header(buf, 0)?;
    let body = cr + 2;
    if kind == b':' {
        return Some((body, kind));
    }
    let end = body.checked_add(usize::try_from(n).ok()?)?;
    (buf.get(end..end.checked_add(2)?)? == b"\r\n").then_some((end + 2, kind))
}

/// Parses a length or count line: `Ok(None)` for `-1`, `Ok(Some(n))` for
/// `n >= 0`.
fn length(line: &[u8]) -> Result<Option<u64>, ReplyError> {
    if line == b"?" {
        return Err(ReplyError::Streamed);
    }
    match parse_i64(line) {
        Some(-1) => Ok(None),
        Some(n) => u64::try_from(n)
            .map(Some)
            .map_err(|_| ReplyError::BadLength),
        None => Err(ReplyError::BadLength),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::resp::testutil::XorShift;

    fn whole(input: &[u8]) -> ReplyScan {
        ReplyScanner::new().scan(input)
    }

    fn split(input: &[u8], at: usize) -> ReplyScan {
        let mut sc = ReplyScanner::new();
        match sc.scan(&input[..at]) {
            ReplyScan::Incomplete => sc.scan(input),
            settled => settled,
        }
    }

    fn bytewise(input: &[u8]) -> ReplyScan {
        let mut sc = ReplyScanner::new();
        for end in 0..=input.len() {
            match sc.scan(&input[..end]) {
                ReplyScan::Incomplete => {}
                settled => return settled,
            }
        }
        ReplyScan::Incomplete
    }

    fn check(input: &[u8], expected: ReplyScan) {
        assert_eq!(
            whole(input),
            expected,
            "whole {:?}",
            String::from_utf8_lossy(input)
        );
        for at in crate::resp::request::tests::split_points(input.len()) {
            assert_eq!(
                split(input, at),
                expected,
                "split at {at} of {:?}",
                String::from_utf8_lossy(input)
            );
        }
        if input.len() <= 8192 {
            assert_eq!(bytewise(input), expected);
        }
    }

    fn ok(input: &[u8], head: u8) {
        check(
            input,
            ReplyScan::Complete {
                len: input.len(),
                head,
            },
        );
        // Followed by another reply, the boundary stays put.
        let mut more = input.to_vec();
        more.extend_from_slice(b"+OK\r\n:1\r\n");
        check(
            &more,
            ReplyScan::Complete {
                len: input.len(),
                head,
            },
        );
        // Every strict prefix is incomplete.
        for end in crate::resp::request::tests::split_points(input.len()) {
            if end == input.len() {
                continue;
            }
            assert_eq!(whole(&input[..end]), ReplyScan::Incomplete, "prefix {end}");
        }
    }

    fn bad(input: &[u8], e: ReplyError) {
        check(input, ReplyScan::Error(e));
    }

    #[test]
    fn resp2_types() {
        ok(b"+OK\r\n", b'+');
        ok(b"+\r\n", b'+');
        ok(b"-ERR wrong\r\n", b'-');
        ok(b"-MOVED 3999 127.0.0.1:6381\r\n", b'-');
        ok(b":0\r\n", b':');
        ok(b":-9223372036854775808\r\n", b':');
        ok(b"$5\r\nhello\r\n", b'$');
        ok(b"$0\r\n\r\n", b'$');
        ok(b"$4\r\n\r\n\r\n\r\n", b'$');
        ok(b"$-1\r\n", b'$');
        ok(b"*-1\r\n", b'*');
        ok(b"*0\r\n", b'*');
        ok(b"*2\r\n$3\r\nfoo\r\n$-1\r\n", b'*');
        ok(b"*3\r\n:1\r\n*2\r\n+a\r\n-b\r\n*0\r\n", b'*');
        ok(b"*2\r\n*-1\r\n*1\r\n*1\r\n:5\r\n", b'*');
    }

    #[test]
    fn resp3_types() {
        ok(b"_\r\n", b'_');
        ok(b",3.14\r\n", b',');
        ok(b",-inf\r\n", b',');
        ok(b"#t\r\n", b'#');
        ok(b"#f\r\n", b'#');
        ok(b"(3492890328409238509324850943850943825024385\r\n", b'(');
        ok(b"!21\r\nSYNTAX invalid syntax\r\n", b'!');
        ok(b"=15\r\ntxt:Some string\r\n", b'=');
        ok(b"%2\r\n+first\r\n:1\r\n+second\r\n:2\r\n", b'%');
        ok(b"%0\r\n", b'%');
        ok(b"~3\r\n+a\r\n+b\r\n+c\r\n", b'~');
        ok(b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n", b'>');
        ok(b"%1\r\n*2\r\n:1\r\n:2\r\n%1\r\n~1\r\n_\r\n#t\r\n", b'%');
    }

    #[test]
    fn attributes() {
        // A leading attribute and the value it annotates are one reply.
        ok(
            b"|1\r\n+key-popularity\r\n%2\r\n$1\r\na\r\n,0.1923\r\n$1\r\nb\r\n,0.0012\r\n*2\r\n:2039123\r\n:9543892\r\n",
            b'*',
        );
        ok(b"|0\r\n:1\r\n", b':');
        ok(b"|1\r\n+a\r\n+b\r\n|1\r\n+c\r\n+d\r\n$1\r\nx\r\n", b'$');
        // Inside an aggregate, an attribute does not count as an element.
        ok(b"*2\r\n:1\r\n|1\r\n+ttl\r\n:3600\r\n:2\r\n", b'*');
        ok(b"*1\r\n|1\r\n+a\r\n|1\r\n+b\r\n+c\r\n+d\r\n+e\r\n", b'*');
        ok(b"*1\r\n|0\r\n:2\r\n", b'*');
        // An attribute alone is not a reply yet.
        assert_eq!(whole(b"|1\r\n+a\r\n+b\r\n"), ReplyScan::Incomplete);
        assert_eq!(whole(b"*1\r\n|1\r\n+a\r\n+b\r\n"), ReplyScan::Incomplete);
    }

    #[test]
    fn malformed() {
        bad(b"@foo\r\n", ReplyError::UnknownType(b'@'));
        bad(b"\r\n", ReplyError::UnknownType(b'\r'));
        bad(b"*2\r\n:1\r\nx", ReplyError::UnknownType(b'x'));
        bad(b"+OK\rX", ReplyError::BadLineEnd);
        bad(b"$3\r\nfooXX", ReplyError::BadLineEnd);
        bad(b"$3\r\nfoo\rX", ReplyError::BadLineEnd);
        bad(b"$3\rX", ReplyError::BadLineEnd);
        bad(b"$-2\r\n", ReplyError::BadLength);
        bad(b"$x\r\n", ReplyError::BadLength);
        bad(b"$01\r\n", ReplyError::BadLength);
        bad(b"!-1\r\n", ReplyError::BadLength);
        bad(b"%-1\r\n", ReplyError::BadLength);
        bad(b"*-2\r\n", ReplyError::BadLength);
        bad(b"$?\r\n", ReplyError::Streamed);
        bad(b"*?\r\n", ReplyError::Streamed);
        bad(b"%?\r\n", ReplyError::Streamed);
        bad(b":1.5\r\n", ReplyError::BadInteger);
        bad(b":\r\n", ReplyError::BadInteger);
        bad(b"#x\r\n", ReplyError::BadBoolean);
        bad(b"_x\r\n", ReplyError::BadNull);
        bad(
            b":111111111111111111111111111111111111",
            ReplyError::HeaderTooLong,
        );
        bad(
            b"$000000000000000000000000000000000000",
            ReplyError::HeaderTooLong,
        );
    }

    #[test]
    fn long_simple_lines_are_fine() {
        let mut line = b"+".to_vec();
        line.extend_from_slice(&[b'a'; 20_000]);
        line.extend_from_slice(b"\r\n");
        ok(&line[..], b'+');
    }

    #[test]
    fn deep_nesting_uses_no_recursion() {
        const DEPTH: usize = 200_000;
        let mut buf = Vec::with_capacity(DEPTH * 4 + 8);
        for _ in 0..DEPTH {
            buf.extend_from_slice(b"*1\r\n");
        }
        buf.extend_from_slice(b":1\r\n");
        assert_eq!(
            whole(&buf),
            ReplyScan::Complete {
                len: buf.len(),
                head: b'*'
            }
        );
        assert_eq!(whole(&buf[..buf.len() - 1]), ReplyScan::Incomplete);
    }

    #[test]
    fn million_elements_in_64k_reads_is_linear() {
        const N: usize = 1_000_000;
        let mut buf = Vec::with_capacity(N * 9 + 16);
        buf.extend_from_slice(b"*1000000\r\n");
        for i in 0..N {
            if i % 2 == 0 {
                buf.extend_from_slice(b"$3\r\nfoo\r\n");
            } else {
                buf.extend_from_slice(b":12345\r\n");
            }
        }
        let mut sc = ReplyScanner::new();
        let started = std::time::Instant::now();
        let mut end = 0;
        let mut calls = 0u64;
        let result = loop {
            end = (end + 64 * 1024).min(buf.len());
            calls += 1;
            match sc.scan(&buf[..end]) {
                ReplyScan::Incomplete => assert!(end < buf.len(), "stuck at the end"),
                other => break other,
            }
        };
        let elapsed = started.elapsed();
        assert_eq!(
            result,
            ReplyScan::Complete {
                len: buf.len(),
                head: b'*'
            }
        );
        let work = sc.work();
        assert!(
            work < 2 * buf.len() as u64 + 10 * calls,
            "work {work} in {calls} reads"
        );
        assert!(elapsed.as_secs() < 10, "took {elapsed:?}");
    }

    // ---- seeded random streams -------------------------------------------

    /// Appends one random RESP2/RESP3 reply (with nested aggregates and
    /// attributes) to `out`; returns its head byte. Iterative, like the
    /// scanner, via a list of element counts still to emit.
    pub(crate) fn random_reply(rng: &mut XorShift, out: &mut Vec<u8>) -> u8 {
        let mut head = 0u8;
        // Elements still owed at each open level; bottom is the reply itself.
        let mut owed: Vec<usize> = vec![1];
        let mut budget = 1 + rng.below(400);
        while let Some(top) = owed.last_mut() {
            if *top == 0 {
                owed.pop();
                continue;
            }
            *top -= 1;
            let at_top = owed.len() == 1;
            // Optionally an attribute before the element.
            if rng.below(12) == 0 && budget > 0 {
                let n = rng.below(3);
                out.extend_from_slice(format!("|{n}\r\n").as_bytes());
                for _ in 0..2 * n {
                    out.extend_from_slice(b"+attr\r\n");
                }
            }
            let pick = if budget == 0 {
                rng.below(10)
            } else {
                rng.below(17)
            };
            budget = budget.saturating_sub(1);
            let kind = match pick {
                0 => {
                    out.extend_from_slice(b"+OK\r\n");
                    b'+'
                }
                1 => {
                    out.extend_from_slice(b"-ERR something\r\n");
                    b'-'
                }
                2 => {
                    let v = rng.next_u64() as i64 >> rng.below(64);
                    out.extend_from_slice(format!(":{v}\r\n").as_bytes());
                    b':'
                }
                3 => {
                    let len = {
                        let rare = rng.below(10) == 0;
                        rng.below(if rare { 5000 } else { 20 })
                    };
                    out.extend_from_slice(format!("${len}\r\n").as_bytes());
                    for _ in 0..len {
                        out.push(b"\r\n*$ab"[rng.below(6)]);
                    }
                    out.extend_from_slice(b"\r\n");
                    b'$'
                }
                4 => {
                    out.extend_from_slice(if rng.below(2) == 0 {
                        b"$-1\r\n"
                    } else {
                        b"*-1\r\n"
                    });
                    out[out.len() - 5]
                }
                5 => {
                    out.extend_from_slice(b"_\r\n");
                    b'_'
                }
                6 => {
                    out.extend_from_slice(b",1.5e-3\r\n");
                    b','
                }
                7 => {
                    out.extend_from_slice(if rng.below(2) == 0 {
                        b"#t\r\n"
                    } else {
                        b"#f\r\n"
                    });
                    b'#'
                }
                8 => {
                    out.extend_from_slice(b"(12345678901234567890123\r\n");
                    b'('
                }
                9 => {
                    if rng.below(2) == 0 {
                        out.extend_from_slice(b"!10\r\nERR bad\r\nx\r\n");
                        b'!'
                    } else {
                        out.extend_from_slice(b"=8\r\ntxt:ab\r\n\r\n");
                        b'='
                    }
                }
                _ => {
                    let kind = b"*%~>"[rng.below(4)];
                    let n = {
                        let rare = rng.below(30) == 0;
                        rng.below(if rare { 2000 } else { 5 })
                    };
                    out.push(kind);
                    out.extend_from_slice(format!("{n}\r\n").as_bytes());
                    owed.push(if kind == b'%' { 2 * n } else { n });
                    kind
                }
            };
            if at_top {
                head = kind;
            }
        }
        head
    }

    #[test]
    fn random_streams_in_random_chunks() {
        for seed in 1..=16u64 {
            let mut rng = XorShift::new(seed);
            let mut stream = Vec::new();
            let mut record = Vec::new();
            for _ in 0..200 {
                let start = stream.len();
                let head = random_reply(&mut rng, &mut stream);
                record.push((stream.len() - start, head));
            }
            let mut sc = ReplyScanner::new();
            let (mut front, mut fed, mut next) = (0, 0, 0);
            while next < record.len() {
                match sc.scan(&stream[front..fed]) {
                    ReplyScan::Incomplete => {
                        assert!(fed < stream.len(), "seed {seed}: stuck at reply {next}");
                        let chunk = match rng.below(3) {
                            0 => 1 + rng.below(3),
                            1 => 1 + rng.below(300),
                            _ => 1 + rng.below(50_000),
                        };
                        fed = (fed + chunk).min(stream.len());
                    }
                    ReplyScan::Complete { len, head } => {
                        assert_eq!((len, head), record[next], "seed {seed} reply {next}");
                        front += len;
                        next += 1;
                    }
                    ReplyScan::Error(e) => panic!("seed {seed} reply {next}: {e}"),
                }
            }
            assert_eq!(front, stream.len());
        }
    }

    #[test]
    fn random_replies_split_everywhere() {
        let mut rng = XorShift::new(77);
        for _ in 0..60 {
            let mut one = Vec::new();
            let head = random_reply(&mut rng, &mut one);
            if one.len() > 3000 {
                continue;
            }
            check(
                &one,
                ReplyScan::Complete {
                    len: one.len(),
                    head,
                },
            );
        }
    }

    #[test]
    fn random_garbage_is_split_stable() {
        let mut rng = XorShift::new(0xbad);
        for _ in 0..300 {
            let mut frame = Vec::new();
            random_reply(&mut rng, &mut frame);
            frame.truncate(300);
            for _ in 0..1 + rng.below(3) {
                let at = rng.below(frame.len());
                frame[at] = b"\r\n$*%|-?0123456789x"[rng.below(19)];
            }
            let want = whole(&frame);
            for at in 0..=frame.len() {
                assert_eq!(split(&frame, at), want, "{:?} at {at}", frame);
            }
        }
    }
}
