//! Process CPU time and machine load, read from `/proc`.
//!
//! Owns nothing: it only reads `/proc/PID/stat`, `/proc/stat` and
//! `/proc/loadavg`.
//! Invariant: CPU time is user + system time of the whole process (every
//! thread), in clock ticks, as the kernel accounts it. Never: signal or
//! otherwise touch the processes it reads.

use std::time::Duration;

/// utime + stime of process `pid` (all its threads), in clock ticks; `None`
/// if the process is gone or the file cannot be parsed.
pub fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) sits in parentheses and may contain spaces;
    // the fields after the last ')' start with field 3, the state.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    // utime and stime are fields 14 and 15 of the line, so 11 and 12 here.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// Sum of `cpu_ticks` over `pids`; `None` if any of them cannot be read.
pub fn cpu_ticks_sum(pids: &[u32]) -> Option<u64> {
    pids.iter().map(|&p| cpu_ticks(p)).sum()
}

/// CPU time (user + system) of every child this process has waited for,
/// in clock ticks: the before/after difference around one redis-benchmark
/// run is that run's CPU (rb::run reaps it; the cluster's servers are
/// reaped only at the end).
pub fn reaped_children_ticks() -> u64 {
    // SAFETY: getrusage writes into the rusage we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above: `ru` is ours and large enough.
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) } != 0 {
        return 0;
    }
    let us = |t: libc::timeval| t.tv_sec as f64 * 1e6 + t.tv_usec as f64;
    ((us(ru.ru_utime) + us(ru.ru_stime)) * ticks_per_sec() / 1e6).round() as u64
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`, 100 on usual kernels).
pub fn ticks_per_sec() -> f64 {
    // SAFETY: sysconf takes no pointers.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// Ticks as a duration.
pub fn ticks_to_duration(ticks: u64) -> Duration {
    Duration::from_secs_f64(ticks as f64 / ticks_per_sec())
}

/// The whole machine's CPU time, from the first line of `/proc/stat`, in
/// clock ticks: what no process was busy with (idle), and what the
/// hypervisor took from this guest (steal), of all of it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Machine {
    pub idle: u64,
    pub steal: u64,
    pub total: u64,
}

impl Machine {
    pub fn now() -> Option<Machine> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        Machine::parse(stat.lines().next()?)
    }

    /// `cpu  user nice system idle iowait irq softirq steal ...`; guest
    /// time is already inside user and nice, so it is not added again.
    fn parse(line: &str) -> Option<Machine> {
        let mut f = line.split_whitespace();
        if f.next()? != "cpu" {
            return None;
        }
        let v: Vec<u64> = f.take(8).map(|x| x.parse().ok()).collect::<Option<_>>()?;
        let at = |i: usize| v.get(i).copied().unwrap_or(0);
        Some(Machine {
            idle: at(3) + at(4),
            steal: at(7),
            total: v.iter().sum(),
        })
    }

    /// The time between `before` and `self`.
    pub fn since(self, before: Machine) -> Machine {
        Machine {
            idle: self.idle.saturating_sub(before.idle),
            steal: self.steal.saturating_sub(before.steal),
            total: self.total.saturating_sub(before.total),
        }
    }

    pub fn add(self, o: Machine) -> Machine {
        Machine {
            idle: self.idle + o.idle,
            steal: self.steal + o.steal,
            total: self.total + o.total,
        }
    }

    /// Idle and steal, in percent of the whole; `None` with no time.
    pub fn shares(self) -> Option<(f64, f64)> {
        let t = self.total as f64;
        (self.total > 0).then(|| (self.idle as f64 * 100.0 / t, self.steal as f64 * 100.0 / t))
    }
}

/// The first three fields of `/proc/loadavg` ("1-min 5-min 15-min").
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| "unknown".to_string())
}

/// Number of CPUs this process may run on.
pub fn nproc() -> usize {
    std::thread::available_parallelism().map_or(0, |n| n.get())
}
