//! The script registry: the bodies of the scripts and the code of the
//! function libraries loaded through the proxy, so that a node that lacks
//! one (a replica promoted after a failover, a new master, a node whose
//! cache was flushed directly) gets it again without the client seeing
//! the node's error.
//!
//! ```text
//!   EVAL body ......................─► note_script (SHA-1 of the body)
//!   SCRIPT LOAD body (a master said the SHA) ─► insert_script
//!   FUNCTION LOAD code (a master said the name) ─► insert_library
//!   node: -NOSCRIPT for EVALSHA sha ─► script(sha) ─► SCRIPT LOAD, then the EVALSHA again
//!   node: -ERR Function not found   ─► library_of(function) ─► FUNCTION LOAD, then the FCALL again
//! ```
//!
//! What it owns: two least-recently-used maps (scripts by SHA-1, libraries
//! by name, with the function names each library registers), each bounded
//! by `script-registry-size` bytes (an entry counts its text plus
//! [`ENTRY_OVERHEAD`]); the counters INFO shows.
//!
//! One registry per process, behind a mutex: it is touched only when a
//! script body passes (EVAL, SCRIPT LOAD, FUNCTION LOAD and the management
//! commands), by EVALSHA / FCALL without declared keys (where they go:
//! below), and on a node's NOSCRIPT / "Function not found", never by
//! other commands, so the lock is neither hot nor held long (no I/O, no
//! hashing and no scan under it).
//!
//! Scripts without keys: each script, and each function name, remembers
//! where a call of it with numkeys 0 goes: the slot of the first key its
//! code names literally ([`literal`]), scanned once, at its first such
//! call.
//!
//! Never: keep a slice of a client's read buffer (bodies are copied, so a
//! remembered script does not pin the buffer it arrived in), or grow past
//! its budget.

pub mod literal;
pub mod sha1;

use bytes::Bytes;
use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// What an entry costs beyond its text: the key, the map slots and the
/// LRU order, rounded up.
pub const ENTRY_OVERHEAD: u64 = 96;

/// Where a script called without keys goes, as its body says
/// ([`literal`]): found once, on the first such call.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Hint {
    Unscanned,
    /// The first literal key, or None: any master. The placement of the
    /// calling session's pool turns it into a unit.
    Scanned(Option<Bytes>),
}

/// The same stored text (not a copy with equal bytes: no compare).
fn same(a: &Bytes, b: &Bytes) -> bool {
    a.as_ptr() == b.as_ptr() && a.len() == b.len()
}

/// The key the scanner found, if any, kept.
fn slot_of(key: Option<Vec<u8>>) -> Option<Bytes> {
    key.map(Bytes::from)
}

/// A least-recently-used map of texts with a byte budget (each text with
/// its [`Hint`]).
struct Lru<K> {
    entries: HashMap<K, (Bytes, u64, Hint)>,
    /// Use stamp → key, oldest first.
    order: BTreeMap<u64, K>,
    clock: u64,
    bytes: u64,
    budget: u64,
}

fn cost(text: &[u8]) -> u64 {
    text.len() as u64 + ENTRY_OVERHEAD
}

impl<K: Hash + Eq + Clone> Lru<K> {
    fn new(budget: u64) -> Lru<K> {
        Lru {
            entries: HashMap::new(),
            order: BTreeMap::new(),
            clock: 0,
            bytes: 0,
            budget,
        }
    }

    /// The text of `key`, now the most recently used.
    fn get(&mut self, key: &K) -> Option<Bytes> {
        self.clock += 1;
        let now = self.clock;
        let (text, stamp, _) = self.entries.get_mut(key)?;
        self.order.remove(stamp);
        *stamp = now;
        self.order.insert(now, key.clone());
        Some(text.clone())
    }

    fn hint(&self, key: &K) -> Option<Hint> {
        self.entries.get(key).map(|e| e.2.clone())
    }

    /// Remember the hint of `key`'s text, if it is still that `text`.
    fn set_hint(&mut self, key: &K, text: &Bytes, hint: Hint) {
        if let Some(e) = self.entries.get_mut(key) {
            if same(&e.0, text) {
                e.2 = hint;
            }
        }
    }

    fn contains(&self, key: &K) -> bool {
        self.entries.contains_key(key)
    }

    fn remove(&mut self, key: &K) -> bool {
        match self.entries.remove(key) {
            Some((text, stamp, _)) => {
                self.order.remove(&stamp);
                self.bytes -= cost(&text);
                true
            }
            None => false,
        }
    }

    /// Insert (or replace) `key`, evicting the least recently used entries
    /// until it fits; the keys evicted are returned. A text larger than the
    /// whole budget is not kept (and replaces nothing: the old one goes).
    fn insert(&mut self, key: K, text: Bytes) -> Vec<K> {
        self.remove(&key);
        let need = cost(&text);
        let mut evicted = Vec::new();
        if need > self.budget {
            return evicted;
        }
        while self.bytes + need > self.budget {
            let Some((_, oldest)) = self.order.pop_first() else {
                break;
            };
            if let Some((t, _, _)) = self.entries.remove(&oldest) {
                self.bytes -= cost(&t);
            }
            evicted.push(oldest);
        }
        self.clock += 1;
        self.order.insert(self.clock, key.clone());
        self.entries
            .insert(key, (text, self.clock, Hint::Unscanned));
        self.bytes += need;
        evicted
    }

    fn clear(&mut self) {
        self.entries.clear();
        self.order.clear();
        self.bytes = 0;
    }
}

struct Inner {
    scripts: Lru<[u8; 20]>,
    libraries: Lru<Vec<u8>>,
    /// Function name → the library that registers it, and where a call
    /// of it without keys goes.
    functions: HashMap<Vec<u8>, (Vec<u8>, Hint)>,
    /// Library name → the function names it registers.
    library_functions: HashMap<Vec<u8>, Vec<Vec<u8>>>,
}

impl Inner {
    fn forget_library(&mut self, name: &[u8]) {
        if let Some(fns) = self.library_functions.remove(name) {
            for f in fns {
                if self.functions.get(&f).is_some_and(|l| l.0 == name) {
                    self.functions.remove(&f);
                }
            }
        }
    }
}

/// What INFO shows of the registry.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Figures {
    /// The budget of each map (`script-registry-size`).
    pub budget: u64,
    pub scripts: u64,
    pub script_bytes: u64,
    pub libraries: u64,
    pub library_bytes: u64,
    /// The function names the kept libraries register (as far as their
    /// code names them literally: [`function_names`]).
    pub functions: u64,
    /// Entries dropped to make room, since start.
    pub evictions: u64,
    /// Scripts loaded again on a node that answered NOSCRIPT.
    pub script_reloads: u64,
    /// Libraries loaded again on a node that lacked a function.
    pub function_reloads: u64,
}

/// The process-wide registry (in `Shared`).
pub struct Registry {
    inner: Mutex<Inner>,
    budget: u64,
    evictions: AtomicU64,
    /// Workers that see a script call unanswered for a tick or more.
    stalled: AtomicU64,
    script_reloads: AtomicU64,
    function_reloads: AtomicU64,
}

impl Registry {
    /// A registry keeping at most `budget` bytes of scripts and as much
    /// again of libraries (0: remembers nothing).
    pub fn new(budget: u64) -> Registry {
        Registry {
            inner: Mutex::new(Inner {
                scripts: Lru::new(budget),
                libraries: Lru::new(budget),
                functions: HashMap::new(),
                library_functions: HashMap::new(),
            }),
            budget,
            evictions: AtomicU64::new(0),
            stalled: AtomicU64::new(0),
            script_reloads: AtomicU64::new(0),
            function_reloads: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Remember a script by its SHA-1, or mark it used if it is known (the
    /// body is copied only when it is new). Returns its SHA-1.
    pub fn note_script(&self, body: &[u8]) -> [u8; 20] {
        let sha = sha1::digest(body);
        self.insert_script(sha, body);
        sha
    }

    /// Remember `body` under `sha` (its SHA-1, computed by the caller).
    pub fn insert_script(&self, sha: [u8; 20], body: &[u8]) {
        if cost(body) > self.budget {
            return; // never kept: no copy, no lock
        }
        let mut g = self.lock();
        if g.scripts.get(&sha).is_some() {
            return;
        }
        let evicted = g.scripts.insert(sha, Bytes::copy_from_slice(body));
        drop(g);
        self.count_evictions(evicted.len());
    }

    /// The body of the script named `sha`, if it was seen and is still
    /// kept (it becomes the most recently used).
    pub fn script(&self, sha: &[u8; 20]) -> Option<Bytes> {
        self.lock().scripts.get(sha)
    }

    pub fn has_script(&self, sha: &[u8; 20]) -> bool {
        self.lock().scripts.contains(sha)
    }

    /// SCRIPT FLUSH went through: forget every script.
    pub fn clear_scripts(&self) {
        self.lock().scripts.clear();
    }

    /// Remember the library `name` (as a node named it) and its `code`,
    /// replacing a previous version; the function names it registers are
    /// read from the code ([`function_names`]).
    pub fn insert_library(&self, name: &[u8], code: &[u8]) {
        if cost(code) > self.budget {
            // Too large to keep: the version kept before is stale now.
            return self.remove_library(name);
        }
        let fns = function_names(code);
        let mut g = self.lock();
        g.forget_library(name);
        let evicted = g
            .libraries
            .insert(name.to_vec(), Bytes::copy_from_slice(code));
        for lib in &evicted {
            g.forget_library(lib);
        }
        if g.libraries.contains(&name.to_vec()) {
            for f in &fns {
                g.functions
                    .insert(f.clone(), (name.to_vec(), Hint::Unscanned));
            }
            g.library_functions.insert(name.to_vec(), fns);
        }
        drop(g);
        self.count_evictions(evicted.len());
    }

    /// The name and code of the library that registers `function`.
    pub fn library_of(&self, function: &[u8]) -> Option<(Vec<u8>, Bytes)> {
        let mut g = self.lock();
        let lib = g.functions.get(function)?.0.clone();
        let code = g.libraries.get(&lib)?;
        Some((lib, code))
    }

    /// EVAL body 0: remember the script, and the first key its body names
    /// literally (scanned once while it is kept; a body too
    /// large to keep is scanned each time, [`literal::SCAN_LIMIT`] bytes
    /// at most).
    pub fn note_keyless_script(&self, body: &[u8]) -> Option<Bytes> {
        let sha = self.note_script(body);
        match self.script_slot(&sha) {
            Some(hint) => hint,
            None => slot_of(literal::first_literal_key(body)),
        }
    }

    /// EVALSHA sha 0: the first literal key of the script kept as `sha`
    /// (Some(None): none; None: the script is not kept).
    pub fn script_slot(&self, sha: &[u8; 20]) -> Option<Option<Bytes>> {
        let mut g = self.lock();
        if let Hint::Scanned(slot) = g.scripts.hint(sha)? {
            return Some(slot);
        }
        let body = g.scripts.get(sha)?;
        drop(g); // no scan under the lock
        let slot = slot_of(literal::first_literal_key(&body));
        self.lock()
            .scripts
            .set_hint(sha, &body, Hint::Scanned(slot.clone()));
        Some(slot)
    }

    /// FCALL function 0: the first literal key in the code of
    /// `function` (or of its library, [`literal::function_literal_key`]),
    /// if the registry keeps its library.
    pub fn function_slot(&self, function: &[u8]) -> Option<Bytes> {
        let mut g = self.lock();
        let (lib, hint) = g.functions.get(function)?.clone();
        if let Hint::Scanned(slot) = hint {
            return slot;
        }
        let code = g.libraries.get(&lib)?;
        drop(g); // no scan under the lock
        let slot = slot_of(literal::function_literal_key(&code, function));
        let mut g = self.lock();
        // Unless the library was replaced meanwhile.
        if g.libraries
            .entries
            .get(&lib)
            .is_some_and(|e| same(&e.0, &code))
        {
            if let Some(f) = g.functions.get_mut(function) {
                f.1 = Hint::Scanned(slot.clone());
            }
        }
        slot
    }

    /// FUNCTION DELETE went through.
    pub fn remove_library(&self, name: &[u8]) {
        let mut g = self.lock();
        g.forget_library(name);
        g.libraries.remove(&name.to_vec());
    }

    /// FUNCTION FLUSH (or RESTORE ... FLUSH) went through.
    pub fn clear_libraries(&self) {
        let mut g = self.lock();
        g.libraries.clear();
        g.functions.clear();
        g.library_functions.clear();
    }

    /// A worker starts (`true`) or stops seeing a script call unanswered
    /// for a tick or more on one of its connections.
    pub fn note_stalled(&self, stalled: bool) {
        if stalled {
            self.stalled.fetch_add(1, Ordering::Relaxed);
        } else {
            self.stalled.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Whether some worker sees a script that runs long (PING then asks
    /// the masters).
    pub fn scripts_stalled(&self) -> bool {
        self.stalled.load(Ordering::Relaxed) > 0
    }

    /// A script was loaded again on a node that lacked it.
    pub fn count_script_reload(&self) {
        self.script_reloads.fetch_add(1, Ordering::Relaxed);
    }

    /// A library was loaded again on a node that lacked it.
    pub fn count_function_reload(&self) {
        self.function_reloads.fetch_add(1, Ordering::Relaxed);
    }

    fn count_evictions(&self, n: usize) {
        if n > 0 {
            self.evictions.fetch_add(n as u64, Ordering::Relaxed);
        }
    }

    pub fn figures(&self) -> Figures {
        let g = self.lock();
        Figures {
            budget: self.budget,
            scripts: g.scripts.entries.len() as u64,
            script_bytes: g.scripts.bytes,
            libraries: g.libraries.entries.len() as u64,
            library_bytes: g.libraries.bytes,
            functions: g.functions.len() as u64,
            evictions: self.evictions.load(Ordering::Relaxed),
            script_reloads: self.script_reloads.load(Ordering::Relaxed),
            function_reloads: self.function_reloads.load(Ordering::Relaxed),
        }
    }
}

/// The function names a library's code registers, as far as they are
/// written literally: `redis.register_function('name', ...)` (or with
/// double quotes, `[[name]]`, or `server.`), and the table form
/// `redis.register_function{function_name='name', ...}`. A name computed
/// at load time is not found; calling such a function on a node that lacks
/// the library gets the node's error. Names are what Redis allows
/// (letters, digits, underscores).
pub fn function_names(code: &[u8]) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = Vec::new();
    for i in registrations(code) {
        let name = if code.get(i) == Some(&b'{') {
            // The table form: the first `function_name = literal` after it.
            name_field(code, i)
        } else {
            string_literal(code, i)
        };
        if let Some(n) = name {
            let valid = !n.is_empty() && n.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'_');
            if valid && !out.contains(&n) {
                out.push(n);
            }
        }
    }
    out
}

/// What a node over `maxmemory` does with a script body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverMemory {
    Runs,
    Refused,
}

/// Over `maxmemory`, whether a node would run `body`: with a shebang, only
/// when its flags name `no-writes` or `allow-oom`; without one (Redis's
/// compatibility mode, where each call is checked as it runs), unless it
/// calls a command that may grow memory (`denyoom`) by a literal name:
/// `redis.call('set', ...)`, `redis.pcall("LPUSH", ...)`. A name computed
/// at run time is not seen (the node decides then).
pub fn over_memory(body: &[u8]) -> OverMemory {
    if let Some(rest) = body.strip_prefix(b"#!") {
        let line = rest.split(|&b| b == b'\n').next().unwrap_or_default();
        let allowed = line
            .split(|&b| b == b' ')
            .filter_map(|w| w.strip_prefix(b"flags="))
            .flat_map(|f| f.split(|&b| b == b','))
            .any(|f| f == b"no-writes" || f == b"allow-oom");
        return if allowed {
            OverMemory::Runs
        } else {
            OverMemory::Refused
        };
    }
    let mut at = 0;
    while let Some(pos) = find(body, b"redis.", at) {
        at = pos + 6;
        let rest = &body[at..];
        let call = if rest.starts_with(b"call") {
            4
        } else if rest.starts_with(b"pcall") {
            5
        } else {
            continue;
        };
        let mut i = skip_ws(body, at + call);
        if body.get(i) != Some(&b'(') {
            continue;
        }
        i = skip_ws(body, i + 1);
        if let Some(name) = string_literal(body, i) {
            let grows = crate::command::lookup(&name)
                .is_some_and(|c| c.flags & crate::command::flags::DENYOOM != 0);
            if grows {
                return OverMemory::Refused;
            }
        }
    }
    OverMemory::Runs
}

/// Whether `function`, as `code` registers it, may run while a node is
/// over `maxmemory`: its flags name `no-writes` or `allow-oom`. `None` when
/// the code does not register it in a form this reads (the literal name
/// in `register_function('f', ...)` or in the table form's
/// `function_name`, the flags as a table of string literals).
pub fn runs_over_memory(code: &[u8], function: &[u8]) -> Option<bool> {
    for i in registrations(code) {
        if code.get(i) != Some(&b'{') {
            // The positional form takes no flags.
            if string_literal(code, i).as_deref() == Some(function) {
                return Some(false);
            }
            continue;
        }
        let end = table_end(code, i)?;
        let table = &code[i..end];
        if name_field(table, 0).as_deref() != Some(function) {
            continue;
        }
        let allowed = find_flags(table).is_some_and(|flags| {
            [
                &b"'no-writes'"[..],
                b"\"no-writes\"",
                b"'allow-oom'",
                b"\"allow-oom\"",
            ]
            .iter()
            .any(|f| find(flags, f, 0).is_some())
        });
        return Some(allowed);
    }
    None
}

/// Where the argument of each `register_function` call in `code` starts
/// (after the `(`, if any): a name literal, or the table form's `{`.
fn registrations(code: &[u8]) -> impl Iterator<Item = usize> + '_ {
    const CALL: &[u8] = b"register_function";
    let mut at = 0;
    std::iter::from_fn(move || {
        let pos = find(code, CALL, at)?;
        at = pos + CALL.len();
        let i = skip_ws(code, at);
        Some(match code.get(i) {
            Some(&b'(') => skip_ws(code, i + 1),
            _ => i,
        })
    })
}

/// The literal of the first `function_name = '...'` in `code` from `from`.
fn name_field(code: &[u8], from: usize) -> Option<Vec<u8>> {
    const FIELD: &[u8] = b"function_name";
    let f = find(code, FIELD, from)?;
    let j = skip_ws(code, f + FIELD.len());
    (code.get(j) == Some(&b'=')).then(|| string_literal(code, skip_ws(code, j + 1)))?
}

/// The `{...}` of a table form's `flags = {...}` (nested tables of the
/// callback are skipped by brace depth).
fn find_flags(table: &[u8]) -> Option<&[u8]> {
    let mut from = 0;
    while let Some(f) = find(table, b"flags", from) {
        from = f + 5;
        let j = skip_ws(table, from);
        if table.get(j) != Some(&b'=') {
            continue;
        }
        let k = skip_ws(table, j + 1);
        if table.get(k) == Some(&b'{') {
            let end = table_end(table, k)?;
            return table.get(k..end);
        }
    }
    None
}

/// Where the table opened at `open` ends (one past its `}`), counting
/// braces outside string literals.
fn table_end(code: &[u8], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = open;
    while let Some(&b) = code.get(i) {
        match b {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            b'\'' | b'"' => {
                let close = code
                    .get(i + 1..)?
                    .iter()
                    .position(|&c| c == b || c == b'\n')?;
                i += close + 1;
            }
            _ => {}
        }
        i += 1;
    }
    None
}

fn find(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    hay.get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| p + from)
}

fn skip_ws(code: &[u8], mut i: usize) -> usize {
    while code.get(i).is_some_and(u8::is_ascii_whitespace) {
        i += 1;
    }
    i
}

/// A Lua string literal without escapes starting at `i`: '...', "...",
/// or a long bracket [[...]] / [=[...]=].
fn string_literal(code: &[u8], i: usize) -> Option<Vec<u8>> {
    match *code.get(i)? {
        q @ (b'\'' | b'"') => {
            let body = code.get(i + 1..)?;
            let end = body
                .iter()
                .position(|&b| b == q || b == b'\\' || b == b'\n')?;
            (body[end] == q).then(|| body[..end].to_vec())
        }
        b'[' => {
            let level = code
                .get(i + 1..)?
                .iter()
                .take_while(|&&b| b == b'=')
                .count();
            if code.get(i + 1 + level) != Some(&b'[') {
                return None;
            }
            let start = i + 2 + level;
            let mut close = vec![b']'];
            close.extend(std::iter::repeat(b'=').take(level));
            close.push(b']');
            let end = find(code, &close, start)?;
            Some(code[start..end].to_vec())
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests;
