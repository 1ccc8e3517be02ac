//! Buffers that end at an inaccessible page, so that a SIMD kernel reading or writing
//! one byte past its slice faults instead of passing silently.

/// `len` bytes ending exactly where a `PROT_NONE` page begins.
pub struct Guarded {
    map: *mut libc::c_void,
    map_len: usize,
    page: usize,
    len: usize,
}

impl Guarded {
    /// A guarded buffer holding `data`.
    pub fn with(data: &[u8]) -> Guarded {
        // SAFETY: sysconf reads a system constant.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
        let len = data.len();
        let map_len = len.div_ceil(page) * page + page;
        // SAFETY: an anonymous private mapping of map_len bytes; checked for failure.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(map, libc::MAP_FAILED);
        // SAFETY: the last page of the mapping just made.
        let rc =
            unsafe { libc::mprotect(map.cast::<u8>().add(map_len - page).cast(), page, libc::PROT_NONE) };
        assert_eq!(rc, 0);
        let mut g = Guarded { map, map_len, page, len };
        g.as_mut().copy_from_slice(data);
        g
    }

    fn start(&self) -> *mut u8 {
        // SAFETY: map_len - page - len >= 0 bytes into the mapping.
        unsafe { self.map.cast::<u8>().add(self.map_len - self.page - self.len) }
    }
}

impl AsRef<[u8]> for Guarded {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: len readable bytes before the guard page, owned by self.
        unsafe { std::slice::from_raw_parts(self.start(), self.len) }
    }
}

impl AsMut<[u8]> for Guarded {
    fn as_mut(&mut self) -> &mut [u8] {
        // SAFETY: len writable bytes before the guard page, owned by self and borrowed mutably.
        unsafe { std::slice::from_raw_parts_mut(self.start(), self.len) }
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `with`, unmapped once.
        unsafe { libc::munmap(self.map, self.map_len) };
    }
}
