//! Flags back to an argv: how `organ serve` starts a job's child from the same clap
//! structs the command line fills. Each struct writes its own flags ([`ToArgs`]); the
//! tests parse every command's argv again and get the same struct back, so an argv and
//! the flags it is parsed by cannot drift apart.

use std::ffi::{OsStr, OsString};

/// A struct of flags that can say itself as arguments: the inverse of clap's parse.
pub trait ToArgs {
    /// Appends the arguments that parse back into `self`.
    fn to_args(&self, a: &mut Argv);
}

/// The argv `flags` parse from (after the program's name).
pub fn argv(flags: &impl ToArgs) -> Vec<OsString> {
    let mut a = Argv::default();
    flags.to_args(&mut a);
    a.0
}

/// An argv being built, flag by flag.
#[derive(Default)]
pub struct Argv(Vec<OsString>);

impl Argv {
    /// A positional argument (or a subcommand's name).
    pub fn arg(&mut self, value: impl AsRef<OsStr>) -> &mut Self {
        self.0.push(value.as_ref().to_owned());
        self
    }

    /// `--NAME` when `on`.
    pub fn switch(&mut self, name: &str, on: bool) -> &mut Self {
        if on {
            self.arg(name);
        }
        self
    }

    /// `--NAME=VALUE`, one argument: a value that starts with `-` (a key `--in-place`, a
    /// name `-x`) is still the flag's value, never read as a flag of its own.
    pub fn value(&mut self, name: &str, value: impl AsRef<OsStr>) -> &mut Self {
        let mut both = OsString::from(name);
        both.push("=");
        both.push(value);
        self.arg(both)
    }

    /// `--NAME=VALUE` when there is a value.
    pub fn opt(&mut self, name: &str, value: Option<impl AsRef<OsStr>>) -> &mut Self {
        if let Some(v) = value {
            self.value(name, v);
        }
        self
    }

    /// `--NAME=NUMBER` when there is a number.
    pub fn number(&mut self, name: &str, value: Option<impl ToString>) -> &mut Self {
        self.opt(name, value.map(|v| v.to_string()))
    }

    /// `--NAME=VALUE` once per value.
    pub fn each<V: AsRef<OsStr>>(&mut self, name: &str, values: impl IntoIterator<Item = V>) -> &mut Self {
        for v in values {
            self.value(name, v);
        }
        self
    }

    /// Another struct's flags.
    pub fn flags(&mut self, flags: &impl ToArgs) -> &mut Self {
        flags.to_args(self);
        self
    }
}
