//! `pthread_create`, while CPU time is sampled (`crate::cpu`): the new thread starts its
//! sampler before the program's start routine runs (its end is seen by a thread-specific
//! destructor, whichever way it ends). Otherwise, and for the monitor's own threads, it passes
//! straight through.

use crate::real::ThreadStart;

use super::*;

/// The program's start routine and argument, handed to [`begin`].
struct Start(ThreadStart, P);

#[allow(clippy::missing_safety_doc)]
#[no_mangle]
pub unsafe extern "C" fn pthread_create(
    thread: *mut libc::pthread_t,
    attr: *const libc::pthread_attr_t,
    start: ThreadStart,
    arg: P,
) -> i32 {
    if !crate::cpu::enabled() || crate::tls::slot().guard != 0 {
        return call::pthread_create(thread, attr, start, arg);
    }
    let s = Box::into_raw(Box::new(Start(start, arg)));
    let r = call::pthread_create(thread, attr, begin, s.cast());
    if r != 0 {
        drop(Box::from_raw(s));
    }
    r
}

extern "C" fn begin(p: P) -> P {
    // SAFETY: the box `pthread_create` made for this thread, taken once.
    let Start(start, arg) = *unsafe { Box::from_raw(p as *mut Start) };
    crate::cpu::start_thread();
    start(arg)
}
