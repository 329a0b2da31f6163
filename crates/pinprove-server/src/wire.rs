//! Requests between the wire and pinprove's terms, both ways: the service
//! reads them, the `prove` command and the demo write them.

use pinprove_engine::Priority;
use pinprove_filecoin::{ProofKind, ProofRequest};
use tonic::Status;

use crate::pb;

pub(crate) fn kind_of(k: i32) -> Result<ProofKind, Status> {
    match pb::ProofKind::try_from(k) {
        Ok(pb::ProofKind::PorepSealCommit) => Ok(ProofKind::PoRep),
        Ok(pb::ProofKind::SnapDealsUpdate) => Ok(ProofKind::SnapDeals),
        Ok(pb::ProofKind::WindowPostPartition) => Ok(ProofKind::WindowPoSt),
        Ok(pb::ProofKind::WinningPost) => Ok(ProofKind::WinningPoSt),
        Ok(pb::ProofKind::Unspecified) => Err(Status::invalid_argument("proof_kind is not set")),
        Err(_) => Err(Status::invalid_argument(format!("unknown proof_kind {k}"))),
    }
}

fn wire_kind(k: ProofKind) -> pb::ProofKind {
    match k {
        ProofKind::PoRep => pb::ProofKind::PorepSealCommit,
        ProofKind::SnapDeals => pb::ProofKind::SnapDealsUpdate,
        ProofKind::WindowPoSt => pb::ProofKind::WindowPostPartition,
        ProofKind::WinningPoSt => pb::ProofKind::WinningPost,
    }
}

pub(crate) fn priority_of(p: i32) -> Result<Option<Priority>, Status> {
    match pb::Priority::try_from(p) {
        Ok(pb::Priority::Unspecified) => Ok(None),
        Ok(pb::Priority::Low) => Ok(Some(Priority::Low)),
        Ok(pb::Priority::Normal) => Ok(Some(Priority::Normal)),
        Ok(pb::Priority::High) => Ok(Some(Priority::High)),
        Ok(pb::Priority::Critical) => Ok(Some(Priority::Critical)),
        Err(_) => Err(Status::invalid_argument(format!("unknown priority {p}"))),
    }
}

fn wire_priority(p: Option<Priority>) -> pb::Priority {
    match p {
        None => pb::Priority::Unspecified,
        Some(Priority::Low) => pb::Priority::Low,
        Some(Priority::Normal) => pb::Priority::Normal,
        Some(Priority::High) => pb::Priority::High,
        Some(Priority::Critical) => pb::Priority::Critical,
    }
}

/// A submitted request in pinprove's terms, with its request id. Zero
/// values are values (registered proof 0, partition 0): nothing is
/// "missing".
///
/// This is a conversion, not a check: the daemon's codec checked the
/// message on its wire bytes before it was decoded
/// ([`crate::codec::check_submit`]: ids, kind, priority, sizes), the one
/// place a request is judged. A number the check refuses that reached here
/// all the same (a message that did not come through the codec) is an
/// internal error.
pub fn request_of(s: pb::SubmitProofRequest) -> Result<(String, ProofRequest), Status> {
    let unchecked = |e: Status| Status::internal(format!("a request that skipped the wire check: {}", e.message()));
    let req = ProofRequest {
        kind: kind_of(s.proof_kind).map_err(unchecked)?,
        sector_size: s.sector_size,
        registered_proof: s.registered_proof,
        priority: priority_of(s.priority).map_err(unchecked)?,
        vanilla_proof: s.vanilla_proof,
        vanilla_proofs: s.vanilla_proofs,
        sector_number: s.sector_number,
        miner_id: s.miner_id,
        randomness: s.randomness,
        partition_index: s.partition_index,
        comm_r_old: s.comm_r_old,
        comm_r_new: s.comm_r_new,
        comm_d_new: s.comm_d_new,
    };
    Ok((s.request_id, req))
}

/// The wire form of `req` under `request_id`.
pub fn submit_request(request_id: &str, req: ProofRequest) -> pb::SubmitProofRequest {
    pb::SubmitProofRequest {
        request_id: request_id.to_string(),
        proof_kind: wire_kind(req.kind) as i32,
        sector_size: req.sector_size,
        registered_proof: req.registered_proof,
        priority: wire_priority(req.priority) as i32,
        vanilla_proof: req.vanilla_proof,
        vanilla_proofs: req.vanilla_proofs,
        sector_number: req.sector_number,
        miner_id: req.miner_id,
        randomness: req.randomness,
        partition_index: req.partition_index,
        comm_r_old: req.comm_r_old,
        comm_r_new: req.comm_r_new,
        comm_d_new: req.comm_d_new,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_goes_to_the_wire_and_back_unchanged() {
        for (kind, priority) in [
            (ProofKind::PoRep, None),
            (ProofKind::SnapDeals, Some(Priority::Low)),
            (ProofKind::WindowPoSt, Some(Priority::High)),
            (ProofKind::WinningPoSt, Some(Priority::Critical)),
        ] {
            let req = ProofRequest {
                sector_size: 2048,
                registered_proof: 0,
                priority,
                vanilla_proof: vec![1],
                vanilla_proofs: vec![vec![2], vec![3]],
                sector_number: 7,
                miner_id: 1000,
                randomness: vec![4; 32],
                partition_index: 0,
                comm_r_old: vec![5; 32],
                comm_r_new: vec![6; 32],
                comm_d_new: vec![7; 32],
                ..ProofRequest::new(kind)
            };
            let (id, back) = request_of(submit_request("wdpost-1000-0-[0 1]", req.clone())).unwrap();
            assert_eq!(id, "wdpost-1000-0-[0 1]");
            assert_eq!(format!("{back:?}"), format!("{req:?}"));
        }
    }

    #[test]
    fn a_number_the_wire_check_refuses_is_an_internal_error_here() {
        let mut s = submit_request("x", ProofRequest::new(ProofKind::PoRep));
        s.proof_kind = 9;
        let e = request_of(s.clone()).unwrap_err();
        assert_eq!(e.code(), tonic::Code::Internal);
        assert!(e.message().contains("unknown proof_kind 9"), "{e:?}");
        s.proof_kind = 1;
        s.priority = 17;
        assert!(request_of(s).unwrap_err().message().contains("unknown priority 17"));
    }
}
