//! The directive table: one row per configuration directive.
//!
//! Owns the name, default, one-line summary, argument count, parser and
//! `CONFIG GET` rendering of every directive, and the three views built on
//! the table: [`get`] / [`matching`] (what `CONFIG GET` shows) and
//! [`render`] (the whole configuration as a file that parses back to the
//! same [`Config`]).
//!
//! Invariants: a setter either applies its whole value or leaves the
//! `Config` untouched and returns a message naming the directive; each
//! row's `default`, parsed by its own setter, gives `Config::default()`
//! (tested). Adding a row means adding it to `conf/mithril.conf` and
//! `man/mithril.conf.5` too (`tests/docs_sync.rs` fails otherwise).

use super::values::{format_size, quote_arg};
pub use super::values::{parse_bool, parse_size};
use super::{glob_match, Config};

/// How a directive's value is shown and written back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Not a setting (`include`): no value to show.
    Meta,
    /// Shown as its arguments joined by spaces.
    Plain,
    /// A byte count: bytes for `CONFIG GET`, the largest exact unit in files.
    Size,
    /// Written like `Plain` in files; `CONFIG GET` shows "(hidden)" when set.
    Secret,
    /// `user`: one line per user in files; `CONFIG GET` shows the users
    /// with their passwords as SHA-256 digests, separated by "; ".
    PerUser,
    /// `pool`: one line per pool setting in files; `CONFIG GET` shows
    /// each pool's name, kind and listeners, separated by "; ".
    PerPool,
}

/// What `CONFIG GET` shows for a secret that is set.
pub const HIDDEN: &str = "(hidden)";

type Setter = fn(&mut Config, &[&str]) -> Result<(), String>;
type Getter = fn(&Config) -> Vec<String>;

/// One configuration directive.
pub struct Directive {
    /// The name, lower case (names are matched case-insensitively).
    pub name: &'static str,
    /// The default in file syntax (empty for `include` and `cluster-nodes`,
    /// which have none).
    pub default: &'static str,
    /// One line on what the directive does.
    pub summary: &'static str,
    /// Whether `CONFIG SET` may change it while the proxy runs.
    pub runtime_settable: bool,
    kind: Kind,
    /// Fewest and most arguments after the name.
    arity: (usize, usize),
    setter: Setter,
    getter: Getter,
}

impl std::fmt::Debug for Directive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Directive")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl Directive {
    /// Applies `args` (the words after the directive name) to `cfg`. On error
    /// `cfg` is unchanged and the message names the directive.
    pub fn set(&self, cfg: &mut Config, args: &[&str]) -> Result<(), String> {
        let (min, max) = self.arity;
        let n = args.len();
        if n < min || n > max {
            let name = self.name;
            return Err(match (min, max) {
                (1, 1) => format!("{name} takes exactly one argument, got {n}"),
                (_, usize::MAX) => format!("{name} takes at least {min} argument(s), got {n}"),
                _ => format!("{name} takes {min} to {max} arguments, got {n}"),
            });
        }
        (self.setter)(cfg, args)
    }

    /// The value as `CONFIG GET` shows it (sizes in bytes, lists joined by
    /// spaces); `None` for `include`, which is not a setting.
    pub fn value(&self, cfg: &Config) -> Option<String> {
        match self.kind {
            Kind::Meta => None,
            Kind::Secret => {
                let v = (self.getter)(cfg).join(" ");
                Some(if v.is_empty() { v } else { HIDDEN.to_string() })
            }
            Kind::PerUser => Some(
                cfg.users
                    .iter()
                    .map(super::UserSpec::canonical)
                    .collect::<Vec<_>>()
                    .join("; "),
            ),
            Kind::PerPool => Some(super::pool::pool_summary(cfg).join("; ")),
            Kind::Plain | Kind::Size => Some((self.getter)(cfg).join(" ")),
        }
    }

    /// The directive's lines in a configuration file for `cfg`'s value:
    /// none when it is not set (or is `include`), one per user or pool
    /// setting for `user` and `pool`, one otherwise. What [`render`] and
    /// `CONFIG REWRITE` (`config/rewrite.rs`) write.
    pub fn file_lines(&self, cfg: &Config) -> Vec<String> {
        let args = (self.getter)(cfg);
        let line = |words: Vec<String>| format!("{} {}", self.name, words.join(" "));
        match self.kind {
            Kind::Meta => Vec::new(),
            Kind::PerPool => super::pool::pool_lines(cfg),
            // The rules as the source gave them (clear passwords
            // included): render is a migration aid, see mithril.conf(5).
            Kind::PerUser => cfg
                .users
                .iter()
                .map(|u| {
                    line(
                        std::iter::once(&u.name)
                            .chain(&u.rules)
                            .map(|a| quote_arg(a))
                            .collect(),
                    )
                })
                .collect(),
            _ if args.is_empty() => Vec::new(),
            Kind::Size => vec![line(
                args.iter()
                    .map(|a| a.parse::<u64>().map_or_else(|_| quote_arg(a), format_size))
                    .collect(),
            )],
            Kind::Plain | Kind::Secret => vec![line(args.iter().map(|a| quote_arg(a)).collect())],
        }
    }

    /// Gives `to` the value `from` has for this directive (its words
    /// through the setter); on error `to` is unchanged.
    pub fn copy(&self, from: &Config, to: &mut Config) -> Result<(), String> {
        let words = (self.getter)(from);
        let args: Vec<&str> = words.iter().map(String::as_str).collect();
        self.set(to, &args)
    }

    /// Whether `a` and `b` hold the same setting for this directive: its
    /// words as the getter gives them (a secret compared in clear, never
    /// shown), every user's rules and every pool's lines in full (what
    /// `CONFIG GET` abridges). Always true for `include`, which is not a
    /// setting. What a configuration reload compares.
    pub fn same_in(&self, a: &Config, b: &Config) -> bool {
        match self.kind {
            Kind::Meta => true,
            Kind::PerUser => {
                let canonical = |c: &Config| {
                    c.users
                        .iter()
                        .map(super::UserSpec::canonical)
                        .collect::<Vec<_>>()
                };
                canonical(a) == canonical(b)
            }
            Kind::PerPool => super::pool::pool_lines(a) == super::pool::pool_lines(b),
            Kind::Plain | Kind::Size | Kind::Secret => (self.getter)(a) == (self.getter)(b),
        }
    }
}

mod table;
mod tls;

pub use table::DIRECTIVES;

/// The directive called `name`, ignoring case.
pub fn lookup(name: &str) -> Option<&'static Directive> {
    DIRECTIVES
        .iter()
        .find(|d| d.name.eq_ignore_ascii_case(name))
}

/// The value of directive `name` as `CONFIG GET` shows it; `None` for an
/// unknown name or `include`.
pub fn get(cfg: &Config, name: &str) -> Option<String> {
    lookup(name)?.value(cfg)
}

/// Every setting whose name matches the Redis glob `glob` (ignoring case),
/// with its `CONFIG GET` value, in table order.
pub fn matching(cfg: &Config, glob: &[u8]) -> Vec<(&'static str, String)> {
    DIRECTIVES
        .iter()
        .filter(|d| glob_match(glob, d.name.as_bytes(), true))
        .filter_map(|d| Some((d.name, d.value(cfg)?)))
        .collect()
}

/// The whole configuration as a mithril configuration file, one line per
/// setting, that parses back to an equal `Config` (`config_file` aside).
pub fn render(cfg: &Config) -> String {
    let mut out = format!(
        "# mithril configuration, written by {}\n",
        super::cli::version_string()
    );
    if let Some(file) = &cfg.config_file {
        out.push_str(&format!("# read from {}\n", file.display()));
    }
    for d in DIRECTIVES {
        if d.kind == Kind::Meta {
            continue;
        }
        let lines = d.file_lines(cfg);
        if lines.is_empty() {
            out.push_str(&format!("# {} (not set)\n", d.name));
        }
        for line in lines {
            out.push_str(&line);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{format_size, parse_bool, parse_size, quote_arg};

    #[test]
    fn sizes() {
        let cases: &[(&str, Option<u64>)] = &[
            ("0", Some(0)),
            ("100", Some(100)),
            ("100b", Some(100)),
            ("100B", Some(100)),
            ("1k", Some(1000)),
            ("512k", Some(512_000)),
            ("1kb", Some(1024)),
            ("1KB", Some(1024)),
            ("1Kb", Some(1024)),
            ("1m", Some(1_000_000)),
            ("64mb", Some(64 * 1024 * 1024)),
            ("64MB", Some(64 * 1024 * 1024)),
            ("1g", Some(1_000_000_000)),
            ("1gb", Some(1 << 30)),
            ("2GB", Some(2 << 30)),
            ("", None),
            ("mb", None),
            ("-1", None),
            ("+1", None),
            ("1.5gb", None),
            ("1 gb", None),
            ("1tb", None),
            ("1kbb", None),
            ("18446744073709551615", Some(u64::MAX)),
            ("18446744073709551616", None),
            ("17179869184gb", None),
        ];
        for &(text, want) in cases {
            assert_eq!(parse_size(text), want, "{text:?}");
        }
    }

    #[test]
    fn size_formatting_round_trips() {
        for (n, text) in [
            (0, "0"),
            (1000, "1000"),
            (1024, "1kb"),
            (1536, "1536"),
            (512 << 20, "512mb"),
            (1 << 30, "1gb"),
            (3 << 30, "3gb"),
        ] {
            assert_eq!(format_size(n), text);
            assert_eq!(parse_size(text), Some(n));
        }
    }

    #[test]
    fn booleans() {
        assert_eq!(parse_bool("yes"), Some(true));
        assert_eq!(parse_bool("YES"), Some(true));
        assert_eq!(parse_bool("no"), Some(false));
        assert_eq!(parse_bool("No"), Some(false));
        assert_eq!(parse_bool("true"), None);
        assert_eq!(parse_bool("1"), None);
        assert_eq!(parse_bool(""), None);
    }

    #[test]
    fn quoting_round_trips_through_the_lexer() {
        for arg in [
            "plain",
            "",
            "a b",
            "#hash",
            "a#b",
            "quote\"d",
            "it's",
            "back\\slash",
            "tab\there",
            "nl\n",
            "ctl\x01",
            "ünï",
        ] {
            let line = format!("x {}", quote_arg(arg));
            let split = super::super::lex::split_line(line.as_bytes()).unwrap();
            assert_eq!(
                split.args,
                [b"x".to_vec(), arg.as_bytes().to_vec()],
                "{arg:?} written as {line}"
            );
        }
        assert_eq!(quote_arg("plain"), "plain");
        assert_eq!(quote_arg(""), "\"\"");
    }
}
