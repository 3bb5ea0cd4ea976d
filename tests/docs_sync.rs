//! Keeps the three homes of every configuration directive in step: the
//! parser's table (`mithril::config::DIRECTIVES`), the annotated file
//! `conf/mithril.conf` and the manual page `man/mithril.conf.5`. Also
//! checks that the annotated file parses to the defaults, and that both
//! manual pages format without warnings when `mandoc` / `groff` are present.
//!
//! How entries are recognised:
//! - conf/mithril.conf: every live (uncommented) line is a directive; a
//!   commented-out directive is a `# name ...` line (lower-case name, no
//!   closing punctuation such as a full stop) that ends its paragraph (the
//!   next line is blank or the file ends), outside the `###` banners.
//! - man/mithril.conf.5: every `.TP` item in the DIRECTIVES section; its tag
//!   line starts with the directive's name, and its text must state
//!   `Default: VALUE` (or `Default: none`) and `CONFIG SET: yes|no`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use mithril::config::{self, Config, DIRECTIVES};

/// mandoc -Tlint messages accepted as unavoidable. None so far.
const ACCEPTED_MANDOC_WARNINGS: &[&str] = &[];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    let path = root().join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

fn table_names() -> BTreeSet<&'static str> {
    DIRECTIVES.iter().map(|d| d.name).collect()
}

fn is_directive_word(word: &str) -> bool {
    let mut chars = word.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// (line number, directive name) for every directive entry in the conf file.
fn conf_entries(text: &str) -> Vec<(usize, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut entries = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with("##") {
            continue;
        }
        if let Some(comment) = trimmed.strip_prefix('#') {
            let ends_paragraph = lines.get(i + 1).map_or(true, |next| next.trim().is_empty());
            let word = comment.split_whitespace().next().unwrap_or("");
            let ends_sentence = comment
                .trim_end()
                .ends_with(['.', ':', ',', ';', '!', '?', ')']);
            if ends_paragraph
                && !ends_sentence
                && comment.starts_with(' ')
                && is_directive_word(word)
            {
                entries.push((i + 1, word.to_string()));
            }
        } else {
            let word = trimmed.split_whitespace().next().unwrap_or("");
            entries.push((i + 1, word.to_ascii_lowercase()));
        }
    }
    entries
}

/// Plain text of a roff fragment: font escapes and `\&` dropped, `\-`,
/// `\(dq`, `\(aq` and `\(rs` turned into their characters.
fn roff_text(s: &str) -> String {
    let mut out = s
        .replace("\\-", "-")
        .replace("\\(dq", "\"")
        .replace("\\(aq", "'")
        .replace("\\(rs", "\\");
    for esc in ["\\fB", "\\fI", "\\fR", "\\fP", "\\&"] {
        out = out.replace(esc, "");
    }
    out
}

/// One `.TP` entry of the DIRECTIVES section.
struct ManEntry {
    line: usize,
    name: String,
    /// The entry's text, roff requests stripped, lines joined by spaces.
    body: String,
}

fn man_entries(text: &str) -> Vec<ManEntry> {
    let mut in_section = false;
    let mut entries: Vec<ManEntry> = Vec::new();
    let mut expect_tag = false;
    for (i, line) in text.lines().enumerate() {
        if let Some(title) = line.strip_prefix(".SH ") {
            in_section = title.trim().trim_matches('"') == "DIRECTIVES";
            expect_tag = false;
            continue;
        }
        if !in_section {
            continue;
        }
        if line.trim_end() == ".TP" {
            expect_tag = true;
            continue;
        }
        if expect_tag {
            expect_tag = false;
            // The tag: ".B name", ".BI \"name \" arg", or plain text.
            let args = line
                .strip_prefix('.')
                .map_or(line, |l| l.split_once(' ').map_or("", |(_, rest)| rest));
            let first = match args.strip_prefix('"') {
                Some(quoted) => quoted.split('"').next().unwrap_or(""),
                None => args.split_whitespace().next().unwrap_or(""),
            };
            let name = roff_text(first)
                .split_whitespace()
                .next()
                .unwrap_or("")
                .to_string();
            entries.push(ManEntry {
                line: i + 1,
                name,
                body: String::new(),
            });
            continue;
        }
        if let Some(entry) = entries.last_mut() {
            let content = match line.strip_prefix('.') {
                // A request: keep the arguments of font macros, drop others.
                Some(req) => match req.split_once(' ') {
                    Some(("B" | "I" | "BR" | "BI" | "IR" | "RB" | "IB" | "RI", rest)) => {
                        rest.replace('"', "")
                    }
                    _ => String::new(),
                },
                None => line.to_string(),
            };
            entry.body.push(' ');
            entry.body.push_str(&roff_text(&content));
        }
    }
    entries
}

#[test]
fn every_directive_is_in_the_table_the_conf_file_and_the_man_page() {
    let table = table_names();
    let conf = conf_entries(&read("conf/mithril.conf"));
    let man = man_entries(&read("man/mithril.conf.5"));
    let conf_names: BTreeSet<&str> = conf.iter().map(|(_, n)| n.as_str()).collect();
    let man_names: BTreeSet<&str> = man.iter().map(|e| e.name.as_str()).collect();

    let mut problems = Vec::new();
    for name in &table {
        if !conf_names.contains(name) {
            problems.push(format!(
                "directive '{name}' is in DIRECTIVES but not in conf/mithril.conf"
            ));
        }
        if !man_names.contains(name) {
            problems.push(format!(
                "directive '{name}' is in DIRECTIVES but has no entry in man/mithril.conf.5"
            ));
        }
    }
    for (line, name) in &conf {
        if !table.contains(name.as_str()) {
            problems.push(format!(
                "conf/mithril.conf:{line}: '{name}' is written as a directive but is not in DIRECTIVES \
                 (a paragraph of explanation must not end with a '# lowercase-word ...' line \
                 lacking a full stop)"
            ));
        }
    }
    let mut seen = BTreeSet::new();
    for entry in &man {
        if !table.contains(entry.name.as_str()) {
            problems.push(format!(
                "man/mithril.conf.5:{}: DIRECTIVES entry '{}' is not in DIRECTIVES",
                entry.line, entry.name
            ));
        }
        if !seen.insert(entry.name.as_str()) {
            problems.push(format!(
                "man/mithril.conf.5:{}: second entry for '{}'",
                entry.line, entry.name
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "directives out of step:\n  {}",
        problems.join("\n  ")
    );
    assert_eq!(conf_names.len(), DIRECTIVES.len());
    assert_eq!(man.len(), DIRECTIVES.len());
}

#[test]
fn man_entries_state_each_default_and_whether_config_set_applies() {
    let man = man_entries(&read("man/mithril.conf.5"));
    let mut problems = Vec::new();
    for d in DIRECTIVES {
        let Some(entry) = man.iter().find(|e| e.name == d.name) else {
            continue; // reported by the test above
        };
        let default = if d.default.is_empty() {
            "none"
        } else {
            d.default
        };
        let body = entry.body.split_whitespace().collect::<Vec<_>>().join(" ");
        if !body.contains(&format!("Default: {default}.")) {
            problems.push(format!(
                "'{}' should say 'Default: {default}.' but says: {body}",
                d.name
            ));
        }
        let runtime = if d.runtime_settable {
            "CONFIG SET: yes."
        } else {
            "CONFIG SET: no."
        };
        if !body.contains(runtime) {
            problems.push(format!("'{}' should say '{runtime}'", d.name));
        }
    }
    assert!(
        problems.is_empty(),
        "man/mithril.conf.5 disagrees with DIRECTIVES:\n  {}",
        problems.join("\n  ")
    );
}

#[test]
fn conf_file_parses_to_the_defaults_except_cluster_nodes() {
    let path = root().join("conf/mithril.conf");
    let cfg = config::parse_file(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cfg.cluster_nodes, ["127.0.0.1:7000"]);
    let expected = Config {
        cluster_nodes: vec!["127.0.0.1:7000".to_string()],
        config_file: cfg.config_file.clone(),
        ..Config::default()
    };
    assert_eq!(cfg, expected);
    assert!(cfg.config_file.as_deref().is_some_and(Path::is_absolute));
    config::validate(&cfg).unwrap_or_else(|e| panic!("{e}"));
}

/// Runs a formatter; `None` when it is not installed.
fn run(tool: &str, args: &[&str]) -> Option<std::process::Output> {
    match Command::new(tool).args(args).current_dir(root()).output() {
        Ok(out) => Some(out),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => panic!("cannot run {tool}: {e}"),
    }
}

const PAGES: [&str; 2] = ["man/mithril.8", "man/mithril.conf.5"];

#[test]
fn man_pages_pass_mandoc_lint() {
    for page in PAGES {
        let Some(out) = run("mandoc", &["-Tlint", page]) else {
            println!("note: mandoc is not installed; skipping the mandoc -Tlint check");
            return;
        };
        let report = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let unexpected: Vec<&str> = report
            .lines()
            .filter(|l| !l.trim().is_empty())
            .filter(|l| !ACCEPTED_MANDOC_WARNINGS.iter().any(|w| l.contains(w)))
            .collect();
        assert!(
            unexpected.is_empty(),
            "mandoc -Tlint {page}:\n{}",
            unexpected.join("\n")
        );
    }
}

#[test]
fn man_pages_format_without_groff_warnings() {
    for page in PAGES {
        let Some(out) = run("groff", &["-man", "-ww", "-z", page]) else {
            println!("note: groff is not installed; skipping the groff -ww check");
            return;
        };
        let report = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.status.success() && report.trim().is_empty(),
            "groff -man -ww -z {page}:\n{report}"
        );
    }
}

// The recognisers themselves, so that a silent mismatch cannot pass the
// checks above by finding nothing.

#[test]
fn conf_recogniser_finds_live_and_commented_directives_only() {
    let text = "# Intro line\n# ends here.\n\n####### BANNER #######\n\n# Prose about\n# things\n#\n# include x.conf\n\n\
                # Prose\nport 7777\n\n# A paragraph whose last line\n# looks like prose.\n\n# frob 1\n";
    let found: Vec<(usize, String)> = conf_entries(text);
    assert_eq!(
        found,
        [
            (9, "include".to_string()),
            (12, "port".to_string()),
            (17, "frob".to_string())
        ]
    );
}

#[test]
fn man_recogniser_reads_tags_and_bodies() {
    let text = ".SH DESCRIPTION\n.TP\n.B notme\nx\n.SH DIRECTIVES\nIntro.\n.TP\n.BI \"cluster\\-nodes \" host : port\n\
                Seeds.\nDefault: \\fB127.0.0.1 \\-::1\\fR.\n.TP\n.B port\n.BR CONFIG \" SET\" :\nno.\n.SH SEE ALSO\n.TP\n.B after\n";
    let entries = man_entries(text);
    let names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["cluster-nodes", "port"]);
    assert_eq!(entries[0].line, 8);
    assert_eq!(
        entries[0]
            .body
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" "),
        "Seeds. Default: 127.0.0.1 -::1."
    );
    assert_eq!(
        entries[1]
            .body
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" "),
        "CONFIG SET : no."
    );
}
