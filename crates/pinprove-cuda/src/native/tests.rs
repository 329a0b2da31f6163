//! The native backend's unit tests (on a GPU; they skip elsewhere).

use std::ffi::c_int;
use std::sync::Arc;
use std::time::Duration;

use blst::{blst_p1_affine, blst_p2_affine};
use blstrs::{G1Projective, G2Projective, Scalar};
use ff::Field;
use group::Group;
use pinprove_groth16::domain::{Domain, bit_reverse_index};
use pinprove_groth16::{AbcLayout, Backend, ProofBatch, ProveError, Srs, StartedProof, Witness};
use pinprove_mem::PinnedPool;
use pinprove_mem::test_util::skip_without_gpu;

use super::curve::{G1, G2};
use super::h::{Events, HJob};
use super::msm::{Bases, MAX_BATCH, MAX_LISTED, Msm, MsmScalars, Windows, msm};
use super::resident::resident;
use super::*;
use crate::split::{self, Mode};

/// Whether a GPU is usable; where none is, `test` is skipped (or fails,
/// where one is expected).
pub(super) fn have_gpu(test: &str) -> bool {
    match crate::runtime::device_count() {
        Ok(n) if n > 0 => true,
        Ok(_) => {
            skip_without_gpu(test, "the driver reports no devices");
            false
        }
        Err(e) => {
            skip_without_gpu(test, e);
            false
        }
    }
}

/// h on the CPU, as the CPU backend computes it.
fn reference_h(abc: [&[Scalar]; 3]) -> Vec<Scalar> {
    let domain = Domain::new(abc[0].len()).unwrap();
    let m = domain.size();
    let mut v = abc.map(|x| {
        let mut x = x.to_vec();
        x.resize(m, Scalar::ZERO);
        domain.evaluations_to_coset(&mut x);
        x
    });
    let z_inv = domain.z_on_coset_inverse();
    let [a, b, c] = &mut v;
    for i in 0..m {
        a[i] = (a[i] * b[i] - c[i]) * z_inv;
    }
    domain.coset_to_coefficients_bit_reversed(a);
    (0..m - 1).map(|i| a[bit_reverse_index(i, domain.log_size())]).collect()
}

fn full_density(n: usize, set: bool) -> pinprove_groth16::Density {
    let mut d = pinprove_groth16::Density::new();
    for i in 0..n {
        d.add_element();
        if set {
            d.inc(i);
        }
    }
    d
}

#[test]
fn msms_split_by_value_equal_the_plain_sums() {
    use group::prime::PrimeCurveAffine;
    use rand::{Rng, SeedableRng};
    if !have_gpu("msms_split_by_value_equal_the_plain_sums") {
        return;
    }
    let pool = PinnedPool::new(
        Arc::new(pinprove_mem::HeapAllocator::default()),
        pinprove_mem::MemoryBudget::new(1 << 30),
        pinprove_mem::PoolConfig::default(),
    );
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    let n = 3001;
    // Every class: zeros, ones, small values of all widths, the largest
    // small value, full-width values.
    let values: Vec<Scalar> = (0..n)
        .map(|i| match i % 5 {
            0 => Scalar::ZERO,
            1 => Scalar::ONE,
            2 => Scalar::from(rng.r#gen::<u64>() >> (i % 64)),
            3 => Scalar::from(u64::MAX),
            _ => Scalar::random(&mut rng),
        })
        .collect();
    let g1: Vec<G1Projective> = (0..n).map(|_| G1Projective::random(&mut rng)).collect();
    let g2: Vec<G2Projective> = (0..n).map(|_| G2Projective::random(&mut rng)).collect();
    let g1_affine: Vec<blst_p1_affine> = g1.iter().map(|p| *blstrs::G1Affine::from(p).as_ref()).collect();
    let g2_affine: Vec<blst_p2_affine> = g2.iter().map(|p| *blstrs::G2Affine::from(p).as_ref()).collect();
    let want1: G1Projective = g1.iter().zip(&values).map(|(p, s)| p * s).sum();
    let want2: G2Projective = g2.iter().zip(&values).map(|(p, s)| p * s).sum();
    assert!(!bool::from(blstrs::G1Affine::from(want1).is_identity()));

    let vec_in = |v: &[Scalar]| {
        let mut p = pinprove_mem::PinnedVec::new_in(&pool);
        p.extend_from_slice(v);
        p
    };
    let mut w = Witness {
        inputs: vec_in(&[Scalar::ONE]),
        aux: vec_in(&values),
        densities: pinprove_groth16::Densities {
            a_aux: full_density(n, true),
            b_input: full_density(1, false),
            b_aux: full_density(n, true),
        },
        working_set: None,
    };
    let r1 = resident::<G1>(0, &g1_affine).unwrap();
    let r2 = resident::<G2>(0, &g2_affine).unwrap();
    let split = split::prepare_witness(&mut w, &pool, Mode::Split).unwrap();
    assert!(split.l.ones_count > 0 && split.l.small_bits == 64 && split.l.idx.is_some());
    let aux: &[Scalar] = &w.aux;
    // L pairs every aux value with a G1 base, B with a G2 base.
    let threads = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
    let sum = |m: Result<Msm<G1>, ProveError>| m.and_then(|mut m| m.sum(&threads));
    let sum2 = |m: Result<Msm<G2>, ProveError>| m.and_then(|mut m| m.sum(&threads));
    // Both queued before either is waited for; resident bases need no host
    // copy.
    let mut q1 = msm::<G1>(0, Bases::Resident(&r1), MsmScalars::Query(&split.l, aux), None).unwrap();
    let mut q2 = msm::<G2>(0, Bases::Resident(&r2), MsmScalars::Query(&split.b, aux), None).unwrap();
    let got2 = q2.sum(&threads).unwrap();
    let got1 = q1.sum(&threads).unwrap();
    assert_eq!(got1, want1);
    assert_eq!(got2, want2);
    // Streamed through windows of 1024 bases (three windows, so each of
    // the two is filled again once the calls that read it are done), the
    // same split scalars.
    let mut w1 = Windows::<G1>::new(0, 1024).unwrap();
    let mut w2 = Windows::<G2>::new(0, 1024).unwrap();
    let streamed1 = |w: &mut Windows<G1>, q: &crate::split::QueryScalars| {
        msm::<G1>(
            0,
            Bases::Streamed {
                host: &g1_affine,
                windows: w,
            },
            MsmScalars::Query(q, aux),
            None,
        )
    };
    assert_eq!(sum(streamed1(&mut w1, &split.l)).unwrap(), want1);
    let got2 = msm::<G2>(
        0,
        Bases::Streamed {
            host: &g2_affine,
            windows: &mut w2,
        },
        MsmScalars::Query(&split.b, aux),
        None,
    );
    assert_eq!(sum2(got2).unwrap(), want2);
    // Lists cut into calls of 100 scalars (and small values), resident or
    // streamed; several Pippenger batches per call, the last one short.
    MAX_LISTED.store(100, std::sync::atomic::Ordering::Relaxed);
    MAX_BATCH.store(64, std::sync::atomic::Ordering::Relaxed);
    let cut_resident = sum(msm::<G1>(
        0,
        Bases::Resident(&r1),
        MsmScalars::Query(&split.l, aux),
        None,
    ));
    let cut_streamed = sum(streamed1(&mut w1, &split.l));
    MAX_LISTED.store(crate::plan::MAX_LISTED, std::sync::atomic::Ordering::Relaxed);
    MAX_BATCH.store(0, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(cut_resident.unwrap(), want1);
    assert_eq!(cut_streamed.unwrap(), want1);
    // Every scalar through Pippenger (the dense reference), resident and
    // streamed.
    let dense = split::prepare_witness(&mut w, &pool, Mode::Dense).unwrap();
    let aux: &[Scalar] = &w.aux;
    assert_eq!(
        sum(msm::<G1>(
            0,
            Bases::Resident(&r1),
            MsmScalars::Query(&dense.l, aux),
            None
        ))
        .unwrap(),
        want1
    );
    let got = msm::<G1>(
        0,
        Bases::Streamed {
            host: &g1_affine,
            windows: &mut w1,
        },
        MsmScalars::Query(&dense.l, aux),
        None,
    );
    assert_eq!(sum(got).unwrap(), want1);
    drop((w1, w2));
    let _ = rng.r#gen::<u8>();
}

unsafe extern "C" {
    /// See `cuda/lane.cu`.
    fn pinprove_test_fault(device: c_int, kind: c_int) -> c_int;
}

/// Synthesizes `c` from `pool` and starts its proof.
fn start_proof(
    backend: &dyn Backend,
    pool: &Arc<PinnedPool>,
    srs: &Arc<Srs>,
    c: &pinprove_groth16::circuits::BenchCircuit,
) -> Result<Box<dyn StartedProof>, ProveError> {
    start_proof_as(backend, pool, srs, c, false)
}

/// As [`start_proof`], an urgent proof when `urgent`.
fn start_proof_as(
    backend: &dyn Backend,
    pool: &Arc<PinnedPool>,
    srs: &Arc<Srs>,
    c: &pinprove_groth16::circuits::BenchCircuit,
    urgent: bool,
) -> Result<Box<dyn StartedProof>, ProveError> {
    start_synthesized(backend, srs, synthesized(backend, pool, c)?, urgent)
}

/// `c` synthesized from `pool` in `backend`'s layout.
fn synthesized(
    backend: &dyn Backend,
    pool: &Arc<PinnedPool>,
    c: &pinprove_groth16::circuits::BenchCircuit,
) -> Result<pinprove_groth16::ProvingAssignment, ProveError> {
    let hints = pinprove_groth16::CapacityHints::in_memory();
    let layout = backend.capabilities().abc_layout;
    Ok(pinprove_groth16::synthesize(c.clone(), &c.id(), pool, &hints, layout, None)?.0)
}

/// Starts the proof of `asg` (r = 3, s = 4).
fn start_synthesized(
    backend: &dyn Backend,
    srs: &Arc<Srs>,
    asg: pinprove_groth16::ProvingAssignment,
    urgent: bool,
) -> Result<Box<dyn StartedProof>, ProveError> {
    backend.start(
        ProofBatch::new(
            Arc::clone(srs),
            vec![asg],
            vec![(Scalar::from(3u64), Scalar::from(4u64))],
        )
        .with_urgent(urgent),
    )
}

pub(super) fn prove_bytes(
    backend: &dyn Backend,
    pool: &Arc<PinnedPool>,
    srs: &Arc<Srs>,
    c: &pinprove_groth16::circuits::BenchCircuit,
) -> Result<Vec<u8>, ProveError> {
    Ok(start_proof(backend, pool, srs, c)?
        .finish()?
        .remove(0)
        .to_bytes()
        .to_vec())
}

/// Whether `r` failed because the device was lost: at `start` or
/// `finish`, or before them, when the pool had to pin fresh memory
/// (pinning goes through the same, now unusable, CUDA context).
fn lost(r: &Result<Vec<u8>, ProveError>) -> bool {
    match r {
        Err(ProveError::Memory(e)) => {
            let e = e.to_string();
            e.contains("cudaHostAlloc") || e.contains("cudaHostRegister")
        }
        Err(e) => e.device_fault() == Some(pinprove_groth16::DeviceFault::Lost),
        Ok(_) => false,
    }
}

/// A bench circuit with real parameters (bellperson's generator, seeded),
/// their bytes, and the SRS read from them into a pool.
pub(super) struct Fixture {
    pub(super) c: pinprove_groth16::circuits::BenchCircuit,
    pub(super) params: bellperson::groth16::Parameters<blstrs::Bls12>,
    pub(super) bytes: Vec<u8>,
    pub(super) srs: Arc<Srs>,
}

pub(super) fn fixture(
    pool: &Arc<PinnedPool>,
    constraints: usize,
    mix: pinprove_groth16::circuits::WitnessMix,
    seed: u64,
) -> Fixture {
    use rand::SeedableRng;
    let c = pinprove_groth16::circuits::BenchCircuit::new(constraints, mix).unwrap();
    let params = bellperson::groth16::generate_random_parameters::<blstrs::Bls12, _, _>(
        c.clone(),
        &mut rand_chacha::ChaCha8Rng::seed_from_u64(seed),
    )
    .unwrap();
    let mut bytes = Vec::new();
    params.write(&mut bytes).unwrap();
    let srs = Arc::new(Srs::from_bytes(&bytes, pool, pinprove_groth16::Validation::OnCurve).unwrap());
    Fixture { c, params, bytes, srs }
}

/// A pool of registered (pinned) memory within 4 GiB.
pub(super) fn registered_pool() -> Arc<PinnedPool> {
    PinnedPool::new(
        Arc::new(crate::runtime::CudaRegisteredAllocator::new().unwrap()),
        pinprove_mem::MemoryBudget::new(4 << 30),
        pinprove_mem::PoolConfig::default(),
    )
}

// Runs in a process of its own (as every GPU test does in CI's GPU
// runs and under nextest): the fault it provokes ends the process's use
// of the device.
#[test]
fn a_faulting_kernel_loses_the_device_and_nothing_else() {
    use pinprove_groth16::circuits::WitnessMix;
    use pinprove_groth16::{CpuBackend, DeviceFault, Validation};

    if !have_gpu("a_faulting_kernel_loses_the_device_and_nothing_else") {
        return;
    }
    let pool = PinnedPool::new(
        Arc::new(crate::runtime::CudaPinnedAllocator::new().unwrap()),
        pinprove_mem::MemoryBudget::new(4 << 30),
        pinprove_mem::PoolConfig::default(),
    );
    let Fixture { c, params, bytes, srs } = fixture(&pool, 1 << 10, WitnessMix::Random, 9);
    let gpu = NativeBackend::new(Arc::clone(&pool)).unwrap();
    gpu.prepare_srs(&srs).unwrap();
    let expected = prove_bytes(&CpuBackend::new(Arc::clone(&pool)), &pool, &srs, &c).unwrap();
    assert_eq!(prove_bytes(&gpu, &pool, &srs, &c).unwrap(), expected);

    // A launch the device refuses: a typed error, and the device goes on.
    // SAFETY: the hook only queues a kernel on device 0's lane.
    let code = unsafe { pinprove_test_fault(0, 0) };
    assert_eq!(crate::fault::classify(code), DeviceFault::Launch, "code {code}");
    eprintln!("launch refused with code {code}: the device goes on");
    assert_eq!(prove_bytes(&gpu, &pool, &srs, &c).unwrap(), expected);
    assert!(gpu.lost().is_none());

    // A second worker proves in a loop while the device is lost under it.
    std::thread::scope(|s| {
        let worker = s.spawn(|| {
            for _ in 0..10_000 {
                let r = prove_bytes(&gpu, &pool, &srs, &c);
                match &r {
                    Ok(b) => assert_eq!(*b, expected, "a proof before the fault is right"),
                    Err(_) => return r,
                }
            }
            r_timeout()
        });
        let queued = start_proof(&gpu, &pool, &srs, &c).unwrap();
        // Synthesized now: pinning fresh pool memory may fail once the
        // device is lost.
        let hints = pinprove_groth16::CapacityHints::in_memory();
        let (asg, _) = pinprove_groth16::synthesize(c.clone(), &c.id(), &pool, &hints, AbcLayout::Exact, None).unwrap();
        // SAFETY: as above; the kernel stores through a null pointer.
        let code = unsafe { pinprove_test_fault(0, 1) };
        assert_eq!(crate::fault::classify(code), DeviceFault::Lost, "code {code}");
        // Queued before the fault: right, or failed with it.
        match queued.finish() {
            Ok(p) => assert_eq!(p[0].to_bytes().to_vec(), expected),
            Err(e) => assert_eq!(e.device_fault(), Some(DeviceFault::Lost), "{e}"),
        }
        // The next proof meets the fault.
        let next = gpu
            .start(ProofBatch::new(
                Arc::clone(&srs),
                vec![asg],
                vec![(Scalar::from(3u64), Scalar::from(4u64))],
            ))
            .and_then(|p| p.finish())
            .map(|p| p[0].to_bytes().to_vec());
        assert!(
            matches!(&next, Err(e) if e.device_fault() == Some(DeviceFault::Lost)),
            "{next:?}"
        );
        let other = worker.join().unwrap();
        assert!(lost(&other), "the other worker: {other:?}");
    });
    let why = gpu.lost().expect("the backend knows");
    eprintln!("lost: {why}");
    assert!(why.contains("illegal") || why.contains("address"), "{why}");
    // From now on calls fail at once, without the device.
    let err = gpu.prepare_srs(&srs).unwrap_err();
    assert!(err.to_string().contains("failed earlier"), "{err}");
    let err = start_proof(&gpu, &pool, &srs, &c).err().expect("refused");
    assert_eq!(err.device_fault(), Some(DeviceFault::Lost));
    drop(gpu);
    drop(srs);

    // The process goes on: a CPU prover over heap memory proves, and the
    // proof verifies.
    let heap = PinnedPool::new(
        Arc::new(pinprove_mem::HeapAllocator::default()),
        pinprove_mem::MemoryBudget::new(1 << 30),
        pinprove_mem::PoolConfig::default(),
    );
    let srs = Arc::new(Srs::from_bytes(&bytes, &heap, Validation::OnCurve).unwrap());
    let cpu = CpuBackend::new(Arc::clone(&heap));
    let proof = start_proof(&cpu, &heap, &srs, &c).unwrap().finish().unwrap().remove(0);
    let proof = bellperson::groth16::Proof::<blstrs::Bls12>::read(&proof.to_bytes()[..]).unwrap();
    let pvk = bellperson::groth16::prepare_verifying_key(&params.vk);
    assert!(bellperson::groth16::verify_proof(&pvk, &proof, &c.public_inputs()).unwrap());
}

// On a host with two GPUs or more (skipped elsewhere; a process of its own,
// as every GPU test): one backend per GPU proves the same bytes, and when
// GPU 0 is lost, GPU 1 goes on proving from freshly pinned pool memory,
// pinned with GPU 1's context.
#[test]
fn a_lost_gpu_leaves_the_others_proving() {
    use pinprove_groth16::circuits::WitnessMix;
    use pinprove_groth16::{CpuBackend, DeviceFault};

    let test = "a_lost_gpu_leaves_the_others_proving";
    if !have_gpu(test) {
        return;
    }
    let n = crate::runtime::device_count().unwrap();
    if n < 2 {
        pinprove_mem::test_util::skip_without_gpus(test, 2, n);
        return;
    }
    let pool = registered_pool();
    let Fixture { c, srs, .. } = fixture(&pool, 1 << 10, WitnessMix::Random, 9);
    let on = |device| {
        NativeBackend::with_config(
            Arc::clone(&pool),
            NativeConfig {
                device,
                ..NativeConfig::default()
            },
        )
        .unwrap()
    };
    let (gpu0, gpu1) = (on(0), on(1));
    assert_eq!((gpu0.gpu(), gpu1.gpu()), (Some(0), Some(1)));
    gpu0.prepare_srs(&srs).unwrap();
    gpu1.prepare_srs(&srs).unwrap();
    let expected = prove_bytes(&CpuBackend::new(Arc::clone(&pool)), &pool, &srs, &c).unwrap();
    crate::runtime::pin_with_device(Some(0));
    assert_eq!(prove_bytes(&gpu0, &pool, &srs, &c).unwrap(), expected, "GPU 0");
    assert_eq!(prove_bytes(&gpu1, &pool, &srs, &c).unwrap(), expected, "GPU 1");

    // SAFETY: the hook only queues a kernel on device 0's lane; the
    // kernel stores through a null pointer.
    let code = unsafe { pinprove_test_fault(0, 1) };
    assert_eq!(crate::fault::classify(code), DeviceFault::Lost, "code {code}");
    let r = prove_bytes(&gpu0, &pool, &srs, &c);
    assert!(lost(&r) || gpu0.lost().is_some(), "GPU 0 after the fault: {r:?}");

    // GPU 1 serves on, with buffers pinned after the fault by GPU 1's
    // context (the engine moves the pinning there when GPU 0 is lost).
    crate::runtime::pin_with_device(Some(1));
    pool.clear_idle();
    for _ in 0..3 {
        assert_eq!(
            prove_bytes(&gpu1, &pool, &srs, &c).unwrap(),
            expected,
            "GPU 1 after GPU 0 was lost"
        );
    }
    assert!(gpu1.lost().is_none());
    crate::runtime::pin_with_device(None);
}

// What a backend learned from its proofs (its hint) prepares a new backend
// for its first proof: preparation buffers warm, admission sized as seen,
// and the device's memory pool grown back to what the proofs held.
#[test]
fn a_backend_hint_prepares_a_new_backend_for_its_first_proof() {
    use pinprove_groth16::CapacityHint;
    use pinprove_groth16::circuits::WitnessMix;

    if !have_gpu("a_backend_hint_prepares_a_new_backend_for_its_first_proof") {
        return;
    }
    let pool = registered_pool();
    // Bit-valued: its prepared lists are far below the worst case. At
    // 2^12 they are not: the pool's smallest buffer (64 KiB) then outweighs
    // them, and what a proof took rounds up to more than the worst case
    // counted with three buffers per query.
    let Fixture { c, srs, .. } = fixture(&pool, 1 << 16, WitnessMix::Bits, 4);
    let shape = CapacityHint {
        constraints: c.constraints(),
        inputs: c.public_inputs().len() + 1,
        aux: c.constraints(),
    };

    let gpu = NativeBackend::new(Arc::clone(&pool)).unwrap();
    gpu.prepare_srs(&srs).unwrap();
    assert!(gpu.hint(&srs).is_none(), "nothing learned before a proof");
    let worst = gpu.extra_working_set(&shape, Some(srs.lengths()), true);
    assert_eq!(gpu.extra_working_set(&shape, Some(srs.lengths()), false), worst);
    let expected = prove_bytes(&gpu, &pool, &srs, &c).unwrap();
    let hint = gpu.hint(&srs).expect("learned from the proof");
    assert!(!hint.host_buffers.is_empty(), "{hint:?}");
    assert!(hint.preparation_bytes > 0, "{hint:?}");
    assert!(hint.device_pool_bytes > 0, "{hint:?}");
    // Gone with its warm buffers, as in a process that exited.
    gpu.evict_srs(&srs);
    drop(gpu);
    pool.clear_idle();
    assert_eq!(pool.stats().warm_ready_bytes, 0);

    // A new backend (as in a restarted process): its upload of the bases
    // trims the device's pool; the hint grows it back and sizes admission.
    let fresh = NativeBackend::new(Arc::clone(&pool)).unwrap();
    fresh.prepare_srs(&srs).unwrap();
    for urgent in [false, true] {
        assert_eq!(
            fresh.extra_working_set(&shape, Some(srs.lengths()), urgent),
            worst,
            "unhinted: the worst case"
        );
    }
    fresh.apply_hint(&srs, &hint);
    assert!(
        fresh.pool_reserved().unwrap() >= hint.device_pool_bytes,
        "the pool holds what the proofs held"
    );
    assert!(
        fresh.extra_working_set(&shape, Some(srs.lengths()), true) < worst,
        "admission as seen"
    );
    // Once the preparation buffers are held, a background proof (which
    // prepares into them on its device lane) is admitted without them.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while pool.stats().warm_ready_bytes < hint.host_buffers.iter().sum::<u64>()
        || fresh.extra_working_set(&shape, Some(srs.lengths()), false) > 0
    {
        assert!(std::time::Instant::now() < deadline, "{:?}", pool.stats());
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(prove_bytes(&fresh, &pool, &srs, &c).unwrap(), expected);
}

// Background proofs queued in pieces (h, the h MSM in many parts, the
// other MSMs) on a queue one piece deep, two at once from two threads, and
// urgent proofs between their pieces: every proof is the CPU backend's,
// bases resident or streamed.
#[test]
fn proofs_queued_in_pieces_with_urgent_ones_between_are_unchanged() {
    for placement in [SrsPlacement::Device, SrsPlacement::Host] {
        pieces_with_urgent_ones_between(placement);
    }
}

fn pieces_with_urgent_ones_between(placement: SrsPlacement) {
    use pinprove_groth16::CpuBackend;
    use pinprove_groth16::circuits::WitnessMix;

    if !have_gpu("proofs_queued_in_pieces_with_urgent_ones_between_are_unchanged") {
        return;
    }
    let pool = registered_pool();
    let Fixture { c, srs, .. } = fixture(&pool, 1 << 12, WitnessMix::Random, 12);
    let expected = prove_bytes(&CpuBackend::new(Arc::clone(&pool)), &pool, &srs, &c).unwrap();
    let gpu = NativeBackend::with_config(
        Arc::clone(&pool),
        NativeConfig {
            queue_depth: 1,
            srs_placement: placement,
            ..NativeConfig::default()
        },
    )
    .unwrap();
    gpu.prepare_srs(&srs).unwrap();
    // 2^12 - 1 h bases in parts of 700: six parts, eight pieces a proof.
    super::backend::H_MSM_PART_BASES.store(700, std::sync::atomic::Ordering::Relaxed);
    // (Other tests of this binary running meanwhile get the same proofs.)
    let prove_one = |urgent: bool| {
        start_proof_as(&gpu, &pool, &srs, &c, urgent)
            .and_then(|p| p.finish())
            .map(|p| p[0].to_bytes().to_vec())
    };
    std::thread::scope(|s| {
        let background: Vec<_> = (0..2)
            .map(|_| s.spawn(|| (0..4).map(|_| prove_one(false).unwrap()).collect::<Vec<_>>()))
            .collect();
        for _ in 0..4 {
            assert_eq!(prove_one(true).unwrap(), expected, "an urgent proof");
        }
        for b in background {
            for p in b.join().unwrap() {
                assert_eq!(p, expected, "a background proof in pieces");
            }
        }
    });
    super::backend::H_MSM_PART_BASES.store(1 << 25, std::sync::atomic::Ordering::Relaxed);
    let phases = gpu.last_phases().unwrap();
    assert_eq!(phases.resident_bases, placement == SrsPlacement::Device);
    assert!(
        phases.msm[0].0 > Duration::ZERO,
        "the h MSM's parts timed as one: {phases:?}"
    );
}

// Partitions of one circuit proved as one job over streamed bases share
// each window of bases (filled once, read by every partition's calls): each
// proof is still the CPU backend's for its own witness and randomness, as a
// background job in pieces and as an urgent one.
#[test]
fn partitions_sharing_streamed_bases_each_get_their_own_proof() {
    use pinprove_groth16::CpuBackend;
    use pinprove_groth16::circuits::WitnessMix;
    use std::sync::atomic::Ordering::Relaxed;

    if !have_gpu("partitions_sharing_streamed_bases_each_get_their_own_proof") {
        return;
    }
    let pool = registered_pool();
    let Fixture { c, srs, .. } = fixture(&pool, 1 << 12, WitnessMix::Random, 21);
    let circuits: Vec<_> = (0..3).map(|i| c.clone().with_seed(100 + i)).collect();
    let randomness: Vec<_> = (0..3u64).map(|i| (Scalar::from(3 + i), Scalar::from(11 + i))).collect();
    let job = |backend: &dyn Backend, urgent: bool| {
        let assignments = circuits
            .iter()
            .map(|c| synthesized(backend, &pool, c).unwrap())
            .collect();
        ProofBatch::new(Arc::clone(&srs), assignments, randomness.clone()).with_urgent(urgent)
    };
    let bytes = |proofs: Vec<pinprove_groth16::Proof>| -> Vec<Vec<u8>> {
        proofs.iter().map(|p| p.to_bytes().to_vec()).collect()
    };
    let cpu = CpuBackend::new(Arc::clone(&pool));
    let expected = bytes(cpu.prove(job(&cpu, false)).unwrap());
    assert!(expected[0] != expected[1] && expected[1] != expected[2]);
    let gpu = NativeBackend::with_config(
        Arc::clone(&pool),
        NativeConfig {
            queue_depth: 1,
            srs_placement: SrsPlacement::Host,
            ..NativeConfig::default()
        },
    )
    .unwrap();
    gpu.prepare_srs(&srs).unwrap();
    // Windows of 1024 bases (each query's pass through several), runs of
    // 300 listed scalars (several calls per window and partition), h MSMs
    // in parts of 700 bases (background proofs in many pieces).
    super::backend::WINDOW_BASES.store(1024, Relaxed);
    super::msm::MAX_LISTED.store(300, Relaxed);
    super::backend::H_MSM_PART_BASES.store(700, Relaxed);
    for urgent in [false, true] {
        let got = bytes(gpu.prove(job(&gpu, urgent)).unwrap());
        assert_eq!(got, expected, "urgent: {urgent}");
    }
    super::backend::WINDOW_BASES.store(0, Relaxed);
    super::msm::MAX_LISTED.store(crate::plan::MAX_LISTED, Relaxed);
    super::backend::H_MSM_PART_BASES.store(1 << 25, Relaxed);
    let phases = gpu.last_phases().unwrap();
    assert!(!phases.resident_bases);
    assert_eq!(phases.bases_shared_by, 3, "{phases:?}");
    assert!(phases.msm[1].0 > Duration::ZERO, "{phases:?}");
}

fn r_timeout() -> Result<Vec<u8>, ProveError> {
    Err(backend_error("the worker never met the fault"))
}

#[test]
fn h_on_the_device_matches_the_cpu_and_survives_running_out_of_memory() {
    if !have_gpu("h_on_the_device_matches_the_cpu_and_survives_running_out_of_memory") {
        return;
    }
    let mut rng = <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(11);
    let n = 1000;
    let abc: [Vec<Scalar>; 3] = std::array::from_fn(|_| (0..n).map(|_| Scalar::random(&mut rng)).collect());
    let abc_ref = [&abc[0][..], &abc[1][..], &abc[2][..]];

    // 2^36 elements of 32 bytes, three times over: no GPU has that.
    let events = Events::new();
    let up = events.fences().unwrap();
    let ev = events.proof().unwrap();
    let err = HJob::begin(0, abc_ref, 36, &up, &ev.marks)
        .err()
        .expect("6 TB of device memory");
    assert!(err.to_string().contains("memory"), "{err}");

    // The device is still usable, and h is right.
    let job = HJob::begin(0, abc_ref, 10, &up, &ev.marks).unwrap();
    job.wait().unwrap();
    assert_eq!(job.download().unwrap(), reference_h(abc_ref));
    assert!(ev.marks[1].elapsed_since(&ev.marks[0]).unwrap() > Duration::ZERO);
    assert!(ev.marks[3].elapsed_since(&ev.marks[2]).unwrap() > Duration::ZERO);

    // No such device: a typed error, from the backend and from the C side.
    let pool = PinnedPool::new(
        Arc::new(pinprove_mem::HeapAllocator::default()),
        pinprove_mem::MemoryBudget::new(1 << 30),
        pinprove_mem::PoolConfig::default(),
    );
    let config = NativeConfig {
        device: 4096,
        ..NativeConfig::default()
    };
    assert!(NativeBackend::with_config(pool, config).is_err());
    assert!(HJob::begin(4096, abc_ref, 10, &up, &ev.marks).is_err());
}

#[test]
fn a_queued_proof_returns_its_pool_buffers_fenced_and_a_later_proof_reuses_them_before_it_finishes() {
    use pinprove_groth16::CpuBackend;
    use pinprove_groth16::circuits::WitnessMix;

    if !have_gpu("a_queued_proof_returns_its_pool_buffers_fenced_and_a_later_proof_reuses_them_before_it_finishes") {
        return;
    }
    let pool = registered_pool();
    // Random values: every base is listed, so the lists are large.
    let Fixture { c, srs, .. } = fixture(&pool, 1 << 12, WitnessMix::Random, 6);
    let expected = prove_bytes(&CpuBackend::new(Arc::clone(&pool)), &pool, &srs, &c).unwrap();
    let gpu = NativeBackend::new(Arc::clone(&pool)).unwrap();
    gpu.prepare_srs(&srs).unwrap();
    let settled = |what: &str| {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while pool.stats().fenced_bytes > 0 {
            assert!(std::time::Instant::now() < deadline, "{what}: fences never completed");
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    // The SRS's host points stay checked out.
    let held = pool.stats().checked_out_buffers;
    let first = start_proof(&gpu, &pool, &srs, &c).unwrap();
    // Queued, not finished: its a/b/c, witness and prepared scalars are
    // all back in the pool, fenced until the device has read them.
    let s = pool.stats();
    assert_eq!(
        s.checked_out_buffers, held,
        "buffers still held by a queued proof: {s:?}"
    );
    settled("first proof");
    // The next proof, started while the first is unfinished, finds the
    // first's buffers idle: nothing pinned on a lane for it.
    let lanes = pool.stats().lane_allocations;
    let second = start_proof(&gpu, &pool, &srs, &c).unwrap();
    assert_eq!(
        pool.stats().lane_allocations,
        lanes,
        "the second proof pinned on a lane although the first's buffers were idle"
    );
    for started in [first, second] {
        let proof = started.finish().unwrap().remove(0).to_bytes().to_vec();
        assert_eq!(proof, expected, "the native proof equals the CPU backend's");
    }
}

#[test]
fn later_proofs_of_a_circuit_type_find_their_preparation_buffers_warm() {
    use pinprove_groth16::circuits::WitnessMix;

    if !have_gpu("later_proofs_of_a_circuit_type_find_their_preparation_buffers_warm") {
        return;
    }
    let pool = PinnedPool::new(
        crate::runtime::pinned_allocator(pinprove_mem::PinMethod::default()).unwrap(),
        pinprove_mem::MemoryBudget::new(4 << 30),
        pinprove_mem::PoolConfig {
            idle_timeout: None,
            ..pinprove_mem::PoolConfig::default()
        },
    );
    // Random values: every base is listed, so the lists are large.
    let Fixture { c, srs, .. } = fixture(&pool, 1 << 12, WitnessMix::Random, 5);
    let gpu = NativeBackend::new(Arc::clone(&pool)).unwrap();
    gpu.prepare_srs(&srs).unwrap();

    // Syntheses learn their sizes once, as the engine's do.
    let hints = pinprove_groth16::CapacityHints::in_memory();
    let prove = || -> Vec<u8> {
        let (asg, _) = pinprove_groth16::synthesize(c.clone(), &c.id(), &pool, &hints, AbcLayout::Exact, None).unwrap();
        gpu.start(ProofBatch::new(
            Arc::clone(&srs),
            vec![asg],
            vec![(Scalar::from(3u64), Scalar::from(4u64))],
        ))
        .unwrap()
        .finish()
        .unwrap()
        .remove(0)
        .to_bytes()
        .to_vec()
    };
    let first = prove();
    assert!(
        pool.stats().lane_allocations > 0,
        "the first proof pinned its lists on a lane"
    );
    // The syntheses' buffers are kept warm for two proofs at once, as the
    // engine does after a preload (a/b/c share a size class with the
    // lists here, so without it the syntheses would take the lists').
    let h = hints.get(&c.id()).expect("a hint after one synthesis");
    let per_proof = [
        32 * h.constraints,
        32 * h.constraints,
        32 * h.constraints,
        32 * h.aux,
        32 * h.inputs,
    ];
    let synthesis_set = pool
        .keep_warm("test-synthesis", &per_proof.repeat(2))
        .unwrap()
        .wanted_bytes;
    // The preparation's are kept warm in the background, for every proof
    // that can be in flight.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let s = pool.stats();
        if s.warm_bytes > synthesis_set && s.warm_ready_bytes >= s.warm_bytes {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "warm set not made: {s:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
    let before = pool.stats().lane_allocations;
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                for _ in 0..3 {
                    assert_eq!(prove(), first);
                }
            });
        }
    });
    assert_eq!(
        pool.stats().lane_allocations,
        before,
        "later proofs pinned nothing while the device waited"
    );
    // Other work asking the budget for every byte evicts the syntheses'
    // buffers, not the preparation's: those stay while the SRS does.
    let prep = pool.stats().warm_bytes - synthesis_set;
    let budget = Arc::clone(pool.budget());
    let everything = budget.available() + pool.stats().idle_bytes;
    assert!(budget.try_acquire(everything).is_err());
    let s = pool.stats();
    assert!(s.idle_bytes >= prep, "the preparation's buffers were freed: {s:?}");
    pool.keep_warm("test-synthesis", &per_proof.repeat(2)).unwrap();
    let before = pool.stats().lane_allocations;
    assert_eq!(prove(), first);
    assert_eq!(
        pool.stats().lane_allocations,
        before,
        "nothing pinned on a lane after the pressure"
    );
    pool.stop_warm("test-synthesis");
    // Evicting the SRS lets the pool forget the set.
    gpu.evict_srs(&srs);
    assert_eq!(pool.stats().warm_bytes, 0);
}

#[test]
fn urgent_scalars_prepared_ahead_of_start_give_the_same_proofs() {
    use pinprove_groth16::CpuBackend;
    use pinprove_groth16::circuits::WitnessMix;

    if !have_gpu("urgent_scalars_prepared_ahead_of_start_give_the_same_proofs") {
        return;
    }
    let pool = registered_pool();
    let Fixture { c, srs, .. } = fixture(&pool, 1 << 12, WitnessMix::Bits, 21);
    let expected = prove_bytes(&CpuBackend::new(Arc::clone(&pool)), &pool, &srs, &c).unwrap();
    let gpu = NativeBackend::new(Arc::clone(&pool)).unwrap();
    // Prepared with the bases not yet resident, proved with them resident:
    // scalars are split the same way for both, so the preparation serves.
    let prepared_then_start = |urgent: bool, before_start: &dyn Fn()| {
        let mut asg = synthesized(&gpu, &pool, &c).unwrap();
        gpu.prepare(&srs, &mut asg, urgent).unwrap();
        before_start();
        let proof = start_synthesized(&gpu, &srs, asg, urgent)
            .and_then(|p| p.finish())
            .unwrap();
        (proof[0].to_bytes().to_vec(), gpu.last_phases().unwrap())
    };
    let make_resident = || {
        gpu.prepare_srs(&srs).unwrap();
    };
    let (bytes, phases) = prepared_then_start(true, &make_resident);
    assert_eq!(
        bytes, expected,
        "prepared for streamed bases, proved over resident ones"
    );
    assert!(
        phases.prepared_ahead > Duration::ZERO,
        "not prepared again in start: {phases:?}"
    );
    let (bytes, phases) = prepared_then_start(true, &|| ());
    assert_eq!(bytes, expected, "prepared ahead");
    assert!(phases.prepared_ahead > Duration::ZERO, "{phases:?}");
    // Background proofs prepare in `start` (see `Backend::prepare`).
    let (bytes, phases) = prepared_then_start(false, &|| ());
    assert_eq!(bytes, expected, "a background proof");
    assert_eq!(phases.prepared_ahead, Duration::ZERO, "{phases:?}");
}
