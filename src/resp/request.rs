//! The client-side request scanner: finds where each request frame ends and
//! where its arguments sit, without copying or building values.
//!
//! Owns: the resumable parse state of the one frame currently at the front
//! of a session's input buffer, and the reusable argument-range vector.
//!
//! Contract with the caller: the buffer passed to [`RequestScanner::scan`]
//! always begins at the first byte of the current frame, and between two
//! calls the caller only appends to it. The scanner keeps absolute offsets,
//! so it resumes exactly where it stopped: a header is validated once, a
//! terminator search never revisits a byte, and a request of a million
//! arguments delivered in small reads costs time linear in its size.
//!
//! Invariants:
//! - Nothing is reserved on the word of a header: `*1000000` allocates
//!   nothing; the argument vector grows only as arguments really arrive and
//!   keeps its capacity across requests, so a warm scanner does not allocate
//!   for multibulk requests.
//! - Every bound in [`Limits`] is checked before waiting for more bytes, so a
//!   client cannot make its session hold an unbounded header or inline line.
//! - Any input gives a [`Scan`]; nothing here panics.
//!
//! Deliberately stricter than Redis: Redis takes the first CR of a header as
//! the end of the line and skips the following byte unchecked, and skips the
//! two bytes after a bulk payload unchecked. The proxy forwards the raw frame
//! bytes to backend connections shared with other clients, so the proxy and
//! the backend must agree on every frame boundary. Here a header CR must be
//! followed by LF (otherwise the line's own length error is reported) and a
//! bulk payload must be followed by CRLF ([`ProtoError::BulkNotTerminated`]).
//! A few errors are also reported earlier than Redis would (a non-`$`
//! argument header as soon as its first byte arrives), and a header line
//! longer than `max_inline_len` is always "too big", whether or not its CR
//! happened to be buffered already: every verdict depends only on the bytes
//! received, never on how the reads split them.
//!
//! Inline commands (a first byte other than `*`) are split the way Redis's
//! `sdssplitargs` splits them and rewritten as the equivalent multibulk
//! frame, so everything downstream sees one request format. A NUL byte ends
//! an inline line's content, as it ends the C string Redis splits. Inline
//! requests are the one path that allocates per request: the rewritten frame
//! is handed over as an owned `Vec<u8>`.
//!
//! Never: no I/O, no knowledge of commands; the scanner does not decide what
//! a request means, only where it is.

use std::ops::Range;

use super::error::ProtoError;
use super::limits::Limits;
use super::num::{find_line, parse_i64, quick_header, IntBuf, Line};

/// Largest argument count accepted before a client has authenticated.
const UNAUTH_MAX_ARGS: i64 = 10;
/// Largest bulk length accepted before a client has authenticated.
const UNAUTH_MAX_BULK: i64 = 16384;

/// What one call to [`RequestScanner::scan`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scan {
    /// More bytes are needed; the progress so far is kept in the scanner.
    Incomplete,
    /// A multibulk request occupies `buf[..len]`; [`RequestScanner::args`]
    /// holds its argument ranges into `buf`.
    Request { len: usize },
    /// An inline request occupied `buf[..len]`. It was rewritten as a
    /// multibulk frame, taken with [`RequestScanner::take_inline_frame`];
    /// [`RequestScanner::args`] holds ranges into that rewritten frame.
    Inline { len: usize },
    /// `buf[..len]` holds nothing to execute (an empty or blank inline line,
    /// or a `*` count of zero or less); drop those bytes.
    Skip { len: usize },
    /// A protocol error: reply with [`ProtoError::reply`] and close.
    Error(ProtoError),
}

/// Where the scan of the current frame stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// No byte of the current frame examined yet.
    Start,
    /// Looking for the LF that ends an inline line.
    Inline,
    /// Looking for the CRLF of the `*<count>` line.
    CountLine,
    /// At (or inside) a `$<len>` argument header starting at `pos`.
    ArgHeader,
    /// Argument payload starts at `pos` and ends at `end`; CRLF must follow.
    ArgData { end: usize },
}

/// Resumable scanner for client requests. One per session; reused for every
/// frame of that session.
#[derive(Debug)]
pub struct RequestScanner {
    phase: Phase,
    /// Start of the line or payload being examined (absolute offset).
    pos: usize,
    /// How far the terminator search of the current line has got.
    searched: usize,
    /// Arguments still to come in the current multibulk request.
    remaining: usize,
    /// Argument ranges of the last complete request (or the one in progress).
    args: Vec<Range<usize>>,
    /// The multibulk rewrite of the last inline request.
    inline_frame: Vec<u8>,
    /// Unescaped inline arguments, before they are framed.
    scratch: Vec<u8>,
    /// Units of work done, to prove resumption is linear.
    #[cfg(test)]
    work: u64,
}

impl Default for RequestScanner {
    fn default() -> Self {
        Self::new()
    }
}

/// A plain decimal number at `buf[at..]` followed by CRLF, as a header
/// line carries it: 1 to 18 digits, no sign, no leading zero (except "0").
/// Returns the number and the offset after the CRLF.
#[inline]
fn plain_number(buf: &[u8], at: usize) -> Option<(u64, usize)> {
    let digits = buf.get(at..)?;
    // The counts and lengths of ordinary requests have one or two digits.
    match *digits {
        [d, b'\r', b'\n', ..] if d.is_ascii_digit() => return Some((u64::from(d - b'0'), at + 3)),
        [t @ b'1'..=b'9', d, b'\r', b'\n', ..] if d.is_ascii_digit() => {
            return Some((u64::from(t - b'0') * 10 + u64::from(d - b'0'), at + 4))
        }
        _ => {}
    }
    let mut v: u64 = 0;
    let mut n = 0;
    while let Some(&b) = digits.get(n) {
        if !b.is_ascii_digit() {
            break;
        }
        v = v * 10 + u64::from(b - b'0');
        n += 1;
        if n > 18 {
            return None;
        }
    }
    if n == 0 || (n > 1 && digits[0] == b'0') {
        return None;
    }
    if digits.get(n..n + 2) != Some(&b"\r\n"[..]) {
        return None;
    }
    Some((v, at + n + 2))
}

/// The key of a complete `GET key` multibulk frame at the head of `buf`,
/// and what follows it; `None` for anything else (another command, an
/// incomplete or inline frame). A cheap look ahead, not a parse: what it
/// finds is scanned again when dispatched.
pub fn leading_get(buf: &[u8]) -> Option<(&[u8], &[u8])> {
    let head = buf.get(..11)?;
    if &head[..8] != b"*2\r\n$3\r\n" || !head[8..].eq_ignore_ascii_case(b"GET") {
        return None;
    }
    if buf.get(11..14)? != b"\r\n$" {
        return None;
    }
    let (len, at) = plain_number(buf, 14)?;
    let end = at.checked_add(usize::try_from(len).ok()?)?;
    if buf.get(end..end + 2)? != b"\r\n" {
        return None;
    }
    Some((&buf[at..end], &buf[end + 2..]))
}

impl RequestScanner {
    pub fn new() -> Self {
        RequestScanner {
            phase: Phase::Start,
            pos: 0,
            searched: 0,
            remaining: 0,
            args: Vec::new(),
            inline_frame: Vec::new(),
            scratch: Vec::new(),
            #[cfg(test)]
            work: 0,
        }
    }

    /// Scans the frame at the front of `buf`, resuming where the previous
    /// call stopped. `buf` must start at the frame's first byte and may only
    /// have grown since the last call (see the module doc).
    pub fn scan(&mut self, buf: &[u8], limits: &Limits, authenticated: bool) -> Scan {
        // Fast path: a whole, ordinary multibulk request already in the
        // buffer (the pipelined case) is walked in one tight loop. Anything
        // else — incomplete, unusual or wrong — goes through the state
        // machine from the start, which decides it exactly as before.
        if self.phase == Phase::Start {
            match buf.first() {
                // Nothing to look at: the common end of a read's batch.
                None => return Scan::Incomplete,
                Some(&b'*') => {
                    if let Some(len) = self.whole(buf, limits, authenticated) {
                        return Scan::Request { len };
                    }
                }
                Some(_) => {}
            }
        }
        let out = self.step(buf, limits, authenticated);
        if out != Scan::Incomplete {
            // The frame is settled; the next call starts a new one. `args`
            // stays readable until then.
            self.phase = Phase::Start;
            self.pos = 0;
            self.searched = 0;
            self.remaining = 0;
        }
        out
    }

    /// The fast path: `Some(len)` when `buf` starts with a complete,
    /// well-formed multibulk request whose counts and lengths are plain
    /// decimal numbers within the limits; its argument ranges are then in
    /// `args`. `None` (and nothing remembered) in every other case.
    #[inline]
    fn whole(&mut self, buf: &[u8], limits: &Limits, authenticated: bool) -> Option<usize> {
        let (count, mut pos) = plain_number(buf, 1)?;
        let mut max_args = limits.max_multibulk_len as u64;
        let mut max_bulk = limits.max_bulk_len as u64;
        if !authenticated {
            max_args = max_args.min(UNAUTH_MAX_ARGS as u64);
            max_bulk = max_bulk.min(UNAUTH_MAX_BULK as u64);
        }
        if count == 0 || count > max_args {
            return None;
        }
        self.args.clear();
        for _ in 0..count {
            if buf.get(pos) != Some(&b'$') {
                self.args.clear();
                return None;
            }
            let (len, data) = match plain_number(buf, pos + 1) {
                Some(v) if v.0 <= max_bulk => v,
                _ => {
                    self.args.clear();
                    return None;
                }
            };
            let end = data + len as usize;
            if buf.get(end..end + 2) != Some(&b"\r\n"[..]) {
                self.args.clear();
                return None;
            }
            self.args.push(data..end);
            pos = end + 2;
        }
        Some(pos)
    }

    /// Argument ranges of the request just returned as `Request` (into the
    /// caller's buffer) or `Inline` (into the rewritten frame). Valid until
    /// the next call to `scan`.
    pub fn args(&self) -> &[Range<usize>] {
        &self.args
    }

    /// Hands the argument ranges of the request just returned to the
    /// caller by exchanging vectors with `other` (whose contents the next
    /// `scan` discards): no copy, and a vector a request of many arguments
    /// grew leaves with it. `args` is not valid afterwards.
    pub fn swap_args(&mut self, other: &mut Vec<Range<usize>>) {
        std::mem::swap(&mut self.args, other);
    }

    /// The multibulk rewrite of the inline request just returned, to look
    /// at (its arguments are `args`) before deciding to take it.
    pub fn inline_frame(&self) -> &[u8] {
        &self.inline_frame
    }

    /// Takes the multibulk rewrite of the inline request just returned.
    /// Empty when the last result was not `Inline`.
    pub fn take_inline_frame(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.inline_frame)
    }

    /// Forgets any partial frame (e.g. after the caller discarded its buffer).
    pub fn reset(&mut self) {
        self.phase = Phase::Start;
        self.pos = 0;
        self.searched = 0;
        self.remaining = 0;
        self.args.clear();
        self.inline_frame.clear();
    }

    /// Forgets any partial frame and frees the argument vectors, which a
    /// request of many arguments can leave large (for idle sessions).
    pub fn release(&mut self) {
        self.reset();
        self.args = Vec::new();
        self.inline_frame = Vec::new();
        self.scratch = Vec::new();
    }

    /// After `Incomplete` inside a bulk whose length is known: the total
    /// number of bytes the frame needs so far (through that bulk's CRLF), so
    /// the caller can reserve buffer space once. `None` otherwise.
    pub fn pending_hint(&self) -> Option<usize> {
        match self.phase {
            Phase::ArgData { end } => end.checked_add(2),
            _ => None,
        }
    }

    #[cfg(test)]
    pub(crate) fn work(&self) -> u64 {
        self.work
    }

    /// Terminator search that also accounts the bytes it examined.
    fn find(&mut self, buf: &[u8], needle: u8, max: usize) -> Line {
        #[cfg(test)]
        let before = self.searched.max(self.pos);
        let line = find_line(buf, self.pos, &mut self.searched, needle, max);
        #[cfg(test)]
        {
            self.work += (self.searched.saturating_sub(before)) as u64 + 1;
        }
        line
    }

    /// Reads the `*<n>` or `$<n>` header line starting at `pos`: its number
    /// and the offset of its CR, or the result to return (incomplete, the
    /// line's too-big error, or its invalid-length error).
    #[inline(always)]
    fn header(
        &mut self,
        buf: &[u8],
        max_line: usize,
        too_big: ProtoError,
        invalid: ProtoError,
    ) -> Result<(i64, usize), Scan> {
        if let Some((n, cr)) = quick_header(buf, self.pos) {
            if cr - self.pos <= max_line {
                #[cfg(test)]
                {
                    self.work += (cr - self.pos) as u64;
                }
                // At most 18 digits: always fits.
                return Ok((n as i64, cr));
            }
        }
        let cr = match self.find(buf, b'\r', max_line) {
            Line::Found(cr) => cr,
            Line::Incomplete => return Err(Scan::Incomplete),
            Line::TooLong => return Err(Scan::Error(too_big)),
        };
        match buf.get(cr + 1) {
            None => return Err(Scan::Incomplete),
            Some(b'\n') => {}
            Some(_) => return Err(Scan::Error(invalid)),
        }
        match buf.get(self.pos + 1..cr).and_then(parse_i64) {
            Some(n) => Ok((n, cr)),
            None => Err(Scan::Error(invalid)),
        }
    }

    fn step(&mut self, buf: &[u8], limits: &Limits, authenticated: bool) -> Scan {
        if self.phase == Phase::Start {
            self.args.clear();
            self.inline_frame.clear();
            self.pos = 0;
            self.searched = 0;
            match buf.first() {
                None => return Scan::Incomplete,
                Some(b'*') => self.phase = Phase::CountLine,
                Some(_) => self.phase = Phase::Inline,
            }
        }
        loop {
            #[cfg(test)]
            {
                self.work += 1;
            }
            match self.phase {
                Phase::Start => return Scan::Incomplete,
                Phase::Inline => return self.scan_inline(buf, limits),
                Phase::CountLine => {
                    let (count, cr) = match self.header(
                        buf,
                        limits.max_inline_len,
                        ProtoError::TooBigMultibulkCount,
                        ProtoError::InvalidMultibulkLength,
                    ) {
                        Ok(header) => header,
                        Err(settled) => return settled,
                    };
                    let max = i64::try_from(limits.max_multibulk_len).unwrap_or(i64::MAX);
                    if count > max {
                        return Scan::Error(ProtoError::InvalidMultibulkLength);
                    }
                    if !authenticated && count > UNAUTH_MAX_ARGS {
                        return Scan::Error(ProtoError::UnauthenticatedMultibulkLength);
                    }
                    let Ok(count) = usize::try_from(count) else {
                        // Zero or negative: Redis ignores the frame.
                        return Scan::Skip { len: cr + 2 };
                    };
                    if count == 0 {
                        return Scan::Skip { len: cr + 2 };
                    }
                    self.remaining = count;
                    self.pos = cr + 2;
                    self.searched = self.pos;
                    self.phase = Phase::ArgHeader;
                }
                Phase::ArgHeader => {
                    match buf.get(self.pos) {
                        None => return Scan::Incomplete,
                        Some(b'$') => {}
                        Some(&other) => return Scan::Error(ProtoError::ExpectedDollar(other)),
                    }
                    let (len, cr) = match self.header(
                        buf,
                        limits.max_inline_len,
                        ProtoError::TooBigBulkCount,
                        ProtoError::InvalidBulkLength,
                    ) {
                        Ok(header) => header,
                        Err(settled) => return settled,
                    };
                    let max = i64::try_from(limits.max_bulk_len).unwrap_or(i64::MAX);
                    if !(0..=max).contains(&len) {
                        return Scan::Error(ProtoError::InvalidBulkLength);
                    }
                    if !authenticated && len > UNAUTH_MAX_BULK {
                        return Scan::Error(ProtoError::UnauthenticatedBulkLength);
                    }
                    let data = cr + 2;
                    let end = match usize::try_from(len).ok().and_then(|l| data.checked_add(l)) {
                        Some(end) => end,
                        None => return Scan::Error(ProtoError::InvalidBulkLength),
                    };
                    self.pos = data;
                    self.phase = Phase::ArgData { end };
                }
                Phase::ArgData { end } => {
                    match buf.get(end) {
                        None => return Scan::Incomplete,
                        Some(b'\r') => {}
                        Some(_) => return Scan::Error(ProtoError::BulkNotTerminated),
                    }
                    match buf.get(end + 1) {
                        None => return Scan::Incomplete,
                        Some(b'\n') => {}
                        Some(_) => return Scan::Error(ProtoError::BulkNotTerminated),
                    }
                    self.args.push(self.pos..end);
                    self.pos = end + 2;
                    self.searched = self.pos;
                    self.remaining = self.remaining.saturating_sub(1);
                    if self.remaining == 0 {
                        return Scan::Request { len: self.pos };
                    }
                    self.phase = Phase::ArgHeader;
                }
            }
        }
    }

    fn scan_inline(&mut self, buf: &[u8], limits: &Limits) -> Scan {
        let nl = match self.find(buf, b'\n', limits.max_inline_len) {
            Line::Found(nl) => nl,
            Line::Incomplete => return Scan::Incomplete,
            Line::TooLong => return Scan::Error(ProtoError::TooBigInline),
        };
        let len = nl + 1;
        let mut line = buf.get(..nl).unwrap_or_default();
        if let Some(stripped) = line.strip_suffix(b"\r") {
            line = stripped;
        }
        if let Some(nul) = line.iter().position(|&b| b == 0) {
            line = line.get(..nul).unwrap_or_default();
        }
        self.scratch.clear();
        self.args.clear();
        if split_inline(line, &mut self.scratch, &mut self.args).is_err() {
            self.args.clear();
            return Scan::Error(ProtoError::UnbalancedQuotes);
        }
        if self.args.is_empty() {
            return Scan::Skip { len };
        }
        // Rewrite as a multibulk frame; re-point the ranges into it.
        let frame = &mut self.inline_frame;
        frame.clear();
        frame.push(b'*');
        frame.extend_from_slice(IntBuf::unsigned(self.args.len() as u64).as_bytes());
        frame.extend_from_slice(b"\r\n");
        for range in self.args.iter_mut() {
            let arg = self.scratch.get(range.clone()).unwrap_or_default();
            frame.push(b'$');
            frame.extend_from_slice(IntBuf::unsigned(arg.len() as u64).as_bytes());
            frame.extend_from_slice(b"\r\n");
            let start = frame.len();
            frame.extend_from_slice(arg);
            *range = start..frame.len();
            frame.extend_from_slice(b"\r\n");
        }
        Scan::Inline { len }
    }
}

/// The whitespace set of C's `isspace` in the "C" locale.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

fn hex_value(b: Option<&u8>) -> Option<u8> {
    match b {
        Some(&c @ b'0'..=b'9') => Some(c - b'0'),
        Some(&c @ b'a'..=b'f') => Some(c - b'a' + 10),
        Some(&c @ b'A'..=b'F') => Some(c - b'A' + 10),
        _ => None,
    }
}

/// A closing quote must be the last byte or be followed by whitespace.
fn closing_quote_ok(next: Option<&u8>) -> bool {
    match next {
        None => true,
        Some(&b) => is_c_space(b),
    }
}

/// Splits an inline line into arguments with the rules of Redis's
/// `sdssplitargs`: arguments are separated by whitespace; `"..."` quotes
/// understand `\n \r \t \b \a \\ \"` and `\xHH` (any other escaped byte
/// stands for itself); `'...'` quotes understand only `\'`; a closing quote
/// must be followed by whitespace or the end of the line. Note that inside an
/// unquoted argument only space, tab, CR and LF end it (vertical tab and form
/// feed are kept), while between arguments all of `isspace` is skipped.
/// Unescaped bytes go to `out`; one range into `out` per argument goes to
/// `args`. `Err` means unbalanced quotes.
fn split_inline(line: &[u8], out: &mut Vec<u8>, args: &mut Vec<Range<usize>>) -> Result<(), ()> {
    let mut i = 0;
    loop {
        while line.get(i).is_some_and(|&b| is_c_space(b)) {
            i += 1;
        }
        if i >= line.len() {
            return Ok(());
        }
        let start = out.len();
        let mut in_double = false;
        let mut in_single = false;
        loop {
            let c = line.get(i).copied();
            if in_double {
                match c {
                    None => return Err(()),
                    Some(b'\\') => {
                        let next = line.get(i + 1).copied();
                        if next == Some(b'x') {
                            if let (Some(hi), Some(lo)) =
                                (hex_value(line.get(i + 2)), hex_value(line.get(i + 3)))
                            {
                                out.push(hi << 4 | lo);
                                i += 4;
                                continue;
                            }
                        }
                        match next {
                            None => {
                                // A lone backslash at the end: kept, and the
                                // quote is then unterminated.
                                out.push(b'\\');
                                i += 1;
                            }
                            Some(e) => {
                                out.push(match e {
                                    b'n' => b'\n',
                                    b'r' => b'\r',
                                    b't' => b'\t',
                                    b'b' => 0x08,
                                    b'a' => 0x07,
                                    other => other,
                                });
                                i += 2;
                            }
                        }
                    }
                    Some(b'"') => {
                        if !closing_quote_ok(line.get(i + 1)) {
                            return Err(());
                        }
                        i += 1;
                        break;
                    }
                    Some(b) => {
                        out.push(b);
                        i += 1;
                    }
                }
            } else if in_single {
                match c {
                    None => return Err(()),
                    Some(b'\\') if line.get(i + 1) == Some(&b'\'') => {
                        out.push(b'\'');
                        i += 2;
                    }
                    Some(b'\'') => {
                        if !closing_quote_ok(line.get(i + 1)) {
                            return Err(());
                        }
                        i += 1;
                        break;
                    }
                    Some(b) => {
                        out.push(b);
                        i += 1;
                    }
                }
            } else {
                match c {
                    None => break,
                    Some(b' ' | b'\n' | b'\r' | b'\t') => {
                        i += 1;
                        break;
                    }
                    Some(b'"') => {
                        in_double = true;
                        i += 1;
                    }
                    Some(b'\'') => {
                        in_single = true;
                        i += 1;
                    }
                    Some(b) => {
                        out.push(b);
                        i += 1;
                    }
                }
            }
        }
        args.push(start..out.len());
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::resp::testutil::XorShift;

    #[test]
    fn plain_numbers_of_every_width_read_alike() {
        let ok = |s: &str| plain_number(s.as_bytes(), 1);
        assert_eq!(ok("$0\r\n"), Some((0, 4)));
        assert_eq!(ok("$7\r\nx"), Some((7, 4)));
        assert_eq!(ok("$10\r\n"), Some((10, 5)));
        assert_eq!(ok("$99\r\n"), Some((99, 5)));
        assert_eq!(ok("$100\r\n"), Some((100, 6)));
        for bad in [
            "$05\r\n", "$00\r\n", "$-1\r\n", "$1x\r\n", "$7\r", "$", "$12\n\r",
        ] {
            assert_eq!(ok(bad), None, "{bad:?}");
        }
        for n in 0..1000u64 {
            let s = format!("*{n}\r\n");
            assert_eq!(ok(&s), Some((n, s.len())));
        }
    }

    #[test]
    fn a_leading_get_is_seen_and_nothing_else() {
        let batch = b"*2\r\n$3\r\nGET\r\n$3\r\nfoo\r\n*2\r\n$3\r\nget\r\n$0\r\n\r\n*1\r\n";
        let (k, rest) = leading_get(batch).expect("first");
        assert_eq!(k, b"foo");
        let (k, rest) = leading_get(rest).expect("second");
        assert_eq!(k, b"");
        assert_eq!(rest, b"*1\r\n");
        assert_eq!(leading_get(rest), None);
        for bad in [
            &b"*2\r\n$3\r\nGET\r\n$3\r\nfoo\r"[..],
            b"*2\r\n$3\r\nGET\r\n$3\r\nfooo\r\n",
            b"*2\r\n$3\r\nSET\r\n$3\r\nfoo\r\n",
            b"*3\r\n$3\r\nGET\r\n$3\r\nfoo\r\n",
            b"GET foo\r\n",
            b"*2\r\n$3\r\nGET\r\n$99999999999999999999\r\n",
        ] {
            assert_eq!(leading_get(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    /// A scan result with its arguments copied out, comparable across runs.
    #[derive(Debug, Clone, PartialEq, Eq)]
    enum Outcome {
        Incomplete,
        Request {
            len: usize,
            args: Vec<Vec<u8>>,
        },
        Inline {
            len: usize,
            args: Vec<Vec<u8>>,
            frame: Vec<u8>,
        },
        Skip {
            len: usize,
        },
        Error(ProtoError),
    }

    fn outcome(sc: &mut RequestScanner, buf: &[u8], scan: Scan) -> Outcome {
        match scan {
            Scan::Incomplete => Outcome::Incomplete,
            Scan::Request { len } => Outcome::Request {
                len,
                args: sc.args().iter().map(|r| buf[r.clone()].to_vec()).collect(),
            },
            Scan::Inline { len } => {
                let frame = sc.take_inline_frame();
                let args = sc
                    .args()
                    .iter()
                    .map(|r| frame[r.clone()].to_vec())
                    .collect();
                Outcome::Inline { len, args, frame }
            }
            Scan::Skip { len } => Outcome::Skip { len },
            Scan::Error(e) => Outcome::Error(e),
        }
    }

    fn whole(input: &[u8], limits: &Limits, auth: bool) -> Outcome {
        let mut sc = RequestScanner::new();
        let s = sc.scan(input, limits, auth);
        outcome(&mut sc, input, s)
    }

    /// Feeds `input[..at]`, then all of `input`; the first settled result wins.
    fn split(input: &[u8], at: usize, limits: &Limits, auth: bool) -> Outcome {
        let mut sc = RequestScanner::new();
        let s = sc.scan(&input[..at], limits, auth);
        if s != Scan::Incomplete {
            return outcome(&mut sc, &input[..at], s);
        }
        let s = sc.scan(input, limits, auth);
        outcome(&mut sc, input, s)
    }

    /// Feeds one more byte per call.
    fn bytewise(input: &[u8], limits: &Limits, auth: bool) -> Outcome {
        let mut sc = RequestScanner::new();
        for end in 0..=input.len() {
            let s = sc.scan(&input[..end], limits, auth);
            if s != Scan::Incomplete {
                return outcome(&mut sc, &input[..end], s);
            }
        }
        Outcome::Incomplete
    }

    /// Checks the whole-buffer result, then that every split and byte-wise
    /// feeding agrees with it.
    fn check_with(input: &[u8], limits: &Limits, auth: bool, expected: &Outcome) {
        let got = whole(input, limits, auth);
        assert_eq!(
            &got,
            expected,
            "whole input {:?}",
            String::from_utf8_lossy(input)
        );
        for at in split_points(input.len()) {
            assert_eq!(
                &split(input, at, limits, auth),
                expected,
                "split at {at} of {:?}",
                String::from_utf8_lossy(input)
            );
        }
        if input.len() <= 4096 {
            assert_eq!(&bytewise(input, limits, auth), expected);
        }
    }

    /// Every split position for inputs up to 8 KiB; for the few larger
    /// inputs (each split costs a full rescan, so all of them would be
    /// quadratic) the first and last 64 positions and every 997th one.
    pub(crate) fn split_points(len: usize) -> Vec<usize> {
        if len <= 8192 {
            return (0..=len).collect();
        }
        (0..=len)
            .filter(|&at| at < 64 || at + 64 > len || at % 997 == 0)
            .collect()
    }

    fn check(input: &[u8], expected: &Outcome) {
        check_with(input, &Limits::default(), true, expected);
    }

    fn req(len: usize, args: &[&[u8]]) -> Outcome {
        Outcome::Request {
            len,
            args: args.iter().map(|a| a.to_vec()).collect(),
        }
    }

    fn inline(len: usize, args: &[&[u8]]) -> Outcome {
        let mut frame = Vec::new();
        crate::resp::encode::request(&mut frame, args);
        Outcome::Inline {
            len,
            args: args.iter().map(|a| a.to_vec()).collect(),
            frame,
        }
    }

    fn err(e: ProtoError) -> Outcome {
        Outcome::Error(e)
    }

    #[test]
    fn valid_multibulk() {
        check(b"*1\r\n$4\r\nPING\r\n", &req(14, &[b"PING"]));
        check(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", &req(20, &[b"GET", b"k"]));
        check(b"*1\r\n$0\r\n\r\n", &req(10, &[b""]));
        // Binary payloads, including CRLF inside the data.
        check(b"*1\r\n$4\r\n\r\n\r\n\r\n", &req(14, &[b"\r\n\r\n"]));
        check(b"*1\r\n$1\r\n\x00\r\n", &req(11, &[b"\x00"]));
        // Trailing bytes of the next frame are not part of this one.
        check(b"*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nPI", &req(14, &[b"PING"]));
        check(b"*1\r\n$4\r\nPING\r\nGARBAGE", &req(14, &[b"PING"]));
    }

    #[test]
    fn incomplete_multibulk() {
        check(b"", &Outcome::Incomplete);
        check(b"*", &Outcome::Incomplete);
        check(b"*2\r", &Outcome::Incomplete);
        check(b"*2\r\n$3\r\nGET\r\n", &Outcome::Incomplete);
        check(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r", &Outcome::Incomplete);
    }

    #[test]
    fn skips() {
        check(b"*0\r\n", &Outcome::Skip { len: 4 });
        check(b"*-5\r\n", &Outcome::Skip { len: 5 });
        check(b"*-5\r\n*1\r\n$4\r\nPING\r\n", &Outcome::Skip { len: 5 });
        check(b"*-1\r\n", &Outcome::Skip { len: 5 });
        check(b"\r\n", &Outcome::Skip { len: 2 });
        check(b"\n", &Outcome::Skip { len: 1 });
        check(b"   \t \r\n", &Outcome::Skip { len: 7 });
        // Negative counts are skipped even when not authenticated.
        check_with(
            b"*-5\r\n",
            &Limits::default(),
            false,
            &Outcome::Skip { len: 5 },
        );
    }

    #[test]
    fn multibulk_count_errors() {
        let e = err(ProtoError::InvalidMultibulkLength);
        check(b"*99999999999\r\n", &e);
        check(b"*1048577\r\n", &e);
        check(b"*+1\r\n", &e);
        check(b"*01\r\n", &e);
        check(b"*-0\r\n", &e);
        check(b"*\r\n", &e);
        check(b"*1 \r\n", &e);
        check(b"*abc\r\n", &e);
        check(b"*1\n\r\n", &e);
        // A CR that is not followed by LF ends nothing.
        check(b"*1\rX$4\r\nPING\r\n", &e);
        check(b"*1\r\r\n", &e);
        // Just at the limit is fine.
        check(b"*1048576\r\n", &Outcome::Incomplete);
        let small = Limits {
            max_multibulk_len: 3,
            ..Limits::default()
        };
        check_with(b"*4\r\n", &small, true, &e);
        check_with(b"*3\r\n", &small, true, &Outcome::Incomplete);
    }

    #[test]
    fn too_big_mbulk_count_string() {
        let limits = Limits {
            max_inline_len: 16,
            ..Limits::default()
        };
        // 16 bytes without CR: still waiting; 17: too big.
        let mut line = b"*".to_vec();
        line.extend_from_slice(&[b'1'; 15]);
        check_with(&line, &limits, true, &Outcome::Incomplete);
        line.push(b'1');
        check_with(&line, &limits, true, &err(ProtoError::TooBigMultibulkCount));
        // With the default limit, 70 KB of digits.
        let mut big = b"*".to_vec();
        big.extend_from_slice(&[b'1'; 70_000]);
        assert_eq!(
            whole(&big, &Limits::default(), true),
            err(ProtoError::TooBigMultibulkCount)
        );
        assert_eq!(
            split(&big, 40_000, &Limits::default(), true),
            err(ProtoError::TooBigMultibulkCount)
        );
    }

    #[test]
    fn unauthenticated_limits() {
        let l = Limits::default();
        check_with(
            b"*11\r\n",
            &l,
            false,
            &err(ProtoError::UnauthenticatedMultibulkLength),
        );
        check_with(b"*10\r\n", &l, false, &Outcome::Incomplete);
        check_with(b"*11\r\n", &l, true, &Outcome::Incomplete);
        check_with(
            b"*1\r\n$16385\r\n",
            &l,
            false,
            &err(ProtoError::UnauthenticatedBulkLength),
        );
        check_with(b"*1\r\n$16384\r\n", &l, false, &Outcome::Incomplete);
        check_with(b"*1\r\n$16385\r\n", &l, true, &Outcome::Incomplete);
        // An invalid count is reported as invalid even before auth.
        check_with(
            b"*x\r\n",
            &l,
            false,
            &err(ProtoError::InvalidMultibulkLength),
        );
        check_with(
            b"*1\r\n$-1\r\n",
            &l,
            false,
            &err(ProtoError::InvalidBulkLength),
        );
    }

    #[test]
    fn bulk_header_errors() {
        let e = err(ProtoError::InvalidBulkLength);
        check(b"*2\r\n$-7\r\n", &e);
        check(b"*1\r\n$-1\r\n", &e);
        check(b"*1\r\n$1099511627776\r\n", &e);
        check(b"*1\r\n$536870913\r\n", &e);
        check(b"*1\r\n$+3\r\n", &e);
        check(b"*1\r\n$03\r\n", &e);
        check(b"*1\r\n$\r\n", &e);
        check(b"*1\r\n$3x\r\n", &e);
        check(b"*1\r\n$4\rPING\r\n", &e);
        check(b"*1\r\n$536870912\r\n", &Outcome::Incomplete);
        check(b"*1\r\nx", &err(ProtoError::ExpectedDollar(b'x')));
        check(b"*1\r\nx\r\n", &err(ProtoError::ExpectedDollar(b'x')));
        check(b"*1\r\n\r\n", &err(ProtoError::ExpectedDollar(b'\r')));
        check(
            b"*2\r\n$1\r\na\r\n:1\r\n",
            &err(ProtoError::ExpectedDollar(b':')),
        );
        check(
            b"*2\r\n$1\r\na\r\n*1\r\n",
            &err(ProtoError::ExpectedDollar(b'*')),
        );
    }

    #[test]
    fn too_big_bulk_count_string() {
        let limits = Limits {
            max_inline_len: 8,
            ..Limits::default()
        };
        check_with(b"*1\r\n$1234567", &limits, true, &Outcome::Incomplete);
        check_with(
            b"*1\r\n$12345678",
            &limits,
            true,
            &err(ProtoError::TooBigBulkCount),
        );
        let mut big = b"*1\r\n$".to_vec();
        big.extend_from_slice(&[b'9'; 70_000]);
        assert_eq!(
            whole(&big, &Limits::default(), true),
            err(ProtoError::TooBigBulkCount)
        );
    }

    #[test]
    fn bulk_not_terminated() {
        let e = err(ProtoError::BulkNotTerminated);
        check(b"*1\r\n$3\r\nfooXX", &e);
        check(b"*1\r\n$3\r\nfoo\rX", &e);
        check(b"*1\r\n$3\r\nfoo\n\r", &e);
        check(b"*2\r\n$3\r\nfoo\r\n$0\r\nX", &e);
        check(b"*1\r\n$3\r\nfoo\r", &Outcome::Incomplete);
    }

    #[test]
    fn inline_requests() {
        check(b"PING\r\n", &inline(6, &[b"PING"]));
        check(b"PING\n", &inline(5, &[b"PING"]));
        check(b"set a b\r\nGET a\r\n", &inline(9, &[b"set", b"a", b"b"]));
        check(b"  get   k  \r\n", &inline(13, &[b"get", b"k"]));
        check(b"get\tk\r\n", &inline(7, &[b"get", b"k"]));
        check(b"echo \"a b\"\r\n", &inline(12, &[b"echo", b"a b"]));
        check(b"echo \"\"\r\n", &inline(9, &[b"echo", b""]));
        check(
            b"echo \"\\n\\r\\t\\b\\a\\\\\\\"\\z\"\n",
            &inline(24, &[b"echo", b"\n\r\t\x08\x07\\\"z"]),
        );
        check(b"echo \"\\x41\\x4g\"\n", &inline(16, &[b"echo", b"Ax4g"]));
        check(b"echo \"\\xfF\"\n", &inline(12, &[b"echo", b"\xff"]));
        check(b"echo 'a\\'b'\n", &inline(12, &[b"echo", b"a'b"]));
        check(b"echo 'a\\nb'\n", &inline(12, &[b"echo", b"a\\nb"]));
        check(b"echo 'a \"b'\n", &inline(12, &[b"echo", b"a \"b"]));
        // A quote can start mid-argument.
        check(
            b"echo foo\"bar baz\"\n",
            &inline(18, &[b"echo", b"foobar baz"]),
        );
        // Vertical tab is kept inside a word but skipped between words.
        check(b"echo a\x0bb\n", &inline(9, &[b"echo", b"a\x0bb"]));
        check(b"echo \x0b b\n", &inline(9, &[b"echo", b"b"]));
        // Only one CR is stripped; a CR inside the line separates.
        check(b"a\rb\r\n", &inline(5, &[b"a", b"b"]));
        check(b"a\r\r\n", &inline(4, &[b"a"]));
        // A NUL ends the line's content.
        check(b"echo a\x00b c\r\n", &inline(12, &[b"echo", b"a"]));
        check(b"\x00abc\n", &Outcome::Skip { len: 5 });
        // Closing quote followed by whitespace other than space.
        check(b"echo \"a\"\tb\n", &inline(11, &[b"echo", b"a", b"b"]));
        check(b"PING", &Outcome::Incomplete);
        check(b"PING\r", &Outcome::Incomplete);
    }

    #[test]
    fn inline_unbalanced_quotes() {
        let e = err(ProtoError::UnbalancedQuotes);
        check(b"set a \"x\"y\r\n", &e);
        check(b"set a 'x'y\r\n", &e);
        check(b"echo \"abc\r\n", &e);
        check(b"echo 'abc\r\n", &e);
        check(b"echo \"abc\\\"\r\n", &e);
        check(b"echo \"abc\\\r\n", &e);
        check(b"echo \"a\x00\"\r\n", &e);
    }

    #[test]
    fn too_big_inline() {
        let line = vec![b'a'; 70 * 1024];
        check(&line, &err(ProtoError::TooBigInline));
        let limits = Limits {
            max_inline_len: 10,
            ..Limits::default()
        };
        check_with(b"abcdefghij", &limits, true, &Outcome::Incomplete);
        check_with(
            b"abcdefghijk",
            &limits,
            true,
            &err(ProtoError::TooBigInline),
        );
        check_with(
            b"abcdefghij\n",
            &limits,
            true,
            &inline(11, &[b"abcdefghij"]),
        );
    }

    #[test]
    fn inline_needs_no_auth_limits() {
        let many = b"a b c d e f g h i j k l\n";
        let args: Vec<&[u8]> = many[..many.len() - 1].split(|&b| b == b' ').collect();
        check_with(many, &Limits::default(), false, &inline(many.len(), &args));
    }

    #[test]
    fn scanner_is_reusable_and_resets() {
        let limits = Limits::default();
        let mut sc = RequestScanner::new();
        let stream = b"*1\r\n$4\r\nPING\r\nECHO hi\r\n*0\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n";
        let mut at = 0;
        let mut seen = Vec::new();
        while at < stream.len() {
            let buf = &stream[at..];
            match sc.scan(buf, &limits, true) {
                Scan::Request { len } => {
                    let args: Vec<_> = sc.args().iter().map(|r| buf[r.clone()].to_vec()).collect();
                    seen.push(args);
                    at += len;
                }
                Scan::Inline { len } => {
                    let frame = sc.take_inline_frame();
                    seen.push(
                        sc.args()
                            .iter()
                            .map(|r| frame[r.clone()].to_vec())
                            .collect(),
                    );
                    at += len;
                }
                Scan::Skip { len } => at += len,
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(
            seen,
            vec![
                vec![b"PING".to_vec()],
                vec![b"ECHO".to_vec(), b"hi".to_vec()],
                vec![b"GET".to_vec(), b"k".to_vec()],
            ]
        );
        // reset() drops a partial frame.
        assert_eq!(
            sc.scan(b"*2\r\n$3\r\nGET\r\n", &limits, true),
            Scan::Incomplete
        );
        sc.reset();
        assert_eq!(
            sc.scan(b"*1\r\n$1\r\nx\r\n", &limits, true),
            Scan::Request { len: 11 }
        );
        assert_eq!(sc.args().len(), 1);
        assert_eq!(sc.args()[0], 8..9);
        // After an error, the next call starts over.
        assert_eq!(
            sc.scan(b"*x\r\n", &limits, true),
            Scan::Error(ProtoError::InvalidMultibulkLength)
        );
        assert_eq!(sc.scan(b"*0\r\n", &limits, true), Scan::Skip { len: 4 });
    }

    #[test]
    fn pending_hint_inside_bulk() {
        let limits = Limits::default();
        let mut sc = RequestScanner::new();
        assert_eq!(
            sc.scan(b"*2\r\n$3\r\nGET\r\n$100", &limits, true),
            Scan::Incomplete
        );
        assert_eq!(sc.pending_hint(), None);
        assert_eq!(
            sc.scan(b"*2\r\n$3\r\nGET\r\n$100\r\nab", &limits, true),
            Scan::Incomplete
        );
        // Payload starts at 19, ends at 119, CRLF through 121.
        assert_eq!(sc.pending_hint(), Some(121));
        let mut full = b"*2\r\n$3\r\nGET\r\n$100\r\n".to_vec();
        full.extend_from_slice(&[b'v'; 100]);
        full.extend_from_slice(b"\r\n");
        assert_eq!(full.len(), 121);
        assert_eq!(sc.scan(&full, &limits, true), Scan::Request { len: 121 });
        assert_eq!(sc.pending_hint(), None);
        assert_eq!(sc.args(), &[8..11, 19..119]);
    }

    #[test]
    fn huge_claim_allocates_nothing_up_front() {
        let limits = Limits::default();
        let mut sc = RequestScanner::new();
        assert_eq!(
            sc.scan(b"*1000000\r\n$1\r\na\r\n", &limits, true),
            Scan::Incomplete
        );
        assert_eq!(sc.args().len(), 1);
        assert!(sc.args.capacity() < 1000, "capacity {}", sc.args.capacity());
    }

    #[test]
    fn million_args_in_64k_reads_is_linear() {
        const N: usize = 1_000_000;
        let mut buf = Vec::with_capacity(N * 9 + 16);
        buf.extend_from_slice(b"*1000000\r\n");
        for _ in 0..N {
            buf.extend_from_slice(b"$3\r\nfoo\r\n");
        }
        let limits = Limits::default();
        let mut sc = RequestScanner::new();
        let started = std::time::Instant::now();
        let mut end = 0;
        let mut calls = 0u64;
        let result = loop {
            end = (end + 64 * 1024).min(buf.len());
            calls += 1;
            match sc.scan(&buf[..end], &limits, true) {
                Scan::Incomplete => assert!(end < buf.len(), "stuck at the end"),
                other => break other,
            }
        };
        let elapsed = started.elapsed();
        assert_eq!(result, Scan::Request { len: buf.len() });
        assert_eq!(sc.args().len(), N);
        assert_eq!(sc.args()[N - 1], buf.len() - 5..buf.len() - 2);
        // Work is bounded by a small multiple of the bytes, however many
        // reads it took (a rescan per read would be ~140x the size).
        let work = sc.work();
        assert!(
            work < 2 * buf.len() as u64 + 10 * calls,
            "work {work} for {} bytes in {calls} reads",
            buf.len()
        );
        assert!(elapsed.as_secs() < 10, "took {elapsed:?}");
    }

    // ---- seeded random streams -------------------------------------------

    /// What the generator promises about one frame.
    #[derive(Debug)]
    enum Expect {
        Request { len: usize, args: Vec<Vec<u8>> },
        Inline { len: usize, args: Vec<Vec<u8>> },
        Skip { len: usize },
    }

    fn random_arg(rng: &mut XorShift, allow_big: bool) -> Vec<u8> {
        let len = match rng.below(10) {
            0 => 0,
            1..=6 => rng.below(12),
            9 if allow_big => rng.below(70_000),
            _ => rng.below(300),
        };
        (0..len)
            .map(|_| match rng.below(4) {
                0 => b"\r\n$*\" '"[rng.below(7)],
                _ => rng.below(256) as u8,
            })
            .collect()
    }

    /// An inline argument and how to write it on the line.
    fn random_inline_arg(rng: &mut XorShift) -> (Vec<u8>, Vec<u8>) {
        let word: Vec<u8> = (0..1 + rng.below(8))
            .map(|_| b'a' + rng.below(26) as u8)
            .collect();
        match rng.below(4) {
            0 | 1 => (word.clone(), word),
            2 => {
                // Double quoted with escapes.
                let mut raw = Vec::new();
                let mut text = b"\"".to_vec();
                for _ in 0..rng.below(6) {
                    match rng.below(5) {
                        0 => {
                            let b = rng.below(256) as u8;
                            raw.push(b);
                            text.extend_from_slice(format!("\\x{b:02x}").as_bytes());
                        }
                        1 => {
                            raw.push(b'\n');
                            text.extend_from_slice(b"\\n");
                        }
                        2 => {
                            raw.push(b'"');
                            text.extend_from_slice(b"\\\"");
                        }
                        3 => {
                            raw.push(b' ');
                            text.push(b' ');
                        }
                        _ => {
                            raw.extend_from_slice(&word);
                            text.extend_from_slice(&word);
                        }
                    }
                }
                text.push(b'"');
                (raw, text)
            }
            _ => {
                let mut raw = word.clone();
                raw.extend_from_slice(b"' x");
                let mut text = b"'".to_vec();
                text.extend_from_slice(&word);
                text.extend_from_slice(b"\\' x'");
                (raw, text)
            }
        }
    }

    fn random_frame(rng: &mut XorShift, out: &mut Vec<u8>) -> Expect {
        let start = out.len();
        match rng.below(10) {
            0 => {
                let n = rng.below(6);
                let line: &[u8] = match n {
                    0 => b"*0\r\n",
                    1 => b"*-1\r\n",
                    2 => b"*-12\r\n",
                    3 => b"\r\n",
                    4 => b"\n",
                    _ => b"  \t\r\n",
                };
                out.extend_from_slice(line);
                Expect::Skip { len: line.len() }
            }
            1 | 2 => {
                let n = 1 + rng.below(5);
                let mut args = Vec::new();
                for i in 0..n {
                    let (raw, text) = random_inline_arg(rng);
                    if i > 0 {
                        out.extend_from_slice(if rng.below(2) == 0 { b" " } else { b" \t " });
                    }
                    out.extend_from_slice(&text);
                    args.push(raw);
                }
                out.extend_from_slice(if rng.below(2) == 0 { b"\r\n" } else { b"\n" });
                Expect::Inline {
                    len: out.len() - start,
                    args,
                }
            }
            _ => {
                let n = 1 + {
                    let rare = rng.below(20) == 0;
                    rng.below(if rare { 3000 } else { 6 })
                };
                let args: Vec<Vec<u8>> = (0..n).map(|_| random_arg(rng, n <= 6)).collect();
                let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
                crate::resp::encode::request(out, &refs);
                Expect::Request {
                    len: out.len() - start,
                    args,
                }
            }
        }
    }

    #[test]
    fn random_streams_in_random_chunks() {
        let limits = Limits::default();
        for seed in 1..=12u64 {
            let mut rng = XorShift::new(seed);
            let mut stream = Vec::new();
            let mut expects = Vec::new();
            for _ in 0..300 {
                expects.push(random_frame(&mut rng, &mut stream));
            }
            // The caller: a buffer that grows by random reads and loses
            // whole frames from its front.
            let mut sc = RequestScanner::new();
            let mut fed = 0;
            let mut front = 0;
            let mut next = 0;
            while next < expects.len() {
                let buf = &stream[front..fed];
                match sc.scan(buf, &limits, true) {
                    Scan::Incomplete => {
                        assert!(fed < stream.len(), "seed {seed}: stuck at frame {next}");
                        let chunk = match rng.below(4) {
                            0 => 1 + rng.below(4),
                            1 | 2 => 1 + rng.below(512),
                            _ => 1 + rng.below(100_000),
                        };
                        fed = (fed + chunk).min(stream.len());
                    }
                    Scan::Request { len } => {
                        let Expect::Request { len: want, args } = &expects[next] else {
                            panic!(
                                "seed {seed} frame {next}: got request, want {:?}",
                                expects[next]
                            );
                        };
                        assert_eq!(len, *want, "seed {seed} frame {next}");
                        assert_eq!(sc.args().len(), args.len());
                        for (r, a) in sc.args().iter().zip(args) {
                            assert_eq!(&buf[r.clone()], a.as_slice(), "seed {seed} frame {next}");
                        }
                        front += len;
                        next += 1;
                    }
                    Scan::Inline { len } => {
                        let Expect::Inline { len: want, args } = &expects[next] else {
                            panic!(
                                "seed {seed} frame {next}: got inline, want {:?}",
                                expects[next]
                            );
                        };
                        assert_eq!(len, *want, "seed {seed} frame {next}");
                        let frame = sc.take_inline_frame();
                        let got: Vec<Vec<u8>> = sc
                            .args()
                            .iter()
                            .map(|r| frame[r.clone()].to_vec())
                            .collect();
                        assert_eq!(&got, args, "seed {seed} frame {next}");
                        let mut want_frame = Vec::new();
                        let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
                        crate::resp::encode::request(&mut want_frame, &refs);
                        assert_eq!(frame, want_frame);
                        front += len;
                        next += 1;
                    }
                    Scan::Skip { len } => {
                        let Expect::Skip { len: want } = &expects[next] else {
                            panic!(
                                "seed {seed} frame {next}: got skip, want {:?}",
                                expects[next]
                            );
                        };
                        assert_eq!(len, *want, "seed {seed} frame {next}");
                        front += len;
                        next += 1;
                    }
                    Scan::Error(e) => panic!("seed {seed} frame {next}: error {e}"),
                }
            }
            assert_eq!(front, stream.len());
        }
    }

    #[test]
    fn random_garbage_never_panics_and_is_split_stable() {
        // Mutated valid frames: whatever the verdict, it must not depend on
        // where the input was split.
        let limits = Limits::default();
        let mut rng = XorShift::new(0xfeed);
        for _ in 0..400 {
            let mut frame = Vec::new();
            let _ = random_frame(&mut rng, &mut frame);
            frame.truncate(200);
            for _ in 0..1 + rng.below(3) {
                if frame.is_empty() {
                    break;
                }
                let at = rng.below(frame.len());
                frame[at] = b"\r\n$*-0123456789x\" '"[rng.below(19)];
            }
            let want = whole(&frame, &limits, true);
            for at in 0..=frame.len() {
                assert_eq!(
                    split(&frame, at, &limits, true),
                    want,
                    "{:?} at {at}",
                    frame
                );
            }
        }
    }
}
