//! NVML, loaded at run time: PCIe link, utilization and throughput of a GPU.
//!
//! The library ships with the driver (`libnvidia-ml.so.1`); opening it with
//! `dlopen` keeps the binary free of a link-time dependency, so it starts on
//! machines without a driver and simply reports that NVML is missing.

use std::ffi::{CStr, CString, c_char, c_uint, c_void};
use std::fmt;

type Ret = c_uint;
type Device = *mut c_void;

const SUCCESS: Ret = 0;
const PCIE_TX: c_uint = 0;
const PCIE_RX: c_uint = 1;

#[repr(C)]
#[derive(Default)]
struct Memory {
    total: u64,
    free: u64,
    used: u64,
}

#[repr(C)]
#[derive(Default)]
struct Utilization {
    gpu: c_uint,
    memory: c_uint,
}

/// An NVML failure.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("NVML: {0}")]
pub struct NvmlError(String);

type FnVoid = unsafe extern "C" fn() -> Ret;
type FnErrorString = unsafe extern "C" fn(Ret) -> *const c_char;
type FnCount = unsafe extern "C" fn(*mut c_uint) -> Ret;
type FnHandleByIndex = unsafe extern "C" fn(c_uint, *mut Device) -> Ret;
type FnHandleByBusId = unsafe extern "C" fn(*const c_char, *mut Device) -> Ret;
type FnName = unsafe extern "C" fn(Device, *mut c_char, c_uint) -> Ret;
type FnMemory = unsafe extern "C" fn(Device, *mut Memory) -> Ret;
type FnUint = unsafe extern "C" fn(Device, *mut c_uint) -> Ret;
type FnUtilization = unsafe extern "C" fn(Device, *mut Utilization) -> Ret;
type FnThroughput = unsafe extern "C" fn(Device, c_uint, *mut c_uint) -> Ret;
type FnDriverVersion = unsafe extern "C" fn(*mut c_char, c_uint) -> Ret;

struct Api {
    init: FnVoid,
    shutdown: FnVoid,
    error_string: FnErrorString,
    device_count: FnCount,
    handle_by_index: FnHandleByIndex,
    handle_by_bus_id: FnHandleByBusId,
    name: FnName,
    memory: FnMemory,
    pcie_gen: FnUint,
    pcie_width: FnUint,
    max_pcie_gen: FnUint,
    max_pcie_width: FnUint,
    utilization: FnUtilization,
    pcie_throughput: FnThroughput,
    driver_version: FnDriverVersion,
}

/// A loaded and initialized NVML.
pub struct Nvml {
    lib: *mut c_void,
    api: Api,
}

// SAFETY: NVML's API is thread-safe; the handle and function pointers are
// immutable after loading.
unsafe impl Send for Nvml {}
// SAFETY: as above.
unsafe impl Sync for Nvml {}

impl fmt::Debug for Nvml {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Nvml")
    }
}

fn dl_error() -> String {
    // SAFETY: dlerror returns a thread-local NUL-terminated string or null.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        "unknown dlopen error".into()
    } else {
        // SAFETY: non-null, NUL-terminated, valid until the next dl call.
        unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
    }
}

impl Nvml {
    /// Opens and initializes NVML.
    pub fn load() -> Result<Nvml, NvmlError> {
        let name = CString::new("libnvidia-ml.so.1").expect("no NUL");
        // SAFETY: dlopen of a library name; a null return is handled.
        let lib = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if lib.is_null() {
            return Err(NvmlError(format!("cannot open libnvidia-ml.so.1: {}", dl_error())));
        }
        macro_rules! sym {
            ($name:literal, $ty:ty) => {{
                let s = CString::new($name).expect("no NUL");
                // SAFETY: looking up a symbol in a library we opened.
                let p = unsafe { libc::dlsym(lib, s.as_ptr()) };
                if p.is_null() {
                    // SAFETY: closing the handle we opened, once, on failure.
                    unsafe { libc::dlclose(lib) };
                    return Err(NvmlError(format!("symbol {} missing", $name)));
                }
                // SAFETY: the symbol is the NVML function of that name, whose
                // C signature the field's type states.
                unsafe { std::mem::transmute::<*mut c_void, $ty>(p) }
            }};
        }
        let api = Api {
            init: sym!("nvmlInit_v2", FnVoid),
            shutdown: sym!("nvmlShutdown", FnVoid),
            error_string: sym!("nvmlErrorString", FnErrorString),
            device_count: sym!("nvmlDeviceGetCount_v2", FnCount),
            handle_by_index: sym!("nvmlDeviceGetHandleByIndex_v2", FnHandleByIndex),
            handle_by_bus_id: sym!("nvmlDeviceGetHandleByPciBusId_v2", FnHandleByBusId),
            name: sym!("nvmlDeviceGetName", FnName),
            memory: sym!("nvmlDeviceGetMemoryInfo", FnMemory),
            pcie_gen: sym!("nvmlDeviceGetCurrPcieLinkGeneration", FnUint),
            pcie_width: sym!("nvmlDeviceGetCurrPcieLinkWidth", FnUint),
            max_pcie_gen: sym!("nvmlDeviceGetMaxPcieLinkGeneration", FnUint),
            max_pcie_width: sym!("nvmlDeviceGetMaxPcieLinkWidth", FnUint),
            utilization: sym!("nvmlDeviceGetUtilizationRates", FnUtilization),
            pcie_throughput: sym!("nvmlDeviceGetPcieThroughput", FnThroughput),
            driver_version: sym!("nvmlSystemGetDriverVersion", FnDriverVersion),
        };
        let nvml = Nvml { lib, api };
        // SAFETY: plain NVML call.
        nvml.check(unsafe { (nvml.api.init)() }, "nvmlInit")?;
        Ok(nvml)
    }

    fn check(&self, rc: Ret, what: &str) -> Result<(), NvmlError> {
        if rc == SUCCESS {
            return Ok(());
        }
        // SAFETY: nvmlErrorString returns a static string.
        let s = unsafe { (self.api.error_string)(rc) };
        let msg = if s.is_null() {
            format!("error {rc}")
        } else {
            // SAFETY: non-null static NUL-terminated string.
            unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned()
        };
        Err(NvmlError(format!("{what}: {msg}")))
    }

    /// Number of GPUs NVML sees.
    pub fn device_count(&self) -> Result<usize, NvmlError> {
        let mut n: c_uint = 0;
        // SAFETY: writes one uint.
        self.check(unsafe { (self.api.device_count)(&mut n) }, "nvmlDeviceGetCount")?;
        Ok(n as usize)
    }

    /// The driver's version string, such as "580.159.04".
    pub fn driver_version(&self) -> Result<String, NvmlError> {
        let mut buf = [0 as c_char; 96];
        // SAFETY: writes at most `buf.len()` bytes, NUL-terminated.
        self.check(
            unsafe { (self.api.driver_version)(buf.as_mut_ptr(), buf.len() as c_uint) },
            "nvmlSystemGetDriverVersion",
        )?;
        // SAFETY: NUL-terminated within the buffer by NVML.
        Ok(unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned())
    }

    /// GPU `index` in NVML's order (by PCI bus id).
    pub fn device(&self, index: usize) -> Result<NvmlDevice, NvmlError> {
        let mut d: Device = std::ptr::null_mut();
        // SAFETY: writes one handle.
        self.check(
            unsafe { (self.api.handle_by_index)(index as c_uint, &mut d) },
            "nvmlDeviceGetHandleByIndex",
        )?;
        Ok(NvmlDevice(d))
    }

    /// The GPU at a PCI bus id as the CUDA runtime reports it; CUDA orders
    /// devices fastest first by default, so ordinals do not match NVML's.
    pub fn device_by_pci_bus_id(&self, bus_id: &str) -> Result<NvmlDevice, NvmlError> {
        let id = CString::new(bus_id).map_err(|_| NvmlError("bus id with a NUL byte".into()))?;
        let mut d: Device = std::ptr::null_mut();
        // SAFETY: reads a NUL-terminated string, writes one handle.
        self.check(
            unsafe { (self.api.handle_by_bus_id)(id.as_ptr(), &mut d) },
            "nvmlDeviceGetHandleByPciBusId",
        )?;
        Ok(NvmlDevice(d))
    }

    fn uint(
        &self,
        d: NvmlDevice,
        f: unsafe extern "C" fn(Device, *mut c_uint) -> Ret,
        what: &str,
    ) -> Result<u32, NvmlError> {
        let mut v: c_uint = 0;
        // SAFETY: `f` is an NVML getter writing one uint for a valid handle.
        self.check(unsafe { f(d.0, &mut v) }, what)?;
        Ok(v)
    }

    /// The GPU's PCIe link.
    pub fn link(&self, d: NvmlDevice) -> Result<PcieLink, NvmlError> {
        Ok(PcieLink {
            generation: self.uint(d, self.api.pcie_gen, "PCIe generation")?,
            width: self.uint(d, self.api.pcie_width, "PCIe width")?,
            max_generation: self.uint(d, self.api.max_pcie_gen, "max PCIe generation")?,
            max_width: self.uint(d, self.api.max_pcie_width, "max PCIe width")?,
        })
    }

    /// The GPU's name.
    pub fn name(&self, d: NvmlDevice) -> Result<String, NvmlError> {
        let mut buf = [0 as c_char; 96];
        // SAFETY: writes at most `buf.len()` bytes, NUL-terminated.
        self.check(
            unsafe { (self.api.name)(d.0, buf.as_mut_ptr(), buf.len() as c_uint) },
            "nvmlDeviceGetName",
        )?;
        // SAFETY: NUL-terminated within the buffer by NVML.
        Ok(unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned())
    }

    /// Total and free device memory in bytes.
    pub fn memory(&self, d: NvmlDevice) -> Result<(u64, u64), NvmlError> {
        let mut m = Memory::default();
        // SAFETY: writes one nvmlMemory_t.
        self.check(unsafe { (self.api.memory)(d.0, &mut m) }, "nvmlDeviceGetMemoryInfo")?;
        Ok((m.total, m.free))
    }

    /// A sample of utilization and PCIe traffic (NVML averages each over its
    /// own short window).
    pub fn sample(&self, d: NvmlDevice) -> Result<Sample, NvmlError> {
        let mut u = Utilization::default();
        // SAFETY: writes one nvmlUtilization_t.
        self.check(
            unsafe { (self.api.utilization)(d.0, &mut u) },
            "nvmlDeviceGetUtilizationRates",
        )?;
        let (mut tx, mut rx): (c_uint, c_uint) = (0, 0);
        // SAFETY: each call writes one uint (KB/s).
        self.check(unsafe { (self.api.pcie_throughput)(d.0, PCIE_TX, &mut tx) }, "PCIe TX")?;
        // SAFETY: as above.
        self.check(unsafe { (self.api.pcie_throughput)(d.0, PCIE_RX, &mut rx) }, "PCIe RX")?;
        Ok(Sample {
            gpu_percent: u.gpu,
            memory_percent: u.memory,
            pcie_tx_bytes_per_s: u64::from(tx) * 1024,
            pcie_rx_bytes_per_s: u64::from(rx) * 1024,
        })
    }
}

/// A GPU handle of a loaded [`Nvml`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NvmlDevice(Device);

// SAFETY: NVML device handles are opaque identifiers valid in any thread
// while NVML is initialized.
unsafe impl Send for NvmlDevice {}
// SAFETY: as above.
unsafe impl Sync for NvmlDevice {}

impl Drop for Nvml {
    fn drop(&mut self) {
        // SAFETY: shutdown pairs the init of `load`; the handle is closed once.
        unsafe {
            (self.api.shutdown)();
            libc::dlclose(self.lib);
        }
    }
}

/// A PCIe link as NVML reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PcieLink {
    /// Current link generation (it drops at idle on some systems).
    pub generation: u32,
    /// Current lanes.
    pub width: u32,
    /// Highest generation the link supports.
    pub max_generation: u32,
    /// Most lanes.
    pub max_width: u32,
}

/// One NVML sample of a GPU.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sample {
    /// Percent of time a kernel ran over NVML's last window.
    pub gpu_percent: u32,
    /// Percent of time device memory was read or written.
    pub memory_percent: u32,
    /// Device to host.
    pub pcie_tx_bytes_per_s: u64,
    /// Host to device.
    pub pcie_rx_bytes_per_s: u64,
}
