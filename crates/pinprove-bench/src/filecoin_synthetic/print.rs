//! The human-readable report of a `--synthetic-inputs` run.

use super::SyntheticReport;
use super::device::shared_note;
use crate::report::{DeviceShare, bytes};

pub fn print(r: &SyntheticReport) {
    println!(
        "pinprove-bench filecoin (synthetic inputs and parameters: the proofs do not verify) — {}",
        r.host.summary()
    );
    println!(
        "{} on the {} backend: request made in {:.1} s, shape counted in {:.1} s, parameters ({}) made in {:.1} s; budget {}",
        r.circuit,
        r.backend,
        r.request_s,
        r.register_s,
        bytes(r.params_bytes),
        r.params_s,
        bytes(r.budget_bytes)
    );
    if let Some(p) = &r.partition {
        println!(
            "  one partition: {} constraints, {} inputs, {} aux; densities A aux {}, B inputs {}, B aux {}; \
         aux values 0 {:.1}%, 1 {:.1}%, small {:.1}%, other {:.1}%; a/b/c {}, aux {}; synthesized alone in {:.1} s \
         (heap beyond its buffers {})",
            p.constraints,
            p.inputs,
            p.aux,
            p.a_aux_density,
            p.b_input_density,
            p.b_aux_density,
            100.0 * p.aux_zero,
            100.0 * p.aux_one,
            100.0 * p.aux_small,
            100.0 * p.aux_large,
            bytes(p.abc_bytes),
            bytes(p.aux_bytes),
            p.synthesis_alone_s,
            p.synthesis_heap_bytes.map_or("?".into(), bytes)
        );
        if let Some(pc) = &p.precompiled {
            println!(
                "  pre-compiled: recorded in {:.1} s ({} non-zero entries, {} coefficients, {}); witness only ({}, heap beyond \
                 them {}) in {:.1} s ({:.2}x the classic synthesis); a/b/c from the recording on the host: {}",
                pc.record_s,
                pc.nonzero_entries,
                pc.coefficients,
                bytes(pc.recording_bytes),
                bytes(pc.witness_bytes),
                pc.witness_heap_bytes.map_or("?".into(), bytes),
                pc.witness_s,
                p.synthesis_alone_s / pc.witness_s.max(1e-9),
                pc.host_evaluation_s
                    .map_or("not run (no room)".into(), |t| format!("{t:.1} s"))
            );
        }
    }
    let Some(r) = &r.proving else { return };
    println!(
        "  first proof: {} partitions in {:.1} s (synthesis median {:.1} s per partition), peak RSS {}",
        r.partitions,
        r.first_proof_s,
        r.first_proof_synthesis_median_s,
        r.first_proof_peak_rss_bytes.map_or("?".into(), bytes)
    );
    if r.first_proof_device.as_ref().is_some_and(|d| !d.device_timed) {
        println!("  GPU, last partition: its GPU times could not be read (unknown)");
    }
    if let Some(d) = r.first_proof_device.as_ref().filter(|d| d.device_timed) {
        println!(
            "  GPU, last partition: upload {:.3} s ({:.1} GB/s), h {:.3} s, device {:.3} s, preparation {:.3} s{}",
            d.upload_s,
            d.upload_gbps,
            d.h_s,
            d.device_s,
            d.preparation_s,
            shared_note(d.bases_shared_by)
        );
        for (name, t, n, rate, pip) in &d.msm {
            println!(
                "    MSM {name}: {t:.3} s, {n} bases ({:.0} M/s), {pip} through Pippenger",
                rate / 1e6
            );
        }
    }
    if r.stream > 0 {
        println!(
            "  stream of {}: {:.1} s, {:.1} s per proof, {:.1} proofs per hour; synthesis median {:.1} s, max {:.1} s; \
             admission wait median {:.1} s, wait for the device median {:.1} s",
            r.stream,
            r.stream_wall_s,
            r.seconds_per_proof,
            r.proofs_per_hour,
            r.stream_synthesis_median_s,
            r.stream_synthesis_max_s,
            r.stream_admission_median_s,
            r.stream_handoff_median_s
        );
        println!(
            "  device busy {:.1}%, GPU utilization {}; partitions waited for the device {:.1} s, GPU utilization then {}",
            100.0 * r.device_busy_fraction,
            r.gpu_utilization_percent.map_or("n/a".into(), |g| format!("{g:.1}%")),
            r.backlog_s,
            r.gpu_utilization_backlog_percent
                .map_or("n/a".into(), |g| format!("{g:.1}%"))
        );
        DeviceShare::print(&r.per_device);
    }
    if let Some(d) = r.stream_device.as_ref().filter(|d| d.device_timed) {
        println!(
            "  GPU, the stream's last partition: upload {} in {:.3} s ({:.1} GB/s), a/b/c computed on the GPU in {:.3} s, h {:.3} s, device {:.3} s",
            bytes(d.upload_bytes),
            d.upload_s,
            d.upload_gbps,
            d.evaluation_s,
            d.h_s,
            d.device_s
        );
    }
    println!(
        "  synthesis: {} partitions pre-compiled ({} witnesses computed directly), {} classic (mode now {}); waited {:.1} s for the recording",
        r.precompiled_partitions, r.direct_witnesses, r.classic_partitions, r.synthesis_mode, r.recording_wait_s
    );
    if let Some(w) = r.winning_alone_s {
        println!("  the first WinningPoSt of the process, proved alone before: {w:.2} s");
    }
    if let Some(w) = r.winning_during_s {
        println!(
            "  WinningPoSts submitted while other partitions were proved: {} of them, the slowest {w:.2} s ({})",
            r.winning_during_all_s.len(),
            r.winning_during_all_s
                .iter()
                .map(|s| format!("{s:.2}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if r.stream > 0 {
        println!(
            "  in the stream: {}; at most {} partitions at the device at once",
            r.stream_budget.describe(),
            r.stream_most_at_device
        );
    }
    println!(
        "  memory: peak RSS {}, pool grew by {} in {:.1} s of pinning",
        r.peak_rss_bytes.map_or("?".into(), bytes),
        bytes(r.pool_fresh_bytes),
        r.pool_alloc_s
    );
}
