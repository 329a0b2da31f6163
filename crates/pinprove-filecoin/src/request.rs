//! What a client asks to be proved: the fields of cuzk.v1's
//! `SubmitProofRequest`, kind by kind.

use pinprove_engine::Priority;

use crate::ProofKind;

/// One proof to make, with everything its kind needs. Which fields matter:
///
/// | kind | fields |
/// |---|---|
/// | PoRep | `vanilla_proof` (the C1 output: filecoin-ffi's JSON, bare or in Curio's `{SectorNum, Phase1Out, SectorSize}` wrapper), `sector_number`, `miner_id`, `registered_proof` (a seal proof; the C1 output's own is used, and must agree) |
/// | SnapDeals | `vanilla_proofs` (one bincode `PartitionProof` per partition), `comm_r_old`, `comm_r_new`, `comm_d_new`, `registered_proof` (an update proof) |
/// | WindowPoSt | `vanilla_proofs` (one bincode `FallbackPoStSectorProof` per sector of the partition, ascending), `randomness`, `miner_id`, `partition_index`, `registered_proof` (a Window PoSt proof) |
/// | WinningPoSt | `vanilla_proofs` (one), `randomness`, `miner_id`, `registered_proof` (a Winning PoSt proof) |
///
/// `sector_size` may be 0 (then the registered proof says it); when it is
/// given it must agree. Zero is a real value of every number field.
#[derive(Clone, Debug)]
pub struct ProofRequest {
    /// What to prove.
    pub kind: ProofKind,
    /// The sector size in bytes, or 0.
    pub sector_size: u64,
    /// Filecoin's number of the registered seal, PoSt or update proof.
    pub registered_proof: u64,
    /// Scheduling priority; the kind's default when `None`.
    pub priority: Option<Priority>,
    /// PoRep: the C1 output.
    pub vanilla_proof: Vec<u8>,
    /// PoSt and SnapDeals: the vanilla proofs.
    pub vanilla_proofs: Vec<Vec<u8>>,
    /// The sector (PoRep).
    pub sector_number: u64,
    /// The miner actor's id (PoRep, PoSt).
    pub miner_id: u64,
    /// PoSt challenge randomness, 32 bytes.
    pub randomness: Vec<u8>,
    /// WindowPoSt: the partition proved.
    pub partition_index: u32,
    /// SnapDeals commitments, 32 bytes each.
    pub comm_r_old: Vec<u8>,
    /// See `comm_r_old`.
    pub comm_r_new: Vec<u8>,
    /// See `comm_r_old`.
    pub comm_d_new: Vec<u8>,
}

impl ProofRequest {
    /// An empty request of `kind` (every other field zero or empty).
    pub fn new(kind: ProofKind) -> ProofRequest {
        ProofRequest {
            kind,
            sector_size: 0,
            registered_proof: 0,
            priority: None,
            vanilla_proof: Vec::new(),
            vanilla_proofs: Vec::new(),
            sector_number: 0,
            miner_id: 0,
            randomness: Vec::new(),
            partition_index: 0,
            comm_r_old: Vec::new(),
            comm_r_new: Vec::new(),
            comm_d_new: Vec::new(),
        }
    }

    /// The priority it is proved at: its own, or its kind's default. Every
    /// decision that orders or bounds work reads this one.
    pub fn priority(&self) -> Priority {
        self.priority.unwrap_or_else(|| self.kind.default_priority())
    }
}
