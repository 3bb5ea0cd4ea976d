//! Splits one configuration line into its arguments.
//!
//! Owns the quoting rules of the file format, which follow redis.conf so
//! that a line copied from a Redis configuration splits the same way:
//!
//! - Arguments are separated by ASCII whitespace.
//! - `"double quotes"` allow the escapes `\n \r \t \b \a \\ \"` and `\xHH`
//!   (two hex digits, any byte); any other `\c` stands for `c`.
//! - `'single quotes'` take everything literally except `\'`.
//! - A quote may open in the middle of an argument (`a"b c"` is `ab c`), but
//!   a closing quote must be followed by whitespace or the end of the line.
//! - Beyond redis.conf: a `#` that starts an argument (at the start of the
//!   line or after whitespace, outside quotes) begins a comment running to
//!   the end of the line. A `#` inside an argument (`a#b`) is just a byte.
//!
//! Invariants: works on bytes, never panics on any input, and never looks
//! at the meaning of the arguments; the caller turns them into directives.

/// A line split into arguments.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Split {
    /// The arguments, unescaped. Empty for blank and comment-only lines.
    pub args: Vec<Vec<u8>>,
    /// The source text the arguments came from: the line without leading
    /// whitespace and without a trailing comment (for error messages).
    pub text: String,
}

/// Why a line could not be split.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub(crate) enum LexError {
    /// A quoted argument is never closed.
    UnbalancedQuotes,
    /// A closing quote is followed by something other than whitespace.
    TextAfterQuote,
}

impl LexError {
    pub(crate) fn message(self) -> &'static str {
        match self {
            LexError::UnbalancedQuotes => "unbalanced quotes",
            LexError::TextAfterQuote => "a closing quote must be followed by a space",
        }
    }
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// C's `isspace` in the C locale.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

enum Quote {
    None,
    Double,
    Single,
}

/// Splits `line` (without its newline). On error returns the error and the
/// line's text so the caller can still quote it.
pub(crate) fn split_line(line: &[u8]) -> Result<Split, (LexError, String)> {
    let start = line
        .iter()
        .position(|&b| !is_space(b))
        .unwrap_or(line.len());
    let mut args = Vec::new();
    let mut pos = start;
    let mut text_end = start;
    loop {
        while line.get(pos).is_some_and(|&b| is_space(b)) {
            pos += 1;
        }
        match line.get(pos) {
            None | Some(b'#') => break,
            Some(_) => {}
        }
        match split_arg(line, pos) {
            Ok((arg, end)) => {
                args.push(arg);
                pos = end;
                text_end = end;
            }
            Err(e) => {
                let text = String::from_utf8_lossy(line.get(start..).unwrap_or_default());
                return Err((e, text.trim_end().to_string()));
            }
        }
    }
    let text = String::from_utf8_lossy(line.get(start..text_end).unwrap_or_default()).into_owned();
    Ok(Split { args, text })
}

/// Reads one argument starting at `pos` (not whitespace). Returns it and the
/// position just after it.
fn split_arg(line: &[u8], mut pos: usize) -> Result<(Vec<u8>, usize), LexError> {
    let mut arg = Vec::new();
    let mut quote = Quote::None;
    loop {
        let Some(&b) = line.get(pos) else {
            return match quote {
                Quote::None => Ok((arg, pos)),
                _ => Err(LexError::UnbalancedQuotes),
            };
        };
        match quote {
            Quote::None => {
                if is_space(b) {
                    return Ok((arg, pos));
                }
                match b {
                    b'"' => quote = Quote::Double,
                    b'\'' => quote = Quote::Single,
                    _ => arg.push(b),
                }
                pos += 1;
            }
            Quote::Double => match b {
                b'\\' => {
                    let next = line.get(pos + 1).copied();
                    let hex = (line.get(pos + 2).copied().and_then(hex_value))
                        .zip(line.get(pos + 3).copied().and_then(hex_value));
                    match (next, hex) {
                        (Some(b'x'), Some((hi, lo))) => {
                            arg.push(hi << 4 | lo);
                            pos += 4;
                        }
                        (Some(escaped), _) => {
                            arg.push(match escaped {
                                b'n' => b'\n',
                                b'r' => b'\r',
                                b't' => b'\t',
                                b'b' => 0x08,
                                b'a' => 0x07,
                                other => other,
                            });
                            pos += 2;
                        }
                        (None, _) => return Err(LexError::UnbalancedQuotes),
                    }
                }
                b'"' => return close_quote(line, pos, arg),
                _ => {
                    arg.push(b);
                    pos += 1;
                }
            },
            Quote::Single => match (b, line.get(pos + 1)) {
                (b'\\', Some(b'\'')) => {
                    arg.push(b'\'');
                    pos += 2;
                }
                (b'\'', _) => return close_quote(line, pos, arg),
                _ => {
                    arg.push(b);
                    pos += 1;
                }
            },
        }
    }
}

/// A quote closes at `pos`: the argument ends there, and only whitespace or
/// the end of the line may follow.
fn close_quote(line: &[u8], pos: usize, arg: Vec<u8>) -> Result<(Vec<u8>, usize), LexError> {
    match line.get(pos + 1) {
        Some(&b) if !is_space(b) => Err(LexError::TextAfterQuote),
        _ => Ok((arg, pos + 1)),
    }
}

#[cfg(test)]
mod tests {
    use super::{split_line, LexError};

    fn args(line: &str) -> Vec<Vec<u8>> {
        match split_line(line.as_bytes()) {
            Ok(split) => split.args,
            Err((e, _)) => panic!("{line:?} failed: {e:?}"),
        }
    }

    fn strs(line: &str) -> Vec<String> {
        args(line)
            .into_iter()
            .map(|a| String::from_utf8(a).unwrap())
            .collect()
    }

    #[test]
    fn plain_words_and_whitespace() {
        assert_eq!(strs("port 7777"), ["port", "7777"]);
        assert_eq!(
            strs("  \tbind   127.0.0.1\t-::1  \r"),
            ["bind", "127.0.0.1", "-::1"]
        );
        assert!(strs("").is_empty());
        assert!(strs("   \t ").is_empty());
    }

    #[test]
    fn comments() {
        assert!(strs("# port 1").is_empty());
        assert!(strs("    # indented comment").is_empty());
        assert!(strs("#").is_empty());
        assert_eq!(strs("port 7777 # trailing"), ["port", "7777"]);
        assert_eq!(strs("port 7777\t#trailing"), ["port", "7777"]);
        // A '#' inside an argument or inside quotes is not a comment.
        assert_eq!(strs("logfile a#b"), ["logfile", "a#b"]);
        assert_eq!(strs("logfile \"#x\""), ["logfile", "#x"]);
        assert_eq!(strs("logfile '# y'"), ["logfile", "# y"]);
    }

    #[test]
    fn text_excludes_comment_and_indent() {
        let split = split_line(b"   port  7777   # note").unwrap();
        assert_eq!(split.text, "port  7777");
        let split = split_line(b"logfile \"a b\"").unwrap();
        assert_eq!(split.text, "logfile \"a b\"");
    }

    #[test]
    fn double_quotes_and_escapes() {
        assert_eq!(
            strs(r#"logfile "/var/log/my file.log""#),
            ["logfile", "/var/log/my file.log"]
        );
        assert_eq!(args(r#"x "a\nb\rc\td\\e\"f""#)[1], b"a\nb\rc\td\\e\"f");
        assert_eq!(args(r#"x "\x41\x7a\xff\x00""#)[1], b"Az\xff\x00");
        assert_eq!(args(r#"x "\b\a""#)[1], b"\x08\x07");
        // \x without two hex digits is just an 'x'; unknown escapes are the byte.
        assert_eq!(args(r#"x "\xg1\q""#)[1], b"xg1q");
        assert_eq!(args(r#"x "\x4""#)[1], b"x4");
        assert_eq!(strs(r#"logfile """#), ["logfile", ""]);
        assert_eq!(strs(r#"a"b c"  d"#), ["ab c", "d"]);
    }

    #[test]
    fn single_quotes() {
        assert_eq!(strs(r"x 'a b'"), ["x", "a b"]);
        assert_eq!(strs(r"x 'it\'s'"), ["x", "it's"]);
        // Only \' is an escape inside single quotes.
        assert_eq!(strs(r"x 'a\nb\\c'"), ["x", r"a\nb\\c"]);
        // ... so a backslash right before the closing quote escapes it.
        assert!(split_line(br"x 'a\\'").is_err());
        assert_eq!(strs(r#"x '"'"#), ["x", "\""]);
        assert_eq!(strs("x ''"), ["x", ""]);
    }

    #[test]
    fn quote_errors() {
        for line in [
            r#"logfile "abc"#,
            r"logfile 'abc",
            r#"logfile "abc\"#,
            r#"x "a\""#,
        ] {
            let (err, text) = split_line(line.as_bytes()).unwrap_err();
            assert_eq!(err, LexError::UnbalancedQuotes, "{line}");
            assert_eq!(text, line);
        }
        for line in [r#"logfile "abc"def"#, r"x 'a'b", r#"x """"#] {
            let (err, _) = split_line(line.as_bytes()).unwrap_err();
            assert_eq!(err, LexError::TextAfterQuote, "{line}");
        }
    }
}
