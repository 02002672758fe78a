//! One file per traffic kind, each owning its keys (`KEYS`), its checks (`check`, into a
//! [`PatternKind`]) and its lowering ([`PatternKind::lower`]); the dispatch to them is
//! generated from the table in `scenario/kind.rs`, one line per kind (the mini-redis
//! `cmd/` shape). Adding a kind is its file plus that line.

pub mod pattern;

use std::time::Duration;

pub use pattern::{Ctx, GroupSends, Load, Lowering, PatternKind};

use crate::vocab::kind::{each_kind, TrafficKind};
use crate::Result;

/// Generates the kinds' modules and the dispatch to them from the table.
macro_rules! dispatch {
    ($($(#[$doc:meta])* $variant:ident $name:literal $file:ident $(as $base:ident)?,)*) => {
        $(mod $file;)*

        /// The keys kind `kind` takes besides the common ones.
        pub fn keys(kind: TrafficKind) -> &'static [&'static str] {
            match kind {
                $(TrafficKind::$variant => $file::KEYS,)*
            }
        }

        /// Checks the entry of `cx` as a pattern of `kind`; a kind may set `duration` (a
        /// sweep's whole length).
        pub fn check(
            kind: TrafficKind,
            cx: &Ctx<'_>,
            duration: &mut Option<Duration>,
        ) -> Result<Box<dyn PatternKind>> {
            match kind {
                $(TrafficKind::$variant => $file::check(cx, duration),)*
            }
        }
    };
}
each_kind!(dispatch);
