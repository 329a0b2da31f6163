//! The Filecoin parameter cache: the directory and file names every
//! Filecoin prover uses (`FIL_PROOFS_PARAMETER_CACHE`, default
//! `/var/tmp/filecoin-proof-parameters`; files `v28-<circuit>-<hash>.params`
//! and `.vk`), so a provider's existing directory works unchanged. The
//! files are bellperson's format, read by pinprove's own reader.
//!
//! Filecoin never generates parameters for you. For the test sector sizes
//! (below 32 GiB) pinprove can, on first use, when generation is switched
//! on ([`ParamCache::with_generation`]; the daemon leaves it off unless its
//! configuration says otherwise): a one-time setup with fresh randomness,
//! whose proofs verify only against its own verifying key (not the
//! network's). Generation (pinprove's own setup: about two minutes for the
//! four kinds at 2 KiB on a 2-core machine) is reported while it runs; concurrent processes wait for the one that generates (a
//! lock file beside the parameters, opened without following links).
//!
//! Parameters of production sizes are checked once against the digest
//! storage-proofs carries for their file (its `parameters.json`, what
//! `FIL_PROOFS_VERIFY_PRODUCTION_PARAMS` checks): a tampered file would
//! make proofs that verify against its own key and fail on chain. The check
//! reads the whole file (tens of GB, about a minute); it is remembered by
//! path, size and modification time, in memory and in a stamp file beside
//! the parameters where the cache is writable.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pinprove_mem::sync::Recover;

use blstrs::Bls12;
use pinprove_groth16::setup::{self, SetupStage, ToxicWaste};
#[cfg(any(test, feature = "lab"))]
use pinprove_groth16::shape::CircuitShape;
use rand::RngCore;

use crate::FilecoinError;

/// The environment variable that names the parameter cache.
pub const PARAMETER_CACHE_ENV: &str = "FIL_PROOFS_PARAMETER_CACHE";
/// The parameter cache when the variable is not set.
pub const DEFAULT_PARAMETER_CACHE: &str = "/var/tmp/filecoin-proof-parameters";
/// Sectors below this size are test sizes: their parameters are made when
/// missing.
pub const GENERATED_BELOW: u64 = 32 << 30;
/// The parameter files' version prefix.
const VERSION: u32 = 28;

/// Told about parameter generation, which takes minutes.
pub trait GenerationProgress: Send + Sync {
    /// Generation of `circuit_id`'s parameters into `path` began.
    fn started(&self, circuit_id: &str, path: &Path);
    /// Still generating, `elapsed` so far and `done` of the points (a
    /// fraction, once known); called about every second.
    fn tick(&self, circuit_id: &str, elapsed: Duration, done: Option<f64>);
    /// Done: `bytes` written in `elapsed`.
    fn finished(&self, circuit_id: &str, elapsed: Duration, bytes: u64);
}

/// Progress as log lines, every 30 seconds: the default, and what a process
/// without a terminal shows.
#[derive(Clone, Copy, Debug, Default)]
pub struct LogProgress;

impl GenerationProgress for LogProgress {
    fn started(&self, circuit_id: &str, path: &Path) {
        tracing::info!(circuit = circuit_id, path = %path.display(), "generating parameters (once; this can take minutes)");
    }

    fn tick(&self, circuit_id: &str, elapsed: Duration, done: Option<f64>) {
        let s = elapsed.as_secs();
        if s > 0 && s.is_multiple_of(30) {
            let percent = done.map(|f| format!("{:.0}", f * 100.0));
            tracing::info!(
                circuit = circuit_id,
                seconds = s,
                percent,
                "still generating parameters"
            );
        }
    }

    fn finished(&self, circuit_id: &str, elapsed: Duration, bytes: u64) {
        tracing::info!(
            circuit = circuit_id,
            bytes,
            seconds = elapsed.as_secs_f64(),
            "parameters generated"
        );
    }
}

/// One circuit's parameters, as the cache knows them.
pub(crate) struct CircuitParams {
    /// pinprove's id ("porep-2k").
    pub circuit_id: String,
    /// Filecoin's cache identifier (`<prefix>-<sha256 of the public
    /// parameters' identifier>`).
    pub cache_id: String,
    /// The sector size.
    pub sector_bytes: u64,
    /// The circuit's blank form: what its parameters are made from.
    pub blank: BlankCircuit,
}

/// Which setup makes a test size's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Generator {
    /// pinprove's own ([`setup`]): what the cache uses.
    Pinprove,
    /// bellperson's `generate_random_parameters`: the reference, for
    /// comparisons.
    Bellperson,
}

/// Writes a circuit's parameters, made by a generator from an rng, to a
/// file, reporting how far it got; returns their verifying key's bytes.
type WriteParameters = Box<
    dyn FnOnce(
            Generator,
            &mut dyn RngCore,
            &mut BufWriter<File>,
            &(dyn Fn(SetupStage) + Sync),
        ) -> anyhow::Result<Vec<u8>>
        + Send,
>;

/// A circuit's blank form (no witness), made when needed: real parameters
/// are generated from it, synthetic ones (the lab's) take its shape.
pub(crate) struct BlankCircuit {
    write: WriteParameters,
    #[cfg(any(test, feature = "lab"))]
    shape: Box<dyn FnOnce() -> anyhow::Result<CircuitShape> + Send>,
}

impl BlankCircuit {
    pub(crate) fn new<C>(make: impl Fn() -> C + Send + Sync + 'static) -> BlankCircuit
    where
        C: bellpepper_core::Circuit<blstrs::Scalar>,
    {
        let make = Arc::new(make);
        let blank = Arc::clone(&make);
        BlankCircuit {
            write: Box::new(move |generator, mut rng, w, progress| {
                let mut vk = Vec::new();
                match generator {
                    Generator::Pinprove => {
                        let waste = ToxicWaste::random(&mut rng);
                        let (key, stats) = setup::generate(blank(), &waste, w, progress)?;
                        tracing::debug!(?stats, "setup done");
                        key.write(&mut vk)?;
                    }
                    Generator::Bellperson => {
                        let p = bellperson::groth16::generate_random_parameters::<Bls12, _, _>(blank(), &mut rng)?;
                        p.write(&mut *w)?;
                        p.vk.write(&mut vk)?;
                    }
                }
                Ok(vk)
            }),
            #[cfg(any(test, feature = "lab"))]
            shape: Box::new(move || Ok(CircuitShape::of_blank(make())?)),
        }
    }

    /// Writes parameters made by `generator` from `rng` to `w`; returns
    /// their verifying key's bytes.
    pub(crate) fn write(
        self,
        generator: Generator,
        rng: &mut dyn RngCore,
        w: &mut BufWriter<File>,
        progress: &(dyn Fn(SetupStage) + Sync),
    ) -> anyhow::Result<Vec<u8>> {
        (self.write)(generator, rng, w, progress)
    }

    /// The shape of parameters for this circuit (as the generator would
    /// make them), counted from one blank synthesis.
    #[cfg(any(test, feature = "lab"))]
    pub(crate) fn shape(self) -> anyhow::Result<CircuitShape> {
        (self.shape)()
    }

    /// The same circuit, its shape counted by `count` instead of one
    /// sequential blank synthesis (a circuit of parts counts them on every
    /// core, [`CircuitShape::of_blank_parts`]).
    #[cfg(any(test, feature = "lab"))]
    pub(crate) fn counted_by(
        self,
        count: impl FnOnce() -> anyhow::Result<CircuitShape> + Send + 'static,
    ) -> BlankCircuit {
        BlankCircuit {
            write: self.write,
            shape: Box::new(count),
        }
    }
}

/// The parameter cache.
#[derive(Clone)]
pub struct ParamCache {
    dir: PathBuf,
    progress: Arc<dyn GenerationProgress>,
    generate: bool,
}

impl std::fmt::Debug for ParamCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParamCache").field("dir", &self.dir).finish()
    }
}

impl ParamCache {
    /// The cache in `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> ParamCache {
        ParamCache {
            dir: dir.into(),
            progress: Arc::new(LogProgress),
            generate: true,
        }
    }

    /// Whether parameters of test sector sizes are made when missing
    /// (default: yes). Off, a missing file is
    /// [`FilecoinError::MissingParameters`] for every size.
    pub fn with_generation(mut self, generate: bool) -> ParamCache {
        self.generate = generate;
        self
    }

    /// Whether missing parameters of test sizes are made.
    pub fn generates(&self) -> bool {
        self.generate
    }

    /// The cache `FIL_PROOFS_PARAMETER_CACHE` names, else the default.
    pub fn from_env() -> ParamCache {
        ParamCache::new(
            std::env::var_os(PARAMETER_CACHE_ENV).map_or_else(|| PathBuf::from(DEFAULT_PARAMETER_CACHE), PathBuf::from),
        )
    }

    /// Reports generation to `progress` instead of the log.
    pub fn with_progress(mut self, progress: Arc<dyn GenerationProgress>) -> ParamCache {
        self.progress = progress;
        self
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the proving parameters of Filecoin circuit `cache_id` are.
    pub fn params_path(&self, cache_id: &str) -> PathBuf {
        self.dir.join(format!("v{VERSION}-{cache_id}.params"))
    }

    /// Where its verifying key is.
    pub fn vk_path(&self, cache_id: &str) -> PathBuf {
        self.dir.join(format!("v{VERSION}-{cache_id}.vk"))
    }

    /// The parameter file of `circuit` when it is in the cache (checked
    /// against Filecoin's digest for production sizes), `None` when it is
    /// missing.
    pub(crate) fn existing(&self, circuit: &CircuitParams) -> Result<Option<PathBuf>, FilecoinError> {
        let path = self.params_path(&circuit.cache_id);
        if !path.is_file() {
            return Ok(None);
        }
        if circuit.sector_bytes >= GENERATED_BELOW {
            check_production(&path).map_err(|source| FilecoinError::Parameters {
                circuit_id: circuit.circuit_id.clone(),
                source,
            })?;
        }
        Ok(Some(path))
    }

    /// The parameter file of `circuit`, made first when it is missing, its
    /// sector is a test size and generation is on.
    pub(crate) fn ensure(&self, circuit: CircuitParams) -> Result<PathBuf, FilecoinError> {
        if let Some(path) = self.existing(&circuit)? {
            return Ok(path);
        }
        let path = self.params_path(&circuit.cache_id);
        if circuit.sector_bytes >= GENERATED_BELOW || !self.generate {
            return Err(FilecoinError::MissingParameters {
                circuit_id: circuit.circuit_id,
                path,
                generation_off: circuit.sector_bytes < GENERATED_BELOW,
            });
        }
        let id = circuit.circuit_id.clone();
        let failed = |source: anyhow::Error| FilecoinError::Parameters {
            circuit_id: id.clone(),
            source,
        };
        std::fs::create_dir_all(&self.dir).map_err(|e| failed(e.into()))?;
        // One process generates; the others wait here and find the file.
        let lock = open_lock(&path.with_extension("params.lock")).map_err(|e| failed(e.into()))?;
        lock.lock().map_err(|e| failed(e.into()))?;
        if path.is_file() {
            return Ok(path);
        }
        let bytes = self.generate(circuit, &path).map_err(failed)?;
        tracing::debug!(path = %path.display(), bytes, "parameters in the cache");
        Ok(path)
    }

    fn generate(&self, circuit: CircuitParams, path: &Path) -> anyhow::Result<u64> {
        let CircuitParams {
            circuit_id,
            cache_id,
            sector_bytes,
            blank,
        } = circuit;
        self.progress.started(&circuit_id, path);
        let started = Instant::now();
        // The setup's share of its points done, as f64 bits: read by the
        // ticker below once a second.
        let fraction = AtomicU64::new(f64::NAN.to_bits());
        let done = AtomicBool::new(false);
        let report = |stage: SetupStage| {
            if let SetupStage::Points { done, total } = stage {
                let f = done as f64 / total.max(1) as f64;
                fraction.store(f.to_bits(), Ordering::Relaxed);
            }
        };
        let meta = self.dir.join(format!("v{VERSION}-{cache_id}.meta"));
        std::thread::scope(|s| {
            s.spawn(|| {
                while !done.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_secs(1));
                    if !done.load(Ordering::Relaxed) {
                        let f = f64::from_bits(fraction.load(Ordering::Relaxed));
                        self.progress
                            .tick(&circuit_id, started.elapsed(), (!f.is_nan()).then_some(f));
                    }
                }
            });
            // The verifying key and the metadata before the parameter file
            // is renamed into place: a parameter file that exists is
            // complete, with everything beside it.
            let written = write_atomically(path, |w| {
                let vk = blank.write(Generator::Pinprove, &mut rand::rngs::OsRng, w, &report)?;
                write_atomically(&self.vk_path(&cache_id), |w| Ok(w.write_all(&vk)?))?;
                write_atomically(&meta, |w| Ok(write!(w, "{{\"sector_size\":{sector_bytes}}}")?))
            });
            done.store(true, Ordering::Relaxed);
            written
        })?;
        let bytes = std::fs::metadata(path)?.len();
        self.progress.finished(&circuit_id, started.elapsed(), bytes);
        Ok(bytes)
    }
}

/// Opens (creating it) a lock file without following a link at its path:
/// a link planted in a shared cache directory cannot make this process
/// create or truncate a file elsewhere.
pub(crate) fn open_lock(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

/// Temporary files being written now, removed by [`remove_temporary_files`]
/// when a process must stop in the middle of a write.
static WRITING: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Removes the temporary files of writes still in progress (a daemon
/// stopping before a parameter file was complete).
pub fn remove_temporary_files() {
    for tmp in WRITING.lock().recover().drain(..) {
        let _ = std::fs::remove_file(&tmp);
    }
}

/// Writes `path` through a temporary file beside it, renamed into place.
/// The temporary file is created new, never through a link.
pub(crate) fn write_atomically(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<File>) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    // The whole name kept: files of one circuit (`.params`, `.vk`) written
    // at the same time never share a temporary file.
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".tmp.{}", std::process::id()));
    let tmp = path.with_file_name(name);
    // A file left by an earlier process of the same id, or a planted link:
    // removed, not followed.
    let _ = std::fs::remove_file(&tmp);
    WRITING.lock().recover().push(tmp.clone());
    let result = (|| {
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)?;
        let mut w = BufWriter::with_capacity(8 << 20, file);
        write(&mut w)?;
        w.flush()?;
        w.get_ref().sync_all()?;
        std::fs::rename(&tmp, path)?;
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    WRITING.lock().recover().retain(|p| p != &tmp);
    result
}

/// Production parameter files already checked in this process: path,
/// size, modification time.
static CHECKED: Mutex<Option<HashSet<(PathBuf, u64, i64)>>> = Mutex::new(None);

/// Checks a production parameter file against the digest storage-proofs
/// carries for its name (blake2b-512 of the file, the first 32 hex
/// digits), once per path, size and modification time.
pub(crate) fn check_production(path: &Path) -> anyhow::Result<()> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| anyhow::anyhow!("{} has no file name", path.display()))?;
    let Some(entry) = storage_proofs_core::parameter_cache::PARAMETERS.get(name) else {
        anyhow::bail!("{name} is not a parameter file Filecoin publishes (not in storage-proofs' parameters.json)");
    };
    let meta = std::fs::metadata(path)?;
    let key = (
        path.to_path_buf(),
        meta.len(),
        meta.mtime_nsec() + meta.mtime() * 1_000_000_000,
    );
    if CHECKED.lock().recover().as_ref().is_some_and(|c| c.contains(&key)) {
        return Ok(());
    }
    let stamp = path.with_extension("params.checked");
    let stamp_text = format!("{} {} {}\n", key.1, key.2, entry.digest);
    let stamped = std::fs::read_to_string(&stamp).is_ok_and(|s| s == stamp_text);
    if !stamped {
        tracing::info!(
            file = name,
            bytes = key.1,
            "checking the parameter file against Filecoin's digest (once)"
        );
        let started = Instant::now();
        let digest = file_digest(path)?;
        if digest != entry.digest {
            anyhow::bail!(
                "{} does not match the digest storage-proofs carries for it ({digest}, expected {}): \
                 the file is damaged or not Filecoin's; fetch it again",
                path.display(),
                entry.digest
            );
        }
        tracing::info!(
            file = name,
            seconds = started.elapsed().as_secs_f64(),
            "parameter file matches Filecoin's digest"
        );
        // Best effort: a read-only cache is checked again next start.
        let _ = write_atomically(&stamp, |w| Ok(w.write_all(stamp_text.as_bytes())?));
    }
    CHECKED.lock().recover().get_or_insert_with(HashSet::new).insert(key);
    Ok(())
}

/// The digest storage-proofs records for a parameter file: blake2b-512,
/// the first 32 hex digits.
pub(crate) fn file_digest(path: &Path) -> std::io::Result<String> {
    let mut file = File::open(path)?;
    let mut state = blake2b_simd::State::new();
    let mut buf = vec![0u8; 8 << 20];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        state.update(&buf[..n]);
    }
    Ok(state.finalize().to_hex()[..32].to_string())
}
