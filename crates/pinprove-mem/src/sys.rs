//! What the machine offers: memory size, cgroup limits, resident set size.

use std::fs;

/// Physical memory usable by this process: the smaller of MemTotal and the
/// cgroup memory limit (v2 `memory.max`, or v1 `memory.limit_in_bytes`).
pub fn usable_memory_bytes() -> u64 {
    let total = mem_total_bytes().unwrap_or(u64::MAX);
    match cgroup_limit_bytes() {
        Some(limit) => total.min(limit),
        None if total == u64::MAX => 8 << 30,
        None => total,
    }
}

/// MemTotal from `/proc/meminfo`, in bytes.
pub fn mem_total_bytes() -> Option<u64> {
    meminfo_field("MemTotal:")
}

/// MemAvailable from `/proc/meminfo`, in bytes.
pub fn mem_available_bytes() -> Option<u64> {
    meminfo_field("MemAvailable:")
}

fn meminfo_field(name: &str) -> Option<u64> {
    let text = fs::read_to_string("/proc/meminfo").ok()?;
    parse_kib_field(&text, name)
}

fn parse_kib_field(text: &str, name: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(name))?;
    let kib: u64 = line[name.len()..].trim().trim_end_matches("kB").trim().parse().ok()?;
    kib.checked_mul(1024)
}

/// The memory limit of this process's cgroup, if one is set.
pub fn cgroup_limit_bytes() -> Option<u64> {
    let cgroup = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let mut candidates = Vec::new();
    for line in cgroup.lines() {
        // v2: "0::/path"; v1: "N:memory:/path"
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next(), parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        if controllers.is_empty() {
            candidates.push(format!("/sys/fs/cgroup{path}/memory.max"));
        } else if controllers.split(',').any(|c| c == "memory") {
            candidates.push(format!("/sys/fs/cgroup/memory{path}/memory.limit_in_bytes"));
        }
    }
    candidates.push("/sys/fs/cgroup/memory.max".into());
    candidates.push("/sys/fs/cgroup/memory/memory.limit_in_bytes".into());
    candidates
        .iter()
        .filter_map(|p| fs::read_to_string(p).ok())
        .find_map(|s| parse_limit(&s))
}

fn parse_limit(s: &str) -> Option<u64> {
    let s = s.trim();
    if s == "max" {
        return None;
    }
    let v: u64 = s.parse().ok()?;
    // cgroup v1 reports "no limit" as a huge page-rounded number.
    (v < (1u64 << 60)).then_some(v)
}

/// Resets the peak resident set size (VmHWM) to the current one, so that a
/// later [`peak_rss_bytes`] measures one phase. Linux 4.0 and later.
pub fn reset_peak_rss() -> std::io::Result<()> {
    fs::write("/proc/self/clear_refs", "5")
}

/// Resident set size of this process now, in bytes.
pub fn rss_bytes() -> Option<u64> {
    status_field("VmRSS:")
}

/// Peak resident set size of this process, in bytes.
pub fn peak_rss_bytes() -> Option<u64> {
    status_field("VmHWM:")
}

/// The growth of this process's peak resident set from a starting point:
/// how much more memory a phase held at its peak than was resident when
/// it began ([`start`](Self::start) resets the peak, so one measurement
/// at a time).
#[derive(Clone, Copy, Debug)]
pub struct PeakGrowth {
    start: Option<u64>,
}

impl PeakGrowth {
    /// Resets the peak and notes what is resident now.
    pub fn start() -> Self {
        PeakGrowth {
            start: reset_peak_rss().ok().and_then(|()| rss_bytes()),
        }
    }

    /// Bytes the peak has grown since the start; `None` where the kernel
    /// cannot reset or report it.
    pub fn bytes(&self) -> Option<u64> {
        Some(peak_rss_bytes()?.saturating_sub(self.start?))
    }
}

/// Gives the heap's free pages back to the kernel (glibc's `malloc_trim`),
/// so that resident memory counts only what is in use: a measurement of
/// resident growth (see [`reset_peak_rss`]) otherwise misses memory a
/// phase takes from what an earlier one freed. Returns whether any was
/// given back; false where the C library has no such call.
pub fn trim_heap() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: malloc_trim takes a padding in bytes and only touches the
        // allocator's own free lists, under its own locks.
        unsafe { libc::malloc_trim(0) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

fn status_field(name: &str) -> Option<u64> {
    let text = fs::read_to_string("/proc/self/status").ok()?;
    parse_kib_field(&text, name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trimming_gives_freed_heap_back() {
        // Many small blocks (below the threshold where glibc maps a block of
        // its own), written so that they are resident, then freed behind
        // one still in use, which keeps the heap from shrinking on its own.
        let blocks: Vec<Box<[u8; 1024]>> = (0..65_536).map(|i| Box::new([i as u8; 1024])).collect();
        let keep = Box::new([1u8; 1024]);
        drop(blocks);
        let before = rss_bytes().unwrap();
        assert!(trim_heap(), "nothing given back");
        let after = rss_bytes().unwrap();
        assert!(
            before.saturating_sub(after) >= 32 << 20,
            "resident {before} before, {after} after"
        );
        assert_eq!(keep[0], 1);
    }

    #[test]
    fn parses_meminfo_lines() {
        let text = "MemTotal:       24567896 kB\nMemFree:          123 kB\n";
        assert_eq!(parse_kib_field(text, "MemTotal:"), Some(24567896 * 1024));
        assert_eq!(parse_kib_field(text, "MemFree:"), Some(123 * 1024));
        assert_eq!(parse_kib_field(text, "Nope:"), None);
    }

    #[test]
    fn parses_cgroup_limits() {
        assert_eq!(parse_limit("max\n"), None);
        assert_eq!(parse_limit("8589934592\n"), Some(8 << 30));
        assert_eq!(parse_limit("9223372036854771712"), None);
        assert_eq!(parse_limit("garbage"), None);
    }

    #[test]
    fn this_machine_reports_memory() {
        let usable = usable_memory_bytes();
        assert!(usable > 64 << 20, "usable memory {usable}");
        assert!(rss_bytes().unwrap() > 0);
        assert!(peak_rss_bytes().unwrap() > 0);
        // Touch 64 MiB and unmap it again.
        let heap: std::sync::Arc<dyn crate::HostAllocator> = std::sync::Arc::new(crate::HeapAllocator::new(true));
        drop(crate::HostMemory::allocate(&heap, 64 << 20).unwrap());
        let before = peak_rss_bytes().unwrap();
        if reset_peak_rss().is_ok() {
            assert!(peak_rss_bytes().unwrap() < before, "the peak was reset");
            // The peak grows by what is touched after the start (less what
            // the process gave back meanwhile: a little under 64 MiB here).
            let growth = PeakGrowth::start();
            drop(crate::HostMemory::allocate(&heap, 64 << 20).unwrap());
            let grown = growth.bytes().unwrap();
            assert!((56 << 20..=128 << 20).contains(&grown), "grown by {grown}");
        }
    }
}
