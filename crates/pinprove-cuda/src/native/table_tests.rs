//! pinprove's MSM kernel (`cuda/msm_tables.cu`) on a GPU against the value
//! scalar arithmetic gives (they skip without a GPU).
//!
//! The bases are multiples kᵢ·G of the generator with known kᵢ, so every
//! MSM's value is (Σ sᵢ·kᵢ)·G whatever the kernel does; among them a
//! repeated base, the identity and a base's negation, so that buckets meet
//! the equal-point and opposite-point cases of the additions.

use std::sync::Arc;

use blst::{blst_p1_affine, blst_p2_affine};
use blstrs::{G1Projective, G2Projective, Scalar};
use ff::Field;
use group::{Curve, Group};
use pinprove_groth16::synthetic::{g1_multiples, g2_multiples};
use pinprove_mem::PinnedPool;

use super::msm_lab::{HostBases, LabBases, LabKernel, LabScalars, MsmValue, ResidentBases, run_msm};
use super::tests::have_gpu;

/// Bases kᵢ·G and their kᵢ: (i+1)·G, but base 3 repeated at 5, the
/// identity at 7 and base 8 negated at 9.
struct Bases {
    g1: Vec<blst_p1_affine>,
    g2: Vec<blst_p2_affine>,
    k: Vec<Scalar>,
}

fn bases(n: usize, g2: bool) -> Bases {
    let mut k: Vec<Scalar> = (0..n as u64).map(|i| Scalar::from(i + 1)).collect();
    k[5] = k[3];
    k[7] = Scalar::ZERO;
    k[9] = -k[8];
    let (mut b1, mut b2) = (Vec::new(), Vec::new());
    if g2 {
        b2 = vec![blst_p2_affine::default(); n];
        g2_multiples(0, &mut b2);
        for i in [5, 7, 9] {
            b2[i] = *(G2Projective::generator() * k[i]).to_affine().as_ref();
        }
    } else {
        b1 = vec![blst_p1_affine::default(); n];
        g1_multiples(0, &mut b1);
        for i in [5, 7, 9] {
            b1[i] = *(G1Projective::generator() * k[i]).to_affine().as_ref();
        }
    }
    if !g2 {
        assert!(b1[7] == blst_p1_affine::default(), "the identity is (0, 0)");
    }
    Bases { g1: b1, g2: b2, k }
}

/// Random scalars with the edge cases at the front: 0, 1, r − 1, 2^254 − 1
/// (every window's bits all ones), 2^64 − 1, digits of exactly 2^(c−1)
/// for c = 5 and 12, the repeated base's and the negated base's scalars
/// equal to their partners', and one value repeated over a run of 3000
/// scalars (buckets spanning many workers' runs).
fn scalars(n: usize, seed: u64) -> Vec<Scalar> {
    use rand::SeedableRng;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut s: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut rng)).collect();
    let two = Scalar::from(2u64);
    let halves = |c: u64| {
        // Σ_j 2^(c−1)·2^(c·j) over the windows below bit 250.
        (0..250 / c).fold(Scalar::ZERO, |acc, j| acc + two.pow_vartime([c - 1 + c * j]))
    };
    let edges = [
        Scalar::ZERO,
        Scalar::ONE,
        -Scalar::ONE,
        two.pow_vartime([254]) - Scalar::ONE,
        Scalar::from(u64::MAX),
        halves(5),
        halves(12),
    ];
    s[..edges.len()].copy_from_slice(&edges);
    s[5] = s[3];
    s[9] = s[8];
    if n > 4000 {
        let v = s[100];
        s[1000..4000].fill(v);
    }
    s
}

fn expected(b: &Bases, s: &[Scalar], g2: bool) -> MsmValue {
    let m = b.k.iter().zip(s).fold(Scalar::ZERO, |acc, (k, s)| acc + *k * s);
    if g2 {
        MsmValue::G2(G2Projective::generator() * m)
    } else {
        MsmValue::G1(G1Projective::generator() * m)
    }
}

#[test]
fn the_tables_kernel_equals_the_known_msm_in_both_groups() {
    if !have_gpu("the_tables_kernel_equals_the_known_msm_in_both_groups") {
        return;
    }
    let pool = PinnedPool::new(
        Arc::new(pinprove_mem::HeapAllocator::default()),
        pinprove_mem::MemoryBudget::new(1 << 30),
        pinprove_mem::PoolConfig::default(),
    );
    let threads = rayon::ThreadPoolBuilder::new().num_threads(4).build().unwrap();
    // (bases, G2, window bits of the tables).
    let sizes = [
        (1 << 10, false, 6),
        (3001, false, 9),
        (1 << 13, false, 10),
        (1 << 16, false, 12),
        (1 << 10, true, 6),
        (1 << 12, true, 8),
    ];
    for (n, g2, c) in sizes {
        let b = bases(n, g2);
        let host = if g2 { HostBases::G2(&b.g2) } else { HostBases::G1(&b.g1) };
        let mut resident = ResidentBases::upload(0, host).unwrap();
        let s = scalars(n, n as u64);
        let want = expected(&b, &s, g2);
        let on_device = LabScalars::on_device(0, &s, n.div_ceil(3)).unwrap();
        let split = LabScalars::split(&s, &pool).unwrap();
        let what = |how: &str| format!("{} 2^{:.1} {how}", if g2 { "G2" } else { "G1" }, (n as f64).log2());
        let check = |r: &ResidentBases, kernel: LabKernel, how: &str| {
            for (sc, kind) in [(&on_device, "device scalars in 3 parts"), (&split, "split scalars")] {
                let got = run_msm(0, LabBases::Resident(r), sc, kernel, &threads).unwrap();
                assert_eq!(got.value, want, "{}, {kind}", what(how));
            }
        };
        // No table: windows by size, and narrow ones.
        check(
            &resident,
            LabKernel::Tables {
                window_bits: 0,
                batch_entries: 0,
            },
            "no table",
        );
        check(
            &resident,
            LabKernel::Tables {
                window_bits: 4,
                batch_entries: 0,
            },
            "no table, 4-bit windows",
        );
        // Tables of one copy (the bases alone), two, and one per window.
        let windows = crate::base_tables::windows(c);
        for copies in [1, 2, windows] {
            let info = resident.build_table(c, copies).unwrap();
            assert_eq!(info.window_bits, c);
            assert!(info.copies >= 1 && info.copies <= copies, "{info:?}");
            check(
                &resident,
                LabKernel::Tables {
                    window_bits: 0,
                    batch_entries: 0,
                },
                &format!("{info:?}"),
            );
        }
        // Several batches per call: one window of n/3 + 7 scalars (the
        // last of each window short), or two windows of every scalar (the
        // last range one window where there is an odd number).
        for (entries, how) in [
            (n / 3 + 7, "batches of one window of n/3 + 7 scalars, every copy"),
            (2 * n + 5, "batches of two windows, every copy"),
        ] {
            check(
                &resident,
                LabKernel::Tables {
                    window_bits: 0,
                    batch_entries: entries,
                },
                how,
            );
        }
        // Streamed through windows of 1024 bases: no table.
        for (sc, kind) in [(&on_device, "device scalars"), (&split, "split scalars")] {
            let got = run_msm(
                0,
                LabBases::Streamed { host, window: 1024 },
                sc,
                LabKernel::Tables {
                    window_bits: 0,
                    batch_entries: 0,
                },
                &threads,
            )
            .unwrap();
            assert_eq!(got.value, want, "{}, {kind}", what("streamed"));
        }
        // Today's kernel agrees on the same inputs.
        let got = run_msm(
            0,
            LabBases::Resident(&resident),
            &on_device,
            LabKernel::Sppark,
            &threads,
        )
        .unwrap();
        assert_eq!(got.value, want, "{}", what("sppark"));
    }
}

#[test]
fn wide_windows_equal_the_known_msm() {
    if !have_gpu("wide_windows_equal_the_known_msm") {
        return;
    }
    let threads = rayon::ThreadPoolBuilder::new().num_threads(4).build().unwrap();
    let n = 1 << 14;
    let b = bases(n, false);
    let s = scalars(n, 5);
    let want = expected(&b, &s, false);
    let mut resident = ResidentBases::upload(0, HostBases::G1(&b.g1)).unwrap();
    let sc = LabScalars::on_device(0, &s, n).unwrap();
    // Wide windows without a table: sets cut into 4096 segments of 128
    // buckets (c = 20), or of 512 (c = 22: the most segments a set has);
    // every window in one batch with all sets' buckets, or a window a
    // batch with one set's buckets at a time.
    for c in [20, 22] {
        for (batch_entries, how) in [(0, "one batch"), (n / 2, "set by set")] {
            let got = run_msm(
                0,
                LabBases::Resident(&resident),
                &sc,
                LabKernel::Tables {
                    window_bits: c,
                    batch_entries,
                },
                &threads,
            )
            .unwrap();
            assert_eq!(got.value, want, "{c}-bit windows, no table, {how}");
        }
    }
    // 18-bit windows, a copy per window: one set of 2^17 buckets.
    let info = resident.build_table(18, crate::base_tables::windows(18)).unwrap();
    assert_eq!(info.copies, crate::base_tables::windows(18));
    let got = run_msm(
        0,
        LabBases::Resident(&resident),
        &sc,
        LabKernel::Tables {
            window_bits: 0,
            batch_entries: 0,
        },
        &threads,
    )
    .unwrap();
    assert_eq!(got.value, want);
}

/// With pinprove's kernel on, the backend builds tables of the resident
/// bases at upload, and its proofs are byte for byte the CPU backend's,
/// bases resident (with tables) or streamed (without), witnesses of both
/// mixes.
#[test]
fn proofs_through_the_tables_kernel_are_the_cpu_backends() {
    use super::tests::{Fixture, fixture, prove_bytes, registered_pool};
    use super::{NativeBackend, NativeConfig, SrsPlacement};
    use crate::config::MsmKernelKind;
    use pinprove_groth16::circuits::WitnessMix;
    use pinprove_groth16::{Backend, CpuBackend};

    if !have_gpu("proofs_through_the_tables_kernel_are_the_cpu_backends") {
        return;
    }
    let pool = registered_pool();
    for mix in [WitnessMix::Random, WitnessMix::Bits] {
        let Fixture { c, srs, .. } = fixture(&pool, 1 << 12, mix, 21);
        let expected = prove_bytes(&CpuBackend::new(Arc::clone(&pool)), &pool, &srs, &c).unwrap();
        let p = srs.points().unwrap();
        let bases_bytes = (std::mem::size_of_val(p.h())
            + std::mem::size_of_val(p.l())
            + std::mem::size_of_val(p.a())
            + std::mem::size_of_val(p.b_g1())
            + std::mem::size_of_val(p.b_g2())) as u64;
        for placement in [SrsPlacement::Device, SrsPlacement::Host] {
            let gpu = NativeBackend::with_config(
                Arc::clone(&pool),
                NativeConfig {
                    msm_kernel: MsmKernelKind::Tables,
                    srs_placement: placement,
                    ..NativeConfig::default()
                },
            )
            .unwrap();
            gpu.prepare_srs(&srs).unwrap();
            if placement == SrsPlacement::Device {
                let held: u64 = gpu.resident().iter().map(|r| r.device_bytes).sum();
                assert!(held > bases_bytes, "tables beside the bases: {held} bytes held");
            }
            for _ in 0..2 {
                assert_eq!(
                    prove_bytes(&gpu, &pool, &srs, &c).unwrap(),
                    expected,
                    "{mix:?}, {placement:?}"
                );
            }
        }
    }
}
