//! The key a script names literally: where a script or function called
//! without declared keys (`EVAL body 0`, `FCALL f 0`) is sent.
//!
//! mithril presents one server owning every slot, but a node runs a script
//! only on its own keys. A proxy cannot know which keys a script touches;
//! many scripts, though, name them as string literals:
//! `redis.call('lpush', 'l', ...)`. The scanner reads the body as Lua
//! tokens (comments and strings skipped as Lua reads them) and returns the
//! first literal key of the first `redis.call` / `redis.pcall` (or
//! `server.` ...) whose command has a key at a fixed position (its first
//! key spec begins at an index: GET at 1, BITOP at 2) and whose argument
//! there is a string literal; the arguments before it must be single
//! tokens (a literal, a number, a name such as `ARGV[1]`). Calls whose key
//! is computed (`KEYS[1]`, `'k' .. i`, a variable) are passed over.
//!
//! It is a heuristic, documented as one: a script whose keys span several
//! slots still fails on the node as it would on a cluster node; a key
//! computed at run time is not seen.
//!
//! Bounds: at most [`SCAN_LIMIT`] bytes of a body are read (a call past
//! them is not seen); the caller remembers the result with the script
//! (`Registry`), so a body is scanned once.

use crate::command::{self, key_flags, BeginSearch, FindKeys};

/// How much of a body the scanner reads.
pub const SCAN_LIMIT: usize = 64 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok<'a> {
    Name(&'a [u8]),
    /// A string literal's value; None when it has an escape the scanner
    /// does not decode.
    Str(Option<Vec<u8>>),
    Number,
    Punct(u8),
    /// The end of the (bounded) text, or something the scanner cannot
    /// read past (an unterminated string or comment).
    End,
}

#[derive(Clone, Copy)]
struct Lexer<'a> {
    code: &'a [u8],
    i: usize,
}

impl<'a> Lexer<'a> {
    fn new(code: &'a [u8]) -> Lexer<'a> {
        let code = &code[..code.len().min(SCAN_LIMIT)];
        Lexer { code, i: 0 }
    }

    fn at(&self, j: usize) -> Option<u8> {
        self.code.get(j).copied()
    }

    /// The level of a long bracket opening at `j` (`[[`: 0, `[==[`: 2).
    fn long_open(&self, j: usize) -> Option<usize> {
        if self.at(j) != Some(b'[') {
            return None;
        }
        let level = self.code[j + 1..]
            .iter()
            .take_while(|&&b| b == b'=')
            .count();
        (self.at(j + 1 + level) == Some(b'[')).then_some(level)
    }

    /// The text of a long bracket of `level` whose body starts at `j`;
    /// the lexer moves past its close. None: never closed.
    fn long_body(&mut self, j: usize, level: usize) -> Option<&'a [u8]> {
        let rest = &self.code[j..];
        let end = rest.windows(level + 2).position(|w| {
            w[0] == b']' && w[level + 1] == b']' && w[1..=level].iter().all(|&b| b == b'=')
        })?;
        self.i = j + end + level + 2;
        Some(&rest[..end])
    }

    fn next(&mut self) -> Tok<'a> {
        loop {
            while self.at(self.i).is_some_and(|b| b.is_ascii_whitespace()) {
                self.i += 1;
            }
            if self.at(self.i) == Some(b'-') && self.at(self.i + 1) == Some(b'-') {
                let j = self.i + 2;
                if let Some(level) = self.long_open(j) {
                    if self.long_body(j + level + 2, level).is_none() {
                        return Tok::End;
                    }
                } else {
                    self.i = self.code[j..]
                        .iter()
                        .position(|&b| b == b'\n')
                        .map_or(self.code.len(), |p| j + p);
                }
                continue;
            }
            break;
        }
        let Some(c) = self.at(self.i) else {
            return Tok::End;
        };
        let start = self.i;
        if c.is_ascii_alphabetic() || c == b'_' {
            while self
                .at(self.i)
                .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
            {
                self.i += 1;
            }
            return Tok::Name(&self.code[start..self.i]);
        }
        if c.is_ascii_digit()
            || (c == b'.' && self.at(self.i + 1).is_some_and(|b| b.is_ascii_digit()))
        {
            while let Some(b) = self.at(self.i) {
                let exp_sign = matches!(b, b'+' | b'-')
                    && matches!(self.at(self.i - 1), Some(b'e' | b'E'))
                    && !self.code[start..].starts_with(b"0x");
                if !(b.is_ascii_alphanumeric() || b == b'.' || exp_sign) {
                    break;
                }
                self.i += 1;
            }
            return Tok::Number;
        }
        if c == b'\'' || c == b'"' {
            return self.quoted(c);
        }
        if let Some(level) = self.long_open(start) {
            let mut j = start + level + 2;
            // A newline right after the opening bracket is not part of it.
            match (self.at(j), self.at(j + 1)) {
                (Some(b'\r'), Some(b'\n')) | (Some(b'\n'), Some(b'\r')) => j += 2,
                (Some(b'\n' | b'\r'), _) => j += 1,
                _ => {}
            }
            return match self.long_body(j, level) {
                Some(body) => Tok::Str(Some(body.to_vec())),
                None => Tok::End,
            };
        }
        self.i += 1;
        Tok::Punct(c)
    }

    /// A '...' or "..." literal (the lexer is on its quote).
    fn quoted(&mut self, q: u8) -> Tok<'a> {
        self.i += 1;
        let mut out = Some(Vec::new());
        loop {
            let Some(b) = self.at(self.i) else {
                return Tok::End;
            };
            self.i += 1;
            match b {
                _ if b == q => return Tok::Str(out),
                b'\n' | b'\r' => return Tok::End, // unfinished string
                b'\\' => {
                    let Some(e) = self.at(self.i) else {
                        return Tok::End;
                    };
                    self.i += 1;
                    let decoded = match e {
                        b'a' => Some(7),
                        b'b' => Some(8),
                        b'f' => Some(12),
                        b'n' | b'\n' => Some(b'\n'),
                        b'r' => Some(b'\r'),
                        b't' => Some(b'\t'),
                        b'v' => Some(11),
                        b'\\' | b'"' | b'\'' => Some(e),
                        b'0'..=b'9' => {
                            let mut v = u32::from(e - b'0');
                            for _ in 0..2 {
                                match self.at(self.i) {
                                    Some(d @ b'0'..=b'9') => {
                                        v = v * 10 + u32::from(d - b'0');
                                        self.i += 1;
                                    }
                                    _ => break,
                                }
                            }
                            u8::try_from(v).ok()
                        }
                        _ => None,
                    };
                    match (decoded, out.as_mut()) {
                        (Some(d), Some(o)) => o.push(d),
                        _ => out = None,
                    }
                }
                _ => {
                    if let Some(o) = out.as_mut() {
                        o.push(b);
                    }
                }
            }
        }
    }
}

/// The argv index of a command's key when it is always at one place: its
/// first key spec begins at an index and takes a range (not a count).
fn fixed_key_index(name: &[u8]) -> Option<usize> {
    let cmd = command::lookup(name)?;
    if !cmd.subcommands.is_empty() {
        return None;
    }
    let spec = cmd.key_specs.first()?;
    if spec.flags & (key_flags::NOT_KEY | key_flags::INCOMPLETE) != 0 {
        return None;
    }
    match (spec.begin, spec.find) {
        (BeginSearch::Index(i), FindKeys::Range { .. }) if i > 0 => Some(i as usize),
        _ => None,
    }
}

/// One argument before the key: a single token (a literal, a number, a
/// name with at most one `[index]` or `.field`), then a comma.
fn skip_simple_arg(lx: &mut Lexer) -> Option<()> {
    match lx.next() {
        Tok::Str(_) | Tok::Number => {}
        Tok::Name(_) => {
            let mut after = *lx;
            match after.next() {
                Tok::Punct(b'[') => {
                    match lx.next() {
                        Tok::Punct(b'[') => {}
                        _ => return None,
                    }
                    if !matches!(lx.next(), Tok::Number | Tok::Name(_) | Tok::Str(_)) {
                        return None;
                    }
                    if lx.next() != Tok::Punct(b']') {
                        return None;
                    }
                }
                Tok::Punct(b'.') => {
                    lx.next();
                    if !matches!(lx.next(), Tok::Name(_)) {
                        return None;
                    }
                }
                _ => {}
            }
        }
        _ => return None,
    }
    (lx.next() == Tok::Punct(b',')).then_some(())
}

/// After `redis` / `server`: `.call(` or `.pcall(`, the command literal,
/// and the literal key at its fixed position, if all are there.
fn call_key(mut lx: Lexer) -> Option<Vec<u8>> {
    if lx.next() != Tok::Punct(b'.') {
        return None;
    }
    match lx.next() {
        Tok::Name(b"call" | b"pcall") => {}
        _ => return None,
    }
    if lx.next() != Tok::Punct(b'(') {
        return None;
    }
    let Tok::Str(Some(name)) = lx.next() else {
        return None;
    };
    let at = fixed_key_index(&name)?;
    if lx.next() != Tok::Punct(b',') {
        return None;
    }
    for _ in 1..at {
        skip_simple_arg(&mut lx)?;
    }
    let Tok::Str(Some(key)) = lx.next() else {
        return None;
    };
    // Not a part of a larger expression (`'k' .. i`).
    matches!(lx.next(), Tok::Punct(b',' | b')')).then_some(key)
}

/// Scan from where `lx` is. With `block`, the lexer is just past a
/// `function` keyword and the scan stops at its matching `end`.
fn scan(lx: &mut Lexer, block: bool) -> Option<Vec<u8>> {
    let mut depth: usize = 1;
    loop {
        match lx.next() {
            Tok::End => return None,
            Tok::Name(b"function" | b"do" | b"if" | b"repeat") => depth += 1,
            Tok::Name(b"end" | b"until") => {
                depth = depth.saturating_sub(1);
                if block && depth == 0 {
                    return None;
                }
            }
            Tok::Name(b"redis" | b"server") => {
                if let Some(k) = call_key(*lx) {
                    return Some(k);
                }
            }
            _ => {}
        }
    }
}

/// The first literal key of a script body (see the module's doc).
pub fn first_literal_key(code: &[u8]) -> Option<Vec<u8>> {
    scan(&mut Lexer::new(code), false)
}

/// Where the code of `function` starts in a library: the lexer just past
/// the `function` keyword of the callback `redis.register_function('f',
/// function ... end)` names, or of `function g` / `local function g` /
/// `g = function` when it names a callback `g`.
fn function_body<'a>(code: &'a [u8], function: &[u8]) -> Option<Lexer<'a>> {
    let mut lx = Lexer::new(code);
    let callback = loop {
        match lx.next() {
            Tok::End => return None,
            Tok::Name(b"register_function") => {
                let mut at = lx;
                if at.next() != Tok::Punct(b'(') {
                    continue;
                }
                match at.next() {
                    Tok::Str(Some(n)) if n == function => {}
                    _ => continue,
                }
                if at.next() != Tok::Punct(b',') {
                    return None;
                }
                match at.next() {
                    Tok::Name(b"function") => return Some(at),
                    Tok::Name(g) => break g,
                    _ => return None,
                }
            }
            _ => {}
        }
    };
    // A named callback: its definition.
    let mut lx = Lexer::new(code);
    let mut prev: [Tok; 2] = [Tok::End, Tok::End];
    loop {
        let t = lx.next();
        match (&prev, &t) {
            (_, Tok::End) => return None,
            ([_, Tok::Name(b"function")], Tok::Name(g)) if *g == callback => return Some(lx),
            ([Tok::Name(g), Tok::Punct(b'=')], Tok::Name(b"function")) if *g == callback => {
                return Some(lx)
            }
            _ => {}
        }
        prev = [std::mem::replace(&mut prev[1], Tok::End), t];
    }
}

/// The first literal key of `function` in a library's code: in the code
/// of its callback when the scanner finds it, else in the whole library.
pub fn function_literal_key(code: &[u8], function: &[u8]) -> Option<Vec<u8>> {
    match function_body(code, function) {
        Some(mut lx) => scan(&mut lx, true),
        None => first_literal_key(code),
    }
}
