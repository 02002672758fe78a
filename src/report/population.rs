//! The offered shape of a population in words: the lines `validate` prints before a run
//! and the text report repeats after it (from `population` in `result.json`).

use crate::vocab::Offered;

/// The offered shape of `o` among `users` users, one line per part.
pub fn lines(o: &Offered, users: u32) -> Vec<String> {
    let ms = |v: u64| humantime::format_duration(std::time::Duration::from_millis(v)).to_string();
    let mut out = Vec::new();
    if o.day_ms > 0 {
        out.push(format!(
            "sessions: {} over a {} day (length p50 {}, p90 {}); peak {} of {users} users online",
            o.sessions,
            ms(o.day_ms),
            ms(o.session_p50_ms),
            ms(o.session_p90_ms),
            o.online.iter().max().copied().unwrap_or(0),
        ));
        let points: Vec<String> = o.online.iter().map(u64::to_string).collect();
        out.push(format!(
            "online over the day ({} points): {}",
            points.len(),
            points.join(" ")
        ));
    }
    if o.contacts_max > 0 {
        out.push(format!(
            "contacts: mean {:.1} per user, most {}",
            o.contacts_mean, o.contacts_max
        ));
    }
    if o.chat_sends > 0 {
        out.push(format!(
            "chat: {} messages planned, one recipient each; the top 1% of users send {:.0}% of \
             them, the top 10% {:.0}%",
            o.chat_sends,
            o.top1_share * 100.0,
            o.top10_share * 100.0
        ));
    }
    if o.groups > 0 {
        out.push(format!(
            "groups: {}, the largest {} members; {} messages planned into them, {} deliveries \
             ({:.1} per message)",
            o.groups,
            o.largest_group,
            o.group_sends,
            o.group_deliveries,
            o.group_deliveries as f64 / o.group_sends.max(1) as f64
        ));
    }
    if let Some(b) = &o.sizes {
        out.push(format!(
            "sizes: mean {:.0} bytes, p50 {}, p99 {}, max {}",
            b.mean, b.p50, b.p99, b.max
        ));
    }
    out
}
