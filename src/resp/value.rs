//! A small owned RESP value tree for the paths where convenience beats
//! speed: topology discovery, admin commands, merging fan-out replies.
//!
//! Owns: [`Value`] and [`parse`], which turns one complete reply into a
//! tree. The frame is first delimited and validated by [`ReplyScanner`], so
//! `parse` accepts exactly the replies the hot path accepts (plus checks on
//! double and verbatim contents), and is built with an explicit stack.
//!
//! Invariants: attributes are dropped; RESP2 nulls (`$-1`, `*-1`) and the
//! RESP3 null all become [`Value::Nil`]; nesting deeper than [`MAX_DEPTH`]
//! is refused, so dropping, cloning or printing a parsed tree can never run
//! out of call stack; capacity reserved for an aggregate never exceeds what
//! the bytes present can fill.
//!
//! Never: used on the per-request hot path (it allocates per value).

use super::error::ReplyError;
use super::num::parse_i64;
use super::reply::{ReplyScan, ReplyScanner};

/// Deepest aggregate nesting [`parse`] accepts.
pub const MAX_DEPTH: usize = 128;

/// One RESP value, RESP2 and RESP3 types alike.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Simple(Vec<u8>),
    /// An error reply, from `-` or `!` (without the leading `-`).
    Error(Vec<u8>),
    Int(i64),
    Bulk(Vec<u8>),
    Nil,
    Array(Vec<Value>),
    Map(Vec<(Value, Value)>),
    Set(Vec<Value>),
    Push(Vec<Value>),
    Double(f64),
    Bool(bool),
    BigNumber(Vec<u8>),
    Verbatim {
        format: [u8; 3],
        text: Vec<u8>,
    },
}

impl Value {
    /// The bytes of a string-like value: simple, bulk, verbatim text or big
    /// number. `None` for everything else (errors included).
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Value::Simple(b) | Value::Bulk(b) | Value::BigNumber(b) => Some(b),
            Value::Verbatim { text, .. } => Some(text),
            _ => None,
        }
    }

    /// The number of an integer reply.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            _ => None,
        }
    }

    /// The elements of an array, set or push.
    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(v) | Value::Set(v) | Value::Push(v) => Some(v),
            _ => None,
        }
    }

    /// Looks `key` up in a map, or in an array read as flat key/value pairs
    /// (how RESP2 sends maps). Keys compare by their string bytes.
    pub fn get(&self, key: &str) -> Option<&Value> {
        let key = key.as_bytes();
        match self {
            Value::Map(pairs) => pairs
                .iter()
                .find(|(k, _)| k.as_bytes() == Some(key))
                .map(|(_, v)| v),
            Value::Array(items) => items
                .chunks_exact(2)
                .find(|pair| pair.first().and_then(Value::as_bytes) == Some(key))
                .and_then(|pair| pair.get(1)),
            _ => None,
        }
    }
}

/// Parses the reply at the front of `buf`. `Ok(None)`: not complete yet.
/// `Ok(Some((value, len)))`: the reply occupied `buf[..len]`.
pub fn parse(buf: &[u8]) -> Result<Option<(Value, usize)>, ReplyError> {
    let len = match ReplyScanner::new().scan(buf) {
        ReplyScan::Incomplete => return Ok(None),
        ReplyScan::Error(e) => return Err(e),
        ReplyScan::Complete { len, .. } => len,
    };
    let frame = buf.get(..len).unwrap_or_default();
    build(frame).map(|v| Some((v, len)))
}

/// An aggregate under construction.
enum Partial {
    Array(Vec<Value>),
    Set(Vec<Value>),
    Push(Vec<Value>),
    Map(Vec<(Value, Value)>, Option<Value>),
    /// Elements are read and thrown away.
    Attribute,
}

struct Level {
    partial: Partial,
    remaining: usize,
}

/// One element as read from the wire.
enum Element {
    Value(Value),
    Open(Partial, usize),
    /// An attribute with no entries.
    Nothing,
}

/// Builds the tree of a frame already validated by the scanner.
fn build(frame: &[u8]) -> Result<Value, ReplyError> {
    let mut stack: Vec<Level> = Vec::new();
    let mut pos = 0;
    loop {
        let (element, next) = read_element(frame, pos)?;
        pos = next;
        let mut value = match element {
            Element::Nothing => continue,
            Element::Open(partial, remaining) => {
                if stack.len() >= MAX_DEPTH {
                    return Err(ReplyError::TooDeep);
                }
                stack.push(Level { partial, remaining });
                continue;
            }
            Element::Value(v) => v,
        };
        // Hand the value to its parent, closing every aggregate it fills.
        loop {
            let Some(level) = stack.last_mut() else {
                return Ok(value);
            };
            match &mut level.partial {
                Partial::Array(v) | Partial::Set(v) | Partial::Push(v) => v.push(value),
                Partial::Map(pairs, key) => match key.take() {
                    None => *key = Some(value),
                    Some(k) => pairs.push((k, value)),
                },
                Partial::Attribute => {}
            }
            level.remaining = level.remaining.saturating_sub(1);
            if level.remaining > 0 {
                break;
            }
            let Some(done) = stack.pop() else {
                return Err(ReplyError::BadLength);
            };
            value = match done.partial {
                Partial::Array(v) => Value::Array(v),
                Partial::Set(v) => Value::Set(v),
                Partial::Push(v) => Value::Push(v),
                Partial::Map(pairs, _) => Value::Map(pairs),
                // The annotated element follows; nothing to hand upwards.
                Partial::Attribute => break,
            };
        }
    }
}

/// Reads the element at `pos` of a complete frame.
fn read_element(frame: &[u8], pos: usize) -> Result<(Element, usize), ReplyError> {
    let kind = *frame.get(pos).ok_or(ReplyError::BadLineEnd)?;
    let rest = frame.get(pos + 1..).unwrap_or_default();
    let cr = rest
        .windows(2)
        .position(|w| w == b"\r\n")
        .ok_or(ReplyError::BadLineEnd)?;
    let line = rest.get(..cr).unwrap_or_default();
    let next = pos + 1 + cr + 2;
    let text = |l: &[u8]| l.to_vec();
    let element = match kind {
        b'+' => Element::Value(Value::Simple(text(line))),
        b'-' => Element::Value(Value::Error(text(line))),
        b':' => Element::Value(Value::Int(parse_i64(line).ok_or(ReplyError::BadInteger)?)),
        b'_' => Element::Value(Value::Nil),
        b'#' => Element::Value(Value::Bool(line == b"t")),
        b'(' => Element::Value(Value::BigNumber(text(line))),
        b',' => Element::Value(Value::Double(parse_double(line)?)),
        b'$' | b'!' | b'=' => {
            let n = parse_i64(line).ok_or(ReplyError::BadLength)?;
            if n < 0 {
                return Ok((Element::Value(Value::Nil), next));
            }
            let n = usize::try_from(n).map_err(|_| ReplyError::BadLength)?;
            let data = frame.get(next..next + n).ok_or(ReplyError::BadLength)?;
            let after = next + n + 2;
            let value = match kind {
                b'$' => Value::Bulk(data.to_vec()),
                b'!' => Value::Error(data.to_vec()),
                _ => match data {
                    [a, b, c, b':', text @ ..] => Value::Verbatim {
                        format: [*a, *b, *c],
                        text: text.to_vec(),
                    },
                    _ => return Err(ReplyError::BadVerbatim),
                },
            };
            return Ok((Element::Value(value), after));
        }
        b'*' | b'%' | b'~' | b'>' | b'|' => {
            let n = parse_i64(line).ok_or(ReplyError::BadLength)?;
            if n < 0 {
                return Ok((Element::Value(Value::Nil), next));
            }
            let n = usize::try_from(n).map_err(|_| ReplyError::BadLength)?;
            // Every element takes at least 3 bytes ("_\r\n"): never reserve
            // more than the frame could hold.
            let cap = n.min(frame.len().saturating_sub(next) / 3);
            let (partial, count) = match kind {
                b'*' => (Partial::Array(Vec::with_capacity(cap)), n),
                b'~' => (Partial::Set(Vec::with_capacity(cap)), n),
                b'>' => (Partial::Push(Vec::with_capacity(cap)), n),
                b'%' => (
                    Partial::Map(Vec::with_capacity(cap / 2), None),
                    n.saturating_mul(2),
                ),
                _ => (Partial::Attribute, n.saturating_mul(2)),
            };
            if count == 0 {
                let empty = match partial {
                    Partial::Array(v) => Value::Array(v),
                    Partial::Set(v) => Value::Set(v),
                    Partial::Push(v) => Value::Push(v),
                    Partial::Map(pairs, _) => Value::Map(pairs),
                    Partial::Attribute => return Ok((Element::Nothing, next)),
                };
                return Ok((Element::Value(empty), next));
            }
            Element::Open(partial, count)
        }
        other => return Err(ReplyError::UnknownType(other)),
    };
    Ok((element, next))
}

/// A RESP3 double: decimal or exponent notation, `inf`, `-inf`, `nan`.
fn parse_double(line: &[u8]) -> Result<f64, ReplyError> {
    let s = std::str::from_utf8(line).map_err(|_| ReplyError::BadDouble)?;
    s.parse::<f64>().map_err(|_| ReplyError::BadDouble)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resp::encode::{Encoder, Proto};
    use crate::resp::testutil::XorShift;

    fn one(buf: &[u8]) -> Value {
        match parse(buf) {
            Ok(Some((v, len))) => {
                assert_eq!(len, buf.len());
                v
            }
            other => panic!("{:?}: {other:?}", String::from_utf8_lossy(buf)),
        }
    }

    fn bulk(s: &str) -> Value {
        Value::Bulk(s.as_bytes().to_vec())
    }

    #[test]
    fn scalars() {
        assert_eq!(one(b"+OK\r\n"), Value::Simple(b"OK".to_vec()));
        assert_eq!(one(b"-ERR x\r\n"), Value::Error(b"ERR x".to_vec()));
        assert_eq!(one(b"!5\r\nERR x\r\n"), Value::Error(b"ERR x".to_vec()));
        assert_eq!(one(b":-42\r\n"), Value::Int(-42));
        assert_eq!(one(b"$3\r\na\r\n\r\n"), Value::Bulk(b"a\r\n".to_vec()));
        assert_eq!(one(b"$-1\r\n"), Value::Nil);
        assert_eq!(one(b"*-1\r\n"), Value::Nil);
        assert_eq!(one(b"_\r\n"), Value::Nil);
        assert_eq!(one(b",1.5\r\n"), Value::Double(1.5));
        assert_eq!(one(b",-inf\r\n"), Value::Double(f64::NEG_INFINITY));
        assert!(matches!(one(b",nan\r\n"), Value::Double(d) if d.is_nan()));
        assert_eq!(one(b"#t\r\n"), Value::Bool(true));
        assert_eq!(one(b"#f\r\n"), Value::Bool(false));
        assert_eq!(
            one(b"(123456789012345678901234\r\n"),
            Value::BigNumber(b"123456789012345678901234".to_vec())
        );
        assert_eq!(
            one(b"=8\r\nmkd:# hi\r\n"),
            Value::Verbatim {
                format: *b"mkd",
                text: b"# hi".to_vec()
            }
        );
    }

    #[test]
    fn aggregates_and_attributes() {
        assert_eq!(
            one(b"*3\r\n:1\r\n*0\r\n~1\r\n$1\r\nx\r\n"),
            Value::Array(vec![
                Value::Int(1),
                Value::Array(vec![]),
                Value::Set(vec![bulk("x")])
            ])
        );
        assert_eq!(
            one(b"%2\r\n+a\r\n:1\r\n+b\r\n%0\r\n"),
            Value::Map(vec![
                (Value::Simple(b"a".to_vec()), Value::Int(1)),
                (Value::Simple(b"b".to_vec()), Value::Map(vec![])),
            ])
        );
        assert_eq!(
            one(b">2\r\n$7\r\nmessage\r\n$2\r\nhi\r\n"),
            Value::Push(vec![bulk("message"), bulk("hi")])
        );
        // Attributes vanish, at the top and inside aggregates.
        assert_eq!(one(b"|1\r\n+k\r\n+v\r\n:7\r\n"), Value::Int(7));
        assert_eq!(
            one(b"*2\r\n|1\r\n+k\r\n*1\r\n:0\r\n:1\r\n|0\r\n:2\r\n"),
            Value::Array(vec![Value::Int(1), Value::Int(2)])
        );
    }

    #[test]
    fn incomplete_at_every_prefix_and_trailing_bytes() {
        let frame = b"|1\r\n+k\r\n+v\r\n*2\r\n%1\r\n+a\r\n$2\r\nbc\r\n=7\r\ntxt:abc\r\n";
        for end in 0..frame.len() {
            assert_eq!(parse(&frame[..end]), Ok(None), "prefix {end}");
        }
        let mut more = frame.to_vec();
        more.extend_from_slice(b"+next\r\n");
        let (v, len) = parse(&more).unwrap().unwrap();
        assert_eq!(len, frame.len());
        assert_eq!(
            v,
            Value::Array(vec![
                Value::Map(vec![(Value::Simple(b"a".to_vec()), bulk("bc"))]),
                Value::Verbatim {
                    format: *b"txt",
                    text: b"abc".to_vec()
                },
            ])
        );
    }

    #[test]
    fn errors() {
        assert_eq!(parse(b"@\r\n"), Err(ReplyError::UnknownType(b'@')));
        assert_eq!(parse(b",abc\r\n"), Err(ReplyError::BadDouble));
        assert_eq!(parse(b"=3\r\nabc\r\n"), Err(ReplyError::BadVerbatim));
        assert_eq!(parse(b"=4\r\nabc;\r\n"), Err(ReplyError::BadVerbatim));
        assert_eq!(parse(b"$3\r\nabcd\r\n"), Err(ReplyError::BadLineEnd));
        let mut deep = Vec::new();
        for _ in 0..MAX_DEPTH + 1 {
            deep.extend_from_slice(b"*1\r\n");
        }
        deep.extend_from_slice(b":1\r\n");
        assert_eq!(parse(&deep), Err(ReplyError::TooDeep));
        let ok_depth = &deep[4..];
        assert!(matches!(parse(ok_depth), Ok(Some(_))));
    }

    #[test]
    fn accessors() {
        let v = one(b"%2\r\n+port\r\n:6379\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n");
        assert_eq!(v.get("port").and_then(Value::as_int), Some(6379));
        assert_eq!(
            v.get("ip").and_then(Value::as_bytes),
            Some(&b"127.0.0.1"[..])
        );
        assert_eq!(v.get("nope"), None);
        // RESP2 flat key/value arrays.
        let flat = one(b"*4\r\n$4\r\nport\r\n:7000\r\n$2\r\nip\r\n$1\r\nh\r\n");
        assert_eq!(flat.get("port").and_then(Value::as_int), Some(7000));
        assert_eq!(flat.get("ip").and_then(Value::as_bytes), Some(&b"h"[..]));
        // Values are never taken as keys.
        assert_eq!(flat.get("7000"), None);
        assert_eq!(flat.as_array().map(<[Value]>::len), Some(4));
        assert_eq!(Value::Int(3).get("x"), None);
        assert_eq!(Value::Int(3).as_bytes(), None);
        assert_eq!(Value::Error(b"x".to_vec()).as_bytes(), None);
        assert_eq!(bulk("3").as_int(), None);
        assert_eq!(
            Value::Set(vec![Value::Nil]).as_array(),
            Some(&[Value::Nil][..])
        );
        assert_eq!(Value::Map(vec![]).as_array(), None);
        assert_eq!(
            Value::BigNumber(b"12".to_vec()).as_bytes(),
            Some(&b"12"[..])
        );
    }

    /// A random tree (no NaN: it never compares equal) within MAX_DEPTH.
    fn random_value(rng: &mut XorShift, depth: usize) -> Value {
        let pick = if depth >= 6 {
            rng.below(10)
        } else {
            rng.below(15)
        };
        let items = |rng: &mut XorShift| -> Vec<Value> {
            (0..rng.below(5))
                .map(|_| random_value(rng, depth + 1))
                .collect()
        };
        match pick {
            0 => Value::Simple(b"simple".to_vec()),
            1 => Value::Error(b"ERR no".to_vec()),
            2 => Value::Int(rng.next_u64() as i64),
            3 => Value::Bulk((0..rng.below(20)).map(|_| rng.below(256) as u8).collect()),
            4 => Value::Nil,
            5 => Value::Double([0.5, -1e300, 3.0, f64::INFINITY, 1.1][rng.below(5)]),
            6 => Value::Bool(rng.below(2) == 0),
            7 => Value::BigNumber(b"-123456789012345678901234567890".to_vec()),
            8 => Value::Verbatim {
                format: *b"txt",
                text: b"a\r\nb".to_vec(),
            },
            9 => Value::Bulk(Vec::new()),
            10 => Value::Array(items(rng)),
            11 => Value::Set(items(rng)),
            12 => Value::Push(items(rng)),
            _ => Value::Map(
                (0..rng.below(4))
                    .map(|_| (random_value(rng, depth + 1), random_value(rng, depth + 1)))
                    .collect(),
            ),
        }
    }

    #[test]
    fn resp3_round_trip() {
        let mut rng = XorShift::new(5);
        for _ in 0..500 {
            let v = random_value(&mut rng, 0);
            let mut out = Vec::new();
            Encoder::new(&mut out, Proto::Resp3).value(&v);
            assert_eq!(parse(&out), Ok(Some((v.clone(), out.len()))), "{v:?}");
        }
    }
}
