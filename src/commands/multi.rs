//! `RL.MULTI numkeys key [key ...] LIMIT window limit [LIMIT window limit ...]
//! [COST n] [ALIGN] [AT unix_ms]`: the steps of [`super::multikey`] with fixed windows.

use super::multikey::{self, MultiKey};
use crate::args::Args;
use crate::stats::Outcome;
use ratelimit_core::multi::{self, Request, State};
use ratelimit_core::multikey::{KeyFull, MultiOutcome};
use ratelimit_core::{Error, Micros, Stored};
use redis_module::Context;

struct Multi;

impl MultiKey for Multi {
    const NAME: &'static str = "RL.MULTI";
    type Request = Request;
    type State = State;
    fn parse_args(args: &[&[u8]]) -> Result<Request, Error> {
        multi::parse_args(args)
    }
    fn numkeys(req: &Request) -> usize {
        req.numkeys()
    }
    fn at(req: &Request) -> Option<Micros> {
        req.at()
    }
    fn parse_state(raw: &[u8]) -> Result<State, Error> {
        multi::parse_state(raw)
    }
    fn decide(
        stored: &[Option<Stored<State>>],
        now: Micros,
        req: &Request,
    ) -> Result<MultiOutcome<State>, KeyFull> {
        multi::decide(stored, now, req)
    }
}

pub fn command(ctx: &Context, args: &Args) -> Result<Outcome, Error> {
    multikey::command::<Multi>(ctx, args)
}
