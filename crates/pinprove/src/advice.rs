//! What a host can prove, told before Curio sends anything: for each GPU
//! (or none) and the host's memory budget, each 32 GiB kind's device plan
//! (the one the native backend makes, from the measured shapes of
//! `pinprove_filecoin::production`), whether its parameters and a
//! partition fit the budget, the settings to use, and the rate measured
//! on the nearest class of card, with its date. `pinprove selftest` prints
//! it; `--json` gives the same.

use pinprove_cuda::plan::{CircuitSizes, MatrixPlacement, Plan};
use pinprove_filecoin::PerKind;
use pinprove_filecoin::ProofKind;
use pinprove_filecoin::production::{ProductionCircuit, circuits_32g};
use serde::Serialize;

/// A figure measured for a class of card (docs/benchmarks.md).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Measured {
    /// The class: the card's memory in GB (16, 24, 32, 80, 141).
    pub class_gb: u32,
    /// What was measured, in words ("28.3 s per proof").
    pub figure: &'static str,
    /// How: the card and what it had free.
    pub on: &'static str,
    /// When (YYYY-MM-DD).
    pub date: &'static str,
}

/// The figures measured at 32 GiB, by kind and class of card.
const MEASURED: [(ProofKind, Measured); 12] = {
    const H100_15: &str = "H100 80GB with 15 GiB free (another process held the rest)";
    const H100: &str = "H100 80GB, the whole card";
    const H200: &str = "H200 141GB, the whole card";
    const fn m(class_gb: u32, figure: &'static str, on: &'static str, date: &'static str) -> Measured {
        Measured {
            class_gb,
            figure,
            on,
            date,
        }
    }
    [
        (
            ProofKind::PoRep,
            m(16, "28.5 s per proof (a stream)", H100_15, "2026-12-06"),
        ),
        (
            ProofKind::PoRep,
            m(
                24,
                "26.4 s per proof (a stream)",
                "H100 80GB with 22 GiB free",
                "2026-12-06",
            ),
        ),
        (
            ProofKind::PoRep,
            m(
                32,
                "27.6 s per proof (a stream)",
                "H100 80GB with 29 GiB free",
                "2026-12-06",
            ),
        ),
        (
            ProofKind::PoRep,
            m(80, "19.3 s per proof (a stream)", H100, "2026-12-06"),
        ),
        (
            ProofKind::PoRep,
            m(141, "21.1 s per proof (a stream)", H200, "2026-12-04"),
        ),
        (
            ProofKind::WindowPoSt,
            m(
                16,
                "11.3 s per partition (after a 31 s recording)",
                H100_15,
                "2026-12-06",
            ),
        ),
        (
            ProofKind::WindowPoSt,
            m(141, "70.0 s per partition (classic synthesis)", H200, "2026-12-02"),
        ),
        (ProofKind::SnapDeals, m(16, "37.7 s per update", H100_15, "2026-12-06")),
        (ProofKind::SnapDeals, m(141, "73.0 s per update", H200, "2026-12-02")),
        (ProofKind::WinningPoSt, m(16, "0.1 s (alone)", H100_15, "2026-12-06")),
        (
            ProofKind::WinningPoSt,
            m(16, "0.47-2.59 s beside a PoRep stream", H100_15, "2026-12-06"),
        ),
        (
            ProofKind::WinningPoSt,
            m(141, "0.33-1.92 s beside a PoRep stream", H200, "2026-12-04"),
        ),
    ]
};

/// The measured figures of `kind` on the class of card nearest to a GPU
/// of `total` bytes (by ratio of memory).
pub fn nearest_measured(kind: ProofKind, total: u64) -> Vec<Measured> {
    let gb = total as f64 / 1e9;
    let distance = |m: &Measured| (gb / f64::from(m.class_gb)).ln().abs();
    let of_kind: Vec<Measured> = MEASURED.iter().filter(|(k, _)| *k == kind).map(|(_, m)| *m).collect();
    let Some(best) = of_kind.iter().map(distance).min_by(f64::total_cmp) else {
        return Vec::new();
    };
    of_kind.into_iter().filter(|m| distance(m) == best).collect()
}

/// One kind's advice for one GPU and the host.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KindAdvice {
    /// The kind.
    pub kind: &'static str,
    /// Its sector size.
    pub sector_size: &'static str,
    /// Where its SRS bases live on this GPU ("device", "streamed"), or
    /// why no plan fits; "cpu" without a GPU.
    pub bases: String,
    /// Where its matrices are read from ("device", "streamed", "host").
    pub matrices: Option<MatrixPlacement>,
    /// Proofs the GPU holds at once.
    pub proofs_at_once: u64,
    /// Host bytes its parameters take, and a partition beside them (its
    /// witness and prepared scalars: an estimate from its shape).
    pub srs_bytes: u64,
    /// An estimate: the partition's witness and its prepared scalars.
    pub partition_bytes: u64,
    /// Whether both fit the memory budget.
    pub fits_host: bool,
    /// The rate measured on the nearest class of card.
    pub measured: Vec<Measured>,
}

/// Advice for one GPU (or for the host alone).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GpuAdvice {
    /// The GPU's ordinal, or `None` for the CPU backend.
    pub gpu: Option<usize>,
    /// The memory pinprove would plan with (what is free now).
    pub usable_bytes: u64,
    /// Per kind.
    pub kinds: Vec<KindAdvice>,
    /// Parameters to preload so that they fit the budget together with a
    /// partition of each (most urgent first).
    pub preload: Vec<String>,
    /// What to set, in words.
    pub settings: Vec<String>,
    /// What this host cannot do, in words.
    pub warnings: Vec<String>,
}

/// The advice for a GPU with `usable` bytes free (`None`: no GPU) on a host
/// whose memory budget is `budget` bytes.
pub fn advise(gpu: Option<(usize, u64)>, budget: u64) -> GpuAdvice {
    let kinds: PerKind<KindAdvice> = circuits_32g().map(|_, c| kind_advice(c, gpu, budget));
    // Preload what fits together beside a stream's partitions (three of
    // the largest): WinningPoSt's few hundred MB, then the sealing stream's,
    // then the rest, stopping at the first that does not fit (a kind left
    // out loads when its first request comes, taking memory from work of
    // lower priority).
    let mut preload = Vec::new();
    let mut held = 0u64;
    let largest = kinds
        .iter()
        .filter(|(_, k)| k.fits_host)
        .map(|(_, k)| k.partition_bytes)
        .max();
    let room = budget.saturating_sub(3 * largest.unwrap_or(0));
    let mut order = ProofKind::ALL;
    order.sort_by_key(|&kind| preload_order(kind));
    for kind in order {
        let k = &kinds[kind];
        if !k.fits_host || held + k.srs_bytes > room {
            break;
        }
        held += k.srs_bytes;
        preload.push(format!("{}-32g", kind.name()));
    }
    let mut settings = vec![format!(
        "[memory] budget = \"auto\" ({} here)",
        crate::units::bytes(budget)
    )];
    match gpu {
        Some((_, usable)) => settings.push(format!(
            "[gpu] backend = \"native\"; leave memory_limit unset to plan from what is free at start ({}), \
             or set it lower if something else will take card memory later",
            crate::units::bytes(usable)
        )),
        None => settings.push("[gpu] backend = \"cpu\": no GPU (32 GiB proofs are not measured on the CPU)".into()),
    }
    settings.push(format!("[filecoin] preload = {preload:?}"));
    let mut warnings = Vec::new();
    for (_, k) in kinds.iter().filter(|(_, k)| !k.fits_host) {
        warnings.push(format!(
            "this host cannot prove {} at 32 GiB: its parameters ({}) and a partition (about {}) exceed the budget",
            k.kind,
            crate::units::bytes(k.srs_bytes),
            crate::units::bytes(k.partition_bytes)
        ));
    }
    GpuAdvice {
        gpu: gpu.map(|(g, _)| g),
        usable_bytes: gpu.map_or(0, |(_, u)| u),
        kinds: kinds.into_values().collect(),
        preload,
        settings,
        warnings,
    }
}

/// Where a kind comes in the preload list: the most urgent first, then
/// the sealing stream's, then the rest.
fn preload_order(kind: ProofKind) -> usize {
    match kind {
        ProofKind::WinningPoSt => 0,
        ProofKind::PoRep => 1,
        ProofKind::WindowPoSt => 2,
        ProofKind::SnapDeals => 3,
    }
}

fn kind_advice(c: &ProductionCircuit, gpu: Option<(usize, u64)>, budget: u64) -> KindAdvice {
    let sizes = CircuitSizes::of_shape(&c.shape, Some(c.matrix_bytes));
    // The witness and the prepared L, A and B scalars, at most a scalar
    // each per variable.
    let partition_bytes = 2 * sizes.vars as u64 * 32;
    let (bases, matrices, proofs_at_once) = match gpu {
        None => ("none: the CPU backend".to_string(), None, 0),
        Some((_, usable)) => {
            let plain = CircuitSizes {
                matrices: None,
                ..sizes
            };
            match Plan::new(&plain, usable) {
                Ok(p) => (
                    if p.bases_resident { "device" } else { "streamed" }.to_string(),
                    Some(p.matrix_placement(&sizes, usable)),
                    p.proofs_at_once,
                ),
                Err(e) => (format!("does not fit: {e}"), None, 0),
            }
        }
    };
    KindAdvice {
        kind: c.kind.name(),
        sector_size: "32GiB",
        bases,
        matrices,
        proofs_at_once,
        srs_bytes: c.srs_bytes,
        partition_bytes,
        fits_host: c.srs_bytes + partition_bytes <= budget,
        measured: gpu.map_or_else(Vec::new, |(_, usable)| nearest_measured(c.kind, usable)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    #[test]
    fn a_16_gb_card_in_a_128_gib_host_streams_and_preloads_what_fits() {
        // The H100 with 15 GiB free, and its host's auto budget.
        let a = advise(Some((0, 15_555_231_744)), 121_616_153_396);
        let porep = a.kinds.iter().find(|k| k.kind == "porep").unwrap();
        assert_eq!(porep.bases, "streamed");
        assert_eq!(porep.matrices, Some(MatrixPlacement::Streamed));
        assert!(porep.fits_host);
        assert_eq!(porep.measured[0].class_gb, 16);
        assert!(porep.measured[0].figure.starts_with("28.5 s"));
        // WinningPoSt's few hundred MB stay on the card.
        let winning = a.kinds.iter().find(|k| k.kind == "winning").unwrap();
        assert_eq!(
            (winning.bases.as_str(), winning.matrices),
            ("device", Some(MatrixPlacement::Device))
        );
        // The three large SRSs do not fit together: WinningPoSt's and the
        // sealing stream's.
        assert_eq!(a.preload, ["winning-32g", "porep-32g"]);
        assert!(a.warnings.is_empty(), "{:?}", a.warnings);
    }

    #[test]
    fn an_80_gb_card_keeps_everything_and_a_small_host_is_told_what_it_cannot_prove() {
        let a = advise(Some((0, 79 * GIB)), 500 * GIB);
        let porep = a.kinds.iter().find(|k| k.kind == "porep").unwrap();
        assert_eq!(
            (porep.bases.as_str(), porep.matrices),
            ("device", Some(MatrixPlacement::Device))
        );
        assert_eq!(porep.measured[0].class_gb, 80);
        assert_eq!(a.preload.len(), 4);
        // 48 GiB of host memory: no room for WindowPoSt's 57 GiB of parameters.
        let small = advise(Some((0, 79 * GIB)), 48 * GIB);
        let wpost = small.kinds.iter().find(|k| k.kind == "wpost").unwrap();
        assert!(!wpost.fits_host);
        assert!(
            small.warnings.iter().any(|s| s.contains("cannot prove wpost")),
            "{:?}",
            small.warnings
        );
        assert_eq!(small.preload, ["winning-32g"]);
    }

    #[test]
    fn the_nearest_class_is_by_ratio_of_memory_and_a_card_too_small_is_said_so() {
        assert_eq!(nearest_measured(ProofKind::PoRep, 24 * GIB)[0].class_gb, 24);
        assert_eq!(nearest_measured(ProofKind::PoRep, 40 * GIB)[0].class_gb, 32);
        assert_eq!(nearest_measured(ProofKind::PoRep, 56 * GIB)[0].class_gb, 80);
        assert_eq!(nearest_measured(ProofKind::PoRep, 140 * GIB)[0].class_gb, 141);
        // Two figures of the same class are both given.
        assert_eq!(nearest_measured(ProofKind::WinningPoSt, 16 * GIB).len(), 2);
        let a = advise(Some((0, 6 * GIB)), 500 * GIB);
        let porep = a.kinds.iter().find(|k| k.kind == "porep").unwrap();
        assert!(porep.bases.starts_with("does not fit"), "{}", porep.bases);
        let cpu = advise(None, 500 * GIB);
        assert!(
            cpu.kinds
                .iter()
                .all(|k| k.bases.contains("CPU") && k.measured.is_empty())
        );
        // A 2-core machine's budget: only WinningPoSt, and it is preloaded.
        let laptop = advise(None, 21 * GIB);
        assert_eq!(laptop.preload, ["winning-32g"]);
        assert_eq!(laptop.warnings.len(), 3, "{:?}", laptop.warnings);
    }
}
