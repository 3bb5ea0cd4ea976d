//! The checks behind the scanner fuzz targets and the seeded property test
//! (`tests/hostile_scan_props.rs`): feed a byte stream to mithril's RESP
//! scanners, whole and in arbitrary chunks, and compare every frame they
//! find with a small reference parser written here, independently of the
//! scanners, from the grammar their module docs state.
//!
//! What a violation means: a panic in the scanner (a crash on input), a
//! frame cut differently depending on how the bytes arrived, or a frame
//! boundary or argument the reference disagrees with (the proxy and the
//! node would then disagree about where a request ends).
//!
//! Input layout (both targets): byte 0 holds flags, byte 1 seeds the chunk
//! sizes, the rest is the stream.
//!
//! Never: call anything but the public scanner API; keep state between
//! calls.

#![allow(dead_code)]

use mithril::resp::{Limits, ReplyScan, ReplyScanner, RequestScanner, Scan};

// ---- chunking ---------------------------------------------------------

/// Chunk sizes from a seed: mostly tiny, sometimes large.
struct Chunks(u32);

impl Chunks {
    fn next(&mut self) -> usize {
        // xorshift32
        let mut x = self.0.max(1);
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.0 = x;
        match x % 8 {
            0..=3 => 1 + (x as usize >> 8) % 3,
            4..=6 => 1 + (x as usize >> 8) % 64,
            _ => 1 + (x as usize >> 8) % 4096,
        }
    }
}

// ---- requests ---------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq)]
enum ReqOut {
    Incomplete,
    Request { len: usize, args: Vec<Vec<u8>> },
    Inline { len: usize, args: Vec<Vec<u8>> },
    Skip(usize),
    Error,
}

/// Scans the stream frame by frame; `chunks` None feeds everything at once.
fn scan_requests(
    input: &[u8],
    limits: &Limits,
    auth: bool,
    mut chunks: Option<Chunks>,
) -> Vec<ReqOut> {
    let mut sc = RequestScanner::new();
    let mut out = Vec::new();
    let mut start = 0;
    // Bytes of the stream that have "arrived" (absolute).
    let mut arrived = match chunks.as_mut() {
        Some(c) => c.next().min(input.len()),
        None => input.len(),
    };
    loop {
        let buf = &input[start..arrived];
        match sc.scan(buf, limits, auth) {
            Scan::Incomplete => {
                if arrived == input.len() {
                    out.push(ReqOut::Incomplete);
                    return out;
                }
                let step = chunks.as_mut().map_or(input.len(), |c| c.next());
                arrived = (arrived + step).min(input.len());
            }
            Scan::Request { len } => {
                assert!(
                    len > 0 && len <= buf.len(),
                    "request len {len} of {}",
                    buf.len()
                );
                let args: Vec<Vec<u8>> = sc
                    .args()
                    .iter()
                    .map(|r| {
                        buf.get(r.clone())
                            .expect("arg range inside the frame")
                            .to_vec()
                    })
                    .collect();
                for r in sc.args() {
                    assert!(r.end <= len, "arg {r:?} past the frame end {len}");
                }
                out.push(ReqOut::Request { len, args });
                start += len;
            }
            Scan::Inline { len } => {
                assert!(len > 0 && len <= buf.len());
                let frame = sc.take_inline_frame();
                let args: Vec<Vec<u8>> = sc
                    .args()
                    .iter()
                    .map(|r| frame.get(r.clone()).expect("inline arg range").to_vec())
                    .collect();
                assert!(!args.is_empty(), "an inline request without arguments");
                // The line ends at its first LF.
                let line = &buf[..len];
                assert_eq!(line.last(), Some(&b'\n'));
                assert!(!line[..len - 1].contains(&b'\n'));
                // The rewrite is the multibulk form of the same arguments.
                let big = Limits {
                    max_multibulk_len: usize::MAX / 2,
                    max_bulk_len: usize::MAX / 2,
                    max_inline_len: usize::MAX / 2,
                };
                match ref_request(&frame, &big, true) {
                    ReqOut::Request { len: l, args: a } => {
                        assert_eq!(l, frame.len(), "inline rewrite length");
                        assert_eq!(a, args, "inline rewrite arguments");
                    }
                    other => panic!("inline rewrite is not a request: {other:?}"),
                }
                out.push(ReqOut::Inline { len, args });
                start += len;
            }
            Scan::Skip { len } => {
                assert!(len > 0 && len <= buf.len());
                out.push(ReqOut::Skip(len));
                start += len;
            }
            Scan::Error(_) => {
                out.push(ReqOut::Error);
                return out;
            }
        }
        if start == input.len() {
            return out;
        }
        if arrived < start {
            arrived = start;
        }
    }
}

/// Redis's `string2ll` rules, written out again.
fn strict_i64(s: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(s).ok()?;
    if text.is_empty() || text.len() > 20 || text.starts_with('+') || text == "-0" {
        return None;
    }
    let digits = text.strip_prefix('-').unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if digits.len() > 1 && digits.starts_with('0') {
        return None;
    }
    text.parse().ok()
}

/// A header line at `pos` (`*` or `$`): Ok((value, cr)) or the outcome.
fn ref_header(buf: &[u8], pos: usize, max: usize) -> Result<(i64, usize), ReqOut> {
    let mut i = pos;
    loop {
        if i > pos + max {
            return Err(ReqOut::Error); // too big
        }
        match buf.get(i) {
            None => return Err(ReqOut::Incomplete),
            Some(b'\r') => break,
            Some(_) => i += 1,
        }
    }
    match buf.get(i + 1) {
        None => return Err(ReqOut::Incomplete),
        Some(b'\n') => {}
        Some(_) => return Err(ReqOut::Error),
    }
    match strict_i64(&buf[pos + 1..i]) {
        Some(n) => Ok((n, i)),
        None => Err(ReqOut::Error),
    }
}

/// The reference for one multibulk frame at the front of `buf`.
fn ref_request(buf: &[u8], limits: &Limits, auth: bool) -> ReqOut {
    if buf.first() != Some(&b'*') {
        return ReqOut::Incomplete; // not a multibulk frame: not compared
    }
    let (count, cr) = match ref_header(buf, 0, limits.max_inline_len) {
        Ok(h) => h,
        Err(o) => return o,
    };
    if count > limits.max_multibulk_len as i64 {
        return ReqOut::Error;
    }
    if !auth && count > 10 {
        return ReqOut::Error;
    }
    if count <= 0 {
        return ReqOut::Skip(cr + 2);
    }
    let mut pos = cr + 2;
    let mut args = Vec::new();
    for _ in 0..count {
        match buf.get(pos) {
            None => return ReqOut::Incomplete,
            Some(b'$') => {}
            Some(_) => return ReqOut::Error,
        }
        let (len, cr) = match ref_header(buf, pos, limits.max_inline_len) {
            Ok(h) => h,
            Err(o) => return o,
        };
        if len < 0 || len > limits.max_bulk_len as i64 || (!auth && len > 16384) {
            return ReqOut::Error;
        }
        let data = cr + 2;
        let end = data + len as usize;
        match (buf.get(end), buf.get(end + 1)) {
            (None, _) | (Some(b'\r'), None) => return ReqOut::Incomplete,
            (Some(b'\r'), Some(b'\n')) => {}
            _ => return ReqOut::Error,
        }
        args.push(buf[data..end].to_vec());
        pos = end + 2;
    }
    ReqOut::Request { len: pos, args }
}

/// Fuzz entry for the request scanner.
pub fn check_requests(data: &[u8]) {
    let [flags, seed, input @ ..] = data else {
        return;
    };
    let auth = flags & 1 == 0;
    let limits = if flags & 2 != 0 {
        Limits {
            max_multibulk_len: 16,
            max_bulk_len: 64,
            max_inline_len: 64,
        }
    } else {
        Limits::default()
    };
    let whole = scan_requests(input, &limits, auth, None);
    let chunked = scan_requests(input, &limits, auth, Some(Chunks(u32::from(*seed) + 1)));
    assert_eq!(
        whole, chunked,
        "the outcome depends on how the bytes arrived"
    );
    // Every multibulk outcome agrees with the reference.
    let mut start = 0;
    for o in &whole {
        let rest = &input[start..];
        if rest.first() == Some(&b'*') {
            let want = ref_request(rest, &limits, auth);
            assert_eq!(o, &want, "at offset {start}");
        }
        match o {
            ReqOut::Request { len, .. } | ReqOut::Inline { len, .. } | ReqOut::Skip(len) => {
                start += len
            }
            ReqOut::Incomplete | ReqOut::Error => break,
        }
    }
}

// ---- replies ----------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq)]
enum RepOut {
    Complete { len: usize, head: u8 },
    Incomplete,
    Error,
}

fn scan_replies(input: &[u8], mut chunks: Option<Chunks>) -> Vec<RepOut> {
    let mut sc = ReplyScanner::new();
    let mut out = Vec::new();
    let mut start = 0;
    let mut arrived = match chunks.as_mut() {
        Some(c) => c.next().min(input.len()),
        None => input.len(),
    };
    loop {
        let buf = &input[start..arrived];
        match sc.scan(buf) {
            ReplyScan::Incomplete => {
                if arrived == input.len() {
                    out.push(RepOut::Incomplete);
                    return out;
                }
                let step = chunks.as_mut().map_or(input.len(), |c| c.next());
                arrived = (arrived + step).min(input.len());
            }
            ReplyScan::Complete { len, head } => {
                assert!(len > 0 && len <= buf.len());
                out.push(RepOut::Complete { len, head });
                start += len;
            }
            ReplyScan::Error(_) => {
                out.push(RepOut::Error);
                return out;
            }
        }
        if start == input.len() {
            return out;
        }
        if arrived < start {
            arrived = start;
        }
    }
}

/// Why the reference stopped short of a whole reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Short {
    Incomplete,
    Error,
    /// Nested too deep for this recursive reference: not compared.
    TooDeep,
}

/// One line at `pos` (type byte included): the line's content and the
/// offset after its CRLF. Header types must end within 32 bytes.
fn ref_line(buf: &[u8], pos: usize, limited: bool) -> Result<(&[u8], usize), Short> {
    let mut i = pos + 1;
    loop {
        if limited && i > pos + 32 {
            return Err(Short::Error);
        }
        match buf.get(i) {
            None => return Err(Short::Incomplete),
            Some(b'\r') => break,
            Some(_) => i += 1,
        }
    }
    match buf.get(i + 1) {
        None => Err(Short::Incomplete),
        Some(b'\n') => Ok((&buf[pos + 1..i], i + 2)),
        Some(_) => Err(Short::Error),
    }
}

/// One element at `pos`, attributes before it included: the offset after
/// it and its type byte.
fn ref_element(buf: &[u8], mut pos: usize, depth: usize) -> Result<(usize, u8), Short> {
    if depth > 500 {
        return Err(Short::TooDeep);
    }
    loop {
        let kind = *buf.get(pos).ok_or(Short::Incomplete)?;
        let limited = match kind {
            b'+' | b'-' | b',' | b'(' => false,
            b'$' | b'!' | b'=' | b'*' | b'%' | b'~' | b'>' | b'|' | b':' | b'#' | b'_' => true,
            _ => return Err(Short::Error),
        };
        let (line, next) = ref_line(buf, pos, limited)?;
        match kind {
            b'+' | b'-' | b',' | b'(' => return Ok((next, kind)),
            b':' => {
                strict_i64(line).ok_or(Short::Error)?;
                return Ok((next, kind));
            }
            b'#' => {
                return if line == b"t" || line == b"f" {
                    Ok((next, kind))
                } else {
                    Err(Short::Error)
                }
            }
            b'_' => {
                return if line.is_empty() {
                    Ok((next, kind))
                } else {
                    Err(Short::Error)
                }
            }
            b'$' | b'!' | b'=' => {
                let n = strict_i64(line).ok_or(Short::Error)?;
                if n == -1 && kind == b'$' {
                    return Ok((next, kind));
                }
                if n < 0 {
                    return Err(Short::Error);
                }
                let end = next.checked_add(n as usize).ok_or(Short::Error)?;
                return match (buf.get(end), buf.get(end + 1)) {
                    (None, _) | (Some(b'\r'), None) => Err(Short::Incomplete),
                    (Some(b'\r'), Some(b'\n')) => Ok((end + 2, kind)),
                    _ => Err(Short::Error),
                };
            }
            _ => {
                let n = strict_i64(line).ok_or(Short::Error)?;
                if n == -1 && kind == b'*' {
                    return Ok((next, kind));
                }
                if n < 0 {
                    return Err(Short::Error);
                }
                let count = if matches!(kind, b'%' | b'|') {
                    2 * n as u128
                } else {
                    n as u128
                };
                let mut at = next;
                let mut k = 0u128;
                while k < count {
                    at = ref_element(buf, at, depth + 1)?.0;
                    k += 1;
                }
                if kind == b'|' {
                    // An attribute: the element it annotates follows.
                    pos = at;
                    continue;
                }
                return Ok((at, kind));
            }
        }
    }
}

/// Fuzz entry for the reply scanner.
pub fn check_replies(data: &[u8]) {
    let [_flags, seed, input @ ..] = data else {
        return;
    };
    let whole = scan_replies(input, None);
    let chunked = scan_replies(input, Some(Chunks(u32::from(*seed) + 1)));
    assert_eq!(
        whole, chunked,
        "the outcome depends on how the bytes arrived"
    );
    let mut start = 0;
    for o in &whole {
        let want = ref_element(input, start, 0);
        match (o, want) {
            (_, Err(Short::TooDeep)) => return,
            (RepOut::Complete { len, head }, Ok((end, kind))) => {
                assert_eq!((start + len, *head), (end, kind), "reply at offset {start}");
            }
            (RepOut::Complete { .. }, Err(short)) => {
                panic!("scanner found a reply at {start}, the reference says {short:?}")
            }
            (got, Ok((end, _))) => {
                panic!("the reference found a reply at {start}..{end}, the scanner says {got:?}")
            }
            (RepOut::Incomplete, Err(Short::Error)) => {
                panic!("the scanner waits at {start} for bytes that cannot fix the reply")
            }
            // Both stop short. The scanner may give up earlier than the
            // reference (it refuses streamed types and long headers before
            // their end arrives), never later.
            (_, Err(_)) => {}
        }
        match o {
            RepOut::Complete { len, .. } => start += len,
            _ => break,
        }
    }
}
