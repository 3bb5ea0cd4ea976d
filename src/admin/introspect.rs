//! COMMAND and its subcommands, answered from the static table.

use super::{built, Outcome};
use crate::command::{self, Args, Command};
use crate::session::Session;
use crate::shared::Shared;

pub fn command(_shared: &Shared, s: &Session, cmd: &'static Command, _args: &Args) -> Outcome {
    match cmd.name {
        "command|count" => {
            let n = command::all().len() as i64;
            built(
                |e| {
                    e.int(n);
                },
                s,
            )
        }
        _ => super::error("ERR mithril: this COMMAND form is not supported yet"),
    }
}
