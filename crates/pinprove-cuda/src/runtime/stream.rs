//! Owners of streams and events, and the fence that keeps a pool buffer
//! from reuse until the copy reading it has completed.

use std::ffi::c_void;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use pinprove_mem::sync::Recover;
use pinprove_mem::{PoolBuffer, UseFence};

use super::memory::DeviceBuffer;
use super::result::{self, CudaError};
use super::sys::{RawEvent, RawStream};

/// A non-blocking stream on the current device, destroyed on drop.
pub struct Stream {
    raw: RawStream,
}

// SAFETY: CUDA streams may be used from any host thread.
unsafe impl Send for Stream {}
// SAFETY: the runtime serializes concurrent use of one stream.
unsafe impl Sync for Stream {}

impl Stream {
    /// A stream that does not synchronize with the legacy default stream.
    pub fn new() -> Result<Self, CudaError> {
        Ok(Stream {
            raw: result::stream_create()?,
        })
    }

    /// Waits for everything queued on the stream.
    pub fn synchronize(&self) -> Result<(), CudaError> {
        // SAFETY: the handle is live for `self`'s lifetime.
        unsafe { result::stream_synchronize(self.raw) }
    }

    /// Copies `src` to the start of `dst`, and returns the time the copy took
    /// on the device, measured with events recorded around it. Returns after
    /// the copy has completed, so `src` is free again.
    pub fn timed_upload<T: Copy>(&self, dst: &mut DeviceBuffer, src: &[T]) -> Result<Duration, CudaError> {
        let bytes = std::mem::size_of_val(src);
        assert!(bytes <= dst.len(), "upload larger than the device buffer");
        let start = Event::timing()?;
        let end = Event::timing()?;
        start.record(self)?;
        // SAFETY: `dst` holds at least `bytes` bytes, the size of `src`; `src`
        // stays borrowed until the event after the copy has completed
        // (synchronized below). The device reads the bytes; no Rust value is
        // formed from them.
        unsafe { result::memcpy_async(dst.as_device_ptr(), src.as_ptr().cast(), bytes, true, self.raw)? };
        end.record(self)?;
        end.synchronize()?;
        end.elapsed_since(&start)
    }

    /// Enqueues a copy of the first `len` bytes of `src` into `dst` and
    /// returns at once, giving the buffer back to its pool with a fence: the
    /// pool hands it out again only after the copy has completed, never when
    /// it is merely enqueued. Returns the fence's twin, for waiting.
    pub fn upload_and_release(
        &self,
        dst: &mut DeviceBuffer,
        src: PoolBuffer,
        len: usize,
    ) -> Result<EventFence, CudaError> {
        assert!(len <= src.len() && len <= dst.len(), "upload larger than its buffers");
        // SAFETY: `dst` holds `len` bytes and is freed only by cudaFree,
        // which waits for the device. `src` is moved in and returned to its
        // pool fenced below: nobody can write it, and the pool neither reuses
        // nor frees it, until the event after the copy has completed.
        unsafe { result::memcpy_async(dst.as_device_ptr(), src.as_ptr().cast(), len, true, self.raw)? };
        let mut src = src;
        match EventFence::record(self) {
            Ok(fence) => src.set_use_fence(Box::new(fence)),
            Err(e) => {
                // No fence: the buffer may only go back once the copy is done.
                let _ = self.synchronize();
                return Err(e);
            }
        }
        drop(src);
        EventFence::record(self)
    }

    /// Copies the start of `src` back into `dst`, waiting for completion.
    pub fn download(&self, dst: &mut [u8], src: &DeviceBuffer) -> Result<(), CudaError> {
        assert!(dst.len() <= src.len(), "download larger than the device buffer");
        // SAFETY: sizes checked above; the stream is synchronized before
        // `dst`'s borrow ends.
        unsafe { result::memcpy_async(dst.as_mut_ptr().cast(), src.as_device_ptr(), dst.len(), false, self.raw)? };
        self.synchronize()
    }

    /// The raw handle, for calls into other CUDA code of the process.
    pub fn as_raw(&self) -> *mut c_void {
        self.raw
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        // SAFETY: created by `stream_create` and owned by `self`.
        if let Err(e) = unsafe { result::stream_destroy(self.raw) } {
            tracing::error!("{e}");
        }
    }
}

/// A CUDA event, destroyed on drop.
pub struct Event {
    raw: RawEvent,
}

// SAFETY: CUDA events may be used from any host thread.
unsafe impl Send for Event {}
// SAFETY: recording and querying one event concurrently is allowed.
unsafe impl Sync for Event {}

impl Event {
    /// An event that records timestamps.
    pub fn timing() -> Result<Self, CudaError> {
        Ok(Event {
            raw: result::event_create(true)?,
        })
    }

    /// An event for ordering only (cheaper).
    pub fn fence() -> Result<Self, CudaError> {
        Ok(Event {
            raw: result::event_create(false)?,
        })
    }

    /// Records the event after the work queued so far on `stream`.
    pub fn record(&self, stream: &Stream) -> Result<(), CudaError> {
        // SAFETY: both handles are live.
        unsafe { result::event_record(self.raw, stream.raw) }
    }

    /// Whether the recorded work has completed.
    pub fn is_complete(&self) -> Result<bool, CudaError> {
        // SAFETY: the handle is live.
        unsafe { result::event_query(self.raw) }
    }

    /// Blocks until the recorded work has completed.
    pub fn synchronize(&self) -> Result<(), CudaError> {
        // SAFETY: the handle is live.
        unsafe { result::event_synchronize(self.raw) }
    }

    /// The `cudaEvent_t`, for CUDA code of this process to record or wait
    /// on; valid while `self` lives.
    pub fn as_raw(&self) -> *mut c_void {
        self.raw
    }

    /// GPU time between `start` and this event, both completed.
    pub fn elapsed_since(&self, start: &Event) -> Result<Duration, CudaError> {
        // SAFETY: both handles are live.
        let ms = unsafe { result::event_elapsed_ms(start.raw, self.raw)? };
        Ok(Duration::from_secs_f64(f64::from(ms) / 1e3))
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: created by `event_create` and owned by `self`.
        if let Err(e) = unsafe { result::event_destroy(self.raw) } {
            tracing::error!("{e}");
        }
    }
}

/// CUDA events kept for reuse, of one kind (timing or fence) and one
/// device: creating an event takes a lock of the driver that every other
/// CUDA call of the process contends for, and a proof uses a dozen. An
/// event belongs to the device that was current when it was created, so a
/// pool is used with its device current. Events come back when their
/// [`PooledEvent`] is dropped (a few dozen are kept; more are destroyed).
pub struct EventPool {
    timing: bool,
    free: Mutex<Vec<Event>>,
}

/// Events a pool keeps idle.
const EVENTS_KEPT: usize = 64;

impl EventPool {
    /// A pool of timing events (`timing`) or fence events.
    pub fn new(timing: bool) -> Arc<EventPool> {
        Arc::new(EventPool {
            timing,
            free: Mutex::new(Vec::new()),
        })
    }

    /// An idle event, or a new one (created on the current device).
    pub fn take(self: &Arc<Self>) -> Result<PooledEvent, CudaError> {
        let reused = self.free.lock().recover().pop();
        let event = match reused {
            Some(e) => e,
            None if self.timing => Event::timing()?,
            None => Event::fence()?,
        };
        Ok(PooledEvent {
            event: Some(event),
            pool: Arc::downgrade(self),
        })
    }

    /// Events idle in the pool.
    pub fn idle(&self) -> usize {
        self.free.lock().recover().len()
    }
}

/// An event on loan from an [`EventPool`] (or a standalone one), given back
/// on drop. Re-recording a reused event is fine: waits queued on it before
/// captured the work of its earlier recording.
pub struct PooledEvent {
    event: Option<Event>,
    pool: Weak<EventPool>,
}

impl PooledEvent {
    /// An event of no pool: destroyed on drop.
    pub fn standalone(event: Event) -> PooledEvent {
        PooledEvent {
            event: Some(event),
            pool: Weak::new(),
        }
    }
}

impl std::ops::Deref for PooledEvent {
    type Target = Event;

    fn deref(&self) -> &Event {
        self.event.as_ref().expect("present until dropped")
    }
}

impl Drop for PooledEvent {
    fn drop(&mut self) {
        if let (Some(e), Some(pool)) = (self.event.take(), self.pool.upgrade()) {
            let mut free = pool.free.lock().recover();
            if free.len() < EVENTS_KEPT {
                free.push(e);
            }
        }
    }
}

/// A [`UseFence`] that completes when a CUDA event does: record it on the
/// stream after the copy that reads a pool buffer, attach it to the buffer,
/// and the pool will not hand the buffer out again before the copy is done.
/// Several buffers may share one event (`From<Arc<PooledEvent>>`).
pub struct EventFence(Arc<PooledEvent>);

impl EventFence {
    /// Waits for the fence.
    pub fn synchronize(&self) -> Result<(), CudaError> {
        self.0.synchronize()
    }

    /// Records a fence after the work queued so far on `stream`.
    pub fn record(stream: &Stream) -> Result<Self, CudaError> {
        let e = Event::fence()?;
        e.record(stream)?;
        Ok(EventFence::from(PooledEvent::standalone(e)))
    }
}

impl From<Event> for EventFence {
    /// A fence on an event that is (or will be, before the buffer is
    /// dropped) recorded after the buffer's last use.
    fn from(e: Event) -> Self {
        EventFence::from(PooledEvent::standalone(e))
    }
}

impl From<PooledEvent> for EventFence {
    /// As `From<Event>`; the event goes back to its pool with the fence.
    fn from(e: PooledEvent) -> Self {
        EventFence(Arc::new(e))
    }
}

impl From<Arc<PooledEvent>> for EventFence {
    /// As `From<PooledEvent>`, for an event recorded after the last use of
    /// several buffers; it goes back to its pool with the last of them.
    fn from(e: Arc<PooledEvent>) -> Self {
        EventFence(e)
    }
}

impl UseFence for EventFence {
    fn is_complete(&self) -> bool {
        // An error means the device is gone: nothing is reading any more.
        self.0.is_complete().unwrap_or(true)
    }

    fn wait(&self) {
        if let Err(e) = self.0.synchronize() {
            tracing::error!("waiting for a pool buffer's last use: {e}");
        }
    }
}
