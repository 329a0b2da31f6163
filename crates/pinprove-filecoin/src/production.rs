//! What Filecoin's 32 GiB circuits take, as measured: their shapes
//! (counted from the blank circuits and logged by every synthetic run of
//! `pinprove-bench filecoin`), their parameters' host bytes and their
//! recordings' bytes (docs/benchmarks-journal.md, 2026-12-06). A host's
//! GPUs and memory are planned from them before any proof arrives
//! (`pinprove selftest`); proofs themselves read the parameter files,
//! which carry their own shape.

use pinprove_groth16::shape::CircuitShape;

use crate::kind::circuit_id;
use crate::{PerKind, ProofKind};

/// One production circuit (a partition of its kind).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProductionCircuit {
    /// The kind it proves.
    pub kind: ProofKind,
    /// Its sector size in bytes.
    pub sector_size: u64,
    /// Its shape.
    pub shape: CircuitShape,
    /// Partitions per proof (a WindowPoSt's are proved one by one, each a
    /// request of its own).
    pub partitions: usize,
    /// Host bytes its parameters take once loaded (their bases stay there
    /// where a GPU streams them).
    pub srs_bytes: u64,
    /// Bytes of its recording's matrices (on the GPU where they fit).
    pub matrix_bytes: u64,
}

const GIB32: u64 = 32 << 30;

/// Each kind at 32 GiB. Matrix bytes are the device copy's where one was
/// logged (PoRep, WinningPoSt) and the host recording's otherwise (a few
/// per cent more: it holds the query densities too).
pub const fn circuit_32g(kind: ProofKind) -> ProductionCircuit {
    match kind {
        ProofKind::PoRep => ProductionCircuit {
            kind: ProofKind::PoRep,
            sector_size: GIB32,
            shape: CircuitShape {
                inputs: 328,
                aux: 130_169_893,
                constraints: 130_278_869,
                a_aux: 129_753_292,
                b_inputs: 1,
                b_aux: 33_112_281,
            },
            partitions: 10,
            srs_bytes: 48_318_382_080,
            matrix_bytes: 7_461_105_138,
        },
        ProofKind::SnapDeals => ProductionCircuit {
            kind: ProofKind::SnapDeals,
            sector_size: GIB32,
            shape: CircuitShape {
                inputs: 5,
                aux: 80_978_488,
                constraints: 81_049_504,
                a_aux: 80_743_581,
                b_inputs: 1,
                b_aux: 20_983_607,
            },
            partitions: 16,
            srs_bytes: 35_433_480_192,
            matrix_bytes: 4_627_564_642,
        },
        ProofKind::WindowPoSt => ProductionCircuit {
            kind: ProofKind::WindowPoSt,
            sector_size: GIB32,
            shape: CircuitShape {
                inputs: 25_840,
                aux: 126_902_376,
                constraints: 125_305_057,
                a_aux: 96_179_805,
                b_inputs: 1,
                b_aux: 91_925_766,
            },
            partitions: 1,
            srs_bytes: 60_777_892_704,
            matrix_bytes: 9_922_379_940,
        },
        ProofKind::WinningPoSt => ProductionCircuit {
            kind: ProofKind::WinningPoSt,
            sector_size: GIB32,
            shape: CircuitShape {
                inputs: 133,
                aux: 375_210,
                constraints: 370_723,
                a_aux: 284_196,
                b_inputs: 1,
                b_aux: 272_184,
            },
            partitions: 1,
            srs_bytes: 192_036_576,
            matrix_bytes: 29_275_778,
        },
    }
}

/// Every kind at 32 GiB (see [`circuit_32g`]).
pub fn circuits_32g() -> PerKind<ProductionCircuit> {
    PerKind::from_fn(circuit_32g)
}

/// The measured shape of circuit `id` ("porep-32g"), if it is one of
/// [`circuit_32g`].
pub fn shape_of(id: &str) -> Option<CircuitShape> {
    ProofKind::ALL
        .into_iter()
        .map(circuit_32g)
        .find(|c| circuit_id(c.kind, c.sector_size).is_ok_and(|k| k == id))
        .map(|c| c.shape)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_at_32_gib_has_its_shape_under_its_circuit_id() {
        for (_, c) in circuits_32g().iter() {
            let id = circuit_id(c.kind, c.sector_size).unwrap();
            assert_eq!(shape_of(&id), Some(c.shape), "{id}");
            assert!(c.shape.aux > c.shape.a_aux.min(c.shape.b_aux), "{id}");
        }
        assert_eq!(shape_of("porep-2k"), None);
    }
}
