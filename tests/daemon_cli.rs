//! The command line of the real binary: `-t` verdicts that name file and
//! line, and twemproxy's flags and spellings accepted where they mean the
//! same thing.

mod support;

use std::fs;
use std::path::Path;
use std::process::Output;
use support::run_mithril;

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    fs::write(&p, text).unwrap();
    p.display().to_string()
}

#[test]
fn test_mode_on_broken_configs_exits_1_naming_file_and_line() {
    let dir = support::make_temp_dir();
    let native = write(
        &dir,
        "bad.conf",
        "cluster-nodes 127.0.0.1:7000\n\nport 70000\n",
    );
    let o = run_mithril(&["-t", "-c", &native]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err(&o).contains(&format!(
            "{native}:3: 'port 70000': port must be between 0 and 65535"
        )),
        "{}",
        err(&o)
    );
    assert!(err(&o).contains("test failed"));
    assert_eq!(out(&o), "");

    let yml = write(
        &dir,
        "bad.yml",
        "alpha:\n  listen: 127.0.0.1:22121\n  redis: true\n  hash_tag: \"abc\"\n  servers:\n   - 127.0.0.1:7000:1\n",
    );
    let o = run_mithril(&["-t", "-c", &yml]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err(&o).contains(&format!("{yml}:4: 'hash_tag: abc'")),
        "{}",
        err(&o)
    );

    let px = write(&dir, "bad.conf2", "Bind 127.0.0.1:7617\nWorkerThreads many\nClusterServerPool {\n  Servers {\n    + 127.0.0.1:7000\n  }\n}\n");
    let o = run_mithril(&["-t", &px]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err(&o).contains(&format!("{px}:2: 'WorkerThreads many'")),
        "{}",
        err(&o)
    );

    // A twemproxy file that is fine but for a key with no meaning here:
    // syntax ok, and the warning names file and line.
    let yml = write(
        &dir,
        "good.yml",
        "alpha:\n  listen: 127.0.0.1:22121\n  redis: true\n  reuseport: true\n  servers:\n   - 127.0.0.1:7000:1\n",
    );
    let o = run_mithril(&["-t", "-c", &yml]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert_eq!(
        out(&o),
        format!("configuration file {yml} (twemproxy (nutcracker) configuration) syntax is ok\n")
    );
    assert!(
        err(&o).starts_with(&format!(
            "mithril: warning: {yml}:4: 'reuseport: true': ignored"
        )),
        "{}",
        err(&o)
    );

    let good = write(&dir, "good.conf", "cluster-nodes 127.0.0.1:7000\n");
    let o = run_mithril(&["-t", "-c", &good]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert_eq!(out(&o), format!("configuration file {good} syntax is ok\n"));
    support::remove_temp_dir(&dir);
}

#[test]
fn twemproxy_flags_are_accepted() {
    let dir = support::make_temp_dir();
    let conf = write(&dir, "m.conf", "cluster-nodes 127.0.0.1:7000\n");
    let log = dir.join("x.log").display().to_string();
    let pid = dir.join("x.pid").display().to_string();

    // -V is the version, as for nutcracker.
    let o = run_mithril(&["-V"]);
    assert_eq!(out(&o), format!("mithril {}\n", env!("CARGO_PKG_VERSION")));

    // Short and long spellings, attached values, bundled switches: the
    // printed configuration shows what each flag set.
    for args in [
        vec![
            "-t",
            "--print-config",
            "-c",
            &conf,
            "-d",
            "-p",
            &pid,
            "-o",
            &log,
            "-v",
            "8",
        ],
        vec![
            "--test-conf",
            "--print-config",
            &format!("--conf-file={conf}"),
            "--daemonize",
            &format!("--pid-file={pid}"),
            &format!("--output={log}"),
            "--verbose=7",
        ],
        vec![
            "-dt",
            "--print-config",
            "-c",
            &conf,
            &format!("-p{pid}"),
            &format!("-o{log}"),
            "-v8",
        ],
    ] {
        let o = run_mithril(&args);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", err(&o));
        let printed = out(&o);
        for line in [
            "daemonize yes".to_string(),
            format!("pidfile {pid}"),
            format!("logfile {log}"),
            "loglevel verbose".to_string(),
        ] {
            assert!(
                printed.lines().any(|l| l == line),
                "{args:?}: no {line:?} in\n{printed}"
            );
        }
    }
    for (v, level) in [
        ("0", "warning"),
        ("4", "warning"),
        ("5", "notice"),
        ("6", "notice"),
        ("9", "debug"),
        ("11", "debug"),
    ] {
        let o = run_mithril(&["-t", "--print-config", "-c", &conf, "-v", v]);
        assert!(
            out(&o).lines().any(|l| l == format!("loglevel {level}")),
            "-v {v}"
        );
    }
    let o = run_mithril(&["-t", "-c", &conf, "-v", "12"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(err(&o).contains("'-v 12'"), "{}", err(&o));

    // Stats flags: -s and -a set stats-port and stats-bind; the others are
    // accepted with a warning each; bad values refused.
    let o = run_mithril(&[
        "-t",
        "--print-config",
        "-c",
        &conf,
        "-s",
        "22222",
        "-a",
        "0.0.0.0",
        "-i",
        "30000",
        "-m",
        "16384",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let printed = out(&o);
    assert!(
        printed.lines().any(|l| l == "stats-port 22222"),
        "{printed}"
    );
    assert!(
        printed.lines().any(|l| l == "stats-bind 0.0.0.0"),
        "{printed}"
    );
    let e = err(&o);
    for flag in ["'-i 30000'", "'-m 16384'"] {
        assert_eq!(
            e.lines()
                .filter(|l| l.starts_with("mithril: warning: command line: ") && l.contains(flag))
                .count(),
            1,
            "{flag}: {e}"
        );
    }
    let o = run_mithril(&["-t", "-c", &conf, "-s", "http"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(err(&o).contains("-s takes a port number"), "{}", err(&o));
    support::remove_temp_dir(&dir);
}
