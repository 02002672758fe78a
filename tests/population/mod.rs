//! A population of users who come and go over a compressed day and talk to their contacts,
//! against real servers: every message reaches its recipient exactly once, live or by the
//! catch-up of a returning user, in one process or split over shards.

#[cfg(feature = "mqtt")]
mod mqtt;
mod serve;
mod storm;
mod trace;
#[cfg(feature = "xmpp")]
mod xmpp;

/// 240 users over a 12 s day: sessions of a median 2 s, away a mean 2 s, contacts with a
/// heavy-tailed degree, 60 messages/s to contacts and 10/s into 20 groups of 3 to 60
/// members (heavy-tailed sizes, members drawn from the contacts).
pub const DAY: &str = r#"
[population]
users = 240

[population.sessions]
day = "12s"
length = { lognormal = "2s", spread = 1.0 }
gap = { exponential = "2s" }

[population.contacts]
mean = 6

[population.groups]
count = 20
min = 3
max = 60
exponent = 1.5

[[traffic]]
name = "chat"
kind = "chat"
rate = 60
group_rate = 10
size = 120
"#;
