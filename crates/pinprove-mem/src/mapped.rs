//! Read-only memory-mapped files, for multi-GiB parameter files that are
//! decoded in parallel without being read into a second buffer first.

use std::fmt;
use std::fs::File;
use std::io;
use std::ops::Deref;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;

/// A file mapped read-only into memory; unmapped on drop.
///
/// The mapping is private and read-only. As with every memory-mapped
/// reader, a file that another process truncates while it is mapped makes
/// reads past the new end fault; parameter files are written once and never
/// modified in place.
pub struct MappedFile {
    ptr: NonNull<u8>,
    len: usize,
    path: PathBuf,
}

// SAFETY: the mapping is read-only and owned by this value; shared reads
// from several threads are fine.
unsafe impl Send for MappedFile {}
// SAFETY: as above, only `&[u8]` is handed out.
unsafe impl Sync for MappedFile {}

impl MappedFile {
    /// Maps the whole file at `path`.
    pub fn open(path: impl AsRef<Path>) -> io::Result<MappedFile> {
        let path = path.as_ref();
        let file = File::open(path)?;
        let len = usize::try_from(file.metadata()?.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "file larger than the address space"))?;
        if len == 0 {
            // mmap rejects empty mappings; an empty file is an empty slice.
            return Ok(MappedFile {
                ptr: NonNull::dangling(),
                len: 0,
                path: path.to_path_buf(),
            });
        }
        // SAFETY: a fresh read-only private mapping of an open file; the
        // kernel picks the address, so no existing memory is affected.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                file.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: advice on the range just mapped; failure is harmless.
        unsafe { libc::madvise(p, len, libc::MADV_WILLNEED) };
        Ok(MappedFile {
            ptr: NonNull::new(p.cast()).expect("mmap returned a non-null mapping"),
            len,
            path: path.to_path_buf(),
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Deref for MappedFile {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: the mapping covers `len` readable bytes for `self`'s
        // lifetime and is never written through.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for MappedFile {
    fn drop(&mut self) {
        if self.len > 0 {
            // SAFETY: unmaps exactly the range mapped in `open`.
            unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
        }
    }
}

impl fmt::Debug for MappedFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MappedFile")
            .field("path", &self.path)
            .field("len", &self.len)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn maps_file_contents() {
        let dir = std::env::temp_dir().join(format!("pinprove-mapped-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("data");
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::File::create(&p).unwrap().write_all(&data).unwrap();
        let m = MappedFile::open(&p).unwrap();
        assert_eq!(&m[..], &data[..]);
        let empty = dir.join("empty");
        std::fs::File::create(&empty).unwrap();
        assert!(MappedFile::open(&empty).unwrap().is_empty());
        assert!(MappedFile::open(dir.join("missing")).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
