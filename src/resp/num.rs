//! Small shared helpers of the RESP layer: strict integer parsing, integer
//! formatting into a stack buffer, and the resumable line-terminator search.
//!
//! Owns: nothing stateful. Invariant: none of these allocate or panic, for
//! any input. Never: no scanner state lives here.

/// The value of an integer reply frame, `:<n>\r\n` (None for any other
/// frame).
pub(crate) fn int_reply(frame: &[u8]) -> Option<i64> {
    parse_i64(frame.strip_prefix(b":")?.strip_suffix(b"\r\n")?)
}

/// Parses a decimal integer exactly as Redis's `string2ll` accepts it: an
/// optional `-`, then `0` alone or a digit 1-9 followed by digits; no `+`, no
/// spaces, no leading zeros, no `-0`, at most 20 characters, within `i64`.
pub(crate) fn parse_i64(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (negative, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    let mut v: u64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    if negative {
        if v == 1u64 << 63 {
            Some(i64::MIN)
        } else {
            i64::try_from(v).ok().map(|v| -v)
        }
    } else {
        i64::try_from(v).ok()
    }
}

/// Fast path for the common header shape `<type><digits>\r\n`, entirely
/// present in `buf` at `pos`: 1 to 18 digits, no sign, no leading zero
/// (except `0` itself). Returns the value and the offset of the CR. `None`
/// means "not this shape"; the caller then takes the general path, which
/// agrees with every `Some` this returns. Always inlined: it sits on
/// every request's and every reply's fast path, where a call costs as much
/// as a short header's digits.
#[inline(always)]
pub(crate) fn quick_header(buf: &[u8], pos: usize) -> Option<(u64, usize)> {
    let digits = buf.get(pos + 1..)?;
    let mut v: u64 = 0;
    let mut n = 0;
    for &b in digits.iter().take(19) {
        if !b.is_ascii_digit() {
            break;
        }
        v = v * 10 + u64::from(b - b'0');
        n += 1;
    }
    if n == 0 || n > 18 || (n > 1 && digits.first() == Some(&b'0')) {
        return None;
    }
    if digits.get(n..n + 2) != Some(&b"\r\n"[..]) {
        return None;
    }
    Some((v, pos + 1 + n))
}

/// A stack buffer that renders one integer in decimal.
pub(crate) struct IntBuf {
    buf: [u8; 20],
    start: usize,
}

impl IntBuf {
    /// Renders an unsigned value (at most 20 digits).
    pub(crate) fn unsigned(mut v: u64) -> IntBuf {
        let mut buf = [0u8; 20];
        let mut i = buf.len();
        loop {
            i -= 1;
            // `i` stays in range: u64::MAX has exactly 20 digits.
            if let Some(slot) = buf.get_mut(i) {
                *slot = b'0' + (v % 10) as u8;
            }
            v /= 10;
            if v == 0 || i == 0 {
                break;
            }
        }
        IntBuf { buf, start: i }
    }

    /// Renders a signed value (i64::MIN is 20 characters with its sign).
    pub(crate) fn signed(v: i64) -> IntBuf {
        let mut out = IntBuf::unsigned(v.unsigned_abs());
        if v < 0 && out.start > 0 {
            out.start -= 1;
            if let Some(slot) = out.buf.get_mut(out.start) {
                *slot = b'-';
            }
        }
        out
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        self.buf.get(self.start..).unwrap_or_default()
    }
}

/// Outcome of looking for a line terminator.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line {
    /// The terminator byte sits at this absolute offset.
    Found(usize),
    /// Not there yet; `searched` records how far the search got.
    Incomplete,
    /// More than `max` bytes after `start` hold no terminator.
    TooLong,
}

/// Looks for `needle` in `buf[start..]`, resuming at `*searched` (an absolute
/// offset remembered between calls so no byte is examined twice). The
/// terminator may sit at most `max` bytes after `start`; once `max + 1` bytes
/// from `start` are present without it, the line is too long. The outcome
/// therefore depends only on the bytes present, never on how they arrived.
pub(crate) fn find_line(
    buf: &[u8],
    start: usize,
    searched: &mut usize,
    needle: u8,
    max: usize,
) -> Line {
    let limit = start.saturating_add(max).saturating_add(1);
    let from = (*searched).max(start);
    let to = buf.len().min(limit);
    if from < to {
        if let Some(window) = buf.get(from..to) {
            if let Some(i) = window.iter().position(|&b| b == needle) {
                *searched = from + i;
                return Line::Found(from + i);
            }
        }
        *searched = to;
    }
    if buf.len() >= limit {
        Line::TooLong
    } else {
        Line::Incomplete
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_like_string2ll() {
        let ok: &[(&[u8], i64)] = &[
            (b"0", 0),
            (b"1", 1),
            (b"-1", -1),
            (b"10", 10),
            (b"9223372036854775807", i64::MAX),
            (b"-9223372036854775808", i64::MIN),
            (b"1099511627776", 1_099_511_627_776),
        ];
        for (s, v) in ok {
            assert_eq!(parse_i64(s), Some(*v), "{:?}", String::from_utf8_lossy(s));
        }
        let bad: &[&[u8]] = &[
            b"",
            b"-",
            b"+1",
            b"01",
            b"-0",
            b"00",
            b" 1",
            b"1 ",
            b"1a",
            b"9223372036854775808",
            b"-9223372036854775809",
            b"99999999999999999999",
            b"000000000000000000001",
            b"1.5",
        ];
        for s in bad {
            assert_eq!(parse_i64(s), None, "{:?}", String::from_utf8_lossy(s));
        }
    }

    #[test]
    fn quick_header_agrees_with_parse() {
        assert_eq!(quick_header(b"$3\r\nfoo", 0), Some((3, 2)));
        assert_eq!(quick_header(b"xx*0\r\n", 2), Some((0, 4)));
        assert_eq!(
            quick_header(b"$123456789012345678\r\n", 0),
            Some((123_456_789_012_345_678, 19))
        );
        for odd in [
            &b"$-1\r\n"[..],
            b"$01\r\n",
            b"$\r\n",
            b"$3\r",
            b"$3",
            b"$3\rx",
            b"$3x\r\n",
            b"$1234567890123456789\r\n",
        ] {
            assert_eq!(
                quick_header(odd, 0),
                None,
                "{:?}",
                String::from_utf8_lossy(odd)
            );
        }
    }

    #[test]
    fn intbuf_renders() {
        for v in [0i64, 7, -7, 10, 12345, -100, i64::MAX, i64::MIN] {
            assert_eq!(IntBuf::signed(v).as_bytes(), v.to_string().as_bytes());
        }
        for v in [0u64, 9, 10, 4_294_967_296, u64::MAX] {
            assert_eq!(IntBuf::unsigned(v).as_bytes(), v.to_string().as_bytes());
        }
    }

    #[test]
    fn find_line_resumes_and_bounds() {
        let mut searched = 0;
        assert_eq!(
            find_line(b"*12", 0, &mut searched, b'\r', 5),
            Line::Incomplete
        );
        assert_eq!(searched, 3);
        assert_eq!(
            find_line(b"*12\r\n", 0, &mut searched, b'\r', 5),
            Line::Found(3)
        );
        // Terminator exactly `max` bytes after start is accepted.
        let mut searched = 0;
        assert_eq!(
            find_line(b"*1234\r", 0, &mut searched, b'\r', 5),
            Line::Found(5)
        );
        // max + 1 bytes without it: too long, even if it comes later.
        let mut searched = 0;
        assert_eq!(
            find_line(b"*12345\r", 0, &mut searched, b'\r', 5),
            Line::TooLong
        );
        let mut searched = 0;
        assert_eq!(
            find_line(b"*12345", 0, &mut searched, b'\r', 5),
            Line::TooLong
        );
        // Offsets are absolute.
        let mut searched = 0;
        assert_eq!(
            find_line(b"xx$3\r\n", 2, &mut searched, b'\r', 5),
            Line::Found(4)
        );
    }
}
