//! Logging: the `log` facade through env_logger, to standard error or to
//! `logfile`. The file can be reopened (SIGHUP) so logrotate can move it
//! away: lines written after the reopen land in a fresh file at the
//! configured path.
//!
//! Line format, close to Redis's: `PID:THREAD TIMESTAMP LEVEL message`,
//! with Redis's level marks (`.` debug, `-` verbose, `*` notice,
//! `#` warning).

use crate::config::LogLevel;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::Mutex;

static SINK: Mutex<Option<(PathBuf, File)>> = Mutex::new(None);

struct Sink;

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut g = SINK.lock().unwrap_or_else(|p| p.into_inner());
        match g.as_mut() {
            Some((_, f)) => f.write(buf),
            None => io::stderr().write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        let mut g = SINK.lock().unwrap_or_else(|p| p.into_inner());
        match g.as_mut() {
            Some((_, f)) => f.flush(),
            None => io::stderr().flush(),
        }
    }
}

fn open(path: &PathBuf) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

/// Install the logger. `logfile` empty: standard error.
pub fn init(level: LogLevel, logfile: &str) -> io::Result<()> {
    if !logfile.is_empty() {
        let path = PathBuf::from(logfile);
        let f = open(&path)?;
        *SINK.lock().unwrap_or_else(|p| p.into_inner()) = Some((path, f));
    }
    let pid = std::process::id();
    let mut b = env_logger::Builder::new();
    // The builder lets everything through; the `log` crate's global
    // maximum is the one knob, so CONFIG SET loglevel can raise it as well
    // as lower it.
    b.filter_level(log::LevelFilter::Trace)
        // rustls narrates every handshake at debug: its warnings only
        // (what went wrong reaches the log through mithril's own lines).
        .filter_module("rustls", log::LevelFilter::Warn)
        .target(env_logger::Target::Pipe(Box::new(Sink)))
        .format(move |buf, record| {
            let mark = match record.level() {
                log::Level::Error | log::Level::Warn => '#',
                log::Level::Info => '*',
                log::Level::Debug => '-',
                log::Level::Trace => '.',
            };
            let thread = std::thread::current();
            let name = thread.name().unwrap_or("main");
            writeln!(
                buf,
                "{pid}:{name} {} {mark} {}",
                buf.timestamp_millis(),
                record.args()
            )
        });
    b.try_init().map_err(|e| io::Error::other(e.to_string()))?;
    log::set_max_level(level.to_log_filter());
    Ok(())
}

/// Reopen the log file at its configured path (after logrotate moved it).
pub fn reopen() -> io::Result<()> {
    let mut g = SINK.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((path, f)) = g.as_mut() {
        *f = open(path)?;
    }
    Ok(())
}

/// Change the level at run time (CONFIG SET loglevel).
pub fn set_level(level: LogLevel) {
    log::set_max_level(level.to_log_filter());
}
