//! Running mithril under valgrind's callgrind for the benches that count
//! instructions (compare's callgrind mode, stats_cost's).
//!
//! Owns nothing: it writes a wrapper script and reads callgrind's output
//! file. Invariant: the wrapper `exec`s valgrind, so the PID the harness
//! holds is valgrind's and SIGTERM reaches it (callgrind writes its file at
//! exit).

use crate::support::Mithril;
use std::path::{Path, PathBuf};

/// `dir/<name>.sh`: runs mithril under callgrind, writing to `out`. The
/// support harness starts it as it would start mithril (`-c CONF`), and
/// `exec` keeps the PID, so its signals reach valgrind.
pub fn wrapper_script(dir: &Path, name: &str, bin: &Path, out: &Path) -> Result<PathBuf, String> {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(format!("{name}.sh"));
    let text = format!(
        "#!/bin/sh\nexec valgrind --tool=callgrind --callgrind-out-file='{}' '{}' \"$@\"\n",
        out.display(),
        bin.display()
    );
    std::fs::write(&path, text)
        .and_then(|()| std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(path)
}

/// Stops mithril (SIGTERM; callgrind writes its file at exit) and reads the
/// total Ir from the file.
pub fn stop_and_read(m: &mut Mithril, out: &Path) -> Result<u64, String> {
    let code = m.stop();
    if code != Some(0) {
        return Err(format!(
            "mithril under valgrind did not exit cleanly ({code:?}); its output:\n{}",
            crate::support::tail_file(&m.stdio_path, 20)
        ));
    }
    let text = std::fs::read_to_string(out)
        .map_err(|e| format!("no callgrind output at {}: {e}", out.display()))?;
    text.lines()
        .find_map(|l| {
            l.strip_prefix("totals:")
                .or_else(|| l.strip_prefix("summary:"))
        })
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .ok_or_else(|| format!("no totals line in {}", out.display()))
}
