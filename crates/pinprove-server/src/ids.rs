//! Ids a client gives (request ids, job ids, circuit ids): what is taken,
//! and how one is shown back or logged.

use tonic::Status;

/// Longest request id, job id or circuit id taken, in bytes.
pub const MAX_ID_BYTES: usize = 256;

/// Checks an id: at most [`MAX_ID_BYTES`], UTF-8, no control characters.
pub fn check_id(what: &str, id: &[u8]) -> Result<(), Status> {
    if id.len() > MAX_ID_BYTES {
        return Err(Status::invalid_argument(format!(
            "{what} is {} bytes; at most {MAX_ID_BYTES} are taken",
            id.len()
        )));
    }
    match std::str::from_utf8(id) {
        Ok(s) if !s.chars().any(char::is_control) => Ok(()),
        _ => Err(Status::invalid_argument(format!(
            "{what} holds bytes that are not printable text"
        ))),
    }
}

/// An id as it may be shown back to a client or logged: at most 64
/// characters, escaped.
pub fn shown(id: &str) -> String {
    let mut s: String = id.chars().take(64).flat_map(char::escape_debug).collect();
    if id.chars().nth(64).is_some() {
        s.push('…');
    }
    s
}
