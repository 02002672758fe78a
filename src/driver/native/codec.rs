//! The native protocol's frames as this driver reads them (the frame types themselves are
//! [`crate::wire`], shared with `serve`): which request a reply answers, and the failures
//! of a frame that cannot be read or was not expected.

use crate::driver::kit::json_map::clip;
use crate::driver::Failure;
use crate::metrics::ErrorKind;
use crate::wire::ServerFrame;

/// The `ref` a server frame answers, if any.
pub(super) fn reply_ref(frame: &ServerFrame) -> Option<u64> {
    match frame {
        ServerFrame::Ok { r#ref }
        | ServerFrame::ConvList { r#ref, .. }
        | ServerFrame::SyncPage { r#ref, .. } => Some(*r#ref),
        ServerFrame::ReceiptPage(p) => Some(p.r#ref),
        ServerFrame::Error { r#ref, .. } => *r#ref,
        _ => None,
    }
}

/// Reads a frame that is not one of the [`wire::Hot`] ones.
pub(super) fn parse(text: &str) -> Result<ServerFrame, Failure> {
    serde_json::from_str(text).map_err(|e| unreadable(&e, text))
}

pub(super) fn unreadable(e: &serde_json::Error, text: &str) -> Failure {
    Failure::new(
        ErrorKind::Protocol,
        format!("unreadable frame ({e}): {}", clip(text)),
    )
}

pub(super) fn unexpected(what: &str, frame: &ServerFrame) -> Failure {
    Failure::new(
        ErrorKind::Protocol,
        format!("{what}: unexpected reply {}", clip(&format!("{frame:?}"))),
    )
}
