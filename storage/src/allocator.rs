//! The process's allocator: mimalloc, the global allocator of the CLI and of the Python module,
//! tuned for processes that start, query and exit.
//!
//! mimalloc reserves its memory in arenas of 1 GiB. On Linux it commits an arena eagerly and
//! advises it `MADV_HUGEPAGE`, so the first small allocation in each 2 MiB of it makes the kernel
//! zero a whole transparent huge page. A new Python process that opened a dataset of 2,000 data
//! files and ran one WHERE held 20 MB of fresh anonymous memory for ~10 MB of allocations
//! (`import beton` plus `beton.open` alone: 21 MB, 14 MB of it huge pages). The first touch of
//! fresh memory is what costs on a VM whose host reclaims the guest's freed pages: up to 100 ms
//! of system time in the first query right after a big write (docs/PERFORMANCE.md, "The first
//! query after a write"). Committed on demand, an arena is touched in 4 KiB pages where it is
//! used; buffers that ask for huge pages ([`crate::advise_huge_pages`]) still get them.

/// mimalloc's `mi_option_arena_eager_commit`: its place in `mi_option_t` (v2 and v3 alike).
#[cfg(target_os = "linux")]
const ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;

/// Has mimalloc commit the arenas it reserves from now on as they are used (its option
/// `arena_eager_commit` = 0, default 2: eagerly where the OS overcommits), unless
/// `MIMALLOC_ARENA_EAGER_COMMIT` is set in the environment, which then decides. Call it before
/// the process's first allocation (the first arena is reserved then): first thing in `main`, or
/// when a shared library is loaded. A no-op outside Linux.
///
/// # Safety
/// No other thread may be running mimalloc (allocating or reading its options) nor changing the
/// environment meanwhile: mimalloc's option setter is not thread-safe, nor is `getenv`.
pub unsafe fn commit_arenas_on_demand() {
    #[cfg(target_os = "linux")]
    // SAFETY: the name is NUL-terminated; the caller guarantees no thread changes the environment
    // or uses mimalloc's options meanwhile (`getenv`'s and `mi_option_set`'s requirement).
    unsafe {
        if libc::getenv(c"MIMALLOC_ARENA_EAGER_COMMIT".as_ptr()).is_null() {
            libmimalloc_sys::mi_option_set(ARENA_EAGER_COMMIT, 0);
        }
    }
}

/// mimalloc's `arena_eager_commit` option now (tests).
#[cfg(all(test, target_os = "linux"))]
fn arena_eager_commit() -> std::ffi::c_long {
    // SAFETY: reading an option (initialised from the environment on first read).
    unsafe { libmimalloc_sys::mi_option_get(ARENA_EAGER_COMMIT) }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn the_option_is_mimallocs_arena_eager_commit() {
        // Index 4 is `arena_eager_commit` if its default is 2 (the only option whose default is
        // 2 among the first ten) and setting it reads back; the effect on a process (no huge
        // pages in a new Python process's heap) is python/tests/test_allocator.py's.
        if std::env::var_os("MIMALLOC_ARENA_EAGER_COMMIT").is_none() {
            assert_eq!(arena_eager_commit(), 2, "mimalloc's default for arena_eager_commit");
            // SAFETY: this test binary's allocator is the system's: mimalloc's options are
            // read by this test only.
            unsafe { commit_arenas_on_demand() };
            assert_eq!(arena_eager_commit(), 0);
        }
    }
}
