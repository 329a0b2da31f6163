//! Where host memory comes from.

use std::fmt;
use std::io;
use std::ptr::NonNull;
use std::sync::Arc;

use crate::{Error, MIB, Result};

/// The kind of memory an allocator hands out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemoryKind {
    /// Ordinary pageable memory. Uploads from it are staged by the driver.
    Heap,
    /// Page-locked memory registered with the CUDA driver. The GPU reads it
    /// directly over PCIe at the line rate.
    CudaPinned,
}

impl MemoryKind {
    /// A short lowercase name for logs and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            MemoryKind::Heap => "heap",
            MemoryKind::CudaPinned => "cuda-pinned",
        }
    }
}

impl fmt::Display for MemoryKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How pool buffers are page-locked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum PinMethod {
    /// `cudaHostAlloc`: the driver maps, faults in and locks the pages in
    /// one call, holding a lock that stalls other threads' CUDA calls for
    /// the whole of it (on the H200 host 4 GiB took 1.43 s idle, 3.01 s
    /// with RAM busy).
    HostAlloc,
    /// Huge-page-backed anonymous memory, faulted in by this thread outside
    /// any CUDA call, then locked with `cudaHostRegister` (the default: 4 GiB
    /// took 0.65 s idle, 1.53 s with RAM busy, of which the registration,
    /// the part that stalls other CUDA calls, 0.16–0.23 s).
    #[default]
    Register,
    /// As [`Register`](Self::Register), but each buffer is faulted in by one
    /// call instead of in 32 MiB pieces: kept to measure what the pieces
    /// cost a large buffer against what they spare other threads.
    RegisterWhole,
}

impl PinMethod {
    /// A short name for logs, configs and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            PinMethod::HostAlloc => "host-alloc",
            PinMethod::Register => "register",
            PinMethod::RegisterWhole => "register-whole",
        }
    }
}

impl std::str::FromStr for PinMethod {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "host-alloc" => Ok(PinMethod::HostAlloc),
            "register" => Ok(PinMethod::Register),
            "register-whole" => Ok(PinMethod::RegisterWhole),
            _ => Err(format!(
                "unknown pinning method {s:?} (host-alloc, register or register-whole)"
            )),
        }
    }
}

impl std::fmt::Display for PinMethod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A source of large host buffers.
///
/// # Safety
///
/// Implementors promise that a successful `allocate(len)` returns a pointer to
/// `len` bytes, aligned to at least 4096 bytes, readable and writable from any
/// thread and not aliased by anything else, which stay valid until the same
/// pointer and length are passed to `deallocate`.
pub unsafe trait HostAllocator: Send + Sync + fmt::Debug {
    /// The kind of memory handed out.
    fn kind(&self) -> MemoryKind;

    /// Allocates `len` bytes (`len > 0`). The contents are unspecified.
    fn allocate(&self, len: usize) -> Result<NonNull<u8>>;

    /// Tells an allocator that pins through a GPU's context which GPUs the
    /// process still proves on (`live_gpus`, by ordinal): it pins with one
    /// of them from now on, since a lost GPU's context refuses every call.
    /// Nothing for memory that needs no GPU.
    fn pin_with_one_of(&self, live_gpus: &[usize]) {
        let _ = live_gpus;
    }

    /// Frees memory returned by [`allocate`](Self::allocate).
    ///
    /// # Safety
    ///
    /// `ptr` and `len` must come from one earlier `allocate` call on this
    /// allocator, and the memory must not be used afterwards.
    unsafe fn deallocate(&self, ptr: NonNull<u8>, len: usize);
}

/// Memory of one allocation, freed when dropped.
pub struct HostMemory {
    ptr: NonNull<u8>,
    len: usize,
    allocator: Arc<dyn HostAllocator>,
}

// SAFETY: the allocation is owned exclusively by this value, and
// `HostAllocator` memory is usable from any thread by its contract.
unsafe impl Send for HostMemory {}
// SAFETY: shared access only hands out the pointer value; reading or writing
// through it needs `&mut self` or unsafe code of the caller.
unsafe impl Sync for HostMemory {}

impl HostMemory {
    /// Allocates `len` bytes from `allocator`. A zero `len` is rounded up to
    /// one page, so every `HostMemory` owns a real allocation.
    pub fn allocate(allocator: &Arc<dyn HostAllocator>, len: usize) -> Result<Self> {
        let len = len.max(PAGE);
        let ptr = allocator.allocate(len)?;
        Ok(HostMemory {
            ptr,
            len,
            allocator: Arc::clone(allocator),
        })
    }

    /// Start of the memory.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: allocations are at least one page.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The kind of memory.
    pub fn kind(&self) -> MemoryKind {
        self.allocator.kind()
    }
}

impl Drop for HostMemory {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` came from `allocate` on this allocator and this
        // value is their only owner; nothing can use them after drop.
        unsafe { self.allocator.deallocate(self.ptr, self.len) }
    }
}

impl fmt::Debug for HostMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostMemory")
            .field("ptr", &self.ptr)
            .field("len", &self.len)
            .field("kind", &self.kind())
            .finish()
    }
}

/// The page size buffers are rounded to and faulted in by.
pub const PAGE: usize = 4096;
const HUGE_PAGE: usize = 2 * MIB;

/// Page-aligned anonymous memory from `mmap`.
///
/// Buffers of 2 MiB and more are aligned to 2 MiB and advised as transparent
/// huge pages, which cuts page-table walks when synthesis writes gigabytes.
/// With `prefault` (the default) every page is faulted in at allocation, so
/// the cost of the first touch is paid once, when the pool allocates, and
/// never again while a reused buffer is written.
#[derive(Debug, Clone)]
pub struct HeapAllocator {
    prefault: bool,
    populate_chunk: usize,
}

impl Default for HeapAllocator {
    fn default() -> Self {
        HeapAllocator::new(true)
    }
}

impl HeapAllocator {
    /// A heap allocator; `prefault` chooses whether pages are faulted in at
    /// allocation time.
    pub fn new(prefault: bool) -> Self {
        HeapAllocator {
            prefault,
            populate_chunk: POPULATE_CHUNK,
        }
    }

    /// Faults each buffer in with one call (see [`PinMethod::RegisterWhole`]).
    pub fn populating_whole(self) -> Self {
        HeapAllocator {
            populate_chunk: usize::MAX,
            ..self
        }
    }

    fn map(len: usize) -> Result<*mut u8> {
        // SAFETY: an anonymous private mapping at an address of the kernel's
        // choosing touches no existing memory.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(Error::Os {
                bytes: len,
                source: io::Error::last_os_error(),
            });
        }
        Ok(p.cast())
    }

    /// Faults the range in, `chunk` bytes per call ([`POPULATE_CHUNK`]
    /// unless measuring): populating
    /// holds the process's memory-map lock for reading, and any `mmap` or
    /// `munmap` meanwhile — another thread's allocation, however small —
    /// waits for the whole call, and with it every thread that then faults
    /// a page. In chunks, it waits for one chunk at most.
    fn prefault_range(ptr: *mut u8, len: usize, chunk: usize) {
        let mut off = 0;
        while off < len {
            let n = chunk.min(len - off);
            // SAFETY: `off + n <= len`: a piece of the mapping this
            // allocator just created.
            let rc = unsafe { libc::madvise(ptr.add(off).cast(), n, MADV_POPULATE_WRITE) };
            if rc != 0 {
                // SAFETY: as above.
                let rest = unsafe { ptr.add(off) };
                Self::touch_range(rest, len - off);
                return;
            }
            off += n;
        }
    }

    fn touch_range(ptr: *mut u8, len: usize) {
        // Kernels before 5.14 (and valgrind) do not know MADV_POPULATE_WRITE:
        // touch one byte per page instead.
        let mut off = 0;
        while off < len {
            // SAFETY: `off < len`, inside the fresh private mapping; a
            // volatile write keeps the touch from being optimized out.
            unsafe { ptr.add(off).write_volatile(0) };
            off += PAGE;
        }
    }
}

const MADV_POPULATE_WRITE: libc::c_int = 23;

/// Bytes faulted in per call (16 huge pages). Measured on the H200 host
/// with 4 GiB buffers populated whole: a 16 MiB pool allocation on another
/// thread took 1.3–1.5 s instead of 3–5 ms; on a 2-core test machine
/// (`examples/populate_contention.rs`) the other thread's allocations
/// waited as long as the whole 4 GiB call.
const POPULATE_CHUNK: usize = 16 * HUGE_PAGE;

// SAFETY: `allocate` returns a fresh private anonymous mapping of at least
// `len` bytes, page-aligned (2 MiB-aligned when large), and `deallocate`
// unmaps exactly that range.
unsafe impl HostAllocator for HeapAllocator {
    fn kind(&self) -> MemoryKind {
        MemoryKind::Heap
    }

    fn allocate(&self, len: usize) -> Result<NonNull<u8>> {
        assert!(len > 0, "HeapAllocator::allocate of zero bytes");
        let ptr = if len >= HUGE_PAGE {
            // Map with slack, then unmap the parts outside a 2 MiB-aligned
            // window of `len` bytes.
            let padded = len
                .checked_add(HUGE_PAGE)
                .ok_or(Error::CapacityOverflow("heap allocation"))?;
            let raw = Self::map(padded)?;
            let aligned = (raw as usize).next_multiple_of(HUGE_PAGE);
            let head = aligned - raw as usize;
            let tail = padded - head - len.next_multiple_of(PAGE);
            // SAFETY: both ranges lie inside the mapping just created and
            // outside the window that is kept.
            unsafe {
                if head > 0 {
                    libc::munmap(raw.cast(), head);
                }
                if tail > 0 {
                    libc::munmap((aligned + len.next_multiple_of(PAGE)) as *mut libc::c_void, tail);
                }
                libc::madvise(aligned as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
            }
            aligned as *mut u8
        } else {
            Self::map(len)?
        };
        if self.prefault {
            Self::prefault_range(ptr, len, self.populate_chunk);
        }
        Ok(NonNull::new(ptr).expect("mmap returned a non-null mapping"))
    }

    unsafe fn deallocate(&self, ptr: NonNull<u8>, len: usize) {
        // SAFETY: the caller passes a range this allocator mapped; its
        // mapping covers `len` rounded up to a page.
        let rc = unsafe { libc::munmap(ptr.as_ptr().cast(), len.next_multiple_of(PAGE)) };
        debug_assert_eq!(rc, 0, "munmap failed: {}", io::Error::last_os_error());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heap_allocations_are_aligned_and_usable() {
        let a: Arc<dyn HostAllocator> = Arc::new(HeapAllocator::default());
        for len in [
            1,
            PAGE - 1,
            PAGE,
            3 * PAGE + 7,
            HUGE_PAGE,
            HUGE_PAGE + 1,
            5 * HUGE_PAGE + 123,
        ] {
            let m = HostMemory::allocate(&a, len).unwrap();
            assert!(m.len() >= len);
            let align = if len >= HUGE_PAGE { HUGE_PAGE } else { PAGE };
            assert_eq!(m.as_ptr() as usize % align, 0, "len {len}");
            // SAFETY: the allocation is `m.len()` bytes and exclusively ours.
            let s = unsafe { std::slice::from_raw_parts_mut(m.as_ptr(), m.len()) };
            s.fill(0xA5);
            assert!(s.iter().all(|&b| b == 0xA5));
        }
    }

    #[test]
    fn prefaulted_allocations_are_resident_through_every_chunk() {
        // Two chunks and a partial third: every page is in memory at once.
        // The same with the whole range populated by one call.
        let len = 2 * POPULATE_CHUNK + 3 * HUGE_PAGE + 5 * PAGE;
        for heap in [HeapAllocator::default(), HeapAllocator::default().populating_whole()] {
            let a: Arc<dyn HostAllocator> = Arc::new(heap);
            let m = HostMemory::allocate(&a, len).unwrap();
            let pages = m.len().div_ceil(PAGE);
            let mut resident = vec![0u8; pages];
            // SAFETY: the range is the allocation's own mapping; `resident`
            // has one byte per page of it.
            let rc = unsafe { libc::mincore(m.as_ptr().cast(), m.len(), resident.as_mut_ptr()) };
            assert_eq!(rc, 0, "mincore: {}", io::Error::last_os_error());
            let missing = resident.iter().filter(|&&r| r & 1 == 0).count();
            assert_eq!(missing, 0, "{missing} of {pages} pages not faulted in");
        }
    }

    #[test]
    fn pin_methods_parse_from_their_names() {
        for m in [PinMethod::HostAlloc, PinMethod::Register, PinMethod::RegisterWhole] {
            assert_eq!(m.as_str().parse::<PinMethod>(), Ok(m));
        }
        assert!("pinned".parse::<PinMethod>().is_err());
    }

    #[test]
    fn zero_length_rounds_up_to_a_page() {
        let a: Arc<dyn HostAllocator> = Arc::new(HeapAllocator::new(false));
        let m = HostMemory::allocate(&a, 0).unwrap();
        assert_eq!(m.len(), PAGE);
    }

    #[test]
    fn absurd_sizes_are_errors_not_panics() {
        let a: Arc<dyn HostAllocator> = Arc::new(HeapAllocator::new(false));
        assert!(HostMemory::allocate(&a, usize::MAX - 10).is_err());
        assert!(HostMemory::allocate(&a, 1 << 62).is_err());
    }
}
