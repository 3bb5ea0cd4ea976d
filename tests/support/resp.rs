//! A tiny blocking RESP2/RESP3 client for tests, written independently of
//! mithril's scanner so that the proxy is never checked with its own parser.
//!
//! Owns: one TCP connection and its read buffer. Invariant: bytes read but not
//! yet parsed stay in the buffer, so a `try_read_reply` that times out in the
//! middle of a reply loses nothing; the next call resumes. Never: panic inside
//! the `try_*` calls (they return `io::Result`); the plain calls panic with the
//! peer address and the cause, which is what a test wants.

use std::fmt;
use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// Refuse absurd lengths from a broken peer instead of allocating them.
const MAX_LEN: i64 = 512 * 1024 * 1024;
const MAX_DEPTH: usize = 256;

/// One reply, RESP2 or RESP3.
#[derive(Clone, PartialEq)]
pub enum Reply {
    /// `+...`
    Simple(String),
    /// `-...` and RESP3 blob errors `!len`
    Error(String),
    /// `:n`
    Int(i64),
    /// `$len` (`None` for the RESP2 null bulk `$-1`)
    Bulk(Option<Vec<u8>>),
    /// `*n` (`None` for the RESP2 null array `*-1`)
    Array(Option<Vec<Reply>>),
    /// `%n`
    Map(Vec<(Reply, Reply)>),
    /// `~n`
    Set(Vec<Reply>),
    /// `>n`
    Push(Vec<Reply>),
    /// `,x`
    Double(f64),
    /// `#t` / `#f`
    Bool(bool),
    /// `_`
    Null,
    /// `=len`: the whole payload, format prefix included (`"txt:..."`);
    /// `as_str` gives the text after the prefix.
    Verbatim(String),
    /// `(digits`
    BigNumber(String),
    /// `|n` attributes, then the reply they decorate.
    Attribute(Vec<(Reply, Reply)>, Box<Reply>),
}

impl Reply {
    /// The text of a simple string, a bulk string (UTF-8) or a verbatim string.
    pub fn as_str(&self) -> &str {
        match self {
            Reply::Simple(s) => s,
            Reply::Bulk(Some(b)) => std::str::from_utf8(b)
                .unwrap_or_else(|_| panic!("expected a UTF-8 string, got {self:?}")),
            Reply::Verbatim(s) => s.get(4..).unwrap_or(""),
            _ => panic!("expected a simple or bulk string, got {self:?}"),
        }
    }

    /// The value of an integer reply.
    pub fn as_int(&self) -> i64 {
        match self {
            Reply::Int(n) => *n,
            _ => panic!("expected an integer, got {self:?}"),
        }
    }

    /// The bytes of a bulk string; `None` for a null bulk or RESP3 null.
    pub fn as_bulk(&self) -> Option<&[u8]> {
        match self {
            Reply::Bulk(b) => b.as_deref(),
            Reply::Null => None,
            _ => panic!("expected a bulk string, got {self:?}"),
        }
    }

    /// The elements of an array, set or push.
    pub fn as_array(&self) -> &[Reply] {
        match self {
            Reply::Array(Some(v)) | Reply::Set(v) | Reply::Push(v) => v,
            _ => panic!("expected an array, got {self:?}"),
        }
    }

    /// The message of an error reply.
    pub fn as_error(&self) -> &str {
        match self {
            Reply::Error(e) => e,
            _ => panic!("expected an error, got {self:?}"),
        }
    }

    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }
}

impl fmt::Debug for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn pairs(f: &mut fmt::Formatter<'_>, kv: &[(Reply, Reply)]) -> fmt::Result {
            f.debug_map()
                .entries(kv.iter().map(|(k, v)| (k, v)))
                .finish()
        }
        match self {
            Reply::Simple(s) => write!(f, "Simple({s:?})"),
            Reply::Error(s) => write!(f, "Error({s:?})"),
            Reply::Int(n) => write!(f, "Int({n})"),
            Reply::Bulk(None) => write!(f, "Bulk(nil)"),
            Reply::Bulk(Some(b)) => write!(f, "Bulk(\"{}\")", b.escape_ascii()),
            Reply::Array(None) => write!(f, "Array(nil)"),
            Reply::Array(Some(v)) => f.debug_tuple("Array").field(v).finish(),
            Reply::Map(kv) => {
                write!(f, "Map")?;
                pairs(f, kv)
            }
            Reply::Set(v) => f.debug_tuple("Set").field(v).finish(),
            Reply::Push(v) => f.debug_tuple("Push").field(v).finish(),
            Reply::Double(d) => write!(f, "Double({d})"),
            Reply::Bool(b) => write!(f, "Bool({b})"),
            Reply::Null => write!(f, "Null"),
            Reply::Verbatim(s) => write!(f, "Verbatim({s:?})"),
            Reply::BigNumber(s) => write!(f, "BigNumber({s})"),
            Reply::Attribute(kv, r) => {
                write!(f, "Attribute")?;
                pairs(f, kv)?;
                write!(f, " {r:?}")
            }
        }
    }
}

/// `+OK`, the reply tests compare with most.
pub fn ok() -> Reply {
    Reply::Simple("OK".into())
}

/// An error reply with this text (without the leading `-`).
pub fn err(text: &str) -> Reply {
    Reply::Error(text.to_string())
}

/// A bulk string reply holding `text`.
pub fn bulk(text: &str) -> Reply {
    Reply::Bulk(Some(text.as_bytes().to_vec()))
}

/// A command's arguments as owned byte strings, the form `Conn::pipeline`
/// takes.
pub fn argv(parts: &[&str]) -> Vec<Vec<u8>> {
    parts.iter().map(|p| p.as_bytes().to_vec()).collect()
}

/// One command as a RESP array of bulk strings.
pub fn encode_command(args: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + args.iter().map(|a| a.len() + 16).sum::<usize>());
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Parses one reply from the front of `buf`: `Ok(None)` if it is incomplete,
/// `Ok(Some((reply, bytes used)))` if complete, `Err` if it is not RESP.
pub fn parse_reply(buf: &[u8]) -> Result<Option<(Reply, usize)>, String> {
    let mut pos = 0;
    match parse_at(buf, &mut pos, 0)? {
        Some(r) => Ok(Some((r, pos))),
        None => Ok(None),
    }
}

/// The line starting at `*pos` (without CRLF); advances past the CRLF.
fn line<'a>(buf: &'a [u8], pos: &mut usize) -> Result<Option<&'a [u8]>, String> {
    let rest = buf.get(*pos..).unwrap_or_default();
    match rest.windows(2).position(|w| w == b"\r\n") {
        Some(i) => {
            *pos += i + 2;
            Ok(Some(&rest[..i]))
        }
        None if rest.contains(&b'\n') => Err(format!(
            "bare LF in a RESP line: {:?}",
            String::from_utf8_lossy(rest)
        )),
        None => Ok(None),
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn number(b: &[u8]) -> Result<i64, String> {
    std::str::from_utf8(b)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad RESP integer {:?}", text(b)))
}

fn length(b: &[u8]) -> Result<Option<usize>, String> {
    match number(b)? {
        -1 => Ok(None),
        n if (0..=MAX_LEN).contains(&n) => Ok(Some(n as usize)),
        n => Err(format!("bad RESP length {n}")),
    }
}

/// A length-prefixed payload of `n` bytes followed by CRLF.
fn blob(buf: &[u8], pos: &mut usize, n: usize) -> Result<Option<Vec<u8>>, String> {
    let end = *pos + n;
    if buf.len() < end + 2 {
        return Ok(None);
    }
    if &buf[end..end + 2] != b"\r\n" {
        return Err(format!("blob of {n} bytes not followed by CRLF"));
    }
    let v = buf[*pos..end].to_vec();
    *pos = end + 2;
    Ok(Some(v))
}

fn elements(
    buf: &[u8],
    pos: &mut usize,
    n: usize,
    depth: usize,
) -> Result<Option<Vec<Reply>>, String> {
    let mut v = Vec::with_capacity(n.min(1024));
    for _ in 0..n {
        match parse_at(buf, pos, depth + 1)? {
            Some(r) => v.push(r),
            None => return Ok(None),
        }
    }
    Ok(Some(v))
}

fn pairs(
    buf: &[u8],
    pos: &mut usize,
    n: usize,
    depth: usize,
) -> Result<Option<Vec<(Reply, Reply)>>, String> {
    Ok(elements(buf, pos, n.saturating_mul(2), depth)?.map(|flat| {
        let mut it = flat.into_iter();
        let mut kv = Vec::with_capacity(n);
        while let (Some(k), Some(v)) = (it.next(), it.next()) {
            kv.push((k, v));
        }
        kv
    }))
}

fn parse_at(buf: &[u8], pos: &mut usize, depth: usize) -> Result<Option<Reply>, String> {
    if depth > MAX_DEPTH {
        return Err("RESP nesting too deep".into());
    }
    let Some(&tag) = buf.get(*pos) else {
        return Ok(None);
    };
    *pos += 1;
    let Some(head) = line(buf, pos)? else {
        return Ok(None);
    };
    let r = match tag {
        b'+' => Reply::Simple(text(head)),
        b'-' => Reply::Error(text(head)),
        b':' => Reply::Int(number(head)?),
        b'(' => Reply::BigNumber(text(head)),
        b'_' => Reply::Null,
        b'#' => match head {
            b"t" => Reply::Bool(true),
            b"f" => Reply::Bool(false),
            _ => return Err(format!("bad RESP boolean {:?}", text(head))),
        },
        b',' => Reply::Double(
            std::str::from_utf8(head)
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| format!("bad RESP double {:?}", text(head)))?,
        ),
        b'$' | b'!' | b'=' => {
            let Some(n) = length(head)? else {
                return if tag == b'$' {
                    Ok(Some(Reply::Bulk(None)))
                } else {
                    Err("null length on a blob error or verbatim string".into())
                };
            };
            let Some(v) = blob(buf, pos, n)? else {
                return Ok(None);
            };
            match tag {
                b'$' => Reply::Bulk(Some(v)),
                b'!' => Reply::Error(text(&v)),
                _ => Reply::Verbatim(text(&v)),
            }
        }
        b'*' | b'~' | b'>' => {
            let Some(n) = length(head)? else {
                return if tag == b'*' {
                    Ok(Some(Reply::Array(None)))
                } else {
                    Err("null length on a set or push".into())
                };
            };
            let Some(v) = elements(buf, pos, n, depth)? else {
                return Ok(None);
            };
            match tag {
                b'*' => Reply::Array(Some(v)),
                b'~' => Reply::Set(v),
                _ => Reply::Push(v),
            }
        }
        b'%' | b'|' => {
            let n = length(head)?.ok_or("null length on a map or attribute")?;
            let Some(kv) = pairs(buf, pos, n, depth)? else {
                return Ok(None);
            };
            if tag == b'%' {
                Reply::Map(kv)
            } else {
                let Some(inner) = parse_at(buf, pos, depth + 1)? else {
                    return Ok(None);
                };
                Reply::Attribute(kv, Box::new(inner))
            }
        }
        other => {
            return Err(format!(
                "unknown RESP type byte {:?} in {:?}",
                other as char,
                text(head)
            ))
        }
    };
    Ok(Some(r))
}

/// A blocking connection: 10 s read/write timeouts, TCP_NODELAY.
pub struct Conn {
    stream: TcpStream,
    addr: String,
    /// Read but not yet consumed: `buf[start..]`.
    buf: Vec<u8>,
    start: usize,
    eof: bool,
}

impl Conn {
    /// Connects or panics naming the address.
    pub fn connect(addr: &str) -> Conn {
        Conn::try_connect(addr).unwrap_or_else(|e| panic!("cannot connect to {addr}: {e}"))
    }

    pub fn try_connect(addr: &str) -> io::Result<Conn> {
        let sa = addr
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no address"))?;
        let stream = TcpStream::connect_timeout(&sa, IO_TIMEOUT)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(IO_TIMEOUT))?;
        stream.set_write_timeout(Some(IO_TIMEOUT))?;
        Ok(Conn {
            stream,
            addr: addr.to_string(),
            buf: Vec::with_capacity(64 * 1024),
            start: 0,
            eof: false,
        })
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The underlying socket (for shutdown, peer address, ...).
    pub fn stream(&self) -> &TcpStream {
        &self.stream
    }

    /// Sends one command and reads one reply.
    pub fn cmd(&mut self, args: &[&str]) -> Reply {
        let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.cmd_bytes(&bytes)
    }

    pub fn cmd_bytes(&mut self, args: &[&[u8]]) -> Reply {
        self.send(args);
        self.read_reply()
    }

    /// Writes one command without reading (for pipelining).
    pub fn send(&mut self, args: &[&[u8]]) {
        let bytes = encode_command(args);
        if let Err(e) = self.write_raw(&bytes) {
            panic!("write to {} failed: {e}", self.addr);
        }
    }

    /// Reads one reply (10 s deadline) or panics with the cause.
    pub fn read_reply(&mut self) -> Reply {
        self.try_read_reply(IO_TIMEOUT)
            .unwrap_or_else(|e| panic!("reading a reply from {} failed: {e}", self.addr))
    }

    /// Reads one reply within `timeout`. A timeout is `ErrorKind::TimedOut`
    /// and loses nothing; the peer closing is `UnexpectedEof`; garbage is
    /// `InvalidData`.
    pub fn try_read_reply(&mut self, timeout: Duration) -> io::Result<Reply> {
        let deadline = Instant::now() + timeout;
        loop {
            let parsed = parse_reply(&self.buf[self.start..])
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
            if let Some((reply, used)) = parsed {
                self.consume(used);
                return Ok(reply);
            }
            if self.eof {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "connection closed with {} unparsed bytes",
                        self.buf.len() - self.start
                    ),
                ));
            }
            self.fill(deadline)?;
        }
    }

    /// Writes every command in one write, then reads one reply per command.
    pub fn pipeline(&mut self, cmds: &[Vec<Vec<u8>>]) -> Vec<Reply> {
        let mut out = Vec::new();
        for c in cmds {
            let args: Vec<&[u8]> = c.iter().map(Vec::as_slice).collect();
            out.extend_from_slice(&encode_command(&args));
        }
        if let Err(e) = self.write_raw(&out) {
            panic!("pipeline write to {} failed: {e}", self.addr);
        }
        cmds.iter().map(|_| self.read_reply()).collect()
    }

    /// `pipeline` that reports a failure (write error, a reply not arriving
    /// within 10 s, a closed connection) instead of panicking.
    pub fn try_pipeline(&mut self, cmds: &[Vec<Vec<u8>>]) -> io::Result<Vec<Reply>> {
        let mut out = Vec::new();
        for c in cmds {
            let args: Vec<&[u8]> = c.iter().map(Vec::as_slice).collect();
            out.extend_from_slice(&encode_command(&args));
        }
        self.write_raw(&out)?;
        cmds.iter()
            .map(|_| self.try_read_reply(IO_TIMEOUT))
            .collect()
    }

    /// `try_pipeline` for frames already encoded (inline ones among them):
    /// one write, then one reply per frame.
    pub fn try_pipeline_frames(&mut self, frames: &[Vec<u8>]) -> io::Result<Vec<Reply>> {
        self.write_raw(&frames.concat())?;
        frames
            .iter()
            .map(|_| self.try_read_reply(IO_TIMEOUT))
            .collect()
    }

    pub fn write_raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)?;
        self.stream.flush()
    }

    /// Everything the peer sends until it closes (or `timeout` passes, or the
    /// connection is reset), including bytes already buffered.
    pub fn read_raw_until_closed(&mut self, timeout: Duration) -> Vec<u8> {
        let deadline = Instant::now() + timeout;
        while !self.eof {
            if self.fill(deadline).is_err() {
                break;
            }
        }
        let out = self.buf[self.start..].to_vec();
        self.consume(out.len());
        out
    }

    /// Waits up to `timeout` for the peer to close (EOF or reset). Bytes that
    /// arrive meanwhile stay buffered for `read_reply`.
    pub fn is_closed(&mut self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while !self.eof {
            match self.fill(deadline) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::TimedOut => return false,
                Err(_) => return true,
            }
        }
        true
    }

    /// One read into the buffer before `deadline`. Sets `eof` on a clean close;
    /// a reset also counts as closed.
    fn fill(&mut self, deadline: Instant) -> io::Result<usize> {
        let now = Instant::now();
        if now >= deadline {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "read timed out"));
        }
        // A zero timeout means "block forever" to std; keep at least 1 ms.
        let left = (deadline - now).max(Duration::from_millis(1));
        self.stream.set_read_timeout(Some(left))?;
        let mut chunk = [0u8; 64 * 1024];
        match self.stream.read(&mut chunk) {
            Ok(0) => {
                self.eof = true;
                Ok(0)
            }
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                Ok(n)
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                Err(io::Error::new(io::ErrorKind::TimedOut, "read timed out"))
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(0),
            Err(e) => {
                if matches!(
                    e.kind(),
                    io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted
                ) {
                    self.eof = true;
                }
                Err(e)
            }
        }
    }

    fn consume(&mut self, n: usize) {
        self.start += n;
        if self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        } else if self.start > 64 * 1024 && self.start * 2 > self.buf.len() {
            self.buf.drain(..self.start);
            self.start = 0;
        }
    }
}
