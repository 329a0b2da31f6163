//! GPU tests. Each one runs on a machine with a CUDA device and says it
//! skipped, and why, everywhere else — except where a GPU is expected
//! (`PINPROVE_REQUIRE_GPU=1`, set by `scripts/gpu-run`): there it fails.
#![cfg(feature = "cuda")]

use std::sync::Arc;

use blstrs::{Bls12, Scalar};
use ff::Field;
use pinprove_cuda::runtime::{self as cuda, DeviceBuffer, Stream};
use pinprove_cuda::{NativeBackend, NativeConfig, SrsPlacement, SuprasealBackend};
use pinprove_groth16::circuits::{BenchCircuit, WitnessMix};
use pinprove_groth16::precompiled::Recording;
use pinprove_groth16::{
    AbcLayout, Backend, CapacityHints, CpuBackend, Proof, ProofBatch, ProveError, ProvingAssignment, Srs, Validation,
    synthesize,
};
use pinprove_mem::{MemoryBudget, PinnedPool, PinnedVec, PoolConfig};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// The pinned pool, or `None` (with a message) where no GPU is usable.
fn gpu_pool(test: &str) -> Option<Arc<PinnedPool>> {
    match pinprove_cuda::pinned_allocator(pinprove_mem::PinMethod::default()) {
        Ok(a) => Some(PinnedPool::new(
            a,
            MemoryBudget::new(32 << 30),
            PoolConfig {
                idle_timeout: None,
                ..PoolConfig::default()
            },
        )),
        Err(e) => {
            pinprove_mem::test_util::skip_without_gpu(test, e);
            None
        }
    }
}

#[test]
fn discovery_reports_the_devices() {
    let Some(_pool) = gpu_pool("discovery_reports_the_devices") else {
        return;
    };
    let gpus = pinprove_cuda::gpus().unwrap();
    assert!(!gpus.is_empty());
    for g in &gpus {
        let d = &g.device;
        assert!(
            !d.name.is_empty() && d.total_memory > 0 && d.multiprocessors > 0,
            "{g:?}"
        );
        if let Some(link) = g.pcie {
            assert!(link.max_generation >= 1 && link.max_width >= 1, "{link:?}");
        }
        eprintln!("{g:?}");
    }
    // Uploads from pinned memory are what the pool is for: on every host
    // pinprove runs on they are faster than from the heap.
    let r = pinprove_cuda::measure_uploads(0, 256 << 20, 3).unwrap();
    assert!(r.pinned_gbps.is_finite() && r.pageable_gbps.is_finite(), "{r:?}");
    assert!(r.pinned_gbps > r.pageable_gbps && r.pageable_gbps > 0.0, "{r:?}");
    eprintln!("{r:?}");
}

#[test]
fn pool_buffers_are_pinned_for_the_runtime_the_gpu_code_uses() {
    let Some(pool) = gpu_pool("pool_buffers_are_pinned") else {
        return;
    };
    let b = pool.try_checkout(8 << 20).unwrap();
    assert!(b.is_pinned());
    assert!(
        cuda::is_pinned(b.as_ptr()).unwrap(),
        "the runtime does not see the pool buffer as pinned"
    );
    let heap = vec![0u8; 1 << 20];
    assert!(!cuda::is_pinned(heap.as_ptr()).unwrap());
}

/// A buffer released right after its upload was enqueued is not handed out
/// again before the copy completes: scribbling over whatever the next
/// checkout returns never corrupts the data on the device.
#[test]
fn fenced_buffers_are_reused_only_after_their_upload() {
    let Some(pool) = gpu_pool("fenced_buffers_are_reused_only_after_their_upload") else {
        return;
    };
    const N: usize = 64 << 20;
    let stream = Stream::new().unwrap();
    for round in 0..8u8 {
        let mut dev = DeviceBuffer::new(N).unwrap();
        let mut v = PinnedVec::<u8>::with_capacity_in(N, &pool).unwrap();
        v.extend((0..N).map(|i| (i as u8).wrapping_mul(31).wrapping_add(round)));
        let expect: Vec<u8> = v.to_vec();
        let (buf, len) = v.into_buffer().unwrap();
        let old = buf.as_ptr();
        let done = stream.upload_and_release(&mut dev, buf, len).unwrap();
        // Reuse at once: the pool must not give the same memory back yet.
        let mut again = PinnedVec::<u8>::with_capacity_in(N, &pool).unwrap();
        let same = again.as_ptr() == old;
        again.resize(N, 0xEE);
        done.synchronize().unwrap();
        let mut back = vec![0u8; N];
        stream.download(&mut back, &dev).unwrap();
        assert!(
            back == expect,
            "round {round}: device data corrupted (same buffer reused: {same})"
        );
    }
    assert_eq!(pool.stats().fenced_bytes, 0);
}

fn write_params(
    circuit: &BenchCircuit,
    dir: &std::path::Path,
) -> (std::path::PathBuf, bellperson::groth16::Parameters<Bls12>) {
    let params = bellperson::groth16::generate_random_parameters::<Bls12, _, _>(
        circuit.clone(),
        &mut ChaCha8Rng::seed_from_u64(3),
    )
    .unwrap();
    let path = dir.join(format!("{}.params", circuit.id()));
    let mut bytes = Vec::new();
    params.write(&mut bytes).unwrap();
    std::fs::write(&path, bytes).unwrap();
    (path, params)
}

fn prove(
    backend: &dyn Backend,
    pool: &Arc<PinnedPool>,
    srs: &Arc<Srs>,
    c: &BenchCircuit,
    rs: (Scalar, Scalar),
) -> Proof {
    let hints = CapacityHints::in_memory();
    let layout = backend.capabilities().abc_layout;
    let (asg, _) = synthesize(c.clone(), &c.id(), pool, &hints, layout, None).unwrap();
    backend
        .prove(ProofBatch::new(Arc::clone(srs), vec![asg], vec![rs]))
        .unwrap()
        .remove(0)
}

#[test]
fn supraseal_proofs_equal_the_cpu_backend_and_bellperson() {
    let Some(pool) = gpu_pool("supraseal_proofs_equal_the_cpu_backend_and_bellperson") else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("pinprove-gpu-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let gpu = SuprasealBackend::new().unwrap();
    let cpu = CpuBackend::new(Arc::clone(&pool));
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    // One power-of-two size and one just below (padding to the domain).
    for (n, mix) in [(1 << 16, WitnessMix::Random), ((1 << 16) - 1000, WitnessMix::Bits)] {
        let c = BenchCircuit::new(n, mix).unwrap();
        eprintln!("{}: parameters", c.id());
        let (path, params) = write_params(&c, &dir);
        let header = Arc::new(Srs::read_file_header(&path).unwrap());
        let full = Arc::new(Srs::read_file(&path, &pool, Validation::OnCurve).unwrap());
        for _ in 0..2 {
            let rs = (Scalar::random(&mut rng), Scalar::random(&mut rng));
            eprintln!("{}: GPU proof", c.id());
            let on_gpu = prove(&gpu, &pool, &header, &c, rs);
            eprintln!("{}: CPU proof", c.id());
            let on_cpu = prove(&cpu, &pool, &full, &c, rs);
            eprintln!("{}: bellperson proof", c.id());
            let theirs = bellperson::groth16::create_proof::<Bls12, _, _>(c.clone(), &params, rs.0, rs.1).unwrap();
            let mut theirs_bytes = Vec::new();
            theirs.write(&mut theirs_bytes).unwrap();
            assert_eq!(on_gpu.to_bytes(), on_cpu.to_bytes(), "{} GPU vs CPU", c.id());
            assert_eq!(on_gpu.to_bytes().to_vec(), theirs_bytes, "{} GPU vs bellperson", c.id());
            let pvk = bellperson::groth16::prepare_verifying_key(&params.vk);
            assert!(bellperson::groth16::verify_proof(&pvk, &theirs, &c.public_inputs()).unwrap());
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn native_proofs_equal_the_cpu_backend_and_bellperson() {
    let Some(pool) = gpu_pool("native_proofs_equal_the_cpu_backend_and_bellperson") else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("pinprove-gpu-native-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cpu = CpuBackend::new(Arc::clone(&pool));
    let mut rng = ChaCha8Rng::seed_from_u64(12);
    let cases = [
        (1 << 10, WitnessMix::Random),
        ((1 << 12) - 100, WitnessMix::Bits),
        (1 << 14, WitnessMix::Bits),
        ((1 << 14) + 1, WitnessMix::Random),
    ];
    for placement in [SrsPlacement::Device, SrsPlacement::Host] {
        let gpu = NativeBackend::with_config(
            Arc::clone(&pool),
            NativeConfig {
                srs_placement: placement,
                ..NativeConfig::default()
            },
        )
        .unwrap();
        for (n, mix) in cases {
            let c = BenchCircuit::new(n, mix).unwrap();
            let (path, params) = write_params(&c, &dir);
            let full = Arc::new(Srs::read_file(&path, &pool, Validation::OnCurve).unwrap());
            gpu.prepare_srs(&full).unwrap();
            assert_eq!(gpu.resident().len(), usize::from(placement == SrsPlacement::Device));
            let rs = (Scalar::random(&mut rng), Scalar::random(&mut rng));
            let on_gpu = prove(&gpu, &pool, &full, &c, rs);
            let on_cpu = prove(&cpu, &pool, &full, &c, rs);
            let theirs = bellperson::groth16::create_proof::<Bls12, _, _>(c.clone(), &params, rs.0, rs.1).unwrap();
            let mut theirs_bytes = Vec::new();
            theirs.write(&mut theirs_bytes).unwrap();
            assert_eq!(
                on_gpu.to_bytes(),
                on_cpu.to_bytes(),
                "{} {placement:?}: GPU vs CPU",
                c.id()
            );
            assert_eq!(
                on_gpu.to_bytes().to_vec(),
                theirs_bytes,
                "{} {placement:?}: GPU vs bellperson",
                c.id()
            );
            let ours = bellperson::groth16::Proof::<Bls12>::read(&on_gpu.to_bytes()[..]).unwrap();
            let pvk = bellperson::groth16::prepare_verifying_key(&params.vk);
            assert!(bellperson::groth16::verify_proof(&pvk, &ours, &c.public_inputs()).unwrap());
            gpu.evict_srs(&full);
            assert!(gpu.resident().is_empty());
            eprintln!(
                "{} {placement:?}: native proof identical to the CPU backend's and bellperson's, and verifies",
                c.id()
            );
        }
    }
    // Two workers in flight, bases on the device.
    let gpu = NativeBackend::new(Arc::clone(&pool)).unwrap();
    let c = BenchCircuit::new(1 << 12, WitnessMix::Random).unwrap();
    let (path, _) = write_params(&c, &dir);
    let full = Arc::new(Srs::read_file(&path, &pool, Validation::OnCurve).unwrap());
    gpu.prepare_srs(&full).unwrap();
    let rs = (Scalar::from(5u64), Scalar::from(7u64));
    let expected = prove(&cpu, &pool, &full, &c, rs).to_bytes();
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                for _ in 0..3 {
                    assert_eq!(prove(&gpu, &pool, &full, &c, rs).to_bytes(), expected);
                }
            });
        }
    });
    assert_eq!(
        pool.stats().checked_out_bytes,
        full.memory_bytes(),
        "only the SRS stays checked out"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A native backend that may use `limit` bytes of the GPU.
fn limited(pool: &Arc<PinnedPool>, limit: u64) -> NativeBackend {
    let config = NativeConfig {
        memory_limit: Some(limit),
        ..NativeConfig::default()
    };
    NativeBackend::with_config(Arc::clone(pool), config).unwrap()
}

/// A native backend whose memory limit leaves room only for streamed
/// bases, in the smallest windows: its proofs are the CPU backend's and
/// bellperson's, several at once, and everything comes back.
#[test]
fn native_proofs_under_a_memory_limit_stream_their_bases_and_equal_the_cpu_backend() {
    use pinprove_cuda::plan::{CircuitSizes, Plan};
    let Some(pool) = gpu_pool("native_proofs_under_a_memory_limit_stream_their_bases_and_equal_the_cpu_backend") else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("pinprove-gpu-capped-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cpu = CpuBackend::new(Arc::clone(&pool));
    let mut rng = ChaCha8Rng::seed_from_u64(14);
    for mix in [WitnessMix::Bits, WitnessMix::Random] {
        // 2^17 constraints: a 2^18 domain, so the h MSM alone passes
        // through four windows of the smallest size.
        let c = BenchCircuit::new(1 << 17, mix).unwrap();
        let (path, params) = write_params(&c, &dir);
        let full = Arc::new(Srs::read_file(&path, &pool, Validation::OnCurve).unwrap());
        let q = full.lengths();
        let sizes = CircuitSizes::of_srs(&full);
        // The smallest limit any plan fits: bases streamed.
        let limit = (1..)
            .map(|mib: u64| pinprove_cuda::plan::SLACK + (mib << 20))
            .find(|&l| Plan::new(&sizes, l).is_ok())
            .unwrap();
        let plan = Plan::new(&sizes, limit).unwrap();
        assert!(!plan.bases_resident && plan.window < q.h, "{plan:?}");
        let gpu = limited(&pool, limit);
        gpu.prepare_srs(&full).unwrap();
        assert!(gpu.resident().is_empty(), "the bases stream");
        assert!(
            gpu.resident_srs().iter().any(|r| r.place == "streamed"),
            "{:?}",
            gpu.resident_srs()
        );
        let rs = (Scalar::random(&mut rng), Scalar::random(&mut rng));
        let on_cpu = prove(&cpu, &pool, &full, &c, rs).to_bytes();
        let theirs = bellperson::groth16::create_proof::<Bls12, _, _>(c.clone(), &params, rs.0, rs.1).unwrap();
        let mut theirs_bytes = Vec::new();
        theirs.write(&mut theirs_bytes).unwrap();
        assert_eq!(on_cpu.to_vec(), theirs_bytes);
        // Three proofs from three threads: the device admits them as its
        // memory allows (one at a time here).
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| assert_eq!(prove(&gpu, &pool, &full, &c, rs).to_bytes(), on_cpu, "{mix:?}"));
            }
        });
        eprintln!(
            "{} under a {limit}-byte limit ({plan:?}): streamed proofs identical to the CPU backend's and bellperson's",
            c.id()
        );
        gpu.evict_srs(&full);
        assert_eq!(
            pool.stats().checked_out_bytes,
            full.memory_bytes(),
            "only the SRS stays checked out"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn supraseal_errors_are_values() {
    let Some(pool) = gpu_pool("supraseal_errors_are_values") else {
        return;
    };
    let gpu = SuprasealBackend::new().unwrap();
    let c = BenchCircuit::new(1 << 9, WitnessMix::Bits).unwrap();
    // Parameters without a file: the backend cannot load its own copy (it
    // says so before calling into supraseal).
    let p =
        bellperson::groth16::generate_random_parameters::<Bls12, _, _>(c.clone(), &mut ChaCha8Rng::seed_from_u64(1))
            .unwrap();
    let mut bytes = Vec::new();
    p.write(&mut bytes).unwrap();
    let in_memory = Arc::new(Srs::from_bytes(&bytes, &pool, Validation::OnCurve).unwrap());
    let hints = CapacityHints::in_memory();
    let (asg, _) = synthesize(c.clone(), &c.id(), &pool, &hints, AbcLayout::Exact, None).unwrap();
    let err = gpu
        .prove(ProofBatch::new(in_memory, vec![asg], vec![(Scalar::ONE, Scalar::ONE)]))
        .unwrap_err();
    assert!(matches!(err, ProveError::Backend { .. }), "{err}");
    // A missing file.
    assert!(gpu.load_srs(std::path::Path::new("/nonexistent.params")).is_err());
}

/// Public inputs allocated between aux variables, a variable used only in
/// C, coefficients other than ±1, a term that cancels: the column order and
/// the rows a recording must reproduce exactly.
#[derive(Clone)]
struct Interleaved {
    x: u64,
}

impl bellpepper_core::Circuit<Scalar> for Interleaved {
    fn synthesize<CS: bellpepper_core::ConstraintSystem<Scalar>>(
        self,
        cs: &mut CS,
    ) -> Result<(), bellpepper_core::SynthesisError> {
        let x = Scalar::from(self.x);
        let a = cs.alloc(|| "a", || Ok(x))?;
        let x_in = cs.alloc_input(|| "x", || Ok(x))?;
        let mut prev = a;
        let mut val = x;
        for i in 0..600u64 {
            // val' = val·(val + i) — a chain, with an input every 100 steps
            // and a C-only variable beside it.
            let next = val * (val + Scalar::from(i));
            let v = cs.alloc(|| "step", || Ok(next))?;
            cs.enforce(
                || "step",
                |lc| lc + prev + (Scalar::from(3u64), a) - (Scalar::from(3u64), a),
                |lc| lc + prev + (Scalar::from(i), CS::one()),
                |lc| lc + v,
            );
            if i % 100 == 0 {
                let c_only = cs.alloc(|| "c only", || Ok(next.double()))?;
                let pub_v = cs.alloc_input(|| "step in", || Ok(next))?;
                cs.enforce(
                    || "c only",
                    |lc| lc + (Scalar::from(2u64), v),
                    |lc| lc + CS::one(),
                    |lc| lc + c_only,
                );
                cs.enforce(|| "public", |lc| lc + pub_v, |lc| lc + CS::one(), |lc| lc + v);
            }
            prev = v;
            val = next;
        }
        cs.enforce(|| "x", |lc| lc + x_in, |lc| lc + CS::one(), |lc| lc + a);
        Ok(())
    }
}

/// A recorded circuit's case: its classic assignment and its pending one
/// (a/b/c left to the backend), from another witness than the recording's.
type Make = Box<dyn Fn() -> (ProvingAssignment, ProvingAssignment)>;

/// Bench circuits of `sizes` constraints and the interleaved circuit,
/// recorded, each with how to make its assignments.
fn recorded_cases(pool: &Arc<PinnedPool>, sizes: Vec<(usize, WitnessMix)>) -> Vec<(String, Arc<Recording>, Make)> {
    use pinprove_groth16::precompiled::{defer, record, synthesize_witness};
    let hints = Arc::new(CapacityHints::in_memory());
    let mut cases: Vec<(String, Arc<Recording>, Make)> = Vec::new();
    for (n, mix) in sizes {
        let recorded = BenchCircuit::new(n, mix).unwrap();
        let rec = Arc::new(record(recorded.clone(), &recorded.id()).unwrap());
        let c = recorded.with_seed(41);
        let (pool, hints, r) = (Arc::clone(pool), Arc::clone(&hints), Arc::clone(&rec));
        cases.push((
            c.id(),
            rec,
            Box::new(move || {
                let (asg, _) = synthesize(c.clone(), &c.id(), &pool, &hints, AbcLayout::Exact, None).unwrap();
                let w = synthesize_witness(c.clone(), &r, &pool, None).unwrap();
                (asg, defer(Arc::clone(&r), w, &mut None).unwrap())
            }),
        ));
    }
    let rec = Arc::new(record(Interleaved { x: 2 }, "interleaved").unwrap());
    let (pool, r) = (Arc::clone(pool), Arc::clone(&rec));
    cases.push((
        "interleaved".into(),
        rec,
        Box::new(move || {
            let c = Interleaved { x: 12345 };
            let (asg, _) = synthesize(c.clone(), "interleaved", &pool, &hints, AbcLayout::Exact, None).unwrap();
            let w = synthesize_witness(c, &r, &pool, None).unwrap();
            (asg, defer(Arc::clone(&r), w, &mut None).unwrap())
        }),
    ));
    cases
}

/// Synthetic parameters for `asg`'s circuit, read into `pool`.
fn synthetic_srs(asg: &ProvingAssignment, pool: &Arc<PinnedPool>) -> Arc<Srs> {
    use pinprove_groth16::shape::CircuitShape;
    use pinprove_groth16::synthetic::write_synthetic_params;
    let mut bytes = Vec::new();
    write_synthetic_params(&CircuitShape::of(asg), &mut bytes).unwrap();
    Arc::new(Srs::from_bytes(&bytes, pool, Validation::OnCurve).unwrap())
}

/// Proves a case's classic and pending assignments on `gpu` with the same
/// r and s, and for small circuits the pending one on the CPU backend too:
/// every proof the same bytes, and no a/b/c uploaded for the pending one.
/// The pending proof's device phases.
fn pending_proves_as_classic(
    gpu: &NativeBackend,
    cpu: &CpuBackend,
    srs: &Arc<Srs>,
    (name, make): (&str, &Make),
    (want, pending): (ProvingAssignment, ProvingAssignment),
    rs: (Scalar, Scalar),
) -> pinprove_cuda::NativePhases {
    let job = |asg| ProofBatch::new(Arc::clone(srs), vec![asg], vec![rs]);
    let classic = gpu.prove(job(want)).unwrap().remove(0);
    let from_witness = gpu.prove(job(pending)).unwrap().remove(0);
    let phases = gpu.last_phases().unwrap();
    assert_eq!(
        classic.to_bytes(),
        from_witness.to_bytes(),
        "{name}: classic vs a/b/c on the device"
    );
    assert_eq!(phases.abc_bytes, 0, "{name}: no a/b/c uploaded");
    assert!(phases.witness_bytes > 0, "{name}: {phases:?}");
    if srs.lengths().h < 1 << 16 {
        // The CPU backend computes pending a/b/c on the host.
        let (_, pending) = make();
        let on_cpu = cpu.prove(job(pending)).unwrap().remove(0);
        assert_eq!(on_cpu.to_bytes(), classic.to_bytes(), "{name}: CPU from the recording");
    }
    phases
}

#[test]
fn native_proofs_from_device_computed_a_b_c_equal_the_classic_proofs() {
    let Some(pool) = gpu_pool("native_proofs_from_device_computed_a_b_c_equal_the_classic_proofs") else {
        return;
    };
    let gpu = NativeBackend::new(Arc::clone(&pool)).unwrap();
    let cpu = CpuBackend::new(Arc::clone(&pool));
    let mut rng = ChaCha8Rng::seed_from_u64(19);
    let mut sizes = vec![(1 << 10, WitnessMix::Random), ((1 << 12) - 100, WitnessMix::Bits)];
    for lg in [18, 20, 22] {
        sizes.push((1 << lg, WitnessMix::Random));
        sizes.push(((1 << lg) - 3, WitnessMix::Bits));
    }
    let cases = recorded_cases(&pool, sizes);
    for (name, _, make) in &cases {
        let (want, pending) = make();
        let srs = synthetic_srs(&want, &pool);
        gpu.prepare_srs(&srs).unwrap();
        let rs = (Scalar::random(&mut rng), Scalar::random(&mut rng));
        let phases = pending_proves_as_classic(&gpu, &cpu, &srs, (name, make), (want, pending), rs);
        assert!(phases.evaluation > std::time::Duration::ZERO, "{name}: {phases:?}");
        assert!(
            gpu.resident_srs()
                .iter()
                .any(|r| r.srs.starts_with("matrices of") && r.place == "device"),
            "{name}: matrices reported resident"
        );
        gpu.evict_srs(&srs);
        eprintln!(
            "{name}: identical from device-computed a/b/c (witness {} B uploaded, evaluation {:?}, h {:?})",
            phases.witness_bytes, phases.evaluation, phases.h
        );
    }
    // The recordings gone, their device copies go with them.
    drop(cases);
    assert!(
        !gpu.resident_srs().iter().any(|r| r.srs.starts_with("matrices of")),
        "matrices freed with their recordings"
    );
    assert_eq!(pool.stats().checked_out_bytes, 0);
}

/// Under a memory limit that leaves no room for a circuit's matrices
/// beside a proof, but room for a proof that streams them: the matrices
/// stay in (pinned) host memory and each proof copies them to the device
/// in row chunks, several per matrix at 2^18 and 2^20; the proofs are the
/// classic ones, bit for bit, and everything comes back.
#[test]
fn native_proofs_from_streamed_matrices_equal_the_classic_proofs() {
    use pinprove_cuda::plan::{CircuitSizes, MatrixPlacement, Plan, SLACK};
    let Some(pool) = gpu_pool("native_proofs_from_streamed_matrices_equal_the_classic_proofs") else {
        return;
    };
    let cpu = CpuBackend::new(Arc::clone(&pool));
    let mut rng = ChaCha8Rng::seed_from_u64(23);
    let sizes = vec![
        (1 << 10, WitnessMix::Random),
        ((1 << 18) - 3, WitnessMix::Bits),
        ((1 << 20) - 3, WitnessMix::Random),
    ];
    let cases = recorded_cases(&pool, sizes);
    for (name, rec, make) in &cases {
        let (want, pending) = make();
        let srs = synthetic_srs(&want, &pool);
        let q = srs.lengths();
        let plain = CircuitSizes::of_srs(&srs);
        let recorded = CircuitSizes::of_recording(rec);
        // A limit whose plan streams the matrices: the first (in MiB) that
        // reads them on the device at all, then less, as long as they
        // would fit there beside a proof.
        let placement = |l: u64| Plan::new(&plain, l).map(|p| p.with_recording(&recorded, l).matrices);
        let mut limit = (1..1 << 14)
            .map(|mib: u64| SLACK + (mib << 20))
            .find(|&l| placement(l).is_ok_and(|p| p != MatrixPlacement::Host))
            .unwrap_or_else(|| panic!("{name}: no limit reads the matrices on the device"));
        while placement(limit) == Ok(MatrixPlacement::Device) {
            limit -= 4 << 10;
        }
        assert_eq!(
            placement(limit),
            Ok(MatrixPlacement::Streamed),
            "{name} at {limit} bytes"
        );
        let gpu = limited(&pool, limit);
        gpu.prepare_srs(&srs).unwrap();
        assert!(
            gpu.evaluates_recording(rec),
            "{name}: streamed matrices are evaluated on the device"
        );
        assert!(
            !gpu.hold_recording(rec).unwrap(),
            "{name}: the host copy is what streams"
        );
        let rs = (Scalar::random(&mut rng), Scalar::random(&mut rng));
        let phases = pending_proves_as_classic(&gpu, &cpu, &srs, (name, make), (want, pending), rs);
        let report = gpu.resident_srs();
        let held = report
            .iter()
            .find(|r| r.srs == format!("matrices of {}", rec.circuit_id()))
            .unwrap_or_else(|| panic!("{name}: {report:?}"));
        assert_eq!(held.place, "streamed", "{name}: {report:?}");
        let chunk = held.bytes / 2;
        assert_eq!(chunk, recorded.matrix_chunk(), "{name}");
        if q.h >= 1 << 18 {
            // Several chunks per matrix: each is smaller than a third of
            // the three.
            assert!(
                chunk < recorded.matrices.unwrap() / 6,
                "{name}: chunks of {chunk} bytes for {:?}",
                recorded.matrices
            );
        }
        eprintln!(
            "{name} under a {limit}-byte limit: identical from streamed matrices (chunks of {chunk} bytes, witness {} B \
             uploaded, h {:?})",
            phases.witness_bytes, phases.h
        );
        gpu.evict_srs(&srs);
    }
    drop(cases);
    assert_eq!(
        pool.stats().checked_out_bytes,
        0,
        "pinned copies of short vectors returned"
    );
}
