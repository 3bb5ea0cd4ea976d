//! The command line: `mithril [-c FILE | FILE] [-t] [--port N] [--bind ADDR]...`.
//!
//! Owns the flags and the order in which settings are layered: built-in
//! defaults, then the configuration file (from `-c` or the positional
//! argument, as redis-server takes it), then the flags, then
//! `validate`. A flag always wins over the file.
//!
//! Flags go through the same directive setters as file lines, so a bad
//! value fails with the same message, located at `command line`.
//!
//! Must never: exit the process or print, except in [`run_test`], whose job
//! is exactly that report.

use std::path::PathBuf;

use super::{lookup, parse_file, validate, Config, ConfigError};

/// mithril: a Redis Cluster proxy. Clients see one Redis server; the
/// cluster's nodes, slots and redirects stay behind it.
#[derive(argh::FromArgs, Debug, PartialEq, Eq)]
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
    #[argh(switch)]
    pub version: bool,

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
    let mut cfg = match cli.config_file()? {
        Some(path) => parse_file(path)?,
        None => Config::default(),
    };
    if let Some(port) = &cli.port {
        apply(&mut cfg, "port", "--port", &[port.as_str()])?;
    }
    if !cli.bind.is_empty() {
        let addrs: Vec<&str> = cli.bind.iter().map(String::as_str).collect();
        apply(&mut cfg, "bind", "--bind", &addrs)?;
    }
    validate(&cfg)?;
    Ok(cfg)
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
    let subject = match cli.config_file() {
        Ok(Some(path)) => format!("configuration file {}", path.display()),
        Ok(None) => "configuration (no file given)".to_string(),
        Err(e) => return (1, format!("mithril: {e}")),
    };
    match load(cli) {
        Ok(_) => (0, format!("{subject} syntax is ok")),
        Err(e) => (1, format!("mithril: {e}\n{subject} test failed")),
    }
}

/// Carries out `-t`: loads and validates the configuration, prints the
/// verdict, and returns the process exit code (0 valid, 1 not).
pub fn run_test(cli: &Cli) -> i32 {
    let (code, report) = test_report(cli);
    if code == 0 {
        println!("{report}");
    } else {
        eprintln!("{report}");
    }
    code
}
