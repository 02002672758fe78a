//! `--format`: the report in each of its formats, checked by their own parsers and schemas.

pub(crate) mod cli;
mod junit;
mod markdown;
