//! What a client says of itself, shown by CLIENT INFO and CLIENT LIST:
//! its name (CLIENT SETNAME, HELLO SETNAME) and its library (CLIENT
//! SETINFO LIB-NAME / LIB-VER).
//!
//! Invariant: none of them is ever empty; setting an empty value clears
//! it, as in Redis. (The caller checked the characters.)

use super::Session;

impl Session {
    /// Its name, if it set one.
    #[inline]
    pub fn name(&self) -> Option<&[u8]> {
        self.name.as_deref()
    }

    /// CLIENT SETNAME / HELLO SETNAME (empty: no name).
    pub fn set_name(&mut self, name: &[u8]) {
        self.name = some_bytes(name);
    }

    /// CLIENT SETINFO LIB-NAME, and LIB-VER.
    #[inline]
    pub fn lib_name(&self) -> Option<&[u8]> {
        self.lib_name.as_deref()
    }

    #[inline]
    pub fn lib_ver(&self) -> Option<&[u8]> {
        self.lib_ver.as_deref()
    }

    /// CLIENT SETINFO LIB-NAME (empty: none).
    pub fn set_lib_name(&mut self, value: &[u8]) {
        self.lib_name = some_bytes(value);
    }

    /// CLIENT SETINFO LIB-VER (empty: none).
    pub fn set_lib_ver(&mut self, value: &[u8]) {
        self.lib_ver = some_bytes(value);
    }
}

/// `None` for an empty value.
fn some_bytes(b: &[u8]) -> Option<Vec<u8>> {
    (!b.is_empty()).then(|| b.to_vec())
}
