//! Building RESP output: replies the proxy writes itself (errors, admin and
//! emulated commands, merged fan-out replies) and requests it sends to
//! backends.
//!
//! Owns: [`Encoder`], which appends frames to a caller's `Vec<u8>` in the
//! client's protocol, downgrading RESP3-only types for RESP2 clients the
//! way Redis does (maps, sets and pushes become arrays, booleans integers,
//! doubles, verbatim strings and big numbers bulk strings, nulls `$-1` or
//! `*-1`); and [`request`], which encodes a multibulk request.
//!
//! Invariants: numbers are formatted on the stack, so encoding into a
//! buffer with spare capacity allocates nothing; simple strings and errors
//! never carry CR or LF (each is replaced by a space, as Redis does), so one
//! call always appends exactly one well formed frame; doubles use the
//! `%.17g` formatting of Redis 7.0.
//!
//! Never: counts are not checked against the elements that follow; the
//! caller that announces `array(n)` owes `n` values.

use std::io::Write;

use super::num::IntBuf;
use super::value::Value;

/// The protocol a client speaks (chosen with HELLO).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub enum Proto {
    Resp2,
    Resp3,
}

/// Appends RESP frames to `out` in the protocol `proto`.
#[derive(Debug)]
pub struct Encoder<'a> {
    out: &'a mut Vec<u8>,
    proto: Proto,
}

impl<'a> Encoder<'a> {
    pub fn new(out: &'a mut Vec<u8>, proto: Proto) -> Self {
        Encoder { out, proto }
    }

    pub fn proto(&self) -> Proto {
        self.proto
    }

    /// `+s`: CR and LF in `s` become spaces.
    pub fn simple(&mut self, s: &[u8]) -> &mut Self {
        self.line(b'+', s)
    }

    /// `-s`, where `s` is e.g. `ERR something` (no leading `-`). CR and LF
    /// become spaces.
    pub fn error(&mut self, s: &[u8]) -> &mut Self {
        self.line(b'-', s)
    }

    pub fn int(&mut self, v: i64) -> &mut Self {
        self.out.push(b':');
        self.out.extend_from_slice(IntBuf::signed(v).as_bytes());
        self.out.extend_from_slice(b"\r\n");
        self
    }

    pub fn bulk(&mut self, data: &[u8]) -> &mut Self {
        self.header(b'$', data.len());
        self.out.extend_from_slice(data);
        self.out.extend_from_slice(b"\r\n");
        self
    }

    /// A null string: `$-1` in RESP2, `_` in RESP3.
    pub fn null(&mut self) -> &mut Self {
        self.out.extend_from_slice(match self.proto {
            Proto::Resp2 => b"$-1\r\n",
            Proto::Resp3 => b"_\r\n",
        });
        self
    }

    /// A null array: `*-1` in RESP2, `_` in RESP3.
    pub fn null_array(&mut self) -> &mut Self {
        self.out.extend_from_slice(match self.proto {
            Proto::Resp2 => b"*-1\r\n",
            Proto::Resp3 => b"_\r\n",
        });
        self
    }

    /// Header of an array of `n` values.
    pub fn array(&mut self, n: usize) -> &mut Self {
        self.header(b'*', n)
    }

    /// Header of a map of `n` key/value pairs (2n values follow). RESP2: an
    /// array of 2n.
    pub fn map(&mut self, n: usize) -> &mut Self {
        match self.proto {
            Proto::Resp2 => self.header(b'*', n.saturating_mul(2)),
            Proto::Resp3 => self.header(b'%', n),
        }
    }

    /// Header of a set of `n` values. RESP2: an array.
    pub fn set(&mut self, n: usize) -> &mut Self {
        match self.proto {
            Proto::Resp2 => self.header(b'*', n),
            Proto::Resp3 => self.header(b'~', n),
        }
    }

    /// Header of a push of `n` values. RESP2: an array.
    pub fn push(&mut self, n: usize) -> &mut Self {
        match self.proto {
            Proto::Resp2 => self.header(b'*', n),
            Proto::Resp3 => self.header(b'>', n),
        }
    }

    /// A double, formatted as Redis 7.0 does (`%.17g`, `inf`, `-inf`).
    /// RESP2: a bulk string.
    pub fn double(&mut self, d: f64) -> &mut Self {
        let mut buf = [0u8; 40];
        let text = format_double(d, &mut buf);
        match self.proto {
            Proto::Resp2 => self.bulk(text),
            Proto::Resp3 => {
                self.out.push(b',');
                self.out.extend_from_slice(text);
                self.out.extend_from_slice(b"\r\n");
                self
            }
        }
    }

    /// `#t` / `#f`. RESP2: `:1` / `:0`.
    pub fn boolean(&mut self, b: bool) -> &mut Self {
        match self.proto {
            Proto::Resp2 => self.int(i64::from(b)),
            Proto::Resp3 => {
                self.out
                    .extend_from_slice(if b { b"#t\r\n" } else { b"#f\r\n" });
                self
            }
        }
    }

    /// A verbatim string with a three-byte format such as `txt`. RESP2: a
    /// bulk string of the text alone.
    pub fn verbatim(&mut self, format: &[u8; 3], text: &[u8]) -> &mut Self {
        match self.proto {
            Proto::Resp2 => self.bulk(text),
            Proto::Resp3 => {
                self.header(b'=', text.len().saturating_add(4));
                self.out.extend_from_slice(format);
                self.out.push(b':');
                self.out.extend_from_slice(text);
                self.out.extend_from_slice(b"\r\n");
                self
            }
        }
    }

    /// A big number given as its decimal digits. RESP2: a bulk string.
    pub fn big_number(&mut self, digits: &[u8]) -> &mut Self {
        match self.proto {
            Proto::Resp2 => self.bulk(digits),
            Proto::Resp3 => self.line(b'(', digits),
        }
    }

    /// Re-encodes a parsed value in this encoder's protocol. Iterative: any
    /// nesting depth is fine.
    pub fn value(&mut self, v: &Value) -> &mut Self {
        let mut todo: Vec<&Value> = vec![v];
        while let Some(v) = todo.pop() {
            match v {
                Value::Simple(s) => {
                    self.simple(s);
                }
                Value::Error(s) => {
                    self.error(s);
                }
                Value::Int(i) => {
                    self.int(*i);
                }
                Value::Bulk(b) => {
                    self.bulk(b);
                }
                Value::Nil => {
                    self.null();
                }
                Value::Double(d) => {
                    self.double(*d);
                }
                Value::Bool(b) => {
                    self.boolean(*b);
                }
                Value::BigNumber(n) => {
                    self.big_number(n);
                }
                Value::Verbatim { format, text } => {
                    self.verbatim(format, text);
                }
                Value::Array(items) => {
                    self.array(items.len());
                    todo.extend(items.iter().rev());
                }
                Value::Set(items) => {
                    self.set(items.len());
                    todo.extend(items.iter().rev());
                }
                Value::Push(items) => {
                    self.push(items.len());
                    todo.extend(items.iter().rev());
                }
                Value::Map(pairs) => {
                    self.map(pairs.len());
                    for (k, v) in pairs.iter().rev() {
                        todo.push(v);
                        todo.push(k);
                    }
                }
            }
        }
        self
    }

    /// `<kind><n>\r\n`.
    fn header(&mut self, kind: u8, n: usize) -> &mut Self {
        self.out.push(kind);
        self.out
            .extend_from_slice(IntBuf::unsigned(n as u64).as_bytes());
        self.out.extend_from_slice(b"\r\n");
        self
    }

    /// `<kind><s>\r\n` with CR/LF in `s` replaced by spaces.
    fn line(&mut self, kind: u8, s: &[u8]) -> &mut Self {
        self.out.push(kind);
        let start = self.out.len();
        self.out.extend_from_slice(s);
        if let Some(tail) = self.out.get_mut(start..) {
            for b in tail.iter_mut().filter(|b| matches!(**b, b'\r' | b'\n')) {
                *b = b' ';
            }
        }
        self.out.extend_from_slice(b"\r\n");
        self
    }
}

/// Appends the multibulk request `*<n>` followed by one bulk per argument.
pub fn request(out: &mut Vec<u8>, args: &[&[u8]]) {
    array_into(out, args.len());
    for arg in args {
        bulk_into(out, arg);
    }
}

/// Appends `*<n>\r\n` (a request's or a RESP2 array's header) to any
/// buffer: a `Vec<u8>`, or a `BytesMut` to be cut into zero-copy parts.
#[inline]
pub fn array_into(out: &mut impl bytes::BufMut, n: usize) {
    out.put_u8(b'*');
    out.put_slice(IntBuf::unsigned(n as u64).as_bytes());
    out.put_slice(b"\r\n");
}

/// Appends the bulk string `$<len>\r\n<data>\r\n` to any buffer.
#[inline]
pub fn bulk_into(out: &mut impl bytes::BufMut, data: &[u8]) {
    out.put_u8(b'$');
    out.put_slice(IntBuf::unsigned(data.len() as u64).as_bytes());
    out.put_slice(b"\r\n");
    out.put_slice(data);
    out.put_slice(b"\r\n");
}

/// A `Write` over a fixed stack buffer that silently stops when full (the
/// callers size it so that never happens).
struct StackWriter<'b> {
    buf: &'b mut [u8],
    len: usize,
}

impl Write for StackWriter<'_> {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        let room = self.buf.len().saturating_sub(self.len);
        let n = data.len().min(room);
        if let (Some(dst), Some(src)) = (self.buf.get_mut(self.len..self.len + n), data.get(..n)) {
            dst.copy_from_slice(src);
        }
        self.len += n;
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Formats `d` as C's `printf("%.17g")` does (what Redis 7.0 sends), using
/// `buf` as storage: 17 significant digits, fixed notation when the decimal
/// exponent is in -4..17, exponent notation (`e+XX`, at least two exponent
/// digits) otherwise, trailing zeros and a trailing point removed. Infinity
/// is `inf`/`-inf` and NaN is `nan`.
pub(crate) fn format_double(d: f64, buf: &mut [u8; 40]) -> &[u8] {
    if d.is_nan() {
        return b"nan";
    }
    if d.is_infinite() {
        return if d > 0.0 { b"inf" } else { b"-inf" };
    }
    // Rust's `{:.16e}` rounds correctly to 17 significant digits, the same
    // digits glibc's printf produces: "d.dddddddddddddddde<exp>".
    let mut sci = [0u8; 40];
    let mut w = StackWriter {
        buf: &mut sci,
        len: 0,
    };
    let _ = write!(w, "{:.16e}", d.abs());
    let sci_len = w.len;
    let sci = sci.get(..sci_len).unwrap_or_default();
    let (mantissa, exp) = match sci.iter().position(|&b| b == b'e') {
        Some(e) => (
            sci.get(..e).unwrap_or_default(),
            sci.get(e + 1..).unwrap_or_default(),
        ),
        None => (sci, &b"0"[..]),
    };
    let exp: i32 = std::str::from_utf8(exp)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let mut digits = [b'0'; 17];
    for (slot, &b) in digits
        .iter_mut()
        .zip(mantissa.iter().filter(|b| b.is_ascii_digit()))
    {
        *slot = b;
    }
    // Significant digits after dropping trailing zeros (at least one).
    let sig = digits.iter().rposition(|&b| b != b'0').map_or(1, |i| i + 1);
    let digits = digits.get(..sig).unwrap_or_default();

    let mut out = StackWriter {
        buf: &mut buf[..],
        len: 0,
    };
    if d.is_sign_negative() {
        let _ = out.write(b"-");
    }
    if (-4..17).contains(&exp) {
        if exp >= 0 {
            let int_len = (exp as usize) + 1;
            for i in 0..int_len {
                let _ = out.write(&[digits.get(i).copied().unwrap_or(b'0')]);
            }
            if let Some(frac) = digits.get(int_len..).filter(|f| !f.is_empty()) {
                let _ = out.write(b".");
                let _ = out.write(frac);
            }
        } else {
            let _ = out.write(b"0.");
            for _ in 0..(-exp - 1) {
                let _ = out.write(b"0");
            }
            let _ = out.write(digits);
        }
    } else {
        let (first, rest) = digits
            .split_first()
            .map_or((b'0', &[][..]), |(f, r)| (*f, r));
        let _ = out.write(&[first]);
        if !rest.is_empty() {
            let _ = out.write(b".");
            let _ = out.write(rest);
        }
        let _ = write!(
            out,
            "e{}{:02}",
            if exp < 0 { '-' } else { '+' },
            exp.unsigned_abs()
        );
    }
    let len = out.len;
    buf.get(..len).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(proto: Proto, f: impl FnOnce(&mut Encoder<'_>)) -> Vec<u8> {
        let mut out = Vec::new();
        f(&mut Encoder::new(&mut out, proto));
        out
    }

    fn both(f: impl Fn(&mut Encoder<'_>), resp2: &[u8], resp3: &[u8]) {
        assert_eq!(enc(Proto::Resp2, &f), resp2, "RESP2");
        assert_eq!(enc(Proto::Resp3, &f), resp3, "RESP3");
    }

    #[test]
    fn scalars() {
        both(
            |e| {
                e.simple(b"OK");
            },
            b"+OK\r\n",
            b"+OK\r\n",
        );
        both(
            |e| {
                e.simple(b"a\r\nb");
            },
            b"+a  b\r\n",
            b"+a  b\r\n",
        );
        both(
            |e| {
                e.error(b"ERR bad\nthing");
            },
            b"-ERR bad thing\r\n",
            b"-ERR bad thing\r\n",
        );
        both(
            |e| {
                e.int(-12);
            },
            b":-12\r\n",
            b":-12\r\n",
        );
        both(
            |e| {
                e.int(i64::MIN);
            },
            b":-9223372036854775808\r\n",
            b":-9223372036854775808\r\n",
        );
        both(
            |e| {
                e.bulk(b"hi\r\n");
            },
            b"$4\r\nhi\r\n\r\n",
            b"$4\r\nhi\r\n\r\n",
        );
        both(
            |e| {
                e.bulk(b"");
            },
            b"$0\r\n\r\n",
            b"$0\r\n\r\n",
        );
        both(
            |e| {
                e.null();
            },
            b"$-1\r\n",
            b"_\r\n",
        );
        both(
            |e| {
                e.null_array();
            },
            b"*-1\r\n",
            b"_\r\n",
        );
        both(
            |e| {
                e.boolean(true);
            },
            b":1\r\n",
            b"#t\r\n",
        );
        both(
            |e| {
                e.boolean(false);
            },
            b":0\r\n",
            b"#f\r\n",
        );
        both(
            |e| {
                e.double(1.1);
            },
            b"$18\r\n1.1000000000000001\r\n",
            b",1.1000000000000001\r\n",
        );
        both(
            |e| {
                e.double(f64::INFINITY);
            },
            b"$3\r\ninf\r\n",
            b",inf\r\n",
        );
        both(
            |e| {
                e.double(f64::NEG_INFINITY);
            },
            b"$4\r\n-inf\r\n",
            b",-inf\r\n",
        );
        both(
            |e| {
                e.verbatim(b"txt", b"hello");
            },
            b"$5\r\nhello\r\n",
            b"=9\r\ntxt:hello\r\n",
        );
        both(
            |e| {
                e.big_number(b"-123");
            },
            b"$4\r\n-123\r\n",
            b"(-123\r\n",
        );
    }

    #[test]
    fn aggregates() {
        both(
            |e| {
                e.array(3);
            },
            b"*3\r\n",
            b"*3\r\n",
        );
        both(
            |e| {
                e.map(2);
            },
            b"*4\r\n",
            b"%2\r\n",
        );
        both(
            |e| {
                e.set(0);
            },
            b"*0\r\n",
            b"~0\r\n",
        );
        both(
            |e| {
                e.push(3);
            },
            b"*3\r\n",
            b">3\r\n",
        );
        both(
            |e| {
                e.map(1).bulk(b"k").array(2).int(1).null();
            },
            b"*2\r\n$1\r\nk\r\n*2\r\n:1\r\n$-1\r\n",
            b"%1\r\n$1\r\nk\r\n*2\r\n:1\r\n_\r\n",
        );
    }

    #[test]
    fn values_in_both_protocols() {
        let v = Value::Map(vec![
            (
                Value::Simple(b"a".to_vec()),
                Value::Set(vec![Value::Bool(true), Value::Nil]),
            ),
            (
                Value::Bulk(b"b".to_vec()),
                Value::Push(vec![
                    Value::Double(0.5),
                    Value::BigNumber(b"99".to_vec()),
                    Value::Verbatim {
                        format: *b"txt",
                        text: b"t".to_vec(),
                    },
                    Value::Error(b"ERR e".to_vec()),
                    Value::Array(vec![]),
                ]),
            ),
        ]);
        both(
            |e| {
                e.value(&v);
            },
            b"*4\r\n+a\r\n*2\r\n:1\r\n$-1\r\n$1\r\nb\r\n*5\r\n$3\r\n0.5\r\n$2\r\n99\r\n$1\r\nt\r\n-ERR e\r\n*0\r\n",
            b"%2\r\n+a\r\n~2\r\n#t\r\n_\r\n$1\r\nb\r\n>5\r\n,0.5\r\n(99\r\n=5\r\ntxt:t\r\n-ERR e\r\n*0\r\n",
        );
    }

    #[test]
    fn request_frames() {
        let mut out = Vec::new();
        request(&mut out, &[b"SET", b"k", b"v\r\n"]);
        assert_eq!(out, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\nv\r\n\r\n");
        let mut out = Vec::new();
        request(&mut out, &[]);
        assert_eq!(out, b"*0\r\n");
    }

    #[test]
    fn doubles_like_printf_17g() {
        // Expected strings are what C's printf("%.17g") prints.
        let cases: &[(f64, &str)] = &[
            (0.0, "0"),
            (-0.0, "-0"),
            (1.0, "1"),
            (-2.5, "-2.5"),
            (1.1, "1.1000000000000001"),
            (0.1, "0.10000000000000001"),
            (3.25, "3.25"),
            (2.7, "2.7000000000000002"),
            (100.0, "100"),
            (1e16, "10000000000000000"),
            (1e17, "1e+17"),
            (9.999999999999999e16, "99999999999999984"),
            (123e-20, "1.23e-18"),
            (1e30, "1e+30"),
            (1.5e300, "1.5000000000000001e+300"),
            (0.0001, "0.0001"),
            (0.00001, "1.0000000000000001e-05"),
            (1.5e-7, "1.4999999999999999e-07"),
            (123456789.123, "123456789.123"),
            (f64::MAX, "1.7976931348623157e+308"),
            (f64::MIN_POSITIVE, "2.2250738585072014e-308"),
            (5e-324, "4.9406564584124654e-324"),
            (12345678901234567890.0, "1.2345678901234567e+19"),
            (0.3, "0.29999999999999999"),
            (2.0f64.powi(60), "1.152921504606847e+18"),
        ];
        for (d, want) in cases {
            let mut buf = [0u8; 40];
            let got = format_double(*d, &mut buf);
            assert_eq!(std::str::from_utf8(got).unwrap(), *want, "{d:e}");
        }
        let mut buf = [0u8; 40];
        assert_eq!(format_double(f64::NAN, &mut buf), b"nan");
    }
}
