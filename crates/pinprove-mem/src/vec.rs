//! `PinnedVec`: the container synthesis writes into.

use std::fmt;
use std::marker::PhantomData;
use std::mem::size_of;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::Arc;

use rayon::prelude::*;

use crate::alloc::PAGE;
use crate::pool::{PinnedPool, PoolBuffer, UseFence};
use crate::{Error, MemoryKind, Reservation, Result};

/// A growable array backed by a [`PinnedPool`] buffer, never by the global
/// allocator.
///
/// It behaves like `Vec<T>` for the operations synthesis needs. Sized right
/// from the start (with a capacity hint) it never reallocates, and its
/// memory can be handed to the GPU as it is. When it outgrows its buffer it
/// takes a larger one from the pool, copies, returns the old one, and counts
/// a *spill* (see [`spills`](Self::spills)); a correct hint means zero spills.
///
/// The buffer goes back to the pool exactly once: when the vector is
/// dropped, [`release`](Self::release)d, or converted with
/// [`into_vec`](Self::into_vec) or [`into_buffer`](Self::into_buffer).
///
/// Element types must be `Copy`, non-zero-sized and aligned to at most a page.
pub struct PinnedVec<T: Copy> {
    buf: Option<PoolBuffer>,
    /// Start of `buf` as `T`, or dangling when there is no buffer.
    ptr: NonNull<T>,
    cap: usize,
    len: usize,
    pool: Arc<PinnedPool>,
    spills: u32,
    bytes_copied: u64,
    _owns: PhantomData<T>,
}

// SAFETY: the vector owns its elements exclusively (like `Vec<T>`), so it is
// `Send` when `T` is; the pool buffer it holds is `Send`.
unsafe impl<T: Copy + Send> Send for PinnedVec<T> {}
// SAFETY: shared references only give out `&[T]`, so `Sync` follows `T`.
unsafe impl<T: Copy + Sync> Sync for PinnedVec<T> {}

impl<T: Copy> PinnedVec<T> {
    const ELEM: usize = {
        assert!(size_of::<T>() > 0, "PinnedVec does not hold zero-sized types");
        assert!(
            std::mem::align_of::<T>() <= PAGE,
            "PinnedVec elements must be aligned to at most a page"
        );
        size_of::<T>()
    };

    /// An empty vector that takes its first buffer from `pool` when it first
    /// grows.
    pub fn new_in(pool: &Arc<PinnedPool>) -> Self {
        let _ = Self::ELEM;
        PinnedVec {
            buf: None,
            ptr: NonNull::dangling(),
            cap: 0,
            len: 0,
            pool: Arc::clone(pool),
            spills: 0,
            bytes_copied: 0,
            _owns: PhantomData,
        }
    }

    /// An empty vector with room for at least `capacity` elements, waiting
    /// for memory if the budget is full.
    pub fn with_capacity_in(capacity: usize, pool: &Arc<PinnedPool>) -> Result<Self> {
        let mut v = Self::new_in(pool);
        if capacity > 0 {
            let buf = pool.checkout_blocking(Self::bytes_for(capacity)?)?;
            v.adopt(buf);
        }
        Ok(v)
    }

    /// Like [`with_capacity_in`](Self::with_capacity_in), but charged to
    /// `funds` when given (an admitted working set, see
    /// [`PinnedPool::checkout_funded`]) instead of a new budget reservation.
    pub fn with_capacity_charged(
        capacity: usize,
        pool: &Arc<PinnedPool>,
        funds: Option<&mut Reservation>,
    ) -> Result<Self> {
        let Some(funds) = funds else {
            return Self::with_capacity_in(capacity, pool);
        };
        let mut v = Self::new_in(pool);
        if capacity > 0 {
            let buf = pool.checkout_funded(Self::bytes_for(capacity)?, funds)?;
            v.adopt(buf);
        }
        Ok(v)
    }

    fn bytes_for(n: usize) -> Result<usize> {
        n.checked_mul(Self::ELEM)
            .filter(|&b| b <= isize::MAX as usize)
            .ok_or(Error::CapacityOverflow("PinnedVec capacity"))
    }

    fn adopt(&mut self, mut buf: PoolBuffer) {
        self.ptr = NonNull::new(buf.as_mut_ptr().cast::<T>()).expect("pool buffers are non-null");
        self.cap = buf.len() / Self::ELEM;
        self.buf = Some(buf);
    }

    /// Number of elements.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no elements.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Elements the current buffer holds without growing.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Bytes of the pool buffer behind the vector (0 before the first one).
    pub fn buffer_bytes(&self) -> u64 {
        self.buf.as_ref().map_or(0, |b| b.len() as u64)
    }

    /// Times this vector outgrew its buffer and copied itself to a larger one.
    pub fn spills(&self) -> u32 {
        self.spills
    }

    /// Bytes copied by those spills.
    pub fn bytes_copied(&self) -> u64 {
        self.bytes_copied
    }

    /// The pool the vector draws from.
    pub fn pool(&self) -> &Arc<PinnedPool> {
        &self.pool
    }

    /// What the memory is made of (`None` before the first buffer).
    pub fn memory_kind(&self) -> Option<MemoryKind> {
        self.buf.as_ref().map(PoolBuffer::kind)
    }

    /// Whether the elements live in pinned memory (direct DMA).
    pub fn is_pinned(&self) -> bool {
        self.memory_kind() == Some(MemoryKind::CudaPinned)
    }

    /// Makes the pool wait for `fence` before reusing the buffer once it is
    /// returned (see [`UseFence`]). Does nothing without a buffer.
    pub fn set_use_fence(&mut self, fence: Box<dyn UseFence>) {
        if let Some(b) = self.buf.as_mut() {
            b.set_use_fence(fence);
        }
    }

    /// The elements.
    #[inline]
    pub fn as_slice(&self) -> &[T] {
        // SAFETY: `ptr` is valid for `cap >= len` elements (or dangling with
        // `len == 0`), and the first `len` have been written.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The elements, mutably.
    #[inline]
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        // SAFETY: as in `as_slice`; `&mut self` makes the borrow unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    /// Start of the elements, for DMA. Valid until the vector grows or is
    /// dropped.
    pub fn as_ptr(&self) -> *const T {
        self.ptr.as_ptr()
    }

    /// Start of the elements for writing.
    pub fn as_mut_ptr(&mut self) -> *mut T {
        self.ptr.as_ptr()
    }

    /// Appends an element; panics if no memory can be had (like `Vec`).
    #[inline]
    pub fn push(&mut self, value: T) {
        if self.len == self.cap {
            self.grow_for(1).unwrap_or_else(|e| panic!("PinnedVec::push: {e}"));
        }
        // SAFETY: `len < cap` and the buffer holds `cap` elements.
        unsafe { self.ptr.as_ptr().add(self.len).write(value) };
        self.len += 1;
    }

    /// Appends an element, or says why memory could not be had.
    #[inline]
    pub fn try_push(&mut self, value: T) -> Result<()> {
        if self.len == self.cap {
            self.grow_for(1)?;
        }
        // SAFETY: `len < cap` and the buffer holds `cap` elements.
        unsafe { self.ptr.as_ptr().add(self.len).write(value) };
        self.len += 1;
        Ok(())
    }

    /// Removes and returns the last element.
    pub fn pop(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        self.len -= 1;
        // SAFETY: the element at the old `len - 1` was written.
        Some(unsafe { self.ptr.as_ptr().add(self.len).read() })
    }

    /// Appends all of `other`; panics if no memory can be had.
    pub fn extend_from_slice(&mut self, other: &[T]) {
        self.try_extend_from_slice(other)
            .unwrap_or_else(|e| panic!("PinnedVec::extend_from_slice: {e}"));
    }

    /// Appends all of `other`, or says why memory could not be had.
    pub fn try_extend_from_slice(&mut self, other: &[T]) -> Result<()> {
        self.try_reserve(other.len())?;
        // SAFETY: after `try_reserve`, `len + other.len() <= cap`; `other`
        // cannot overlap our spare capacity, which nobody else can see.
        unsafe {
            std::ptr::copy_nonoverlapping(other.as_ptr(), self.ptr.as_ptr().add(self.len), other.len());
        }
        self.len += other.len();
        Ok(())
    }

    /// Resizes to `new_len`, filling new slots with `value`; panics if no
    /// memory can be had.
    pub fn resize(&mut self, new_len: usize, value: T) {
        self.try_resize(new_len, value)
            .unwrap_or_else(|e| panic!("PinnedVec::resize: {e}"));
    }

    /// Resizes to `new_len`, filling new slots with `value`.
    pub fn try_resize(&mut self, new_len: usize, value: T) -> Result<()> {
        if new_len <= self.len {
            self.len = new_len;
            return Ok(());
        }
        self.try_reserve(new_len - self.len)?;
        for i in self.len..new_len {
            // SAFETY: `i < new_len <= cap` after the reserve.
            unsafe { self.ptr.as_ptr().add(i).write(value) };
        }
        self.len = new_len;
        Ok(())
    }

    /// [`try_resize`](Self::try_resize) with the new slots filled by all
    /// of rayon's threads: for vectors of gigabytes about to be overwritten
    /// piecewise in parallel.
    pub fn try_resize_par(&mut self, new_len: usize, value: T) -> Result<()>
    where
        T: Send + Sync,
    {
        if new_len <= self.len {
            self.len = new_len;
            return Ok(());
        }
        self.try_reserve(new_len - self.len)?;
        // Addresses cross threads as integers; each slot is written by
        // exactly one task.
        let base = self.ptr.as_ptr() as usize;
        (self.len..new_len).into_par_iter().with_min_len(1 << 14).for_each(|i| {
            // SAFETY: `i < new_len <= cap` after the reserve, so the slot is
            // inside the buffer; no other task writes slot `i`, and `&mut
            // self` keeps everyone else out.
            unsafe { (base as *mut T).add(i).write(value) };
        });
        self.len = new_len;
        Ok(())
    }

    /// Shortens to `len` elements (no effect if already shorter).
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Removes all elements, keeping the buffer.
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Makes room for `additional` more elements; panics if no memory can be
    /// had.
    pub fn reserve(&mut self, additional: usize) {
        self.try_reserve(additional)
            .unwrap_or_else(|e| panic!("PinnedVec::reserve: {e}"));
    }

    /// Makes room for `additional` more elements.
    pub fn try_reserve(&mut self, additional: usize) -> Result<()> {
        if self.cap - self.len >= additional {
            return Ok(());
        }
        self.grow_for(additional)
    }

    /// Moves to a buffer with room for `len + additional` elements (at least
    /// double the current capacity, so that pushes are amortized O(1)).
    #[cold]
    fn grow_for(&mut self, additional: usize) -> Result<()> {
        let needed = self
            .len
            .checked_add(additional)
            .ok_or(Error::CapacityOverflow("PinnedVec length"))?;
        let minimum_first = (PAGE / Self::ELEM).max(1);
        let doubled = needed.max(self.cap.saturating_mul(2)).max(minimum_first);
        let new = match self.checkout(doubled) {
            // Doubling may not fit where the exact size does.
            Err(Error::ExceedsBudget { .. } | Error::CapacityOverflow(_)) if doubled > needed => {
                self.checkout(needed)?
            }
            other => other?,
        };
        self.replace_buffer(new);
        Ok(())
    }

    fn checkout(&self, elems: usize) -> Result<PoolBuffer> {
        let bytes = Self::bytes_for(elems)?;
        match self.pool.try_checkout(bytes) {
            Err(Error::WouldBlock { .. }) => {
                // Growth happens inside admitted work (a synthesis larger
                // than its hint): wait for memory, not behind admissions.
                tracing::warn!(bytes, "PinnedVec growth waits for the memory budget");
                self.pool.checkout_urgent(bytes)
            }
            other => other,
        }
    }

    fn replace_buffer(&mut self, mut new: PoolBuffer) {
        let dst = new.as_mut_ptr().cast::<T>();
        if self.buf.is_some() {
            // SAFETY: the new buffer holds at least `len` elements (it was
            // sized for more than the old capacity) and is a different
            // allocation from the old one.
            unsafe { std::ptr::copy_nonoverlapping(self.ptr.as_ptr(), dst, self.len) };
            let copied = (self.len * Self::ELEM) as u64;
            self.spills += 1;
            self.bytes_copied += copied;
            self.pool.record_spill(copied);
        }
        // A buffer outgrown during synthesis is a rung of the growth ladder
        // that a hinted synthesis never asks for again: free it.
        if let Some(old) = self.buf.take() {
            old.discard();
        }
        self.adopt(new);
    }

    /// Returns the buffer to the pool now. Same as dropping the vector.
    pub fn release(self) {}

    /// Returns the buffer to the pool to be freed rather than kept idle: for
    /// long-lived data that will not be asked for again in this size (an
    /// evicted SRS).
    pub fn discard(mut self) {
        if let Some(b) = self.buf.take() {
            b.discard();
        }
    }

    /// Copies the elements into a `Vec` and returns the buffer to the pool.
    pub fn into_vec(self) -> Vec<T> {
        self.as_slice().to_vec()
    }

    /// Gives up the buffer without returning it to the pool, with the number
    /// of elements written at its start; the buffer goes back when the
    /// returned value is dropped. `None` if the vector never had a buffer.
    pub fn into_buffer(mut self) -> Option<(PoolBuffer, usize)> {
        let len = self.len;
        self.len = 0;
        self.cap = 0;
        self.ptr = NonNull::dangling();
        self.buf.take().map(|b| (b, len))
    }

    /// Converts every element with `f`, reusing the buffer: no allocation
    /// and no copy. `U` must have the size of `T` and an alignment no larger
    /// (checked at compile time).
    pub fn map_in_place<U>(mut self, f: impl Fn(T) -> U + Sync + Send) -> PinnedVec<U>
    where
        T: Send,
        U: Copy + Send,
    {
        const {
            assert!(
                size_of::<U>() == size_of::<T>(),
                "map_in_place needs equally sized types"
            );
            assert!(
                std::mem::align_of::<U>() <= std::mem::align_of::<T>(),
                "map_in_place cannot raise alignment"
            );
        }
        let len = self.len;
        // Addresses cross threads as integers; each index is touched by
        // exactly one task.
        let base = self.ptr.as_ptr() as usize;
        (0..len).into_par_iter().with_min_len(1 << 14).for_each(|i| {
            let slot = (base as *mut T).wrapping_add(i);
            // SAFETY: element `i < len` was written as a `T`; it is read once
            // and its slot overwritten with a `U` of the same size, whose
            // alignment the slot (aligned for `T`) satisfies. No other task
            // touches slot `i`, and `self` is owned here, so nobody else can.
            unsafe {
                let t = slot.read();
                slot.cast::<U>().write(f(t));
            }
        });
        let buf = self.buf.take();
        PinnedVec {
            ptr: self.ptr.cast::<U>(),
            cap: self.cap,
            len,
            buf,
            pool: Arc::clone(&self.pool),
            spills: self.spills,
            bytes_copied: self.bytes_copied,
            _owns: PhantomData,
        }
    }

    /// A copy in another buffer of the same pool.
    pub fn try_clone(&self) -> Result<Self> {
        let mut v = Self::with_capacity_in(self.len, &self.pool)?;
        v.try_extend_from_slice(self.as_slice())?;
        Ok(v)
    }
}

impl<T: Copy> Deref for PinnedVec<T> {
    type Target = [T];
    #[inline]
    fn deref(&self) -> &[T] {
        self.as_slice()
    }
}

impl<T: Copy> DerefMut for PinnedVec<T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut [T] {
        self.as_mut_slice()
    }
}

impl<T: Copy> Extend<T> for PinnedVec<T> {
    fn extend<I: IntoIterator<Item = T>>(&mut self, iter: I) {
        let iter = iter.into_iter();
        self.reserve(iter.size_hint().0);
        for x in iter {
            self.push(x);
        }
    }
}

impl<'a, T: Copy + 'a> Extend<&'a T> for PinnedVec<T> {
    fn extend<I: IntoIterator<Item = &'a T>>(&mut self, iter: I) {
        self.extend(iter.into_iter().copied())
    }
}

impl<T: Copy + PartialEq> PartialEq<[T]> for PinnedVec<T> {
    fn eq(&self, other: &[T]) -> bool {
        self.as_slice() == other
    }
}

impl<T: Copy + PartialEq> PartialEq for PinnedVec<T> {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl<T: Copy + fmt::Debug> fmt::Debug for PinnedVec<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}
