//! Running mithril under valgrind's callgrind for the benches that count
//! instructions (compare's callgrind mode, stats_cost's), and filling the
//! key space first so every GET of those runs hits.
//!
//! Owns nothing: it writes a wrapper script and reads callgrind's output
//! file. Invariant: the wrapper `exec`s valgrind, so the PID the harness
//! holds is valgrind's and SIGTERM reaches it (callgrind writes its file at
//! exit).

use crate::support::{key_slot, Conn, Mithril, RedisCluster, Reply};
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

/// SETs `key:%012d` (the names redis-benchmark's `-r` makes) for the whole
/// key space straight on the owning masters, so no GET of the run misses.
pub fn prefill(cluster: &RedisCluster, keyspace: u64, data_size: u32) -> Result<(), String> {
    let map = cluster.slot_map();
    let value = vec![b'x'; data_size as usize];
    let mut per_node: Vec<(u16, Vec<Vec<Vec<u8>>>)> = Vec::new();
    for i in 0..keyspace {
        let key = format!("key:{i:012}").into_bytes();
        let slot = key_slot(&key);
        let port = map
            .iter()
            .find(|&&(a, b, _)| (a..=b).contains(&slot))
            .map(|&(_, _, p)| p)
            .ok_or_else(|| format!("no node serves slot {slot}"))?;
        let cmd = vec![b"SET".to_vec(), key, value.clone()];
        match per_node.iter_mut().find(|(p, _)| *p == port) {
            Some((_, cmds)) => cmds.push(cmd),
            None => per_node.push((port, vec![cmd])),
        }
    }
    for (port, cmds) in per_node {
        let mut c = Conn::try_connect(&format!("127.0.0.1:{port}"))
            .map_err(|e| format!("cannot reach node {port}: {e}"))?;
        for batch in cmds.chunks(1000) {
            for r in c.pipeline(batch) {
                if !matches!(&r, Reply::Simple(s) if s == "OK") {
                    return Err(format!("prefill SET on node {port}: {r:?}"));
                }
            }
        }
    }
    Ok(())
}
