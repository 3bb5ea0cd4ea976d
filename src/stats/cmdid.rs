//! Dense command ids: every command and subcommand of the static table gets
//! a small integer, so per-command counters are plain arrays.
//!
//! A top-level command's id is its position in `command::all()`, found
//! from its address with one subtraction (the table is one static array):
//! that is the path every data command takes. Subcommands follow, container
//! by container in table order; their ids come from a small sorted list of
//! the subcommand arrays' address ranges, built on first use.
//!
//! Invariant: `of(c)` for any `&'static Command` the table hands out is
//! below [`count()`], and `command(of(c))` is `c`. Never allocates after
//! the first call.

use crate::command::{self, Command};
use std::sync::OnceLock;

/// No command (the stamp of a reply slot that is not counted).
pub const NONE: u16 = u16::MAX;

struct Ids {
    /// Every command by id.
    all: Vec<&'static Command>,
    /// (start address, end address, id of the first) per subcommand array,
    /// sorted by address.
    subs: Vec<(usize, usize, u16)>,
}

fn ids() -> &'static Ids {
    // A process-wide static on purpose: a pure function of the static
    // command table, built once on first use and never written again, so
    // it is a constant computed late rather than shared mutable state
    // (nothing configures it, no start-up step sets it).
    static IDS: OnceLock<Ids> = OnceLock::new();
    IDS.get_or_init(|| {
        let top = command::all();
        let mut all: Vec<&'static Command> = top.iter().collect();
        let mut subs = Vec::new();
        for c in top {
            if c.subcommands.is_empty() {
                continue;
            }
            let start = c.subcommands.as_ptr() as usize;
            let end = start + std::mem::size_of_val(c.subcommands);
            subs.push((start, end, all.len() as u16));
            all.extend(c.subcommands.iter());
        }
        subs.sort_unstable();
        Ids { all, subs }
    })
}

/// The id of `cmd`.
#[inline]
pub fn of(cmd: &'static Command) -> u16 {
    let top = command::all();
    let at = cmd as *const Command as usize;
    // One unsigned compare covers both ends of the table.
    let off = at.wrapping_sub(top.as_ptr() as usize);
    if off < std::mem::size_of_val(top) {
        return (off / std::mem::size_of::<Command>()) as u16;
    }
    sub_id(at)
}

#[cold]
fn sub_id(at: usize) -> u16 {
    let size = std::mem::size_of::<Command>();
    let ids = ids();
    let i = ids.subs.partition_point(|&(start, _, _)| start <= at);
    match i.checked_sub(1).and_then(|i| ids.subs.get(i)) {
        Some(&(start, end, first)) if at < end => first + ((at - start) / size) as u16,
        _ => NONE,
    }
}

/// How many ids there are.
pub fn count() -> usize {
    ids().all.len()
}

/// The command with id `id`.
pub fn command(id: u16) -> Option<&'static Command> {
    ids().all.get(usize::from(id)).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_round_trips() {
        let n = count();
        assert!(n > 300 && n < usize::from(NONE), "{n}");
        for id in 0..n as u16 {
            let c = command(id).unwrap();
            assert_eq!(of(c), id, "{}", c.name);
        }
        let get = command::lookup(b"get").unwrap();
        assert_eq!(command(of(get)).unwrap().name, "get");
        let list = command::lookup_full(b"client|list").unwrap();
        assert_eq!(command(of(list)).unwrap().name, "client|list");
        assert!(command(NONE).is_none());
    }
}
