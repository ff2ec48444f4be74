//! The event payloads the analysis keeps in memory: a block's payload followed by one byte
//! naming its layout: [`ROWS`] (Events blocks, which the monitor writes when the program keeps
//! every processor busy, and older traces) or [`COLUMNS`] (EventColumns blocks, see
//! [`heaplens_trace::columns`]).

use heaplens_trace::varint::read_var;

/// Layout byte of an in-memory row payload.
pub const ROWS: u8 = 0;
/// Layout byte of an in-memory column payload.
pub const COLUMNS: u8 = 1;

/// A block payload of `layout` as kept in memory.
pub fn tagged(mut payload: Vec<u8>, layout: u8) -> Vec<u8> {
    payload.push(layout);
    payload
}

/// The block payload and layout of an in-memory payload.
#[inline]
pub fn untag(d: &[u8]) -> (&[u8], u8) {
    match d.split_last() {
        Some((&layout, body)) => (body, layout),
        None => (d, ROWS),
    }
}

/// The thread id of a block payload of `layout`; `None` when it lacks one.
pub fn header(d: &[u8], layout: u8) -> Option<u32> {
    if layout == COLUMNS {
        return heaplens_trace::columns::tid(d);
    }
    u32::try_from(read_var(d, &mut 0)?).ok()
}

/// The timestamp of the first event of an in-memory payload (when it has one).
pub fn first_ts(d: &[u8]) -> Option<u64> {
    match untag(d) {
        (d, COLUMNS) => heaplens_trace::columns::first_ts(d),
        (d, _) => heaplens_trace::event::first_ts(d),
    }
}
