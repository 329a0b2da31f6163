//! The handle to a checked-out pool buffer.

use std::fmt;
use std::mem::MaybeUninit;
use std::sync::Arc;

use super::{Block, PinnedPool, UseFence};
use crate::alloc::MemoryKind;

/// A buffer checked out of a [`PinnedPool`]; goes back when dropped.
///
/// The contents are unspecified when checked out (a reused buffer holds what
/// its previous user wrote), so the buffer exposes raw pointers and
/// `MaybeUninit` bytes only; [`PinnedVec`](crate::PinnedVec) is the typed view.
pub struct PoolBuffer {
    pool: Arc<PinnedPool>,
    /// `None` only during drop.
    block: Option<Block>,
    fence: Option<Box<dyn UseFence>>,
}

impl PoolBuffer {
    pub(super) fn new(pool: Arc<PinnedPool>, block: Block) -> Self {
        PoolBuffer {
            pool,
            block: Some(block),
            fence: None,
        }
    }

    fn block(&self) -> &Block {
        self.block.as_ref().expect("block present until drop")
    }

    /// Size in bytes (the request rounded up to its size class).
    pub fn len(&self) -> usize {
        self.block().mem.len()
    }

    /// Always false: buffers are at least one page.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Start of the buffer, aligned to at least 4096 bytes.
    pub fn as_ptr(&self) -> *const u8 {
        self.block().mem.as_ptr()
    }

    /// Start of the buffer for writing.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.block().mem.as_ptr()
    }

    /// The bytes, as possibly uninitialized memory.
    pub fn as_uninit_mut(&mut self) -> &mut [MaybeUninit<u8>] {
        let (ptr, len) = (self.as_mut_ptr(), self.len());
        // SAFETY: the block is `len` bytes owned exclusively by this buffer
        // while it is checked out; `&mut self` makes the borrow unique, and
        // `MaybeUninit` makes no claim about the contents.
        unsafe { std::slice::from_raw_parts_mut(ptr.cast::<MaybeUninit<u8>>(), len) }
    }

    /// What the buffer is made of.
    pub fn kind(&self) -> MemoryKind {
        self.block().mem.kind()
    }

    /// Whether uploads from this buffer are direct DMA (pinned memory).
    pub fn is_pinned(&self) -> bool {
        self.kind() == MemoryKind::CudaPinned
    }

    /// The pool the buffer goes back to.
    pub fn pool(&self) -> &Arc<PinnedPool> {
        &self.pool
    }

    /// Returns the buffer to the pool to be freed rather than kept idle: for
    /// buffers unlikely to be asked for again (those a vector outgrew).
    pub fn discard(mut self) {
        if let Some(block) = self.block.take() {
            self.pool.give_back(block, self.fence.take(), true);
        }
    }

    /// Makes the pool wait for `fence` before reusing or freeing the buffer
    /// once it is dropped. Replaces an earlier fence.
    pub fn set_use_fence(&mut self, fence: Box<dyn UseFence>) {
        self.fence = Some(fence);
    }
}

impl Drop for PoolBuffer {
    fn drop(&mut self) {
        if let Some(block) = self.block.take() {
            self.pool.give_back(block, self.fence.take(), false);
        }
    }
}

impl fmt::Debug for PoolBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PoolBuffer")
            .field("id", &self.block().id)
            .field("len", &self.len())
            .field("kind", &self.kind())
            .finish()
    }
}
