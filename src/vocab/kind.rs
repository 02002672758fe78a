//! The table of traffic kinds: one line each (`Variant "name" file`, and `as Other` for a
//! kind that runs on the drivers that run kind `Other`), the only place a kind is listed. [`TrafficKind`] is generated from it here, and the dispatch to each
//! kind's file (`kinds/<file>.rs`: its keys, checks and lowering) in `kinds/mod.rs`.
//!
//! Part of the leaf `vocab`: it imports nothing of the crate, so the schema, the drivers'
//! `Spec` and every kind file can name a kind without a cycle.

use serde::Deserialize;

/// Calls macro `$then` with the table of traffic kinds.
macro_rules! each_kind {
    ($then:ident) => {
        $then! {
            /// 1:1 messages.
            Direct "direct" direct,
            /// Group messages.
            Group "group" group,
            /// Heartbeats only.
            Idle "idle" idle,
            /// Closed-loop request/response.
            Request "request" request,
            /// Echo round trips.
            Echo "echo" echo,
            /// Artillery's flow: each user thinks, then loops {send, think}.
            Flow "flow" flow as Direct,
            /// The population talks to its contacts.
            Chat "chat" chat as Direct,
            /// Recorded messages replayed.
            Trace "trace" trace as Direct,
        }
    };
}
pub(crate) use each_kind;

/// Generates [`TrafficKind`] from the table.
macro_rules! define {
    ($($(#[$doc:meta])* $variant:ident $name:literal $file:ident $(as $base:ident)?,)*) => {
        /// `traffic.kind`: what a traffic pattern does.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
        pub enum TrafficKind {
            $($(#[$doc])* #[serde(rename = $name)] $variant,)*
        }

        impl TrafficKind {
            /// Every kind, in the table's order.
            pub const ALL: &'static [TrafficKind] = &[$(TrafficKind::$variant),*];

            /// The name used in scenario files.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(TrafficKind::$variant => $name,)*
                }
            }

            /// The kind a driver must run (in its `Spec::kinds`) to run this one.
            pub fn runs_as(self) -> TrafficKind {
                match self {
                    $(TrafficKind::$variant => base!($variant $($base)?),)*
                }
            }
        }
    };
}
/// A kind's `as` kind, or itself.
macro_rules! base {
    ($variant:ident) => {
        TrafficKind::$variant
    };
    ($variant:ident $base:ident) => {
        TrafficKind::$base
    };
}
each_kind!(define);
