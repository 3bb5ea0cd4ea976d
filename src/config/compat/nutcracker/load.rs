//! The YAML of a `nutcracker.yml`, read into a small tree of values that
//! keep their lines: a mapping's entries in file order, each with its
//! key's line, and a list's items, each with its own.
//!
//! The file is read with `saphyr-parser`, the event parser of the saphyr
//! project (the maintained line of yaml-rust and yaml-rust2), and the
//! events are turned into the tree here ([`load`]).
//!
//! Why a crate: YAML's quoting, flow style, anchors and block scalars are
//! a grammar of their own, and the hand-written subset this replaced
//! refused files libyaml (nutcracker's parser) takes. Why the event parser
//! rather than a document loader (saphyr's, yaml-rust2's): every event
//! carries its place, so every key and value keeps its line for messages;
//! a loader's hash map keeps the last of two equal keys without a word,
//! where nutcracker refuses them; and aliases are expanded here under a
//! bound of our own. What it costs (measured when it came in, see
//! doc/architecture.md): four crates (saphyr-parser, arraydeque,
//! thiserror and its derive, built on the `syn` serde_derive already
//! needs), about 2 s of CPU in a debug build and 6 s in a release one,
//! 137 KiB of stripped binary. 0.0.x because 0.3 needs Rust 1.85.
//!
//! Invariants: never panics on any bytes: nesting and alias expansion are
//! bounded ([`MAX_DEPTH`], [`MAX_VALUES`]), and the recursion is as deep
//! as the nesting. Keys are single values, unique in their mapping.

use std::collections::HashMap;

use saphyr_parser::{Event, Parser, ScalarStyle, Span, StrInput};

/// Deepest nesting of lists and mappings read: a twemproxy file needs
/// three (pools, a pool's settings, its servers).
pub(super) const MAX_DEPTH: usize = 8;
/// Most values (scalars, lists, mappings, aliases counted expanded) a file
/// may hold: far more than any twemproxy file, far less than an alias bomb.
pub(super) const MAX_VALUES: usize = 200_000;

/// A value of the file: a scalar's text (empty for a missing value), a
/// list, or a mapping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Node {
    Scalar(String),
    Seq(Vec<Item>),
    Map(Vec<Entry>),
}

/// One item of a list, with its line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Item {
    pub line: usize,
    pub node: Node,
}

/// One `key: value` of a mapping, with the key's line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Entry {
    pub key: String,
    pub line: usize,
    pub value: Node,
}

/// A file that is not YAML, or not YAML twemproxy could read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct YamlError {
    pub line: usize,
    pub message: String,
}

fn err<T>(line: usize, message: impl Into<String>) -> Result<T, YamlError> {
    Err(YamlError {
        line,
        message: message.into(),
    })
}

/// Reads the one document of `bytes`, a mapping of pool names, into its
/// entries in file order (none for an empty file).
pub(super) fn load(bytes: &[u8]) -> Result<Vec<Entry>, YamlError> {
    let text = std::str::from_utf8(bytes).or_else(|e| {
        let line = bytes[..e.valid_up_to()]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1;
        err(line, "the line is not valid UTF-8")
    })?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut loader = Loader {
        parser: Parser::new_from_str(text),
        anchors: HashMap::new(),
        values: 0,
    };
    let mut root: Option<(usize, Node)> = None;
    loop {
        let (event, span) = loader.next()?;
        match event {
            Event::StreamStart | Event::DocumentEnd | Event::Nothing => {}
            Event::StreamEnd => break,
            Event::DocumentStart(_) if root.is_some() => {
                return err(
                    span.start.line(),
                    "a second YAML document: a twemproxy configuration is exactly one",
                )
            }
            Event::DocumentStart(_) => {
                let (event, span) = loader.next()?;
                let line = span.start.line();
                root = Some((line, loader.node(event, span, 0)?));
            }
            _ => return err(span.start.line(), "unexpected YAML outside a document"),
        }
    }
    match root {
        None => Ok(Vec::new()),
        Some((_, Node::Map(entries))) => Ok(entries),
        Some((_, Node::Scalar(v))) if v.is_empty() => Ok(Vec::new()),
        Some((line, Node::Seq(_))) => err(
            line,
            "the document is a list; a twemproxy configuration is a mapping of pool names",
        ),
        Some((line, Node::Scalar(_))) => err(
            line,
            "the document is a single value; a twemproxy configuration is a mapping of pool \
             names",
        ),
    }
}

/// Turns the parser's events into [`Node`]s.
struct Loader<'a> {
    parser: Parser<'a, StrInput<'a>>,
    /// Anchored values by anchor id, with their size in values.
    anchors: HashMap<usize, (Node, usize)>,
    /// Values made so far, aliases counted expanded.
    values: usize,
}

impl<'a> Loader<'a> {
    fn next(&mut self) -> Result<(Event<'a>, Span), YamlError> {
        match self.parser.next_event() {
            Some(Ok(next)) => Ok(next),
            Some(Err(e)) => err(e.marker().line().max(1), e.info()),
            None => err(1, "the YAML ends early"),
        }
    }

    fn count(&mut self, n: usize, line: usize) -> Result<(), YamlError> {
        self.values = self.values.saturating_add(n);
        if self.values > MAX_VALUES {
            return err(
                line,
                format!(
                    "more than {MAX_VALUES} values (aliases counted expanded): too large for a \
                     twemproxy configuration"
                ),
            );
        }
        Ok(())
    }

    /// The value that starts with `event`, at nesting `depth`.
    fn node(&mut self, event: Event<'a>, span: Span, depth: usize) -> Result<Node, YamlError> {
        let line = span.start.line();
        let before = self.values;
        self.count(1, line)?;
        let (node, anchor) = match event {
            Event::Scalar(v, style, anchor, _) => {
                // A missing value reads as a plain "~" of no length.
                let missing = style == ScalarStyle::Plain && span.is_empty();
                let v = if missing {
                    String::new()
                } else {
                    v.into_owned()
                };
                (Node::Scalar(v), anchor)
            }
            Event::SequenceStart(anchor, _) => {
                deeper(depth, line)?;
                let mut items = Vec::new();
                loop {
                    let (event, span) = self.next()?;
                    if matches!(event, Event::SequenceEnd) {
                        break;
                    }
                    let line = span.start.line();
                    let node = self.node(event, span, depth + 1)?;
                    items.push(Item { line, node });
                }
                (Node::Seq(items), anchor)
            }
            Event::MappingStart(anchor, _) => {
                deeper(depth, line)?;
                let mut entries: Vec<Entry> = Vec::new();
                let mut seen: HashMap<String, usize> = HashMap::new();
                loop {
                    let (event, span) = self.next()?;
                    if matches!(event, Event::MappingEnd) {
                        break;
                    }
                    let line = span.start.line();
                    let key = match self.node(event, span, depth + 1)? {
                        Node::Scalar(k) if k.is_empty() => return err(line, "a key is empty"),
                        Node::Scalar(k) if k == "<<" => {
                            return err(line, "merge keys (<<) are not part of twemproxy's format")
                        }
                        Node::Scalar(k) => k,
                        _ => {
                            return err(
                                line,
                                "a key must be a single value, not a list or a mapping",
                            )
                        }
                    };
                    if let Some(first) = seen.insert(key.clone(), line) {
                        return err(
                            line,
                            format!(
                                "'{key}' is given twice in one mapping (first at line {first})"
                            ),
                        );
                    }
                    let (event, span) = self.next()?;
                    let value = self.node(event, span, depth + 1)?;
                    entries.push(Entry { key, line, value });
                }
                (Node::Map(entries), anchor)
            }
            Event::Alias(id) => {
                let Some((node, size)) = self.anchors.get(&id) else {
                    return err(line, "an alias names no anchor");
                };
                let (node, size) = (node.clone(), *size);
                self.count(size, line)?;
                return Ok(node);
            }
            _ => return err(line, "unexpected YAML"),
        };
        if anchor != 0 {
            let size = self.values - before;
            self.anchors.insert(anchor, (node.clone(), size));
        }
        Ok(node)
    }
}

fn deeper(depth: usize, line: usize) -> Result<(), YamlError> {
    if depth >= MAX_DEPTH {
        return err(
            line,
            format!(
                "lists and mappings nest deeper than {MAX_DEPTH}: a twemproxy configuration \
                 has pools, their settings and their server lists"
            ),
        );
    }
    Ok(())
}
