//! What the simulated day's kinds cost: the 32 GiB figures measured on the
//! H100 host (docs/benchmarks.md, ../shared figures in day-memory.md as the
//! issue quotes them), each with where it comes from. Nothing here is
//! guessed: a figure not measured is not simulated (the command says so).

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Result, bail};
use pinprove_engine::Priority;
use pinprove_engine::planner::KindCosts;
use pinprove_filecoin::ProofKind;

const GIB: f64 = (1u64 << 30) as f64;

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

fn gib(g: f64) -> u64 {
    (g * GIB) as u64
}

/// The budget's bytes the planner does not place: the backends' own
/// buffers (preparation sets kept for the device lanes, the device queue's
/// pinned staging), measured as "other" in the capped PoRep stream alone
/// (15.32 GiB, a4647c5; 15.52 GiB in the day at bcf8eca).
pub const UNPLANNED_BYTES: u64 = (15.32 * GIB) as u64;

/// The PoRep stream alone, capped at 15 GiB free: seconds per proof
/// (a4647c5, `--stream 2`, partitions paired, device busy 100%).
pub const POREP_ALONE_S_PER_PROOF: f64 = 25.9;

/// Reading and checking parameters from a cold page cache: the 44.12 GiB
/// PoRep file in 31.4 s (the measurement at bcf8eca), in GiB of
/// the pool's bytes (45.00 GiB for that file) per second.
pub const LOAD_POOL_GIB_PER_S: f64 = 45.0 / 31.4;

/// Sections (h, l, a, b_g1, b_g2) in GiB as their points count them,
/// scaled to the pool's bytes for the whole set the registry reported.
fn sections(points_gib: [f64; 5], pool_gib: f64) -> Vec<u64> {
    let sum: f64 = points_gib.iter().sum();
    points_gib.iter().map(|g| gib(g * pool_gib / sum)).collect()
}

fn loads(sections: &[u64], gib_per_s: f64) -> Vec<Duration> {
    sections.iter().map(|b| secs(*b as f64 / GIB / gib_per_s)).collect()
}

/// When a partition reads each section for the last time, as shares of
/// its device time: the MSMs run in the sections' order (h, l, a, b_g1,
/// b_g2) after `before` seconds of a/b/c and h; measured MSM seconds
/// (15 GiB free: PoRep cae4545, WindowPoSt a4647c5).
fn release(before: f64, msms: [f64; 5]) -> Vec<f64> {
    let total = before + msms.iter().sum::<f64>();
    let mut at = before;
    msms.iter()
        .map(|m| {
            at += m;
            at / total
        })
        .collect()
}

/// PoRep's device time per partition by the card's free memory (GiB):
/// the stream's seconds per proof over its 10 partitions where the device
/// was busy 100% (15 GiB: a4647c5, paired; 22 and 29 GiB: 8d70b20; the
/// whole card, 79 GiB: 8d70b20, 19.3 s per proof).
fn porep_device(card_free_gib: f64) -> Duration {
    let rows = [(15.0, 25.9), (22.0, 26.4), (29.0, 27.6), (79.0, 19.3)];
    let per_proof = rows
        .iter()
        .rev()
        .find(|(free, _)| card_free_gib >= *free)
        .map_or(rows[0].1, |r| r.1);
    secs(per_proof / 10.0)
}

/// The costs of `kind` at 32 GiB sectors on a card with `card_free_gib`
/// GiB free to pinprove, parameters loading at `load_gib_per_s` (of the
/// pool's bytes).
pub fn of(kind: ProofKind, card_free_gib: f64, load_gib_per_s: f64) -> Result<KindCosts> {
    Ok(match kind {
        // day-memory.md: parameters 45.00 GiB (h 12.0, l 11.6, a 11.6,
        // b_g1 3.0, b_g2 5.9 GiB of points), recording 6.98 GiB loaded from
        // the hints directory in 12.7 s (the day at bcf8eca), ~4 GiB per
        // partition in flight; synthesis from the recording 2.1 s median
        // (a4647c5), classic 101.5 s (e9dc235, four at once).
        ProofKind::PoRep => {
            let sections = sections([12.0, 11.6, 11.6, 3.0, 5.9], 45.0);
            KindCosts {
                priority: Priority::Normal,
                section_load: loads(&sections, load_gib_per_s),
                sections,
                recording_bytes: gib(6.98),
                recording_load: secs(12.7),
                partition_bytes: gib(4.0),
                synthesis: secs(2.1),
                classic_synthesis: secs(101.5),
                device: porep_device(card_free_gib),
                section_release: release(0.539 + 0.685, [1.263, 0.245, 0.239, 0.081, 0.150]),
            }
        }
        // Parameters 60.00 GiB (points of the shape: h 2^27, l 126.9 M,
        // a 96.2 M, b_g1 91.9 M in G1, b_g2 91.9 M in G2), recording
        // 9.24 GiB loaded in 16.8 s and device 6.950 s per partition
        // (a4647c5, 15 GiB free: the only card measured), synthesis from
        // the recording 4.0 s (cae4545), classic 50.9 s (16d15d8), 12.0 GiB
        // for three partitions in flight.
        ProofKind::WindowPoSt => {
            let points = |n: f64, bytes: f64| n * bytes / GIB;
            let sections = sections(
                [
                    points(134_217_728.0, 96.0),
                    points(126_902_376.0, 96.0),
                    points(96_179_805.0, 96.0),
                    points(91_925_766.0, 96.0),
                    points(91_925_766.0, 192.0),
                ],
                60.0,
            );
            KindCosts {
                priority: Priority::High,
                section_load: loads(&sections, load_gib_per_s),
                sections,
                recording_bytes: gib(9.24),
                recording_load: secs(16.8),
                partition_bytes: gib(4.0),
                synthesis: secs(4.0),
                classic_synthesis: secs(50.9),
                device: secs(6.95),
                section_release: release(0.437 + 0.582, [1.229, 1.169, 0.904, 0.865, 2.184]),
            }
        }
        // Held on the device once loaded (its host points freed), a 28 MiB
        // recording, 0.1 s per proof on the device (7749941), 0.015 s of
        // synthesis from the recording (17320a5), 0.8 s classic (one
        // thread, 2-core machine), 202 MB for 16 partitions' buffers.
        ProofKind::WinningPoSt => KindCosts {
            priority: Priority::Critical,
            sections: Vec::new(),
            section_load: Vec::new(),
            recording_bytes: 28 << 20,
            recording_load: secs(0.1),
            partition_bytes: 202_375_168 / 16,
            synthesis: secs(0.015),
            classic_synthesis: secs(0.8),
            device: secs(0.1),
            section_release: Vec::new(),
        },
        other => bail!("{other}: no measured day costs to simulate it with"),
    })
}

/// The costs of the day's three kinds, keyed by their circuit ids.
pub fn day(card_free_gib: f64, load_gib_per_s: f64, sector_size: u64) -> Result<BTreeMap<String, KindCosts>> {
    if sector_size != 32 << 30 {
        bail!("the simulated day has measured costs at 32 GiB sectors only");
    }
    let mut costs = BTreeMap::new();
    for kind in [ProofKind::PoRep, ProofKind::WindowPoSt, ProofKind::WinningPoSt] {
        costs.insert(
            pinprove_filecoin::kind::circuit_id(kind, sector_size)?,
            of(kind, card_free_gib, load_gib_per_s)?,
        );
    }
    Ok(costs)
}
