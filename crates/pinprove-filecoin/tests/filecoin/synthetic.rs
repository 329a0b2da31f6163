//! Synthetic inputs and parameters: the shapes they give are the real
//! circuits' shapes, they prove through the engine, and at production size
//! every kind's circuits build from them.

use crate::common::*;
use pinprove_filecoin::ProofKind;
use pinprove_filecoin::kind::circuit_id;
use pinprove_filecoin::synthetic::{self, circuit_shape};
use pinprove_groth16::Srs;

#[test]
fn blank_shapes_are_the_shapes_of_the_generated_parameters() {
    // The real 2 KiB parameters (made by bellperson's generator from the
    // same blank circuits) have exactly the query lengths the blank shape
    // gives: synthetic parameters have the shape real ones would.
    let prover = prover(8 << 30);
    for kind in ProofKind::ALL {
        let id = circuit_id(kind, 2048).unwrap();
        let path = prover.register(&id).unwrap().expect("a parameter file");
        let real = Srs::read_file_header(&path).unwrap();
        let shape = circuit_shape(kind, 2048).unwrap();
        assert_eq!(&shape.lengths().unwrap(), real.lengths(), "{id}");
        assert_eq!(shape.inputs, real.vk().ic.len(), "{id}");
    }
}

#[test]
fn synthetic_requests_prove_through_the_engine_with_synthetic_parameters() {
    let prover = synthetic_prover(8 << 30);
    for (kind, seed) in [
        (ProofKind::WinningPoSt, 1),
        (ProofKind::WindowPoSt, 2),
        (ProofKind::SnapDeals, 3),
        (ProofKind::PoRep, 4),
    ] {
        let req = synthetic::request(kind, 2048, seed).unwrap();
        let proved = prover.prove(&req).unwrap();
        assert_eq!(proved.proof.len(), 192, "{kind}");
        assert!(
            proved.verification.is_none(),
            "{kind}: synthetic proofs are not verified"
        );
        // The real circuit ran: as many constraints as its parameters say.
        let id = circuit_id(kind, 2048).unwrap();
        let learned = prover.engine().hints().get(&id).unwrap();
        assert_eq!(
            learned.constraints,
            circuit_shape(kind, 2048).unwrap().constraints,
            "{id}"
        );
        // The same seed gives the same request.
        let again = synthetic::request(kind, 2048, seed).unwrap();
        assert_eq!(again.vanilla_proofs, req.vanilla_proofs);
        assert_eq!(again.vanilla_proof, req.vanilla_proof);
    }
    assert_idle(prover.engine(), "synthetic");
}

#[test]
fn production_size_synthetic_requests_build_every_partition() {
    let prover = synthetic_prover(8 << 30);
    for (kind, partitions) in [
        (ProofKind::WinningPoSt, 1),
        (ProofKind::WindowPoSt, 1),
        (ProofKind::SnapDeals, 16),
        (ProofKind::PoRep, 10),
    ] {
        let req = synthetic::request(kind, 32 << 30, 7).unwrap();
        let prepared = prover.prepare(&req).unwrap();
        assert_eq!(prepared.partitions(), partitions, "{kind}");
        assert_eq!(prepared.circuit_id(), circuit_id(kind, 32 << 30).unwrap());
    }
    // Without the synthetic flag, the vanilla checks refuse them.
    let checking = crate::common::prover(1 << 30);
    let req = synthetic::request(ProofKind::WinningPoSt, 32 << 30, 7).unwrap();
    let Err(err) = checking.prepare(&req) else {
        panic!("a synthetic request passed the vanilla checks");
    };
    assert!(err.is_bad_input(), "{err}");
}

/// Curio's wrapper around a C1 output, as Go's encoding/json writes it.
fn curio_wrapped(c1: &[u8], sector_size: u64) -> Vec<u8> {
    use base64::Engine as _;
    format!(
        "{{\"SectorNum\":1,\"Phase1Out\":\"{}\",\"SectorSize\":{sector_size}}}",
        base64::engine::general_purpose::STANDARD.encode(c1)
    )
    .into_bytes()
}

/// The length `json` would have if every number in it of fewer than three
/// digits had three.
fn widest_numbers(json: &[u8]) -> usize {
    let mut extra = 0;
    let mut run = 0;
    for &b in json.iter().chain(b" ") {
        if b.is_ascii_digit() {
            run += 1;
        } else {
            if run > 0 && run < 3 {
                extra += 3 - run;
            }
            run = 0;
        }
    }
    json.len() + extra
}

#[test]
fn vanilla_proofs_of_every_size_have_the_lengths_the_limits_compute() {
    use pinprove_filecoin::kind::{post_proof, update_proof};
    use pinprove_filecoin::limits::{porep_c1_bytes, post_sector_proof_bytes, snap_partition_proof_bytes};
    for (n, size) in pinprove_filecoin::kind::SECTOR_SIZES.into_iter().enumerate() {
        let n = n as u64;
        let winning = synthetic::request(ProofKind::WinningPoSt, size, 1).unwrap();
        let window = synthetic::request(ProofKind::WindowPoSt, size, 2).unwrap();
        let snap = synthetic::request(ProofKind::SnapDeals, size, 3).unwrap();
        let porep = synthetic::request(ProofKind::PoRep, size, 4).unwrap();
        for (what, req, exact) in [
            (
                "winning",
                &winning,
                post_sector_proof_bytes(post_proof(n).unwrap()).unwrap(),
            ),
            (
                "window",
                &window,
                post_sector_proof_bytes(post_proof(10 + n).unwrap()).unwrap(),
            ),
            (
                "snap",
                &snap,
                snap_partition_proof_bytes(update_proof(n).unwrap()).unwrap(),
            ),
        ] {
            for v in &req.vanilla_proofs {
                assert_eq!(v.len(), exact, "{what} at {size} bytes");
            }
        }
        // The C1 output, plain and wrapped, fits; and so would one whose
        // every number were three digits wide (a byte's widest: 255).
        let wrapped = curio_wrapped(&porep.vanilla_proof, size);
        let widest = widest_numbers(&porep.vanilla_proof);
        let limit = porep_c1_bytes(pinprove_filecoin::kind::seal_proof(5 + n).unwrap()).unwrap();
        assert!(widest.div_ceil(3) * 4 + 100 < limit, "{size}: widest {widest}");
        println!(
            "{size}: C1 {} bytes ({widest} at its widest), wrapped {} bytes, limit {limit}; \
             WindowPoSt partition {} bytes, SnapDeals {} bytes",
            porep.vanilla_proof.len(),
            wrapped.len(),
            window.vanilla_proofs.iter().map(Vec::len).sum::<usize>(),
            snap.vanilla_proofs.iter().map(Vec::len).sum::<usize>(),
        );
        assert!(wrapped.len() < limit, "{size}");
        assert_eq!(
            pinprove_filecoin::registered_proof_of(&wrapped).unwrap(),
            pinprove_filecoin::registered_proof_of(&porep.vanilla_proof).unwrap()
        );
    }
}

#[test]
fn whole_circuits_say_they_have_no_parts_and_post_circuits_one_per_sector() {
    // Admission counts a scratch a/b/c and aux per group of parts: a whole
    // circuit that said it had one part paid for a second set it never took
    // (16 GiB for a 32 GiB PoRep partition).
    let prover = synthetic_prover(8 << 30);
    for (kind, seed) in [
        (ProofKind::PoRep, 1),
        (ProofKind::SnapDeals, 2),
        (ProofKind::WindowPoSt, 3),
        (ProofKind::WinningPoSt, 4),
    ] {
        let req = synthetic::request(kind, 2048, seed).unwrap();
        let parts = prover.prepare(&req).unwrap().into_partitions();
        assert!(!parts.is_empty(), "{kind}");
        for p in &parts {
            match kind {
                ProofKind::PoRep | ProofKind::SnapDeals => assert_eq!(p.parts(), 0, "{kind}: whole"),
                ProofKind::WindowPoSt | ProofKind::WinningPoSt => assert!(p.parts() >= 1, "{kind}: one per sector"),
            }
        }
    }
}
