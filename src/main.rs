//! The mithril daemon: parse the command line and the config, take the
//! pidfile, set up logging, go to the background if asked, run the server.
//!
//! ```text
//!   argv ─▶ normalize (twemproxy spellings) ─▶ Cli ─▶ -V / -t / --print-config: report, exit
//!        ─▶ config (+ warnings) ─▶ pidfile lock ─▶ log file check ─▶ [fork: parent waits on a pipe]
//!        ─▶ logger ─▶ server::run_reloadable(Service, how to read the config again) ─▶ exit 0 / 1
//! ```
//!
//! Order matters: everything that can fail in a way the user must see
//! (config, pidfile already held, log file not writable) happens while
//! standard error is still the terminal; the fork happens before any
//! thread exists (the logger starts none); the pidfile is locked before
//! the fork, since the lock travels with the open file into the child.

mod daemon;

use mithril::config::cli::{self, Cli};
use reactor::daemon::{detach, Detached, Notifier, Pidfile};
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

fn main() -> ExitCode {
    let cli = match parse_args() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    if cli.version {
        println!("{}", cli::version_string());
        return ExitCode::SUCCESS;
    }
    if cli.test_config || cli.print_config {
        return ExitCode::from(cli::run_test(&cli) as u8);
    }
    let loaded = match cli::load_loaded(&cli) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("mithril: {e}");
            return ExitCode::from(1);
        }
    };
    for w in &loaded.warnings {
        eprintln!("mithril: warning: {w}");
    }
    let mut cfg = loaded.config;
    // The daemon changes directory to /: pin relative paths first.
    let base = std::env::current_dir().unwrap_or_else(|_| "/".into());
    cfg.logfile = absolute(&base, &cfg.logfile);
    cfg.pidfile = absolute(&base, &cfg.pidfile);
    cfg.upgrade_socket = absolute(&base, &cfg.upgrade_socket);
    let reread = rereader(&cli, &cfg, base);
    if cli.upgrade {
        // The running process's listening sockets, before anything is
        // bound (they are used by address as the listeners are made).
        if cfg.upgrade_socket.is_empty() {
            eprintln!(
                "mithril: --upgrade needs upgrade-socket in the configuration (the socket the \
                 running mithril listens on)"
            );
            return ExitCode::from(1);
        }
        if let Err(e) = mithril::upgrade::take_over(Path::new(&cfg.upgrade_socket)) {
            eprintln!("mithril: {e}");
            return ExitCode::from(1);
        }
    }

    let notifier = match Notifier::from_env() {
        None => None,
        Some(Ok(n)) => Some(n),
        Some(Err(e)) => {
            eprintln!("mithril: warning: NOTIFY_SOCKET is set but unusable ({e}); not notifying");
            None
        }
    };
    let mut daemonize = cfg.daemonize;
    // An upgrade started by the service manager (ExecReload) must return
    // once the new process serves: -d is honoured then.
    if daemonize && notifier.is_some() && !cli.upgrade {
        eprintln!(
            "mithril: warning: NOTIFY_SOCKET is set: a service manager supervises this process, \
             so it stays in the foreground (daemonize ignored)"
        );
        daemonize = false;
    }

    // Taking over, the old process holds the pidfile until it hands over.
    let later = (cli.upgrade && !cfg.pidfile.is_empty()).then(|| cfg.pidfile.clone());
    let pidfile = if cfg.pidfile.is_empty() || cli.upgrade {
        None
    } else {
        match Pidfile::acquire(Path::new(&cfg.pidfile)) {
            Ok(p) => Some(p),
            Err(e) => {
                eprintln!("mithril: {e}");
                return ExitCode::from(1);
            }
        }
    };
    // The logger is installed after the fork (its lines carry the pid it
    // saw at start); check the file here, where the error can be seen.
    if !cfg.logfile.is_empty() {
        let opened = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&cfg.logfile);
        if let Err(e) = opened {
            eprintln!("mithril: cannot open logfile '{}': {e}", cfg.logfile);
            return ExitCode::from(1);
        }
    }

    let report = if daemonize {
        match detach() {
            Ok(Detached::Parent(waiter)) => {
                // The child holds the same lock; leave the file to it.
                if let Some(p) = pidfile {
                    p.disown();
                }
                let child = waiter.child();
                return match waiter.wait() {
                    Ok(()) => ExitCode::SUCCESS,
                    Err(why) => {
                        eprintln!("mithril: {why}");
                        eprintln!("mithril: the daemon (pid {child}) did not start");
                        ExitCode::from(1)
                    }
                };
            }
            Ok(Detached::Child(report)) => Some(report),
            Err(e) => {
                eprintln!("mithril: cannot daemonize: {e}");
                return ExitCode::from(1);
            }
        }
    } else {
        None
    };

    let service = Arc::new(daemon::Service::new(pidfile, later, report, notifier));
    if let Err(e) = mithril::logging::init(cfg.loglevel, &cfg.logfile) {
        let why = format!("cannot open logfile '{}': {e}", cfg.logfile);
        eprintln!("mithril: {why}");
        service.failed(&why);
        return ExitCode::from(1);
    }
    // Already on standard error; into the log file too, when there is one.
    if !cfg.logfile.is_empty() {
        for w in &loaded.warnings {
            log::warn!(target: "mithril::config", "{w}");
        }
    }
    match mithril::server::run_reloadable(cfg, service.clone(), reread) {
        Ok(()) => {
            service.finished();
            ExitCode::SUCCESS
        }
        Err(e) => {
            log::error!(target: "mithril::server", "{e}");
            eprintln!("mithril: {e}");
            service.failed(&e.to_string());
            ExitCode::from(1)
        }
    }
}

/// The command line through [`cli::normalize_args`] and argh; on `--help`
/// or a usage error, the exit code after printing what argh says.
fn parse_args() -> Result<Cli, ExitCode> {
    let args: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let name = args
        .first()
        .and_then(|a| Path::new(a).file_name())
        .and_then(|n| n.to_str())
        .unwrap_or("mithril")
        .to_string();
    let rest = cli::normalize_args(args.get(1..).unwrap_or(&[]));
    let rest: Vec<&str> = rest.iter().map(String::as_str).collect();
    match <Cli as argh::FromArgs>::from_args(&[&name], &rest) {
        Ok(cli) => Ok(cli),
        Err(early) => match early.status {
            Ok(()) => {
                println!("{}", early.output);
                Err(ExitCode::SUCCESS)
            }
            Err(()) => {
                eprintln!("{}", early.output);
                eprintln!("Run {name} --help for more information.");
                Err(ExitCode::from(1))
            }
        },
    }
}

/// `path` made absolute against `base` (the directory mithril started
/// in); empty stays empty.
fn absolute(base: &Path, path: &str) -> String {
    if path.is_empty() {
        return String::new();
    }
    std::path::absolute(base.join(path))
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| path.to_string())
}

/// How a reload (SIGHUP, CONFIG RELOAD) reads the configuration: as at
/// start (the same file, found by its absolute path, the same flags over
/// it, relative paths pinned to the same directory), its warnings logged.
/// `None` without a configuration file.
fn rereader(
    cli: &Cli,
    cfg: &mithril::config::Config,
    base: std::path::PathBuf,
) -> Option<mithril::reload::ReadConfig> {
    let file = cfg.config_file.clone()?;
    let mut again = cli.clone();
    again.config = Some(file);
    again.config_path = None;
    Some(Box::new(move || {
        let loaded = cli::load_loaded(&again)?;
        for w in &loaded.warnings {
            log::warn!(target: "mithril::config", "{w}");
        }
        let mut cfg = loaded.config;
        cfg.logfile = absolute(&base, &cfg.logfile);
        cfg.pidfile = absolute(&base, &cfg.pidfile);
        cfg.upgrade_socket = absolute(&base, &cfg.upgrade_socket);
        Ok(cfg)
    }))
}
