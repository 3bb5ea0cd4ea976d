//! One `user` line of the configuration, as written and as understood.
//!
//! ```text
//!   user NAME [on|off] [>password | #sha256hex | nopass | resetpass ...]
//!             [mode read|write|admin]
//!             [~pattern | %R~pattern | %W~pattern | %RW~pattern | allkeys | resetkeys ...]
//!             [&pattern | allchannels | resetchannels ...]
//! ```
//!
//! Owns [`UserSpec`] (the parsed line, which also keeps the words as given
//! so that `--print-config` writes them back unchanged) and its two other
//! written forms: [`UserSpec::canonical`] (passwords as `#<sha256>`, used
//! by `ACL LIST`, `CONFIG GET user` and for what the running proxy keeps)
//! and [`UserSpec::hashed`].
//!
//! Rules follow Redis's ACL words where Redis has one; commands are granted
//! by `mode` (predixy's read / write / admin) instead of `+`/`-` rules. A
//! line without any key rule allows every key, and one without any channel
//! rule every channel (Redis would allow none): a user line is about who
//! may do what, and the common case is "everything, within a mode".
//!
//! Never: show a `>password` in a `Debug` output or an error message.

use super::sha256;

/// A password as the configuration gives it.
#[derive(Clone, PartialEq, Eq)]
pub enum Password {
    /// `>password`: the clear text (hashed as soon as the proxy starts).
    Plain(String),
    /// `#<64 hex digits>`: its SHA-256 digest.
    Hash([u8; 32]),
}

impl Password {
    /// The SHA-256 digest the proxy compares with.
    pub fn digest(&self) -> [u8; 32] {
        match self {
            Password::Plain(p) => sha256::digest(p.as_bytes()),
            Password::Hash(h) => *h,
        }
    }
}

impl std::fmt::Debug for Password {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "#{}", sha256::hex(&self.digest()))
    }
}

/// What a user may run: each mode includes the ones before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mode {
    /// Read-only commands, plus connection, transaction, pub/sub
    /// subscription and introspection commands.
    Read,
    /// Also every command that writes (and scripts, SCRIPT LOAD, FUNCTION
    /// LOAD).
    Write,
    /// Everything, the admin and dangerous commands included.
    Admin,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Read => "read",
            Mode::Write => "write",
            Mode::Admin => "admin",
        }
    }

    fn parse(s: &str) -> Option<Mode> {
        [Mode::Read, Mode::Write, Mode::Admin]
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(s))
    }
}

/// One key pattern and the access it grants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyPattern {
    pub pattern: String,
    /// Keys of read-only commands may match it (`~`, `%R~`, `%RW~`).
    pub read: bool,
    /// Keys of commands that write may match it (`~`, `%W~`, `%RW~`).
    pub write: bool,
}

impl KeyPattern {
    fn word(&self) -> String {
        let prefix = match (self.read, self.write) {
            (true, false) => "%R~",
            (false, true) => "%W~",
            _ => "~",
        };
        format!("{prefix}{}", self.pattern)
    }
}

/// A parsed `user` line.
#[derive(Clone, PartialEq, Eq)]
pub struct UserSpec {
    pub name: String,
    /// `on`: the user may authenticate (Redis's default for a new user is
    /// `off`, and so is this one's).
    pub enabled: bool,
    /// `nopass`: any password (or none) authenticates as this user.
    pub nopass: bool,
    pub passwords: Vec<Password>,
    pub mode: Mode,
    /// `None`: no key rule was given, every key is allowed.
    pub keys: Option<Vec<KeyPattern>>,
    /// `None`: no channel rule was given, every channel is allowed.
    pub channels: Option<Vec<String>>,
    /// The words after the name, as written.
    pub rules: Vec<String>,
}

impl std::fmt::Debug for UserSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.canonical())
    }
}

/// Characters a user name may not contain: it is written in CLIENT INFO
/// lines and in the configuration without quoting.
fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_graphic())
}

impl UserSpec {
    /// The user `default` as it is when the configuration says nothing of
    /// it: enabled, no password, everything allowed.
    pub fn builtin_default() -> UserSpec {
        UserSpec {
            name: "default".to_string(),
            enabled: true,
            nopass: true,
            passwords: Vec::new(),
            mode: Mode::Admin,
            keys: None,
            channels: None,
            rules: vec!["on".into(), "nopass".into(), "mode".into(), "admin".into()],
        }
    }

    /// Parses the arguments of a `user` directive (the name first). The
    /// message of an error never quotes a password.
    pub fn parse(args: &[&str]) -> Result<UserSpec, String> {
        let Some((&name, rules)) = args.split_first() else {
            return Err("user needs a name".to_string());
        };
        if !valid_name(name) {
            return Err(format!(
                "user: '{name}' is not a valid user name (printable characters, no spaces)"
            ));
        }
        let mut u = UserSpec {
            name: name.to_string(),
            enabled: false,
            nopass: false,
            passwords: Vec::new(),
            mode: Mode::Read,
            keys: None,
            channels: None,
            rules: rules.iter().map(|r| r.to_string()).collect(),
        };
        let fail = |m: String| Err(format!("user {name}: {m}"));
        let mut i = 0;
        while let Some(&rule) = rules.get(i) {
            i += 1;
            let lower = rule.to_ascii_lowercase();
            if let Some(pw) = rule.strip_prefix('>') {
                u.passwords.push(Password::Plain(pw.to_string()));
                u.nopass = false;
            } else if let Some(hex) = rule.strip_prefix('#') {
                match sha256::parse_hex(hex) {
                    Some(h) => u.passwords.push(Password::Hash(h)),
                    None => {
                        return fail(
                            "a '#' rule takes the password's SHA-256 digest: 64 hex digits"
                                .to_string(),
                        )
                    }
                }
                u.nopass = false;
            } else if let Some(p) = rule.strip_prefix('~') {
                u.add_key(p, true, true);
            } else if let Some(rest) = lower.strip_prefix('%') {
                let Some((perm, _)) = rest.split_once('~') else {
                    return fail(format!(
                        "'{rule}': write %R~pattern, %W~pattern or %RW~pattern"
                    ));
                };
                let (read, write) = match perm {
                    "r" => (true, false),
                    "w" => (false, true),
                    "rw" | "wr" => (true, true),
                    _ => return fail(format!("'{rule}': the permission must be R, W or RW")),
                };
                // The pattern keeps its case: only the permission letters
                // were lower-cased.
                let pattern = rule.get(perm.len() + 2..).unwrap_or("");
                u.add_key(pattern, read, write);
            } else if let Some(p) = rule.strip_prefix('&') {
                u.channels.get_or_insert_with(Vec::new).push(p.to_string());
            } else {
                match lower.as_str() {
                    "on" => u.enabled = true,
                    "off" => u.enabled = false,
                    "nopass" => {
                        u.nopass = true;
                        u.passwords.clear();
                    }
                    "resetpass" => {
                        u.nopass = false;
                        u.passwords.clear();
                    }
                    "mode" => {
                        let Some(m) = rules.get(i).and_then(|m| Mode::parse(m)) else {
                            return fail("mode must be followed by read, write or admin".into());
                        };
                        u.mode = m;
                        i += 1;
                    }
                    "allkeys" => u.add_key("*", true, true),
                    "resetkeys" => u.keys = Some(Vec::new()),
                    "allchannels" => u.channels.get_or_insert_with(Vec::new).push("*".into()),
                    "resetchannels" => u.channels = Some(Vec::new()),
                    _ if rule.starts_with('+') || rule.starts_with('-') => {
                        return fail(format!(
                            "'{rule}': commands are granted by mode (mode read, write or \
                             admin), not by +/- rules"
                        ))
                    }
                    _ if rule.starts_with('<') || rule.starts_with('!') => {
                        return fail(
                            "removing a password ('<' or '!') has no meaning in a configuration \
                             file: leave the password out"
                                .to_string(),
                        )
                    }
                    _ => {
                        return fail(
                            "unknown rule (expected on, off, >password, #digest, nopass, \
                             resetpass, mode, ~pattern, %R~pattern, %W~pattern, allkeys, \
                             resetkeys, &pattern, allchannels or resetchannels)"
                                .to_string(),
                        )
                    }
                }
            }
        }
        Ok(u)
    }

    fn add_key(&mut self, pattern: &str, read: bool, write: bool) {
        self.keys.get_or_insert_with(Vec::new).push(KeyPattern {
            pattern: pattern.to_string(),
            read,
            write,
        });
    }

    /// The words of a rule list that names no password in clear: `>pw`
    /// became `#<sha256>`; everything else in a fixed order.
    fn canonical_rules(&self) -> Vec<String> {
        let mut w = vec![if self.enabled { "on" } else { "off" }.to_string()];
        if self.nopass {
            w.push("nopass".into());
        }
        for p in &self.passwords {
            w.push(format!("#{}", sha256::hex(&p.digest())));
        }
        match &self.keys {
            None => w.push("~*".into()),
            Some(k) if k.is_empty() => w.push("resetkeys".into()),
            Some(k) => w.extend(k.iter().map(KeyPattern::word)),
        }
        match &self.channels {
            None => w.push("&*".into()),
            Some(c) if c.is_empty() => w.push("resetchannels".into()),
            Some(c) => w.extend(c.iter().map(|c| format!("&{c}"))),
        }
        w.push("mode".into());
        w.push(self.mode.name().into());
        w
    }

    /// `NAME on #<sha256> ~app:* &* mode write`: the line without any clear
    /// password, as `ACL LIST` shows it (after `user `).
    pub fn canonical(&self) -> String {
        let mut s = self.name.clone();
        for w in self.canonical_rules() {
            s.push(' ');
            s.push_str(&w);
        }
        s
    }

    /// The same user with its clear passwords replaced by their digests
    /// (and its written rules by the canonical ones).
    pub fn hashed(&self) -> UserSpec {
        let mut u = self.clone();
        u.passwords = self
            .passwords
            .iter()
            .map(|p| Password::Hash(p.digest()))
            .collect();
        u.rules = u.canonical_rules();
        u
    }
}

/// `prefix` as a glob that matches exactly the strings starting with it
/// (predixy's `KeyPrefix`): glob characters escaped, then `*`.
pub fn prefix_glob(prefix: &str) -> String {
    let mut g = String::with_capacity(prefix.len() + 2);
    for c in prefix.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            g.push('\\');
        }
        g.push(c);
    }
    g.push('*');
    g
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> Result<UserSpec, String> {
        let words: Vec<&str> = line.split_whitespace().collect();
        UserSpec::parse(&words)
    }

    #[test]
    fn a_full_line() {
        let u = parse("alice on >s3cret #30c952fab122c3f9759f02a6d95c3758b246b4fee239957b2d4fee46e26170c4 mode write ~app:* %R~shared:* &news.*").unwrap();
        assert_eq!(u.name, "alice");
        assert!(u.enabled && !u.nopass);
        assert_eq!(u.mode, Mode::Write);
        assert_eq!(u.passwords.len(), 2);
        assert_eq!(u.passwords[1].digest(), sha256::digest(b"pw"));
        let keys = u.keys.as_ref().unwrap();
        assert_eq!(keys.len(), 2);
        assert!(keys[0].read && keys[0].write && keys[0].pattern == "app:*");
        assert!(keys[1].read && !keys[1].write && keys[1].pattern == "shared:*");
        assert_eq!(u.channels.as_deref(), Some(&["news.*".to_string()][..]));
        let canon = u.canonical();
        assert!(!canon.contains("s3cret"), "{canon}");
        assert!(canon.starts_with(&format!(
            "alice on #{} #30c952fa",
            sha256::hex(&sha256::digest(b"s3cret"))
        )));
        assert!(
            canon.ends_with("~app:* %R~shared:* &news.* mode write"),
            "{canon}"
        );
        assert!(!format!("{u:?}").contains("s3cret"));
    }

    #[test]
    fn defaults_and_resets() {
        let u = parse("bob").unwrap();
        assert!(!u.enabled && !u.nopass && u.passwords.is_empty());
        assert_eq!((u.mode, &u.keys, &u.channels), (Mode::Read, &None, &None));
        let u = parse("bob ON >a NOPASS Mode ADMIN resetkeys resetchannels").unwrap();
        assert!(u.enabled && u.nopass && u.passwords.is_empty());
        assert_eq!(u.mode, Mode::Admin);
        assert_eq!(u.keys, Some(Vec::new()));
        assert_eq!(u.channels, Some(Vec::new()));
        let u = parse("bob nopass >a resetpass >b").unwrap();
        assert!(!u.nopass);
        assert_eq!(u.passwords, [Password::Plain("b".into())]);
        assert_eq!(
            parse("bob allkeys allchannels").unwrap().canonical(),
            "bob off ~* &* mode read"
        );
        // The canonical words parse back to the same user.
        let u = parse("carol on >x %W~w:* %RW~both:* &c mode write").unwrap();
        let back = parse(&u.hashed().canonical()).unwrap();
        assert_eq!(back.canonical(), u.canonical());
        assert_eq!(back.hashed(), u.hashed());
        // The %-rules keep the pattern's case.
        assert_eq!(parse("d %R~Ab*").unwrap().keys.unwrap()[0].pattern, "Ab*");
    }

    #[test]
    fn errors_name_the_problem_not_the_password() {
        for (line, want) in [
            ("", "needs a name"),
            ("bad\u{7f}name", "not a valid user name"),
            ("u mode", "mode must be followed"),
            ("u mode root", "mode must be followed"),
            ("u +@all", "granted by mode"),
            ("u -get", "granted by mode"),
            ("u #abc", "64 hex digits"),
            ("u %X~k", "R, W or RW"),
            ("u %R", "%R~pattern"),
            ("u <old", "no meaning"),
            ("u on hunter2", "unknown rule"),
        ] {
            let e = parse(line).unwrap_err();
            assert!(e.contains(want), "{line:?}: {e}");
            assert!(!e.contains("hunter2") && !e.contains("old"), "{e}");
        }
    }

    #[test]
    fn prefixes_become_globs() {
        assert_eq!(prefix_glob("app:"), "app:*");
        assert_eq!(prefix_glob("a*b?[c]\\"), "a\\*b\\?\\[c\\]\\\\*");
        let g = prefix_glob("a*b");
        assert!(crate::config::glob_match(g.as_bytes(), b"a*bc", false));
        assert!(!crate::config::glob_match(g.as_bytes(), b"axbc", false));
    }
}
