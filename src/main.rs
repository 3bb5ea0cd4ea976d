//! The mithril daemon: parse the command line and the config, set up
//! logging, run the server.

use mithril::config::cli::{self, Cli};
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli: Cli = argh::from_env();
    if cli.version {
        println!("{}", cli::version_string());
        return ExitCode::SUCCESS;
    }
    if cli.test_config {
        return ExitCode::from(cli::run_test(&cli) as u8);
    }
    let cfg = match cli::load(&cli) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("mithril: {e}");
            return ExitCode::from(1);
        }
    };
    if let Err(e) = mithril::logging::init(cfg.loglevel, &cfg.logfile) {
        eprintln!("mithril: cannot open logfile '{}': {e}", cfg.logfile);
        return ExitCode::from(1);
    }
    match mithril::server::run(cfg) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            log::error!(target: "mithril::server", "{e}");
            eprintln!("mithril: {e}");
            ExitCode::from(1)
        }
    }
}
