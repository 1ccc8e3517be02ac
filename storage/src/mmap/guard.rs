//! Turning SIGBUS from a mapped file into an error.
//!
//! Reading a page of a mapping that lies past the end of its file (the file was truncated by
//! another program after it was mapped) or that the file system cannot back (a hole on a full
//! tmpfs) makes the kernel send SIGBUS, which kills the process: in a notebook, a dead kernel.
//! beton registers each of its maps here. A process-wide SIGBUS handler, installed on the first
//! map, looks the faulting address up: inside a registered map, it puts a private page of
//! zeros over the faulting page (so the read that faulted completes, reading zeros), marks that
//! map as *damaged* and returns. Readers check [`Guard::is_damaged`] after they read
//! ([`crate::Dataset::check_intact`]) and report [`crate::Error::FileChanged`], so zeros are
//! never handed out as data. A fault anywhere else goes to the handler that was there before
//! (Python's `faulthandler`, Rust's stack-overflow reporter, or the default action).
//!
//! The hot path costs nothing: no check per access, one relaxed atomic load per check. The
//! registry is a fixed table of atomics (a signal handler may not lock or allocate) with room
//! for as many maps as Linux lets a process have by default (`vm.max_map_count`, 65,530): a
//! version of 10,000 data files maps each. Its pages are untouched (zero) until used. A process
//! with more than [`SLOTS`] maps open at once maps the rest unguarded.

use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use std::sync::Once;

/// Maps guarded at once.
pub(crate) const SLOTS: usize = 65_536;

struct Region {
    start: AtomicUsize,
    len: AtomicUsize,
    damaged: AtomicBool,
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Region =
    Region { start: AtomicUsize::new(0), len: AtomicUsize::new(0), damaged: AtomicBool::new(false) };

static REGIONS: [Region; SLOTS] = [EMPTY; SLOTS];
/// The handler in place before ours (set once, before ours is installed).
static PREVIOUS: AtomicPtr<libc::sigaction> = AtomicPtr::new(std::ptr::null_mut());
static PAGE: AtomicUsize = AtomicUsize::new(4096);
static INSTALL: Once = Once::new();
/// Where the next registration starts looking for a free slot (past the last one taken), so
/// that registering the 10,000th map does not look at the 9,999 taken before it.
static NEXT: AtomicUsize = AtomicUsize::new(0);

/// One registered map; unregisters on drop (before the map itself is unmapped).
#[derive(Debug)]
pub(crate) struct Guard {
    slot: Option<usize>,
}

impl Guard {
    /// Registers `len` bytes from `start` (a map this process owns).
    pub(crate) fn register(start: *const u8, len: usize) -> Guard {
        install();
        let start = start as usize;
        let from = NEXT.load(Ordering::Relaxed);
        for k in (from..SLOTS).chain(0..from) {
            let r = &REGIONS[k];
            if r.start.load(Ordering::Relaxed) == 0 {
                // Claim with the length first, then publish the start.
                if r.len.compare_exchange(0, len, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
                    r.damaged.store(false, Ordering::Relaxed);
                    r.start.store(start, Ordering::Release);
                    NEXT.store((k + 1) % SLOTS, Ordering::Relaxed);
                    return Guard { slot: Some(k) };
                }
            }
        }
        Guard { slot: None }
    }

    /// Whether a read of this map faulted (and got zeros).
    pub(crate) fn is_damaged(&self) -> bool {
        self.slot.is_some_and(|k| REGIONS[k].damaged.load(Ordering::Acquire))
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(k) = self.slot {
            let r = &REGIONS[k];
            r.start.store(0, Ordering::Release);
            r.damaged.store(false, Ordering::Relaxed);
            r.len.store(0, Ordering::Release);
        }
    }
}

fn install() {
    INSTALL.call_once(|| {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if page > 0 {
            PAGE.store(page as usize, Ordering::Relaxed);
        }
        // SAFETY: an all-zero sigaction is a valid value (no handler, empty mask); sigaction
        // fills `previous` and installs `ours`, whose handler has the SA_SIGINFO signature.
        unsafe {
            let previous: *mut libc::sigaction = Box::into_raw(Box::new(std::mem::zeroed()));
            let mut ours: libc::sigaction = std::mem::zeroed();
            ours.sa_sigaction = on_sigbus as *const () as usize;
            ours.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_NODEFER;
            libc::sigemptyset(&mut ours.sa_mask);
            if libc::sigaction(libc::SIGBUS, std::ptr::null(), previous) != 0 {
                return;
            }
            PREVIOUS.store(previous, Ordering::Release);
            libc::sigaction(libc::SIGBUS, &ours, std::ptr::null_mut());
        }
    });
}

/// The SIGBUS handler: async-signal-safe (atomics and one `mmap` call only).
extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let (code, addr) = unsafe { ((*info).si_code, (*info).si_addr() as usize) };
    // si_code > 0: raised by the kernel for a memory access (not by kill/raise).
    if code > 0 {
        for r in &REGIONS {
            let start = r.start.load(Ordering::Acquire);
            if start != 0 && addr >= start && addr - start < r.len.load(Ordering::Acquire) {
                r.damaged.store(true, Ordering::Release);
                let page = addr & !(PAGE.load(Ordering::Relaxed) - 1);
                // SAFETY: `page` is inside a map this process owns (registered, not yet
                // unmapped: the guard is dropped before the map); MAP_FIXED replaces that one
                // page of it with private zeros, which the faulting read then sees.
                let p = unsafe {
                    libc::mmap(
                        page as *mut libc::c_void,
                        PAGE.load(Ordering::Relaxed),
                        libc::PROT_READ,
                        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                        -1,
                        0,
                    )
                };
                if p != libc::MAP_FAILED {
                    return;
                }
            }
        }
    }
    chain(sig, info, ctx);
}

/// Hands a signal that is not ours to the handler installed before ours.
fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let previous = PREVIOUS.load(Ordering::Acquire);
    // SAFETY: `previous` was filled by sigaction before our handler was installed and is never
    // freed; calling its handler with the arguments we were given is what the kernel would
    // have done. For the default action we restore it and let the signal take its course.
    unsafe {
        if previous.is_null() {
            reset_and_raise(sig);
            return;
        }
        let prev = &*previous;
        let handler = prev.sa_sigaction;
        if handler == libc::SIG_IGN {
            return;
        }
        if handler == libc::SIG_DFL {
            reset_and_raise(sig);
            return;
        }
        if prev.sa_flags & libc::SA_SIGINFO != 0 {
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                std::mem::transmute(handler);
            f(sig, info, ctx);
        } else {
            let f: extern "C" fn(libc::c_int) = std::mem::transmute(handler);
            f(sig);
        }
    }
}

/// Restores the default action; a fault re-raises itself when the instruction is retried, a
/// signal sent with kill/raise is raised again here.
///
/// # Safety
/// Called from the signal handler only.
unsafe fn reset_and_raise(sig: libc::c_int) {
    // SAFETY: an all-zero sigaction with SIG_DFL (0) is the default disposition.
    unsafe {
        let mut dfl: libc::sigaction = std::mem::zeroed();
        dfl.sa_sigaction = libc::SIG_DFL;
        libc::sigaction(sig, &dfl, std::ptr::null_mut());
        libc::raise(sig);
    }
}
