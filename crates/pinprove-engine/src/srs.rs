//! SRS residency: parameters loaded on first use, accounted in the budget,
//! kept while used, evicted least-recently-used first when idle and
//! unreferenced and memory is needed.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

#[cfg(any(test, feature = "lab"))]
use pinprove_groth16::shape::CircuitShape;
use pinprove_groth16::{Backend, CapacityHint, CapacityHints, QueryLengths, Srs, Validation, VerifyingKey};
use pinprove_mem::{Evictor, MemoryBudget, PinnedPool, Rank, Reservation};
use serde::Serialize;

use crate::EngineError;
use crate::clock::Clock;
use crate::planner::Policy;
use crate::planner::keep::{self, IdleParams};
use pinprove_mem::sync::Recover;

struct Entry {
    srs: Arc<Srs>,
    /// When it was last used, on the registry's clock.
    last_used: Duration,
    load_time: Duration,
    /// Covers backends' own copies (points decoded into the pool are covered
    /// by the pool).
    _backend_copies: Option<Reservation>,
    bytes: u64,
}

/// The outcome of a funded acquisition.
pub(crate) enum Acquired {
    /// The SRS, and the time spent loading it.
    Ready(Arc<Srs>, Duration),
    /// Loading it needs more bytes than the funds given (it was evicted
    /// since the admission was sized).
    NeedsFunds,
}

/// The right to size an admission for loading one circuit type's SRS (see
/// [`SrsRegistry::claim_load`]); let go when dropped.
pub(crate) struct LoadClaim<'a> {
    registry: &'a SrsRegistry,
    circuit_id: String,
}

impl Drop for LoadClaim<'_> {
    fn drop(&mut self) {
        self.registry.claims.lock().recover().remove(&self.circuit_id);
        self.registry.claim_released.notify_all();
    }
}

/// A load of one circuit type's SRS in progress (see
/// [`SrsRegistry::acquire_funded`]); marked ended when dropped, whatever way
/// the load ends.
struct Loading<'a> {
    registry: &'a SrsRegistry,
    circuit_id: String,
}

impl Drop for Loading<'_> {
    fn drop(&mut self) {
        self.registry.loading.lock().recover().remove(&self.circuit_id);
        self.registry.load_ended.notify_all();
    }
}

/// A job's claim on its circuit type's SRS from submission to its end (see
/// [`SrsRegistry::want`]); let go when dropped.
pub(crate) struct Wanted {
    registry: std::sync::Weak<SrsRegistry>,
    circuit_id: String,
    rank: Rank,
}

impl Drop for Wanted {
    fn drop(&mut self) {
        let Some(r) = self.registry.upgrade() else {
            return;
        };
        {
            let mut wants = r.wants.lock().recover();
            if let Some(ranks) = wants.get_mut(&self.circuit_id) {
                if let Some(i) = ranks.iter().position(|&k| k == self.rank) {
                    ranks.swap_remove(i);
                }
                if ranks.is_empty() {
                    wants.remove(&self.circuit_id);
                }
            }
        }
        // It may have just become evictable for someone waiting.
        r.budget.reclaim();
    }
}

/// What the registry holds for one circuit type.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SrsInfo {
    /// The circuit type.
    pub circuit_id: String,
    /// Whether it is loaded.
    pub loaded: bool,
    /// Host bytes it holds (decoded points and backends' copies).
    pub bytes: u64,
    /// Partitions using it now.
    pub refs: usize,
    /// Time since it was last used.
    pub idle: Duration,
    /// How long loading took.
    pub load_time: Duration,
    /// How many times it was loaded since the engine started (more than
    /// once: evicted and needed again).
    pub loads: u64,
}

/// Where a circuit type's parameters come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SrsSource {
    /// A parameter file in bellperson's format.
    File(PathBuf),
    /// Synthetic parameters of this shape, made in memory when loaded: for
    /// measurements at sizes whose real parameters are not at hand (proofs
    /// made with them do not verify; backends that read parameter files
    /// themselves cannot use them). The lab's only.
    #[cfg(any(test, feature = "lab"))]
    Synthetic(CircuitShape),
}

impl SrsSource {
    /// The verifying key and query lengths, without points.
    fn header(&self) -> Result<Srs, EngineError> {
        Ok(match self {
            SrsSource::File(path) => Srs::read_file_header(path)?,
            #[cfg(any(test, feature = "lab"))]
            SrsSource::Synthetic(shape) => Srs::synthetic_header(shape)?,
        })
    }

    /// The parameters with their points, paid out of `funds` when given.
    fn load(&self, pool: &Arc<PinnedPool>, funds: Option<&mut Reservation>) -> Result<Srs, EngineError> {
        Ok(match (self, funds) {
            (SrsSource::File(path), Some(f)) => Srs::read_file_funded(path, pool, Validation::OnCurve, f)?,
            (SrsSource::File(path), None) => Srs::read_file(path, pool, Validation::OnCurve)?,
            #[cfg(any(test, feature = "lab"))]
            (SrsSource::Synthetic(shape), funds) => Srs::synthetic(shape, pool, funds)?,
        })
    }
}

/// Parameters by circuit type.
pub struct SrsRegistry {
    sources: Mutex<HashMap<String, SrsSource>>,
    loaded: Mutex<HashMap<String, Entry>>,
    /// Each circuit type's verifying key once read (a few hundred bytes,
    /// kept after its SRS is evicted: its proofs are verified after that).
    verifying_keys: Mutex<HashMap<String, Arc<VerifyingKey>>>,
    /// Circuit types whose SRS is being loaded now, and a signal when one
    /// load ends: one load per type at a time (two partitions of a new
    /// type load it once), loads of different types side by side, each
    /// paid out of its own admission.
    loading: Mutex<HashSet<String>>,
    load_ended: Condvar,
    /// Circuit types an admission is being sized to load (see
    /// [`claim_load`](Self::claim_load)), and a signal when one is let go.
    claims: Mutex<HashSet<String>>,
    claim_released: Condvar,
    pool: Arc<PinnedPool>,
    budget: Arc<MemoryBudget>,
    backends: Vec<Arc<dyn Backend>>,
    /// Where the backends' hints of each circuit type are kept (applied
    /// when its SRS is loaded).
    hints: Arc<CapacityHints>,
    idle_timeout: Duration,
    /// Per circuit type, the ranks of the jobs that want its SRS (from
    /// submission to their end, see [`want`](Self::want)).
    wants: Mutex<HashMap<String, Vec<Rank>>>,
    /// Per circuit type, how many times its SRS was loaded.
    loads: Mutex<HashMap<String, u64>>,
    /// What idle and load times are measured on.
    clock: Arc<dyn Clock>,
    /// The planner's rules for idle parameters, when the engine runs under
    /// them (see [`EngineConfig::planner`](crate::EngineConfig::planner)).
    policy: Option<Policy>,
    /// Per circuit type, the rank of the latest job that wanted it and when
    /// it came (what the planner's burst window counts from).
    arrivals: Mutex<HashMap<String, (Rank, Duration)>>,
}

impl SrsRegistry {
    pub(crate) fn new(
        pool: Arc<PinnedPool>,
        budget: Arc<MemoryBudget>,
        backends: Vec<Arc<dyn Backend>>,
        hints: Arc<CapacityHints>,
        idle_timeout: Duration,
        clock: Arc<dyn Clock>,
        policy: Option<Policy>,
    ) -> Arc<Self> {
        let r = Arc::new(SrsRegistry {
            sources: Mutex::new(HashMap::new()),
            loaded: Mutex::new(HashMap::new()),
            verifying_keys: Mutex::new(HashMap::new()),
            loading: Mutex::new(HashSet::new()),
            load_ended: Condvar::new(),
            claims: Mutex::new(HashSet::new()),
            claim_released: Condvar::new(),
            pool,
            budget: Arc::clone(&budget),
            backends,
            hints,
            idle_timeout,
            wants: Mutex::new(HashMap::new()),
            loads: Mutex::new(HashMap::new()),
            clock,
            policy,
            arrivals: Mutex::new(HashMap::new()),
        });
        budget.register_evictor(Arc::downgrade(&r) as std::sync::Weak<dyn Evictor>, 100);
        r
    }

    fn sources(&self) -> MutexGuard<'_, HashMap<String, SrsSource>> {
        self.sources.lock().recover()
    }

    fn loaded(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        self.loaded.lock().recover()
    }

    /// Marks `circuit_id`'s SRS wanted by a job of `rank` until the
    /// returned claim drops: while it is, memory for requests of that rank
    /// or below never evicts the SRS, so a job whose partitions wait
    /// (for memory, for a recording) does not find its parameters gone and
    /// load them again. More urgent work may still take it: that work's
    /// admissions go first anyway.
    pub(crate) fn want(self: &Arc<Self>, circuit_id: &str, rank: Rank) -> Wanted {
        self.arrivals
            .lock()
            .recover()
            .insert(circuit_id.to_string(), (rank, self.clock.now()));
        self.wants
            .lock()
            .recover()
            .entry(circuit_id.to_string())
            .or_default()
            .push(rank);
        Wanted {
            registry: Arc::downgrade(self),
            circuit_id: circuit_id.to_string(),
            rank,
        }
    }

    /// Whether memory for a request of `rank` may evict `circuit_id`'s SRS,
    /// idle for `idle`, loaded in `load_time` and referenced by no
    /// partition: not while a job of `rank` or above wants it; otherwise at
    /// once for urgent work (WindowPoSt and WinningPoSt do not wait for a
    /// stream's parameters to go idle), and for other work once it was idle
    /// as long as loading it again takes, or the idle timeout if shorter.
    /// Keeping it idle longer than a reload costs would starve the work
    /// waiting for its memory: a PoRep stream beside a WindowPoSt every two
    /// minutes proved nothing in six, its 45 GiB waiting behind the
    /// WindowPoSt's 60 GiB held between partitions for the five-minute
    /// timeout.
    ///
    /// With `giving_way` (nothing in flight will bring memory back, see
    /// [`Evictor::give_way`]) the idle time does not count: the work that
    /// waits is all there is, and keeping the SRS for work that may come
    /// would leave the devices idle (on bcf8eca a PoRep partition was
    /// refused two seconds after a WindowPoSt burst, whose 60 GiB had been
    /// idle for less than their 40 s load).
    fn evictable(&self, circuit_id: &str, idle: Duration, load_time: Duration, rank: Rank, giving_way: bool) -> bool {
        let wanted = self
            .wants
            .lock()
            .recover()
            .get(circuit_id)
            .and_then(|ranks| ranks.iter().max().copied());
        match (wanted, &self.policy) {
            (Some(w), _) => rank > w,
            (None, Some(policy)) => self
                .kept(policy, circuit_id, idle, load_time, rank, giving_way)
                .is_none(),
            (None, None) => {
                giving_way || idle >= self.idle_timeout.min(load_time) || rank >= crate::Priority::High.rank()
            }
        }
    }

    /// Why the planner's rule keeps `circuit_id`'s idle SRS from work of
    /// `rank` now (see [`keep::kept`]).
    fn kept(
        &self,
        policy: &Policy,
        circuit_id: &str,
        idle: Duration,
        load_time: Duration,
        rank: Rank,
        giving_way: bool,
    ) -> Option<crate::planner::WaitReason> {
        let now = self.clock.now();
        let arrival = self.arrivals.lock().recover().get(circuit_id).copied();
        let params = IdleParams {
            priority: arrival.map_or(crate::Priority::Low, |(r, _)| crate::Priority::of_rank(r)),
            last_used: now.saturating_sub(idle),
            last_arrival: arrival.map(|(_, at)| at),
            load_time,
        };
        keep::kept(
            policy,
            circuit_id,
            params,
            crate::Priority::of_rank(rank),
            now,
            giving_way,
        )
    }

    /// The rank of the latest job that wanted `circuit_id`'s SRS, and when
    /// it came (on the registry's clock).
    pub(crate) fn arrival(&self, circuit_id: &str) -> Option<(Rank, Duration)> {
        self.arrivals.lock().recover().get(circuit_id).copied()
    }

    /// Whether a loaded SRS nobody uses or wants is kept, for a while that
    /// will end, even from work that waits with nothing else in flight (a
    /// burst window): that work is not stuck, the SRS goes when the window
    /// ends. Only under a planner policy; the engine's own rule gives way.
    pub(crate) fn kept_for_a_while(&self) -> bool {
        let Some(policy) = &self.policy else {
            return false;
        };
        let wants = self.wants.lock().recover().clone();
        let now = self.clock.now();
        self.loaded().iter().any(|(id, e)| {
            e.bytes > 0
                && Arc::strong_count(&e.srs) == 1
                && !wants.contains_key(id)
                && matches!(
                    self.kept(
                        policy,
                        id,
                        now.saturating_sub(e.last_used),
                        e.load_time,
                        Rank::NORMAL,
                        true
                    ),
                    Some(crate::planner::WaitReason::Burst { .. })
                )
        })
    }

    /// Says where the parameters of `circuit_id` come from.
    pub fn register(&self, circuit_id: &str, source: SrsSource) {
        self.sources().insert(circuit_id.to_string(), source);
    }

    fn source(&self, circuit_id: &str) -> Result<SrsSource, EngineError> {
        self.sources()
            .get(circuit_id)
            .cloned()
            .ok_or_else(|| EngineError::UnknownCircuit(circuit_id.to_string()))
    }

    /// The shape a circuit of this type has, read from its parameters'
    /// header (without loading points): what admission estimates a first
    /// partition's working set from.
    pub fn shape(&self, circuit_id: &str) -> Result<CapacityHint, EngineError> {
        Ok(self.shape_and_lengths(circuit_id)?.0)
    }

    /// [`shape`](Self::shape) and the parameters' query lengths, from the
    /// loaded SRS or from one read of its header.
    pub fn shape_and_lengths(&self, circuit_id: &str) -> Result<(CapacityHint, QueryLengths), EngineError> {
        if let Some(e) = self.loaded().get(circuit_id) {
            return Ok((shape_of(&e.srs), *e.srs.lengths()));
        }
        let header = self.source(circuit_id)?.header()?;
        Ok((shape_of(&header), *header.lengths()))
    }

    /// The verifying key of `circuit_id`: the one its SRS was loaded with,
    /// or, for a type not loaded yet, read once from its parameters'
    /// header.
    pub fn verifying_key(&self, circuit_id: &str) -> Result<Arc<VerifyingKey>, EngineError> {
        if let Some(vk) = self.verifying_keys.lock().recover().get(circuit_id) {
            return Ok(Arc::clone(vk));
        }
        let vk = match self.loaded().get(circuit_id) {
            Some(e) => e.srs.vk().clone(),
            None => self.source(circuit_id)?.header()?.vk().clone(),
        };
        Ok(self.keep_verifying_key(circuit_id, vk))
    }

    fn keep_verifying_key(&self, circuit_id: &str, vk: VerifyingKey) -> Arc<VerifyingKey> {
        let mut vks = self.verifying_keys.lock().recover();
        Arc::clone(vks.entry(circuit_id.to_string()).or_insert_with(|| Arc::new(vk)))
    }

    /// Whether the SRS of `circuit_id` is loaded now.
    pub fn is_loaded(&self, circuit_id: &str) -> bool {
        self.loaded().contains_key(circuit_id)
    }

    /// Decides who pays for loading the SRS of `circuit_id`: `None` when it
    /// is resident, or a claim when the caller should size its admission to
    /// include the load. While another admission holds the claim this
    /// waits, holding nothing, and looks again once that one let go (it
    /// loaded the SRS, or failed) or `stopped` says to give up (then
    /// `None`).
    ///
    /// Without it every partition of a type not yet resident reserves the
    /// load's bytes; those still queued keep asking for them after the first
    /// one loaded it, and a budget sized for the SRS once never grants them.
    pub(crate) fn claim_load(&self, circuit_id: &str, stopped: impl Fn() -> bool) -> Option<LoadClaim<'_>> {
        let mut claims = self.claims.lock().recover();
        loop {
            if self.is_loaded(circuit_id) || stopped() {
                return None;
            }
            if claims.insert(circuit_id.to_string()) {
                return Some(LoadClaim {
                    registry: self,
                    circuit_id: circuit_id.to_string(),
                });
            }
            claims = self
                .claim_released
                .wait_timeout(claims, Duration::from_millis(100))
                .recover()
                .0;
        }
    }

    /// Host bytes loading the SRS of `circuit_id` takes: its decoded points
    /// as the pool sizes their buffers (if a backend needs them), and a copy
    /// the size of the file for each backend that keeps its own.
    pub fn load_estimate(&self, circuit_id: &str) -> Result<u64, EngineError> {
        if let Some(e) = self.loaded().get(circuit_id) {
            return Ok(e.bytes);
        }
        let header = self.source(circuit_id)?.header()?;
        let len = header.lengths();
        let points = if self.needs_points() {
            let g1 = std::mem::size_of::<blst::blst_p1_affine>();
            let g2 = std::mem::size_of::<blst::blst_p2_affine>();
            [len.h * g1, len.l * g1, len.a * g1, len.b_g1 * g1, len.b_g2 * g2]
                .iter()
                .map(|&b| self.pool.rounded_size(b).unwrap_or(usize::MAX) as u64)
                .sum()
        } else {
            0
        };
        Ok(points + self.own_copies() as u64 * header.stats().file_bytes)
    }

    fn needs_points(&self) -> bool {
        self.backends.iter().any(|b| b.capabilities().needs_srs_points)
    }

    fn own_copies(&self) -> usize {
        self.backends
            .iter()
            .filter(|b| !b.capabilities().needs_srs_points)
            .count()
    }

    /// The SRS of `circuit_id`, loading it if needed, the load paid out of
    /// `funds` (an admission that included it). When `funds` cannot pay for
    /// a load that turns out to be needed (the SRS was evicted since the
    /// admission was sized), says so instead of waiting: waiting while
    /// holding an admission could deadlock. While another thread loads the
    /// same SRS this waits for that load and takes its result; loads of
    /// other types do not wait for each other.
    pub(crate) fn acquire_funded(&self, circuit_id: &str, funds: &mut Reservation) -> Result<Acquired, EngineError> {
        let _loading = loop {
            if let Some(srs) = self.touch(circuit_id) {
                return Ok(Acquired::Ready(srs, Duration::ZERO));
            }
            if funds.bytes() < self.load_estimate(circuit_id)? {
                return Ok(Acquired::NeedsFunds);
            }
            let mut loading = self.loading.lock().recover();
            if loading.insert(circuit_id.to_string()) {
                break Loading {
                    registry: self,
                    circuit_id: circuit_id.to_string(),
                };
            }
            // Another thread loads it: look again once a load ends.
            drop(
                self.load_ended
                    .wait_timeout(loading, Duration::from_millis(100))
                    .recover(),
            );
        };
        // Loaded between the look and the mark.
        if let Some(srs) = self.touch(circuit_id) {
            return Ok(Acquired::Ready(srs, Duration::ZERO));
        }
        self.load(circuit_id, funds).map(|(srs, t)| Acquired::Ready(srs, t))
    }

    /// Whether an SRS is being loaded now: memory that will be held, then
    /// given back once it is evicted, so that admissions waiting meanwhile
    /// are not stuck.
    pub(crate) fn loading_now(&self) -> bool {
        !self.loading.lock().recover().is_empty()
    }

    /// Loads the SRS of `circuit_id` (marked as loading by the caller), out
    /// of `funds`.
    fn load(&self, circuit_id: &str, funds: &mut Reservation) -> Result<(Arc<Srs>, Duration), EngineError> {
        let source = self.source(circuit_id)?;
        let started = self.clock.now();
        let mut srs = if self.needs_points() {
            source.load(&self.pool, Some(&mut *funds))?
        } else {
            source.header()?
        };
        // Backends that keep their own copy get it accounted up front.
        let own = self.own_copies() as u64 * srs.stats().file_bytes;
        let reservation = match own {
            0 => None,
            _ => {
                let mut r = funds.split(own);
                let short = own - r.bytes();
                if short > 0 {
                    r.merge(self.budget.acquire_urgent_blocking(short)?)?;
                }
                Some(r)
            }
        };
        for b in &self.backends {
            // A lost device takes no work: its copy is not needed (and
            // cannot be made), and the others' must not wait for it.
            if b.lost().is_some() {
                continue;
            }
            match b.prepare_srs(&srs) {
                Err(e) if e.loses_device() => {
                    tracing::error!(circuit = circuit_id, "{e}");
                }
                r => {
                    r?;
                    // What an earlier process learned of this circuit's
                    // proofs: buffers ahead of the first one.
                    if let Some(h) = self.hints.backend_hint(circuit_id, b.name()) {
                        b.apply_hint(&srs, &h);
                    }
                }
            }
        }
        // Every live device holds its own copy of the bases (in device
        // memory): the host points are not read again, and for the largest
        // circuits they are tens of GiB the partitions can use instead.
        let live: Vec<_> = self.backends.iter().filter(|b| b.lost().is_none()).collect();
        if srs.points().is_some() && !live.is_empty() && live.iter().all(|b| !b.needs_host_points(&srs)) {
            let freed = srs.release_points();
            tracing::info!(
                circuit = circuit_id,
                bytes = freed,
                "SRS held on every device: host points freed"
            );
        }
        let load_time = self.clock.now().saturating_sub(started);
        self.keep_verifying_key(circuit_id, srs.vk().clone());
        let bytes = srs.memory_bytes() + own;
        let srs = Arc::new(srs);
        tracing::info!(
            circuit = circuit_id,
            bytes,
            ms = load_time.as_millis() as u64,
            "SRS loaded"
        );
        *self.loads.lock().recover().entry(circuit_id.to_string()).or_default() += 1;
        self.loaded().insert(
            circuit_id.to_string(),
            Entry {
                srs: Arc::clone(&srs),
                last_used: self.clock.now(),
                load_time,
                _backend_copies: reservation,
                bytes,
            },
        );
        Ok((srs, load_time))
    }

    fn touch(&self, circuit_id: &str) -> Option<Arc<Srs>> {
        let mut loaded = self.loaded();
        let e = loaded.get_mut(circuit_id)?;
        e.last_used = self.clock.now();
        Some(Arc::clone(&e.srs))
    }

    /// Marks an SRS used now (when a partition using it finishes).
    pub(crate) fn release(&self, circuit_id: &str) {
        if let Some(e) = self.loaded().get_mut(circuit_id) {
            e.last_used = self.clock.now();
        }
        // It may have just become evictable for someone waiting.
        self.budget.reclaim();
    }

    /// Loads the SRS of `circuit_id` now, admitted by the budget at `rank`
    /// like any work: refused at once, with the numbers, when it needs more
    /// than the budget gives that rank ([`EngineError::ParamsTooLarge`]);
    /// waiting for memory while the budget is held; refused with the
    /// numbers when nothing in flight will ever free what it needs
    /// (`nothing_in_flight`, see
    /// [`PinnedPool::admit_unless_stuck`]). No lock is held while it waits:
    /// other loads go on. Returns whether it was already loaded and the load
    /// time.
    pub(crate) fn preload(
        &self,
        circuit_id: &str,
        rank: Rank,
        nothing_in_flight: impl Fn() -> bool,
        stopped: impl Fn() -> bool,
    ) -> Result<(bool, Duration), EngineError> {
        loop {
            if self.touch(circuit_id).is_some() {
                return Ok((true, Duration::ZERO));
            }
            // Sized for the load alone, as one partition's admission would
            // be: the claim keeps partitions of the type from paying for it
            // too.
            let Some(_claim) = self.claim_load(circuit_id, &stopped) else {
                if stopped() {
                    return Err(EngineError::ShutDown);
                }
                continue;
            };
            let needed = self.load_estimate(circuit_id)?;
            let limit = self.budget.limit_for(rank);
            if needed > limit {
                return Err(EngineError::ParamsTooLarge {
                    circuit_id: circuit_id.to_string(),
                    needed,
                    total: limit,
                });
            }
            let mut funds = self.pool.admit_unless_stuck(&[], needed, rank, &nothing_in_flight)?;
            if let Acquired::Ready(_, t) = self.acquire_funded(circuit_id, &mut funds)? {
                return Ok((t.is_zero(), t));
            }
        }
    }

    /// Drops the SRS of `circuit_id`. Partitions using it keep their copy
    /// until they finish. Returns the bytes it held, if it was loaded.
    pub fn evict(&self, circuit_id: &str) -> Option<u64> {
        let e = self.loaded().remove(circuit_id)?;
        Some(self.drop_entry(circuit_id, e))
    }

    fn drop_entry(&self, circuit_id: &str, e: Entry) -> u64 {
        for b in &self.backends {
            b.evict_srs(&e.srs);
        }
        let bytes = e.bytes;
        // Free the points at once when nobody else holds them; otherwise
        // they go back to the pool when the last user finishes.
        if let Ok(srs) = Arc::try_unwrap(e.srs) {
            srs.discard();
        }
        tracing::info!(circuit = circuit_id, bytes, "SRS evicted");
        bytes
    }

    /// Host bytes the loaded SRSs hold (in the budget until evicted).
    pub(crate) fn host_bytes(&self) -> u64 {
        self.loaded().values().map(|e| e.bytes).sum()
    }

    /// What is registered and loaded.
    pub fn status(&self) -> Vec<SrsInfo> {
        let files: Vec<String> = self.sources().keys().cloned().collect();
        let loads = self.loads.lock().recover().clone();
        let loaded = self.loaded();
        let now = self.clock.now();
        let mut out: Vec<SrsInfo> = files
            .into_iter()
            .map(|id| match loaded.get(&id) {
                Some(e) => SrsInfo {
                    loads: loads.get(&id).copied().unwrap_or(0),
                    circuit_id: id,
                    loaded: true,
                    bytes: e.bytes,
                    refs: Arc::strong_count(&e.srs) - 1,
                    idle: now.saturating_sub(e.last_used),
                    load_time: e.load_time,
                },
                None => SrsInfo {
                    loads: loads.get(&id).copied().unwrap_or(0),
                    circuit_id: id,
                    loaded: false,
                    bytes: 0,
                    refs: 0,
                    idle: Duration::ZERO,
                    load_time: Duration::ZERO,
                },
            })
            .collect();
        out.sort_by(|a, b| a.circuit_id.cmp(&b.circuit_id));
        out
    }
}

impl Evictor for SrsRegistry {
    fn name(&self) -> &str {
        "srs"
    }

    /// Evicts unreferenced SRSs that the request's rank may take (see
    /// [`evictable`](SrsRegistry::evictable)), least recently used first.
    /// One that holds no host memory (every device holds its bases and its
    /// host points were freed) is left: evicting it frees nothing the
    /// budget counts, and its next proof would load it again (a WinningPoSt
    /// then waited for a reload beside a PoRep stream).
    fn evict(&self, bytes: u64, rank: Rank) -> u64 {
        self.evict_unused(bytes, rank, false)
    }

    /// Evicts as [`evict`](Evictor::evict) does, however short the time an
    /// SRS nobody wants has been idle.
    fn give_way(&self, bytes: u64, rank: Rank) -> u64 {
        self.evict_unused(bytes, rank, true)
    }
}

impl SrsRegistry {
    /// The evictor's work: unreferenced SRSs holding host memory that
    /// `rank` may take, least recently used first, until `bytes` are freed.
    fn evict_unused(&self, bytes: u64, rank: Rank, giving_way: bool) -> u64 {
        let victims: Vec<(String, Entry)> = {
            let mut loaded = self.loaded();
            let now = self.clock.now();
            let mut candidates: Vec<(String, Duration)> = loaded
                .iter()
                .filter(|(k, e)| {
                    e.bytes > 0
                        && Arc::strong_count(&e.srs) == 1
                        && self.evictable(k, now.saturating_sub(e.last_used), e.load_time, rank, giving_way)
                })
                .map(|(k, e)| (k.clone(), e.last_used))
                .collect();
            candidates.sort_by_key(|(_, t)| *t);
            let mut freed = 0;
            let mut victims = Vec::new();
            for (k, _) in candidates {
                if freed >= bytes {
                    break;
                }
                let e = loaded.remove(&k).expect("listed");
                freed += e.bytes;
                victims.push((k, e));
            }
            victims
        };
        victims.into_iter().map(|(k, e)| self.drop_entry(&k, e)).sum()
    }
}

fn shape_of(srs: &Srs) -> CapacityHint {
    let len = srs.lengths();
    CapacityHint {
        // The domain is what the parameters pin down; the exact constraint
        // count is learned at the first synthesis.
        constraints: len.h + 1,
        inputs: srs.vk().ic.len(),
        aux: len.l,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Priority;

    /// A registry over a 1 GiB heap budget with one small synthetic SRS,
    /// "c", loaded and referenced by nobody, its time read from `clock`.
    fn loaded_on(idle_timeout: Duration, clock: Arc<crate::clock::ManualClock>) -> Arc<SrsRegistry> {
        let budget = MemoryBudget::new(1 << 30);
        let pool = PinnedPool::new(
            Arc::new(pinprove_mem::HeapAllocator::new(false)),
            Arc::clone(&budget),
            pinprove_mem::PoolConfig::default(),
        );
        let r = SrsRegistry::new(
            pool,
            budget,
            Vec::new(),
            Arc::new(CapacityHints::in_memory()),
            idle_timeout,
            clock,
            None,
        );
        let shape = CircuitShape {
            inputs: 2,
            aux: 1000,
            constraints: 1000,
            a_aux: 1000,
            b_inputs: 1,
            b_aux: 500,
        };
        r.register("c", SrsSource::Synthetic(shape));
        load(&r);
        r
    }

    /// [`loaded_on`] a clock nobody moves.
    fn loaded(idle_timeout: Duration) -> Arc<SrsRegistry> {
        loaded_on(idle_timeout, Arc::new(crate::clock::ManualClock::new()))
    }

    /// "c", loaded if it is not, out of funds as large as its load.
    fn acquire(r: &SrsRegistry) -> Arc<Srs> {
        let mut funds = r.budget.try_acquire(r.load_estimate("c").unwrap()).unwrap();
        match r.acquire_funded("c", &mut funds).unwrap() {
            Acquired::Ready(srs, _) => srs,
            Acquired::NeedsFunds => unreachable!("funded for the load"),
        }
    }

    /// Loads "c" (again), as if it held host memory (without backends
    /// nothing is decoded).
    fn load(r: &SrsRegistry) {
        drop(acquire(r));
        r.loaded().get_mut("c").unwrap().bytes = 1 << 20;
    }

    const NORMAL: Rank = Priority::Normal.rank();
    const HIGH: Rank = Priority::High.rank();

    /// Asks `r` to evict everything a request of `rank` may take; says
    /// whether "c" went.
    fn evicts(r: &SrsRegistry, rank: Rank) -> bool {
        Evictor::evict(r, u64::MAX, rank);
        !r.is_loaded("c")
    }

    #[test]
    fn a_wanted_srs_is_kept_from_work_of_its_rank_and_given_to_more_urgent_work() {
        // Idle at once: only the claims keep it.
        let r = loaded(Duration::ZERO);
        let wanted = r.want("c", NORMAL);
        assert!(!evicts(&r, NORMAL), "a job of its rank wants it");
        assert!(evicts(&r, HIGH), "more urgent work may take it");
        // Loaded again for the job (a second load, counted); its end lets
        // it go.
        load(&r);
        assert_eq!(r.status()[0].loads, 2);
        drop(wanted);
        assert!(evicts(&r, NORMAL));
        // Two claims: the higher one counts until it ends.
        load(&r);
        let low = r.want("c", NORMAL);
        let high = r.want("c", HIGH);
        assert!(!evicts(&r, HIGH));
        drop(high);
        assert!(evicts(&r, HIGH));
        drop(low);
    }

    /// Pretends "c" took `load_time` to load and holds `bytes` of host
    /// memory.
    fn set(r: &SrsRegistry, load_time: Duration, bytes: u64) {
        let mut loaded = r.loaded();
        let e = loaded.get_mut("c").unwrap();
        e.load_time = load_time;
        e.bytes = bytes;
    }

    #[test]
    fn an_unwanted_srs_waits_out_its_idle_time_except_for_urgent_work() {
        let r = loaded(Duration::from_secs(3600));
        set(&r, Duration::from_secs(3600), 1 << 20);
        assert!(!evicts(&r, NORMAL), "recently used");
        assert!(evicts(&r, HIGH), "urgent work does not wait an hour");
        // Referenced by a partition: never.
        let held = acquire(&r);
        assert!(!evicts(&r, Rank::URGENT));
        drop(held);
    }

    #[test]
    fn an_unwanted_srs_idle_as_long_as_its_load_took_goes_to_waiting_work() {
        let clock = Arc::new(crate::clock::ManualClock::new());
        let r = loaded_on(Duration::from_secs(3600), Arc::clone(&clock));
        set(&r, Duration::from_secs(3600), 1 << 20);
        assert!(!evicts(&r, NORMAL));
        // Idle longer than loading it again would take: the work waiting
        // for its memory gets it, long before the idle timeout.
        set(&r, Duration::from_secs(40), 1 << 20);
        clock.advance(Duration::from_secs(39));
        assert!(!evicts(&r, NORMAL));
        clock.advance(Duration::from_secs(1));
        assert!(evicts(&r, NORMAL));
    }

    #[test]
    fn giving_way_an_srs_nobody_wants_goes_however_fresh_and_a_wanted_one_stays() {
        let r = loaded(Duration::from_secs(3600));
        set(&r, Duration::from_secs(3600), 1 << 20);
        let wanted = r.want("c", NORMAL);
        Evictor::give_way(&*r, u64::MAX, NORMAL);
        assert!(r.is_loaded("c"), "a job of its rank wants it");
        drop(wanted);
        assert!(!evicts(&r, NORMAL), "idle for no time");
        Evictor::give_way(&*r, u64::MAX, NORMAL);
        assert!(!r.is_loaded("c"));
    }

    #[test]
    fn an_srs_that_holds_no_host_memory_is_never_evicted_for_it() {
        let r = loaded(Duration::ZERO);
        // Its bases on every device, its host points freed.
        set(&r, Duration::ZERO, 0);
        assert!(!evicts(&r, Rank::URGENT));
        assert!(r.is_loaded("c"));
        // What is evicted by name still goes.
        assert_eq!(r.evict("c"), Some(0));
    }
}
