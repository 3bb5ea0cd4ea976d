//! One `user` line of the configuration, as written and as understood.
//!
//! ```text
//!   user NAME [on|off] [>password | #sha256hex | nopass | resetpass ...]
//!             [mode read|write|admin]
//!             [~pattern | %R~pattern | %W~pattern | %RW~pattern | allkeys | resetkeys ...]
//!             [&pattern | allchannels | resetchannels ...]
//!             [+command | -command | +command|sub | +@category | -@category
//!              | allcommands | nocommands ...]
//! ```
//!
//! Owns [`UserSpec`] (the parsed line, which also keeps the words as given
//! so that `--print-config` writes them back unchanged) and its two other
//! written forms: [`UserSpec::canonical`] (passwords as `#<sha256>`, used
//! by `ACL LIST`, `CONFIG GET user` and for what the running proxy keeps)
//! and [`UserSpec::hashed`].
//!
//! Rules follow Redis's ACL words where Redis has one. Commands are granted
//! by `mode` (predixy's read / write / admin), then Redis's `+`/`-` command
//! rules, if any, add to and take from what the mode gave, in order (`+@all`
//! and `-@all` start over). A line without any key rule allows every key
//! (Redis would allow none): a user line is about who may do what, and
//! the common case is "everything, within a mode". A line without any
//! channel rule gets the channels of `acl-pubsub-default`: none unless it
//! says `allchannels`, as in Redis 7, or the line says `mode admin`
//! ([`UserSpec::with_channels`]).
//!
//! `ACL SETUSER` edits a user with Redis's own dialect of the same words
//! ([`UserSpec::for_setuser`], [`UserSpec::apply_setuser`]): a new user
//! starts as Redis's does (off, no password, no command, no key, the
//! channels of `acl-pubsub-default`), `<password` and `!digest` remove a password, and errors are
//! Redis's texts ([`RuleError`]).
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
    /// `~*`: every key, read and written.
    fn all() -> KeyPattern {
        KeyPattern {
            pattern: "*".to_string(),
            read: true,
            write: true,
        }
    }

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
    /// `None`: no channel rule was given (`acl-pubsub-default` decides:
    /// [`UserSpec::with_channels`]).
    pub channels: Option<Vec<String>>,
    /// Redis's command rules applied after the mode, in order, lower case
    /// (`+get`, `-@write`, `+config|get`); a `+@all` or `-@all` drops the
    /// rules before it, which it overrides.
    pub commands: Vec<String>,
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
            // Every channel whatever `acl-pubsub-default` says, as Redis's
            // own `default` (`&*`).
            channels: Some(vec!["*".to_string()]),
            commands: Vec::new(),
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
            commands: Vec::new(),
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
                    _ if u.login_rule(&lower) => {}
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
                    _ if is_command_rule(&lower) => {
                        if let Err(e) = u.add_command_rule(&lower) {
                            return fail(format!("'{rule}': {}", e.text()));
                        }
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
                             resetkeys, &pattern, allchannels, resetchannels, +command, \
                             -command, +@category, -@category, allcommands or nocommands)"
                                .to_string(),
                        )
                    }
                }
            }
        }
        Ok(u)
    }

    /// Appends one command rule (`lower`, already lower case) after
    /// checking that it names a known command or category.
    fn add_command_rule(&mut self, lower: &str) -> Result<(), RuleError> {
        let rule = command_rule(lower)?;
        if rule == "+@all" || rule == "-@all" {
            self.commands.clear();
        }
        self.commands.push(rule);
        Ok(())
    }

    /// The user as the running proxy takes it: a line without any channel
    /// rule gets `acl-pubsub-default`'s (`all`: every channel; else none,
    /// Redis 7's `resetchannels`), except in mode admin, which is every
    /// channel too (so such a user stays unrestricted: scripts, the fast
    /// path).
    pub fn with_channels(&self, all: bool) -> UserSpec {
        let mut u = self.clone();
        if u.channels.is_none() {
            u.channels = Some(default_channels(all || u.mode == Mode::Admin));
        }
        u
    }

    /// A user `ACL SETUSER` has not seen before, as Redis creates one: off,
    /// no password, no command, no key, and the channels of
    /// `acl-pubsub-default` (`all`).
    pub fn for_setuser(name: &str, all: bool) -> UserSpec {
        UserSpec {
            name: name.to_string(),
            enabled: false,
            nopass: false,
            passwords: Vec::new(),
            mode: Mode::Read,
            keys: Some(Vec::new()),
            channels: Some(default_channels(all)),
            commands: vec!["-@all".to_string()],
            rules: Vec::new(),
        }
    }

    /// Applies one `ACL SETUSER` rule, in Redis's dialect (no `mode`; `<`
    /// and `!` remove a password; a password may be any bytes). A clear
    /// password is hashed at once and never kept. `pubsub_all` is
    /// `acl-pubsub-default` (what `reset` gives).
    pub fn apply_setuser(&mut self, rule: &[u8], pubsub_all: bool) -> Result<(), RuleError> {
        if rule.is_empty() {
            return Ok(());
        }
        match rule.first() {
            Some(b'>') | Some(b'<') => {
                let digest = sha256::digest(rule.get(1..).unwrap_or_default());
                return self.password_rule(rule[0] == b'>', digest);
            }
            Some(b'#') | Some(b'!') => {
                let hex = std::str::from_utf8(rule.get(1..).unwrap_or_default())
                    .ok()
                    .filter(|h| !h.bytes().any(|b| b.is_ascii_uppercase()))
                    .and_then(sha256::parse_hex)
                    .ok_or(RuleError::BadHash)?;
                return self.password_rule(rule[0] == b'#', hex);
            }
            _ => {}
        }
        let rule = std::str::from_utf8(rule).map_err(|_| RuleError::Syntax)?;
        let lower = rule.to_ascii_lowercase();
        let all_keys = |u: &UserSpec| {
            u.keys
                .as_ref()
                .is_some_and(|k| k.iter().any(|p| p.pattern == "*" && p.read && p.write))
        };
        let all_channels = |u: &UserSpec| {
            u.channels
                .as_ref()
                .is_some_and(|c| c.iter().any(|c| c == "*"))
        };
        match lower.as_str() {
            _ if self.login_rule(&lower) => {}
            "sanitize-payload" | "skip-sanitize-payload" | "clearselectors" => {}
            "reset" => {
                *self = UserSpec::for_setuser(&self.name, pubsub_all);
            }
            "allkeys" | "~*" => self.keys = Some(vec![KeyPattern::all()]),
            "resetkeys" => self.keys = Some(Vec::new()),
            "allchannels" | "&*" => self.channels = Some(vec!["*".to_string()]),
            "resetchannels" => self.channels = Some(Vec::new()),
            _ if lower.starts_with('(') => return Err(RuleError::Selectors),
            _ if lower.starts_with('~') || lower.starts_with('%') => {
                if all_keys(self) {
                    return Err(RuleError::AfterAllKeys);
                }
                let (read, write, pattern) = if let Some(p) = rule.strip_prefix('~') {
                    (true, true, p)
                } else {
                    let (perm, _) = lower[1..].split_once('~').ok_or(RuleError::Syntax)?;
                    let (read, write) = match perm {
                        "r" => (true, false),
                        "w" => (false, true),
                        "rw" | "wr" => (true, true),
                        _ => return Err(RuleError::Syntax),
                    };
                    (read, write, &rule[perm.len() + 2..])
                };
                if pattern.bytes().any(|b| b == b' ' || b == 0) {
                    return Err(RuleError::Syntax);
                }
                let keys = self.keys.get_or_insert_with(Vec::new);
                match keys.iter_mut().find(|k| k.pattern == pattern) {
                    Some(k) => {
                        k.read |= read;
                        k.write |= write;
                    }
                    None => keys.push(KeyPattern {
                        pattern: pattern.to_string(),
                        read,
                        write,
                    }),
                }
            }
            _ if lower.starts_with('&') => {
                if all_channels(self) {
                    return Err(RuleError::AfterAllChannels);
                }
                let pattern = &rule[1..];
                if pattern.bytes().any(|b| b == b' ' || b == 0) {
                    return Err(RuleError::Syntax);
                }
                let channels = self.channels.get_or_insert_with(Vec::new);
                if !channels.iter().any(|c| c == pattern) {
                    channels.push(pattern.to_string());
                }
            }
            _ if is_command_rule(&lower) => self.add_command_rule(&lower)?,
            _ => return Err(RuleError::Syntax),
        }
        Ok(())
    }

    /// `on`, `off`, `nopass` or `resetpass` (both dialects): `false` for
    /// any other word.
    fn login_rule(&mut self, lower: &str) -> bool {
        match lower {
            "on" => self.enabled = true,
            "off" => self.enabled = false,
            "nopass" | "resetpass" => {
                self.nopass = lower == "nopass";
                self.passwords.clear();
            }
            _ => return false,
        }
        true
    }

    /// `>`/`#` (`add`) or `<`/`!` (remove) of one digest.
    fn password_rule(&mut self, add: bool, digest: [u8; 32]) -> Result<(), RuleError> {
        let at = self.passwords.iter().position(|p| p.digest() == digest);
        match (add, at) {
            (true, None) => self.passwords.push(Password::Hash(digest)),
            (true, Some(_)) => {}
            (false, Some(i)) => {
                self.passwords.remove(i);
            }
            (false, None) => return Err(RuleError::NoSuchPassword),
        }
        if add {
            self.nopass = false;
        }
        Ok(())
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
    pub fn canonical_words(&self) -> Vec<String> {
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
            // No channel rule: `acl-pubsub-default` decides (the running
            // proxy's users always have one: `with_channels`).
            None => {}
            Some(c) if c.is_empty() => w.push("resetchannels".into()),
            Some(c) => w.extend(c.iter().map(|c| format!("&{c}"))),
        }
        // After a leading +@all or -@all the mode no longer matters.
        if !self
            .commands
            .first()
            .is_some_and(|c| c == "+@all" || c == "-@all")
        {
            w.push("mode".into());
            w.push(self.mode.name().into());
        }
        w.extend(self.commands.iter().cloned());
        w
    }

    /// `NAME on #<sha256> ~app:* &* mode write`: the line without any clear
    /// password, as `ACL LIST` shows it (after `user `).
    pub fn canonical(&self) -> String {
        let mut s = self.name.clone();
        for w in self.canonical_words() {
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
        u.rules = u.canonical_words();
        u
    }
}

/// The channels of a user without a channel rule: `acl-pubsub-default`.
fn default_channels(all: bool) -> Vec<String> {
    if all {
        vec!["*".to_string()]
    } else {
        Vec::new()
    }
}

/// Why a rule was refused. [`RuleError::text`] is Redis 7.0's wording
/// where Redis has one (`ACL SETUSER` puts it after "Error in ACL SETUSER
/// modifier '<rule>': ").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleError {
    Syntax,
    UnknownCommand,
    AfterAllKeys,
    AfterAllChannels,
    NoSuchPassword,
    BadHash,
    /// `+command|arg` of a command without subcommands (Redis's deprecated
    /// first-argument rule).
    FirstArg,
    /// `(...)`: Redis 7's selectors.
    Selectors,
}

impl RuleError {
    pub fn text(self) -> &'static str {
        match self {
            RuleError::Syntax => "Syntax error",
            RuleError::UnknownCommand => "Unknown command or category name in ACL",
            RuleError::AfterAllKeys => {
                "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and \
                 does not have any effect. Try 'resetkeys' to start with an empty list of patterns"
            }
            RuleError::AfterAllChannels => {
                "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid \
                 and does not have any effect. Try 'resetchannels' to start with an empty list \
                 of channels"
            }
            RuleError::NoSuchPassword => {
                "The password you are trying to remove from the user does not exist"
            }
            RuleError::BadHash => {
                "The password hash must be exactly 64 characters and contain only lowercase \
                 hexadecimal characters"
            }
            RuleError::FirstArg => {
                "mithril does not allow one first argument of a command without subcommands \
                 (allow the whole command, or a subcommand of a container command)"
            }
            RuleError::Selectors => "mithril does not support ACL selectors",
        }
    }
}

/// Whether `lower` is a command rule: `+...`, `-...`, `allcommands` or
/// `nocommands`.
fn is_command_rule(lower: &str) -> bool {
    lower.starts_with('+')
        || lower.starts_with('-')
        || lower == "allcommands"
        || lower == "nocommands"
}

/// The rule in the form kept (`allcommands` is `+@all`, `nocommands`
/// `-@all`), once its command or category is known to exist.
fn command_rule(lower: &str) -> Result<String, RuleError> {
    use crate::command;
    let lower = match lower {
        "allcommands" => "+@all",
        "nocommands" => "-@all",
        l => l,
    };
    let (sign, what) = lower.split_at(1);
    if !matches!(sign, "+" | "-") || what.is_empty() {
        return Err(RuleError::Syntax);
    }
    if let Some(cat) = what.strip_prefix('@') {
        if cat != "all" && command::acl::bit(cat).is_none() {
            return Err(RuleError::UnknownCommand);
        }
    } else if let Some((parent, sub)) = what.rsplit_once('|') {
        let cmd = command::lookup(parent.as_bytes()).ok_or(RuleError::UnknownCommand)?;
        if sub.is_empty() {
            return Err(RuleError::Syntax);
        }
        if cmd.subcommands.is_empty() {
            return Err(if sign == "+" {
                RuleError::FirstArg
            } else {
                RuleError::UnknownCommand
            });
        }
        command::lookup_sub(cmd, sub.as_bytes()).ok_or(RuleError::UnknownCommand)?;
    } else {
        command::lookup(what.as_bytes()).ok_or(RuleError::UnknownCommand)?;
    }
    Ok(lower.to_string())
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
            ("u +nosuch", "Unknown command or category"),
            ("u -@nosuch", "Unknown command or category"),
            ("u +get|x", "one first argument"),
            ("u +config|nosuch", "Unknown command or category"),
            ("u +config|", "Syntax error"),
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
