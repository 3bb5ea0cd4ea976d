//! `make install` and `make uninstall` as a packager runs them: DESTDIR and
//! PREFIX honoured, the config installed once and never overwritten, a
//! modified config kept by uninstall. The binary under test is installed
//! (MITHRIL=...), so no release build is started.

mod support;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

fn make(dest: &Path, target: &str, extra: &[&str]) -> String {
    let out = Command::new("make")
        .arg("-C")
        .arg(env!("CARGO_MANIFEST_DIR"))
        .arg("--no-print-directory")
        .arg(target)
        .arg(format!("DESTDIR={}", dest.display()))
        .arg("PREFIX=/usr")
        .arg(format!("MITHRIL={}", support::bin().display()))
        .args(extra)
        .output()
        .unwrap_or_else(|e| panic!("cannot run make: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "make {target} failed:\n{text}");
    text
}

/// Every file under `root`, relative, sorted.
fn tree(root: &Path) -> Vec<String> {
    fn walk(dir: &Path, root: &Path, out: &mut Vec<String>) {
        for entry in fs::read_dir(dir).unwrap().flatten() {
            let p = entry.path();
            if p.is_dir() {
                walk(&p, root, out);
            } else {
                out.push(p.strip_prefix(root).unwrap().display().to_string());
            }
        }
    }
    let mut out = Vec::new();
    if root.exists() {
        walk(root, root, &mut out);
    }
    out.sort();
    out
}

fn mode(p: &Path) -> u32 {
    fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

#[test]
fn make_install_lays_out_the_tree_and_keeps_a_modified_config() {
    let dest = support::make_temp_dir();
    make(&dest, "install", &[]);
    assert_eq!(
        tree(&dest),
        [
            "usr/bin/mithril",
            "usr/etc/mithril/mithril.conf",
            "usr/share/man/man5/mithril.conf.5",
            "usr/share/man/man8/mithril.8",
        ]
    );
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let conf = dest.join("usr/etc/mithril/mithril.conf");
    assert_eq!(mode(&dest.join("usr/bin/mithril")), 0o755);
    assert_eq!(mode(&conf), 0o644);
    assert_eq!(mode(&dest.join("usr/share/man/man8/mithril.8")), 0o644);
    assert_eq!(
        fs::read(&conf).unwrap(),
        fs::read(root.join("conf/mithril.conf")).unwrap()
    );
    assert_eq!(
        fs::read(dest.join("usr/bin/mithril")).unwrap(),
        fs::read(support::bin()).unwrap()
    );

    // The administrator edits the config; a second install keeps it.
    let edited = "cluster-nodes 10.1.2.3:7000\nport 6380\n";
    fs::write(&conf, edited).unwrap();
    let out = make(&dest, "install", &[]);
    assert!(out.contains("keeping the existing"), "{out}");
    assert_eq!(fs::read_to_string(&conf).unwrap(), edited);

    // SYSCONFDIR and MANDIR move their files.
    let other = support::make_temp_dir();
    make(
        &other,
        "install",
        &["SYSCONFDIR=/etc", "MANDIR=/usr/man", "BINDIR=/usr/sbin"],
    );
    assert_eq!(
        tree(&other),
        [
            "etc/mithril/mithril.conf",
            "usr/man/man5/mithril.conf.5",
            "usr/man/man8/mithril.8",
            "usr/sbin/mithril",
        ]
    );

    // Uninstall removes what install put there, but not an edited config.
    let out = make(&dest, "uninstall", &[]);
    assert!(out.contains("keeping the modified"), "{out}");
    assert_eq!(tree(&dest), ["usr/etc/mithril/mithril.conf"]);
    // An unmodified one goes, with its directory.
    make(
        &other,
        "uninstall",
        &["SYSCONFDIR=/etc", "MANDIR=/usr/man", "BINDIR=/usr/sbin"],
    );
    assert_eq!(tree(&other), Vec::<String>::new());
    assert!(!other.join("etc/mithril").exists());
    support::remove_temp_dir(&dest);
    support::remove_temp_dir(&other);
}
