//! The read loops of a request/reply protocol over one WebSocket, shared by the drivers
//! that map an application's protocol (`ws-json`, `socketio`): the next event for the
//! engine — frames held while an answer was awaited first, pings owed answered — and
//! waiting for one answer while every other frame is held for later.

use tokio_tungstenite::tungstenite::Message;

use super::inbox::Inbox;
use super::ws::{read_text, Ws};
use crate::driver::{Event, Failure};

/// What a session makes of the frames it reads ([`next_event`]).
pub(crate) trait Interpret {
    /// The driver's options the interpreting reads.
    type Opts: ?Sized;

    /// The session's bookkeeping of ids, acks, held frames and pings owed.
    fn inbox(&mut self) -> &mut Inbox;

    /// The oldest event interpreted and not handed out yet.
    fn take_ready(&mut self) -> Option<Event>;

    /// Interprets one frame, read now or held: queues the events it holds, if any.
    fn interpret(&mut self, opts: &Self::Opts, frame: &str);

    /// The frame that answers one ping of the server (`None`: the rules name none).
    fn pong(&mut self, opts: &Self::Opts) -> Option<String>;
}

/// The next event of a session: one interpreted already, else the frames held, then a pong
/// owed, then what the socket brings.
pub(crate) async fn next_event<J: Interpret>(ws: &mut Ws, opts: &J::Opts, st: &mut J) -> Event {
    loop {
        if let Some(ev) = st.take_ready() {
            return ev;
        }
        if let Some(frame) = st.inbox().take_unread() {
            st.interpret(opts, &frame);
            continue;
        }
        if st.inbox().pongs_owed > 0 {
            st.inbox().pongs_owed -= 1;
            if let Some(pong) = st.pong(opts) {
                if let Err(f) = ws.write(Message::text(pong)).await {
                    return Event::Closed(f);
                }
                if let Err(f) = ws.flush().await {
                    return Event::Closed(f);
                }
            }
            continue;
        }
        match read_text(ws).await {
            Ok(text) => st.interpret(opts, &text),
            Err(e) => return e.event(),
        }
    }
}

/// Reads frames until `answer` finds the answer in one; `answer` holds in the inbox what
/// else a frame carries, for [`next_event`] to interpret later in the order it came. Unbounded:
/// the caller sets the time limit.
pub(crate) async fn until_answer<T>(
    ws: &mut Ws,
    inbox: &mut Inbox,
    mut answer: impl FnMut(&str, &mut Inbox) -> Option<T>,
) -> Result<T, Failure> {
    loop {
        let text = read_text(ws).await?;
        if let Some(found) = answer(&text, inbox) {
            return Ok(found);
        }
    }
}
