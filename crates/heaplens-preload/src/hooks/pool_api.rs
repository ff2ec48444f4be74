//! `heaplens_pool_v1`, the one entry point of `include/heaplens.h` (and the `heaplens-api`
//! crate): a program's own pools and arenas report their blocks here. The header looks it up
//! with `dlsym`, so a program runs unchanged without heaplens. Its first argument says what
//! happened; the entry stub records where the program's frame is, so the stack starts at the
//! call into the pool (its `arena_alloc`, say), with the pool's frame below it.

use heaplens_trace::event::POOL_TAG;

use super::*;
use crate::pools;

/// `heaplens_alloc(pool, ptr, size)`.
pub const ALLOC: i32 = 1;
/// `heaplens_free(pool, ptr)`.
pub const FREE: i32 = 2;
/// `heaplens_pool_name(pool, name)`: `ptr` is the NUL-terminated name.
pub const NAME: i32 = 3;
/// `heaplens_pool_reset(pool)`.
pub const RESET: i32 = 4;

entry!("C" heaplens_pool_v1);
mod heaplens_pool_v1 {
    use super::*;

    /// What `kind` says of pool `pool`: block `ptr` of `size` bytes allocated, or released,
    /// the pool named `ptr`, or reset. Unknown kinds are ignored (a newer header).
    pub unsafe extern "C" fn imp(kind: i32, pool: usize, ptr: usize, size: usize, cfa: u64, bp: u64) {
        let (pool, ptr) = (pool as u64, ptr as u64);
        match kind {
            ALLOC if ptr != 0 => {
                if sampling::skip(size) {
                    return;
                }
                let Some(_g) = enter() else { return };
                let Some(frame) = pools::allocated(pool, ptr) else { return };
                let tagged = (ptr | POOL_TAG) as P;
                record::alloc_usable(Caller { cfa, bp }, Op::PoolAlloc, tagged, size, Some(frame), |_| size);
            }
            FREE if ptr != 0 => {
                pools::released(pool, ptr);
                if sampling::skip_free(ptr | POOL_TAG) {
                    return;
                }
                let Some(_g) = enter() else { return };
                record::dealloc(Op::PoolFree, (ptr | POOL_TAG) as P);
            }
            NAME if ptr != 0 => {
                let Some(_g) = enter() else { return };
                let name = std::ffi::CStr::from_ptr(ptr as *const std::ffi::c_char).to_string_lossy();
                pools::name(pool, &name);
            }
            RESET => {
                let Some(_g) = enter() else { return };
                for addr in pools::reset(pool) {
                    if !sampling::skip_free(addr | POOL_TAG) {
                        record::dealloc(Op::PoolReset, (addr | POOL_TAG) as P);
                    }
                }
            }
            _ => {}
        }
    }
}
