//! The command line: `mithril [-c FILE | FILE] [-t] [-d] [-p FILE] [-o FILE]
//! [-v N] [--port N] [--bind ADDR]...`, plus the rest of twemproxy's flags.
//!
//! Owns the flags and the order in which settings are layered: built-in
//! defaults, then the configuration file (from `-c` or the positional
//! argument, as redis-server and predixy take it; native, nutcracker.yml or
//! predixy.conf, see [`super::compat`]), then the flags, then `validate`.
//! A flag always wins over the file.
//!
//! Flags go through the same directive setters as file lines, so a bad
//! value fails with the same message, located at `command line`.
//!
//! twemproxy's (nutcracker's) flags are accepted where they mean the same
//! thing, so its init scripts keep working: `-c`, `-t`, `-d`, `-p`, `-o`,
//! `-v N` (its 0-11 verbosity, mapped onto `loglevel`), `-V`, `-a`, `-s`,
//! and `-i` / `-m`, which have no meaning here and only draw a warning.
//! [`normalize_args`] first rewrites the getopt spellings argh does not
//! know (`--conf-file=F`, `-v6`, `-dt`) into plain ones.
//!
//! Must never: exit the process or print, except in [`run_test`], whose job
//! is exactly that report.

use std::path::PathBuf;

use super::{compat, lookup, validate, Config, ConfigError, LogLevel};

/// mithril: a Redis Cluster proxy. Clients see one Redis server; the
/// cluster's nodes, slots and redirects stay behind it.
#[derive(argh::FromArgs, Debug, Clone, PartialEq, Eq)]
pub struct Cli {
    /// read the configuration from FILE
    #[argh(option, short = 'c', arg_name = "FILE")]
    pub config: Option<PathBuf>,

    /// check the configuration, report, and exit (0 when it is valid)
    #[argh(switch, short = 't')]
    pub test_config: bool,

    /// listen on TCP port N (overrides port in the file)
    #[argh(option, arg_name = "N")]
    pub port: Option<String>,

    /// listen on ADDR; repeat for several (together they replace bind in the
    /// file)
    #[argh(option, arg_name = "ADDR")]
    pub bind: Vec<String>,

    /// print the version and exit
    #[argh(switch, short = 'V')]
    pub version: bool,

    /// run in the background (as daemonize yes)
    #[argh(switch, short = 'd')]
    pub daemonize: bool,

    /// write the process id to FILE and lock it (as pidfile)
    #[argh(option, short = 'p', arg_name = "FILE")]
    pub pidfile: Option<String>,

    /// log to FILE (as logfile; twemproxy's -o)
    #[argh(option, short = 'o', arg_name = "FILE")]
    pub logfile: Option<String>,

    /// twemproxy's log verbosity, 0 to 11, mapped onto loglevel
    #[argh(option, short = 'v', arg_name = "N")]
    pub verbose: Option<String>,

    /// with -t: print the configuration as a native mithril.conf
    #[argh(switch)]
    pub print_config: bool,

    /// twemproxy's stats port (the stats-port directive)
    #[argh(option, short = 's', arg_name = "PORT")]
    pub stats_port: Option<String>,

    /// twemproxy's stats address (the stats-bind directive)
    #[argh(option, short = 'a', arg_name = "ADDR")]
    pub stats_addr: Option<String>,

    /// twemproxy's stats interval; no meaning here, ignored with a warning
    #[argh(option, short = 'i', arg_name = "MSEC")]
    pub stats_interval: Option<String>,

    /// twemproxy's mbuf size; no meaning here, ignored with a warning
    #[argh(option, short = 'm', arg_name = "BYTES")]
    pub mbuf_size: Option<String>,

    /// take over the listening sockets of the mithril running on the
    /// configuration's upgrade-socket, then let it drain and exit
    #[argh(switch)]
    pub upgrade: bool,

    /// the configuration file, as an alternative to -c
    #[argh(positional, arg_name = "FILE")]
    pub config_path: Option<PathBuf>,
}

impl Cli {
    /// The configuration file named by `-c` or by the positional argument.
    pub fn config_file(&self) -> Result<Option<&PathBuf>, ConfigError> {
        match (&self.config, &self.config_path) {
            (Some(a), Some(b)) if a != b => Err(ConfigError::new(
                "command line",
                format!(
                    "two configuration files given ({} and {}): use -c FILE or FILE, not both",
                    a.display(),
                    b.display()
                ),
            )),
            (Some(file), _) | (None, Some(file)) => Ok(Some(file)),
            (None, None) => Ok(None),
        }
    }
}

/// Builds the configuration the command line asks for: defaults, the file if
/// one is named, then the flags; and validates the result.
pub fn load(cli: &Cli) -> Result<Config, ConfigError> {
    load_loaded(cli).map(|l| l.config)
}

/// A configuration with what was said about it on the way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loaded {
    pub config: Config,
    /// Settings ignored or adapted, one line each, already located
    /// (`file:line: ...` or `command line: ...`).
    pub warnings: Vec<String>,
    /// How the file was written; `None` without a file.
    pub format: Option<compat::Format>,
}

/// [`load`], keeping the warnings of a foreign file and of the flags that
/// have no meaning for mithril.
pub fn load_loaded(cli: &Cli) -> Result<Loaded, ConfigError> {
    let (mut cfg, mut warnings, format) = match cli.config_file()? {
        Some(path) => {
            let read = compat::read_file(path)?;
            (read.config, read.warnings, Some(read.format))
        }
        None => (Config::default(), Vec::new(), None),
    };
    if let Some(port) = &cli.port {
        apply(&mut cfg, "port", "--port", &[port.as_str()])?;
    }
    if !cli.bind.is_empty() {
        let addrs: Vec<&str> = cli.bind.iter().map(String::as_str).collect();
        apply(&mut cfg, "bind", "--bind", &addrs)?;
    }
    if cli.daemonize {
        apply(&mut cfg, "daemonize", "-d", &["yes"])?;
    }
    if let Some(p) = &cli.pidfile {
        apply(&mut cfg, "pidfile", "-p", &[p.as_str()])?;
    }
    if let Some(o) = &cli.logfile {
        apply(&mut cfg, "logfile", "-o", &[o.as_str()])?;
    }
    if let Some(v) = &cli.verbose {
        let level = verbosity(v)
            .map_err(|m| ConfigError::new("command line", m).with_text(format!("-v {v}")))?;
        cfg.loglevel = level;
    }
    stats_flags(cli, &mut cfg, &mut warnings)?;
    validate(&cfg)?;
    Ok(Loaded {
        config: cfg,
        warnings,
        format,
    })
}

/// twemproxy's verbosity (`-v N`, 0 to 11, its default 5) onto Redis's
/// levels: up to 4 (emergencies to warnings) is `warning`, 5 and 6 (notice,
/// info) `notice`, 7 and 8 (debug, verbose) `verbose`, 9 to 11 `debug`.
pub fn verbosity(text: &str) -> Result<LogLevel, String> {
    match text.parse::<u8>() {
        Ok(0..=4) => Ok(LogLevel::Warning),
        Ok(5..=6) => Ok(LogLevel::Notice),
        Ok(7..=8) => Ok(LogLevel::Verbose),
        Ok(9..=11) => Ok(LogLevel::Debug),
        _ => Err("-v takes twemproxy's verbosity, a number from 0 to 11".to_string()),
    }
}

/// `-s`, `-a`, `-i`, `-m`: twemproxy's stats listener and buffer flags.
/// The stats port and address go to the `stats-port` and `stats-bind`
/// directives; the other two are warned about.
fn stats_flags(cli: &Cli, cfg: &mut Config, warnings: &mut Vec<String>) -> Result<(), ConfigError> {
    if let Some(port) = &cli.stats_port {
        let ok = port.parse::<u16>().is_ok_and(|p| p > 0);
        if !ok {
            return Err(
                ConfigError::new("command line", "-s takes a port number from 1 to 65535")
                    .with_text(format!("-s {port}")),
            );
        }
        if lookup("stats-port").is_some() {
            apply(cfg, "stats-port", "-s", &[port.as_str()])?;
        } else {
            warnings.push(format!(
                "command line: '-s {port}': the twemproxy stats port is not served by this                  version of mithril yet; the flag is accepted and ignored"
            ));
        }
    }
    if let Some(addr) = &cli.stats_addr {
        if addr.parse::<std::net::IpAddr>().is_err() {
            return Err(ConfigError::new(
                "command line",
                "-a takes the IP address of the stats listener",
            )
            .with_text(format!("-a {addr}")));
        }
        if lookup("stats-bind").is_some() {
            apply(cfg, "stats-bind", "-a", &[addr.as_str()])?;
        } else {
            warnings.push(format!(
                "command line: '-a {addr}': the twemproxy stats listener is not served by this                  version of mithril yet; the flag is accepted and ignored"
            ));
        }
    }
    if let Some(i) = &cli.stats_interval {
        warnings.push(format!(
            "command line: '-i {i}': twemproxy's stats aggregation interval has no meaning for              mithril (its counters are always current); ignored"
        ));
    }
    if let Some(m) = &cli.mbuf_size {
        warnings.push(format!(
            "command line: '-m {m}': twemproxy's mbuf size has no meaning for mithril (it sizes              its buffers per connection as data arrives); ignored"
        ));
    }
    Ok(())
}

/// twemproxy's long option names, and ours they stand for.
const LONG_ALIASES: &[(&str, &str)] = &[
    ("--conf-file", "-c"),
    ("--test-conf", "-t"),
    ("--daemonize", "-d"),
    ("--pid-file", "-p"),
    ("--output", "-o"),
    ("--verbose", "-v"),
    ("--verbosity", "-v"),
    ("--stats-port", "-s"),
    ("--stats-addr", "-a"),
    ("--stats-interval", "-i"),
    ("--mbuf-size", "-m"),
];

/// Short options that take a value.
const SHORT_WITH_VALUE: &[char] = &['c', 'p', 'o', 'v', 's', 'a', 'i', 'm'];
/// Short switches that may be bundled (`-dt`).
const SHORT_SWITCHES: &[char] = &['t', 'd', 'V'];

/// Rewrites getopt spellings that argh does not take into plain ones:
/// `--name=value` into `--name value` (twemproxy's long names into the
/// short flags), `-v6` into `-v 6`, bundled switches `-dt` into `-d -t`,
/// and `-h` / `-?` into `--help`.
/// Everything after `--`, and anything it does not recognise, is kept as
/// written for argh to judge.
pub fn normalize_args(args: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        if arg == "-h" || arg == "-?" {
            out.push("--help".to_string());
            continue;
        }
        if arg == "--" {
            out.push(arg.clone());
            out.extend(rest.by_ref().cloned());
            break;
        }
        if let Some(long) = arg.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((n, v)) => (format!("--{n}"), Some(v.to_string())),
                None => (arg.clone(), None),
            };
            let name = LONG_ALIASES
                .iter()
                .find(|(alias, _)| *alias == name)
                .map_or(name, |(_, short)| short.to_string());
            out.push(name);
            out.extend(value);
            continue;
        }
        let Some(shorts) = arg.strip_prefix('-') else {
            out.push(arg.clone());
            continue;
        };
        let mut chars = shorts.chars();
        match chars.next() {
            // `-` alone, or `-::1` given as a value: leave it.
            None => out.push(arg.clone()),
            Some(c) if SHORT_WITH_VALUE.contains(&c) && shorts.len() > 1 => {
                out.push(format!("-{c}"));
                out.push(chars.as_str().to_string());
            }
            Some(_) if shorts.len() > 1 && shorts.chars().all(|c| SHORT_SWITCHES.contains(&c)) => {
                out.extend(shorts.chars().map(|c| format!("-{c}")));
            }
            Some(_) => out.push(arg.clone()),
        }
    }
    out
}

/// Applies one flag through its directive's setter.
fn apply(cfg: &mut Config, directive: &str, flag: &str, args: &[&str]) -> Result<(), ConfigError> {
    let shown = args
        .iter()
        .map(|a| format!("{flag} {a}"))
        .collect::<Vec<_>>()
        .join(" ");
    let result = match lookup(directive) {
        Some(d) => d.set(cfg, args),
        None => Err(format!("no directive behind {flag}")),
    };
    result.map_err(|message| ConfigError::new("command line", message).with_text(shown))
}

/// `mithril 0.1.0`.
pub fn version_string() -> String {
    format!("mithril {}", env!("CARGO_PKG_VERSION"))
}

/// The report for `-t`: the exit code and the line to print (standard output
/// on success, standard error on failure).
pub fn test_report(cli: &Cli) -> (i32, String) {
    let (code, report, _) = test_outcome(cli);
    (code, report)
}

/// [`test_report`] plus the loaded configuration when it is valid.
fn test_outcome(cli: &Cli) -> (i32, String, Option<Loaded>) {
    let subject = match cli.config_file() {
        Ok(Some(path)) => format!("configuration file {}", path.display()),
        Ok(None) => "configuration (no file given)".to_string(),
        Err(e) => return (1, format!("mithril: {e}"), None),
    };
    match load_loaded(cli) {
        Ok(loaded) => {
            let kind = match loaded.format {
                Some(f) if f != compat::Format::Native => format!(" ({})", f.describe()),
                _ => String::new(),
            };
            (0, format!("{subject}{kind} syntax is ok"), Some(loaded))
        }
        Err(e) => (1, format!("mithril: {e}\n{subject} test failed"), None),
    }
}

/// The configuration as a native file, for `--print-config`: the
/// translation's warnings as comments on top, then every directive.
pub fn print_config_text(loaded: &Loaded) -> String {
    let rendered = super::render(&loaded.config);
    let mut lines = rendered.lines();
    let mut out = String::new();
    // Keep render's header (its comment lines) first.
    let mut body = Vec::new();
    for line in lines.by_ref() {
        if line.starts_with("# ") && body.is_empty() {
            out.push_str(line);
            out.push('\n');
        } else {
            body.push(line);
            break;
        }
    }
    if let Some(f) = loaded.format.filter(|f| *f != compat::Format::Native) {
        out.push_str(&format!("# translated from {}\n", f.describe()));
    }
    for w in &loaded.warnings {
        out.push_str(&format!("# warning: {w}\n"));
    }
    for line in body.into_iter().chain(lines) {
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Carries out `-t` (and `--print-config`): loads and validates the
/// configuration, prints the warnings and the verdict (and the native
/// configuration), and returns the process exit code (0 valid, 1 not).
pub fn run_test(cli: &Cli) -> i32 {
    let (code, report, loaded) = test_outcome(cli);
    if let Some(loaded) = &loaded {
        for w in &loaded.warnings {
            eprintln!("mithril: warning: {w}");
        }
    }
    if code != 0 {
        eprintln!("{report}");
        return code;
    }
    match loaded.filter(|_| cli.print_config) {
        // The configuration on standard output, the verdict on standard
        // error, so that the output can be redirected into a file as is.
        Some(loaded) => {
            print!("{}", print_config_text(&loaded));
            eprintln!("{report}");
        }
        None => println!("{report}"),
    }
    code
}
