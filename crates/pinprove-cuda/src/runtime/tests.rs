//! The runtime layer on a GPU where there is one (skipped elsewhere, or
//! failing where a GPU is required).

use std::ffi::c_int;

use pinprove_mem::{HostAllocator, UseFence};

use super::*;

/// Where no GPU is usable the allocator reports why instead of failing
/// later, and the default allocator falls back to the heap.
#[test]
fn availability_is_reported() {
    match CudaPinnedAllocator::new() {
        Ok(a) => {
            let p = a.allocate(1 << 20).unwrap();
            // SAFETY: just allocated, 1 MiB, ours.
            unsafe {
                p.as_ptr().write_bytes(7, 1 << 20);
                a.deallocate(p, 1 << 20);
            }
        }
        Err(e) => {
            assert!(!e.name.is_empty() && e.code != 0, "{e:?}");
            pinprove_mem::test_util::skip_without_gpu("availability_is_reported (pinned memory)", e);
        }
    }
}

/// Pinning with a chosen device leaves the calling thread's own current
/// device as it was, and an ordinal the machine lacks pins with the
/// thread's device instead, leaving no error behind.
#[test]
fn pinning_with_a_chosen_device_keeps_the_threads_own() {
    let a = match CudaPinnedAllocator::new() {
        Ok(a) => a,
        Err(e) => {
            pinprove_mem::test_util::skip_without_gpu("pinning_with_a_chosen_device_keeps_the_threads_own", e);
            return;
        }
    };
    let n = device_count().unwrap();
    let current = || result::get_device().unwrap();
    set_device(n - 1).unwrap();
    for pinning in [Some(0), Some(n), None] {
        pin_with_device(pinning);
        assert_eq!(pinning_device(), pinning);
        let p = a.allocate(1 << 20).unwrap();
        // SAFETY: just allocated, 1 MiB, ours.
        unsafe { a.deallocate(p, 1 << 20) };
        assert_eq!(current(), (n - 1) as c_int, "pinning with {pinning:?}");
        assert_eq!(result::clear_last_error(), sys::SUCCESS, "pinning with {pinning:?}");
    }
}

/// Heap memory pinned in place is known to the runtime as pinned
/// while the registration lives, and only then; its contents are
/// untouched.
#[test]
fn memory_pinned_in_place_is_pinned_until_dropped() {
    if let Err(e) = CudaPinnedAllocator::new() {
        pinprove_mem::test_util::skip_without_gpu("memory_pinned_in_place_is_pinned_until_dropped", e);
        return;
    }
    // As large as the matrices pinned in place: a mapping of its own.
    let v: Vec<u64> = (0..(64u64 << 20) / 8).collect();
    let bytes = v.as_ptr().cast::<u8>();
    assert!(!is_pinned(bytes).unwrap());
    // SAFETY: `v` outlives the registration and is not moved; nothing
    // else registers its pages.
    let pin = unsafe { PinnedInPlace::new(bytes, v.len() * 8) }.unwrap();
    assert!(is_pinned(bytes).unwrap());
    assert!(is_pinned(v.last().unwrap() as *const u64 as *const u8).unwrap());
    drop(pin);
    assert!(!is_pinned(bytes).unwrap());
    assert!(v.iter().enumerate().all(|(i, &x)| x == i as u64));
}

#[test]
fn events_are_reused() {
    if let Err(e) = CudaPinnedAllocator::new() {
        pinprove_mem::test_util::skip_without_gpu("events_are_reused", e);
        return;
    }
    let pool = EventPool::new(false);
    let first = pool.take().unwrap().as_raw();
    assert_eq!(pool.idle(), 1, "given back on drop");
    let again = pool.take().unwrap();
    assert_eq!(again.as_raw(), first, "the same event, reused");
    let stream = Stream::new().unwrap();
    again.record(&stream).unwrap();
    again.synchronize().unwrap();
    let fence = EventFence::from(again);
    assert!(fence.is_complete());
    drop(fence);
    assert_eq!(pool.idle(), 1, "a fence gives its event back too");
}

#[test]
fn upload_roundtrip_when_a_gpu_is_present() {
    if let Err(e) = CudaPinnedAllocator::new() {
        pinprove_mem::test_util::skip_without_gpu("upload_roundtrip_when_a_gpu_is_present", e);
        return;
    }
    let stream = Stream::new().unwrap();
    let mut dev = DeviceBuffer::new(1 << 20).unwrap();
    let src: Vec<u8> = (0..1 << 20).map(|i| (i * 7 % 251) as u8).collect();
    stream.timed_upload(&mut dev, &src).unwrap();
    let mut back = vec![0u8; 1 << 20];
    stream.download(&mut back, &dev).unwrap();
    assert_eq!(src, back);
}
