//! A reader for the part of YAML that twemproxy configurations use: nested
//! block mappings (`key: value`, `key:` with an indented block), block
//! sequences (`- item`, also at the indentation of their key), flow
//! sequences of scalars (`[a, b]`), plain, 'single' and "double" quoted
//! scalars, `#` comments and `---` document markers.
//!
//! Everything else (anchors, tags, multi-line scalars, flow mappings,
//! mappings inside sequences) is refused with an error naming the line,
//! rather than guessed at.
//!
//! Invariants: never panics on any input; every value keeps the line it
//! was written on; keys of one mapping are unique (as YAML requires).

/// A parsed value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Value {
    /// A scalar, unquoted and unescaped.
    Scalar(String),
    /// A sequence: each item with its line.
    Seq(Vec<(usize, Value)>),
    /// A mapping, in file order.
    Map(Vec<Entry>),
    /// `key:` with nothing after or under it.
    Null,
}

/// One `key: value` of a mapping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub key: String,
    pub line: usize,
    pub value: Value,
}

/// A syntax error at a line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct YamlError {
    pub line: usize,
    pub message: String,
}

fn err<T>(line: usize, message: impl Into<String>) -> Result<T, YamlError> {
    Err(YamlError {
        line,
        message: message.into(),
    })
}

/// One significant line: number, indentation, content without comment.
struct Line {
    number: usize,
    indent: usize,
    text: String,
}

/// Parses a document whose top level is a mapping.
pub(crate) fn parse(bytes: &[u8]) -> Result<Vec<Entry>, YamlError> {
    let mut lines = Vec::new();
    for (i, raw) in bytes.split(|&b| b == b'\n').enumerate() {
        let number = i + 1;
        let Ok(raw) = std::str::from_utf8(raw) else {
            return err(number, "the line is not valid UTF-8");
        };
        let raw = raw.strip_suffix('\r').unwrap_or(raw);
        let indent = raw.len() - raw.trim_start_matches(' ').len();
        let text = strip_comment(&raw[indent..]).trim_end();
        if text.is_empty() {
            continue;
        }
        if text.starts_with('\t') {
            return err(number, "tabs cannot indent YAML; use spaces");
        }
        if indent == 0 && (text == "---" || text == "..." || text.starts_with('%')) {
            continue;
        }
        lines.push(Line {
            number,
            indent,
            text: text.to_string(),
        });
    }
    let mut p = Parser { lines, pos: 0 };
    let Some(first) = p.lines.first() else {
        return Ok(Vec::new());
    };
    if first.indent != 0 {
        return err(first.number, "the document must start at the first column");
    }
    if is_item(&first.text) {
        return err(
            first.number,
            "the document is a list; a twemproxy configuration is a mapping of pool names",
        );
    }
    let map = p.mapping(0)?;
    if let Some(extra) = p.lines.get(p.pos) {
        return err(extra.number, "unexpected indentation");
    }
    Ok(map)
}

/// Cuts a comment: `#` at the start or after a space, outside quotes.
fn strip_comment(text: &str) -> &str {
    let mut quote: Option<char> = None;
    let mut prev_space = true;
    for (i, c) in text.char_indices() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '#' && prev_space => return &text[..i],
            None if (c == '"' || c == '\'') && prev_space => quote = Some(c),
            None => {}
        }
        prev_space = c == ' ' || c == '\t';
    }
    text
}

fn is_item(text: &str) -> bool {
    text == "-" || text.starts_with("- ")
}

struct Parser {
    lines: Vec<Line>,
    pos: usize,
}

impl Parser {
    fn mapping(&mut self, indent: usize) -> Result<Vec<Entry>, YamlError> {
        let mut entries: Vec<Entry> = Vec::new();
        while let Some(line) = self.lines.get(self.pos) {
            if line.indent < indent {
                break;
            }
            let number = line.number;
            if line.indent > indent {
                return err(number, "unexpected indentation");
            }
            if is_item(&line.text) {
                return err(number, "a list item where 'key: value' was expected");
            }
            let Some((key, rest)) = split_key(&line.text) else {
                return err(
                    number,
                    format!("expected 'key: value', found '{}'", line.text),
                );
            };
            let key = scalar(key, number)?;
            let rest = rest.to_string();
            self.pos += 1;
            let value = if rest.is_empty() {
                match self.lines.get(self.pos) {
                    Some(next) if next.indent > indent => {
                        let deeper = next.indent;
                        self.block(deeper)?
                    }
                    Some(next) if next.indent == indent && is_item(&next.text) => {
                        self.sequence(indent)?
                    }
                    _ => Value::Null,
                }
            } else {
                inline_value(&rest, number)?
            };
            if entries.iter().any(|e| e.key == key) {
                return err(number, format!("key '{key}' appears twice in one mapping"));
            }
            entries.push(Entry {
                key,
                line: number,
                value,
            });
        }
        Ok(entries)
    }

    fn block(&mut self, indent: usize) -> Result<Value, YamlError> {
        match self.lines.get(self.pos) {
            Some(line) if is_item(&line.text) => self.sequence(indent),
            _ => Ok(Value::Map(self.mapping(indent)?)),
        }
    }

    fn sequence(&mut self, indent: usize) -> Result<Value, YamlError> {
        let mut items = Vec::new();
        while let Some(line) = self.lines.get(self.pos) {
            if line.indent < indent || (line.indent == indent && !is_item(&line.text)) {
                break;
            }
            let number = line.number;
            if line.indent > indent {
                return err(number, "unexpected indentation");
            }
            let text = line.text[1..].trim().to_string();
            self.pos += 1;
            let value = if text.is_empty() {
                match self.lines.get(self.pos) {
                    Some(next) if next.indent > indent => {
                        let deeper = next.indent;
                        self.block(deeper)?
                    }
                    _ => Value::Null,
                }
            } else if split_key(&text).is_some() && !text.starts_with(['"', '\'']) {
                return err(
                    number,
                    "mappings inside lists are not part of twemproxy's format",
                );
            } else {
                inline_value(&text, number)?
            };
            items.push((number, value));
        }
        Ok(Value::Seq(items))
    }
}

/// Splits `key: rest` (or `key:`) at the first `:` followed by a space or
/// the end of the line, outside quotes.
fn split_key(text: &str) -> Option<(&str, &str)> {
    let mut quote: Option<char> = None;
    let bytes = text.as_bytes();
    for (i, c) in text.char_indices() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if i == 0 && (c == '"' || c == '\'') => quote = Some(c),
            None if c == ':' => {
                let next = bytes.get(i + 1).copied();
                if next.is_none() || next == Some(b' ') {
                    return Some((text[..i].trim_end(), text[i + 1..].trim()));
                }
            }
            None => {}
        }
    }
    None
}

/// A value on the same line as its key or dash: a flow sequence or a
/// scalar.
fn inline_value(text: &str, line: usize) -> Result<Value, YamlError> {
    if let Some(inner) = text.strip_prefix('[') {
        let Some(inner) = inner.strip_suffix(']') else {
            return err(
                line,
                "a flow sequence '[' must close with ']' on the same line",
            );
        };
        let mut items = Vec::new();
        for part in split_flow(inner, line)? {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            if part.starts_with(['[', '{']) {
                return err(line, "nested flow collections are not supported");
            }
            items.push((line, Value::Scalar(scalar(part, line)?)));
        }
        return Ok(Value::Seq(items));
    }
    if text.starts_with('{') {
        return err(
            line,
            "flow mappings ({...}) are not supported; if this is a hash_tag, quote it: \"{}\"",
        );
    }
    if text.starts_with(['&', '*', '!', '|', '>']) {
        return err(
            line,
            "anchors, aliases, tags and block scalars are not part of twemproxy's format",
        );
    }
    Ok(Value::Scalar(scalar(text, line)?))
}

/// Splits a flow sequence's inside at commas outside quotes.
fn split_flow(inner: &str, line: usize) -> Result<Vec<&str>, YamlError> {
    let mut parts = Vec::new();
    let mut quote: Option<char> = None;
    let mut start = 0;
    for (i, c) in inner.char_indices() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '"' || c == '\'' => quote = Some(c),
            None if c == ',' => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            None => {}
        }
    }
    if quote.is_some() {
        return err(line, "unbalanced quotes");
    }
    parts.push(&inner[start..]);
    Ok(parts)
}

/// A scalar as written: plain (trimmed), 'single' ('' is a quote) or
/// "double" (backslash escapes).
fn scalar(text: &str, line: usize) -> Result<String, YamlError> {
    let text = text.trim();
    if let Some(rest) = text.strip_prefix('\'') {
        let mut out = String::new();
        let mut chars = rest.chars();
        while let Some(c) = chars.next() {
            if c == '\'' {
                if chars.as_str().starts_with('\'') {
                    chars.next();
                    out.push('\'');
                    continue;
                }
                if !chars.as_str().trim().is_empty() {
                    return err(line, "text after a closing quote");
                }
                return Ok(out);
            }
            out.push(c);
        }
        return err(line, "unbalanced quotes");
    }
    if let Some(rest) = text.strip_prefix('"') {
        let mut out = String::new();
        let mut chars = rest.chars();
        while let Some(c) = chars.next() {
            match c {
                '"' => {
                    if !chars.as_str().trim().is_empty() {
                        return err(line, "text after a closing quote");
                    }
                    return Ok(out);
                }
                '\\' => match chars.next() {
                    Some('n') => out.push('\n'),
                    Some('t') => out.push('\t'),
                    Some('r') => out.push('\r'),
                    Some('0') => out.push('\0'),
                    Some(c @ ('"' | '\\' | '/' | ' ')) => out.push(c),
                    Some(other) => {
                        return err(
                            line,
                            format!("unknown escape '\\{other}' in a quoted string"),
                        )
                    }
                    None => return err(line, "unbalanced quotes"),
                },
                c => out.push(c),
            }
        }
        return err(line, "unbalanced quotes");
    }
    Ok(text.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> Value {
        Value::Scalar(v.to_string())
    }

    #[test]
    fn pools_with_scalars_and_sequences() {
        let doc = b"# comment\n---\nalpha:\n  listen: 127.0.0.1:22121   # trailing\n  hash_tag: \"{}\"\n  \
                    servers:\n   - 127.0.0.1:6379:1\n   - '10.0.0.2:6379:1 two'\n  redis: true\n\
                    beta:\n  servers:\n  - a:1:1\n  empty:\n  flow: [x, \"y, z\" , ]\n";
        let top = parse(doc).unwrap();
        assert_eq!(top.len(), 2);
        assert_eq!((top[0].key.as_str(), top[0].line), ("alpha", 3));
        let Value::Map(alpha) = &top[0].value else {
            panic!("{top:?}")
        };
        assert_eq!(alpha[0].value, s("127.0.0.1:22121"));
        assert_eq!(alpha[1].value, s("{}"));
        assert_eq!(
            alpha[2].value,
            Value::Seq(vec![
                (7, s("127.0.0.1:6379:1")),
                (8, s("10.0.0.2:6379:1 two"))
            ])
        );
        assert_eq!((alpha[3].key.as_str(), alpha[3].line), ("redis", 9));
        let Value::Map(beta) = &top[1].value else {
            panic!()
        };
        assert_eq!(beta[0].value, Value::Seq(vec![(12, s("a:1:1"))]));
        assert_eq!(beta[1].value, Value::Null);
        assert_eq!(
            beta[2].value,
            Value::Seq(vec![(14, s("x")), (14, s("y, z"))])
        );
    }

    #[test]
    fn errors_name_the_line() {
        let cases: &[(&[u8], usize, &str)] = &[
            (b"a:\n  b: 1\n    c: 2\n", 3, "unexpected indentation"),
            (b"a:\n\tb: 1\n", 2, "tabs"),
            (b"a:\n  b 1\n", 2, "expected 'key: value'"),
            (b"a:\n  b: 1\n  b: 2\n", 3, "appears twice"),
            (b"a:\n  h: {}\n", 2, "quote it"),
            (b"a:\n  h: \"{}\n", 2, "unbalanced"),
            (b"- a\n", 1, "is a list"),
            (b"a:\n  s:\n  - k: v\n", 3, "mappings inside lists"),
            (b"a:\n  b: &x 1\n", 2, "anchors"),
            (b"a:\n  b: [1, 2\n", 2, "must close"),
            (b"a:\n  b: \xff\n", 2, "UTF-8"),
        ];
        for &(doc, line, text) in cases {
            let e = parse(doc).unwrap_err();
            assert_eq!(e.line, line, "{:?}: {e:?}", String::from_utf8_lossy(doc));
            assert!(
                e.message.contains(text),
                "{:?}: {e:?}",
                String::from_utf8_lossy(doc)
            );
        }
    }

    #[test]
    fn quoting_and_comments() {
        assert_eq!(strip_comment("a: b # c"), "a: b ");
        assert_eq!(strip_comment("a: 'b # c'"), "a: 'b # c'");
        assert_eq!(strip_comment("a: b#c"), "a: b#c");
        assert_eq!(scalar("'it''s'", 1).unwrap(), "it's");
        assert_eq!(scalar("\"a\\\"b\\n\"", 1).unwrap(), "a\"b\n");
        assert_eq!(split_key("host:6379:1"), None);
        assert_eq!(split_key("k: v:w"), Some(("k", "v:w")));
        assert_eq!(split_key("k:"), Some(("k", "")));
        // Arbitrary bytes never panic.
        for doc in [&b"::\n - \n-\n  -"[..], b"a:\n - [\n", b"\"", b"a: '"] {
            let _ = parse(doc);
        }
    }
}
