//! The service's codec: prost's, with every request checked on its wire
//! bytes before it is decoded.
//!
//! Decoding is where a small message becomes large memory: an empty
//! `repeated bytes` entry is 2 bytes on the wire and a 24-byte vector
//! decoded, so a 190 MiB message of them would take 2.4 GB. Each request
//! type is therefore scanned first, in one pass that allocates nothing:
//! its size against what its method can legitimately carry, and for a
//! proof request every field against what its kind and registered proof
//! allow ([`pinprove_filecoin::limits`]). A request that does not pass is
//! answered `INVALID_ARGUMENT` (or `RESOURCE_EXHAUSTED` for size) with what
//! is wrong, and never decoded.

use std::marker::PhantomData;

use bytes::Buf;
use pinprove_filecoin::ProofKind;
use pinprove_filecoin::limits::{WireLimits, kind_limits, wire_limits};
use tonic::Status;
use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder};
use tonic_prost::ProstCodec;

use crate::ids::check_id;
use crate::pb;

/// Largest message of a method that carries no proof payload (ids and
/// numbers only).
pub const SMALL_MESSAGE_BYTES: usize = 4 << 10;

/// Room in a proof request for everything but its vanilla proofs.
const REQUEST_OVERHEAD: usize = 4 << 10;

/// The largest message of any method: a proof request of the kind that
/// carries the most.
pub fn max_message_bytes() -> usize {
    ProofKind::ALL
        .iter()
        .map(|&k| {
            let l = kind_limits(k);
            // Each entry of `vanilla_proofs` has its own tag and length.
            l.payload() + 16 * l.vanilla_proofs + REQUEST_OVERHEAD
        })
        .max()
        .unwrap_or(0)
}

/// What a message type checks on its wire bytes before it is decoded.
pub trait WireCheck {
    /// `Err` when the message must not be decoded.
    fn check(raw: &[u8]) -> Result<(), Status>;
}

/// prost's codec, with [`WireCheck`] run on every message before decoding.
#[derive(Debug, Clone)]
pub struct BoundedCodec<T, U>(PhantomData<(T, U)>);

impl<T, U> Default for BoundedCodec<T, U> {
    fn default() -> Self {
        BoundedCodec(PhantomData)
    }
}

impl<T, U> Codec for BoundedCodec<T, U>
where
    T: prost::Message + Send + 'static,
    U: prost::Message + Default + WireCheck + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = <ProstCodec<T, U> as Codec>::Encoder;
    type Decoder = BoundedDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        ProstCodec::<T, U>::raw_encoder(BufferSettings::default())
    }

    fn decoder(&mut self) -> Self::Decoder {
        BoundedDecoder(ProstCodec::<T, U>::raw_decoder(BufferSettings::default()))
    }
}

/// Messages refused by their checks before they were decoded, in this
/// process: the daemon counts them with the requests it refused
/// (`pinprove_requests_refused_total`). The decoder is made by generated
/// code that knows no daemon, hence one count per process.
pub(crate) static REFUSED_ON_DECODE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// prost's decoder behind a [`WireCheck`].
pub struct BoundedDecoder<U: prost::Message + Default + Send + 'static>(<ProstCodec<(), U> as Codec>::Decoder);

impl<U> Decoder for BoundedDecoder<U>
where
    U: prost::Message + Default + WireCheck + Send + 'static,
{
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        // tonic hands a message over whole, in one buffer.
        if buf.chunk().len() != buf.remaining() {
            return Err(Status::internal("a message arrived in pieces"));
        }
        U::check(buf.chunk()).inspect_err(|_| {
            REFUSED_ON_DECODE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        })?;
        self.0.decode(buf)
    }

    fn buffer_settings(&self) -> BufferSettings {
        self.0.buffer_settings()
    }
}

/// One field of a protobuf message.
#[derive(Debug, Clone, Copy)]
enum Value<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

/// The fields of a protobuf message, in wire order, without decoding any.
struct Fields<'a> {
    raw: &'a [u8],
}

fn malformed(what: &str) -> Status {
    Status::invalid_argument(format!("malformed message: {what}"))
}

impl<'a> Fields<'a> {
    fn varint(&mut self) -> Result<u64, Status> {
        let mut v = 0u64;
        for i in 0..10 {
            let (&b, rest) = self.raw.split_first().ok_or_else(|| malformed("a truncated number"))?;
            self.raw = rest;
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(malformed("a number longer than ten bytes"))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], Status> {
        if n > self.raw.len() {
            return Err(malformed("a field longer than the message"));
        }
        let (head, rest) = self.raw.split_at(n);
        self.raw = rest;
        Ok(head)
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u32, Value<'a>), Status>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.raw.is_empty() {
            return None;
        }
        Some((|| {
            let key = self.varint()?;
            let number = u32::try_from(key >> 3).map_err(|_| malformed("a field number out of range"))?;
            let value = match key & 7 {
                0 => Value::Varint(self.varint()?),
                1 => {
                    self.take(8)?;
                    Value::Fixed
                }
                2 => {
                    let len = usize::try_from(self.varint()?).map_err(|_| malformed("a length out of range"))?;
                    Value::Bytes(self.take(len)?)
                }
                5 => {
                    self.take(4)?;
                    Value::Fixed
                }
                _ => return Err(malformed("a group or an unknown wire type")),
            };
            Ok((number, value))
        })())
    }
}

fn fields(raw: &[u8]) -> Fields<'_> {
    Fields { raw }
}

/// A message of ids and numbers only: small, and every string field an id.
fn check_small(raw: &[u8], method: &str, id_fields: &[(u32, &str)]) -> Result<(), Status> {
    if raw.len() > SMALL_MESSAGE_BYTES {
        return Err(Status::resource_exhausted(format!(
            "a {method} request is {} bytes; at most {SMALL_MESSAGE_BYTES} are taken",
            raw.len()
        )));
    }
    for field in fields(raw) {
        if let (n, Value::Bytes(b)) = field?
            && let Some((_, what)) = id_fields.iter().find(|(f, _)| *f == n)
        {
            check_id(what, b)?;
        }
    }
    Ok(())
}

/// What a proof request holds, counted on the wire.
#[derive(Default)]
struct Counted<'a> {
    kind: Option<u64>,
    priority: u64,
    registered_proof: u64,
    request_id: &'a [u8],
    vanilla_proof: usize,
    vanilla_proofs: usize,
    largest_element: usize,
    /// The longest of randomness and the three commitments, and its name.
    longest_commitment: (usize, &'static str),
}

/// Checks a `SubmitProofRequest` on the wire: its ids are ids, its kind
/// and priority are known, and it carries no more than its kind and
/// registered proof may. The only check a request gets: what passes is
/// decoded and taken as it is ([`crate::wire::request_of`]).
pub fn check_submit(raw: &[u8]) -> Result<(), Status> {
    use pb::field::submit_proof_request::*;
    let mut c = Counted::default();
    for field in fields(raw) {
        match field? {
            (REQUEST_ID, Value::Bytes(b)) => c.request_id = b,
            (PROOF_KIND, Value::Varint(v)) => c.kind = Some(v),
            (PRIORITY, Value::Varint(v)) => c.priority = v,
            (REGISTERED_PROOF, Value::Varint(v)) => c.registered_proof = v,
            (VANILLA_PROOF, Value::Bytes(b)) => c.vanilla_proof = b.len(),
            (VANILLA_PROOFS, Value::Bytes(b)) => {
                c.vanilla_proofs += 1;
                c.largest_element = c.largest_element.max(b.len());
            }
            (n @ (RANDOMNESS | COMM_R_OLD | COMM_R_NEW | COMM_D_NEW), Value::Bytes(b)) => {
                let name = match n {
                    RANDOMNESS => "randomness",
                    COMM_R_OLD => "comm_r_old",
                    COMM_R_NEW => "comm_r_new",
                    _ => "comm_d_new",
                };
                if b.len() > c.longest_commitment.0 {
                    c.longest_commitment = (b.len(), name);
                }
            }
            _ => {}
        }
    }
    check_id("request_id", c.request_id)?;
    // An enum is an int32 on the wire; a larger number is no member.
    let kind = crate::wire::kind_of(c.kind.map_or(0, |k| k as i32))?;
    crate::wire::priority_of(c.priority as i32)?;
    if c.longest_commitment.0 > 32 {
        return Err(Status::invalid_argument(format!(
            "{} is {} bytes, not 32",
            c.longest_commitment.1, c.longest_commitment.0
        )));
    }
    let limits: WireLimits =
        wire_limits(kind, c.registered_proof).map_err(|e| Status::invalid_argument(e.to_string()))?;
    let what = format!("a {kind} request for registered proof {}", c.registered_proof);
    if c.vanilla_proof > limits.vanilla_proof {
        return Err(Status::invalid_argument(if limits.vanilla_proof == 0 {
            format!("vanilla_proof is set; {what} carries its proofs in vanilla_proofs")
        } else {
            format!(
                "vanilla_proof is {} bytes; {what} carries at most {}",
                c.vanilla_proof, limits.vanilla_proof
            )
        }));
    }
    if c.vanilla_proofs > limits.vanilla_proofs {
        return Err(Status::invalid_argument(if limits.vanilla_proofs == 0 {
            format!(
                "vanilla_proofs holds {} entries; {what} carries its C1 output in vanilla_proof",
                c.vanilla_proofs
            )
        } else {
            format!(
                "vanilla_proofs holds {} entries; {what} carries at most {}",
                c.vanilla_proofs, limits.vanilla_proofs
            )
        }));
    }
    if c.largest_element > limits.element {
        return Err(Status::invalid_argument(format!(
            "an entry of vanilla_proofs is {} bytes; {what} carries entries of at most {}",
            c.largest_element, limits.element
        )));
    }
    let most = limits.payload() + 16 * limits.vanilla_proofs + REQUEST_OVERHEAD;
    if raw.len() > most {
        return Err(Status::resource_exhausted(format!(
            "the message is {} bytes; {what} is at most {most}",
            raw.len()
        )));
    }
    Ok(())
}

impl WireCheck for pb::SubmitProofRequest {
    fn check(raw: &[u8]) -> Result<(), Status> {
        check_submit(raw)
    }
}

impl WireCheck for pb::ProveRequest {
    fn check(raw: &[u8]) -> Result<(), Status> {
        let mut submits = 0;
        for field in fields(raw) {
            if let (pb::field::prove_request::SUBMIT, Value::Bytes(b)) = field? {
                submits += 1;
                if submits > 1 {
                    return Err(malformed("ProveRequest.submit given more than once"));
                }
                check_submit(b)?;
            }
        }
        Ok(())
    }
}

macro_rules! small {
    ($t:ty, $method:literal, [$(($n:expr, $what:literal)),*]) => {
        impl WireCheck for $t {
            fn check(raw: &[u8]) -> Result<(), Status> {
                check_small(raw, $method, &[$(($n, $what)),*])
            }
        }
    };
}

small!(
    pb::AwaitProofRequest,
    "AwaitProof",
    [(pb::field::await_proof_request::JOB_ID, "job_id")]
);
small!(
    pb::CancelProofRequest,
    "CancelProof",
    [(pb::field::cancel_proof_request::JOB_ID, "job_id")]
);
small!(pb::GetStatusRequest, "GetStatus", []);
small!(pb::GetMetricsRequest, "GetMetrics", []);
small!(
    pb::PreloadSrsRequest,
    "PreloadSRS",
    [(pb::field::preload_srs_request::CIRCUIT_ID, "circuit_id")]
);
small!(
    pb::EvictSrsRequest,
    "EvictSRS",
    [(pb::field::evict_srs_request::CIRCUIT_ID, "circuit_id")]
);

/// Responses come from the daemon: the client takes them as they are.
macro_rules! trusted {
    ($($t:ty),*) => {
        $(impl WireCheck for $t {
            fn check(_: &[u8]) -> Result<(), Status> {
                Ok(())
            }
        })*
    };
}

trusted!(
    pb::SubmitProofResponse,
    pb::AwaitProofResponse,
    pb::ProveResponse,
    pb::CancelProofResponse,
    pb::GetStatusResponse,
    pb::GetMetricsResponse,
    pb::PreloadSrsResponse,
    pb::EvictSrsResponse
);

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;
    use crate::ids::{MAX_ID_BYTES, shown};

    fn submit(kind: pb::ProofKind, registered_proof: u64) -> pb::SubmitProofRequest {
        pb::SubmitProofRequest {
            request_id: "r".into(),
            proof_kind: kind as i32,
            registered_proof,
            ..Default::default()
        }
    }

    fn refused(m: &impl Message, check: fn(&[u8]) -> Result<(), Status>) -> Status {
        check(&m.encode_to_vec()).expect_err("refused")
    }

    /// The number of the one field `m` sets.
    fn only_field(m: &impl Message) -> u32 {
        let raw = m.encode_to_vec();
        let mut f = fields(&raw);
        let (n, _) = f.next().expect("a field is set").unwrap();
        assert!(f.next().is_none(), "one field only");
        n
    }

    #[test]
    fn the_field_numbers_written_by_the_build_script_are_prosts() {
        use pb::field::submit_proof_request::*;
        let b = || vec![1u8];
        let s = pb::SubmitProofRequest::default;
        for (want, m) in [
            (
                REQUEST_ID,
                pb::SubmitProofRequest {
                    request_id: "r".into(),
                    ..s()
                },
            ),
            (PROOF_KIND, pb::SubmitProofRequest { proof_kind: 1, ..s() }),
            (PRIORITY, pb::SubmitProofRequest { priority: 1, ..s() }),
            (
                REGISTERED_PROOF,
                pb::SubmitProofRequest {
                    registered_proof: 1,
                    ..s()
                },
            ),
            (
                VANILLA_PROOF,
                pb::SubmitProofRequest {
                    vanilla_proof: b(),
                    ..s()
                },
            ),
            (
                VANILLA_PROOFS,
                pb::SubmitProofRequest {
                    vanilla_proofs: vec![b()],
                    ..s()
                },
            ),
            (RANDOMNESS, pb::SubmitProofRequest { randomness: b(), ..s() }),
            (COMM_R_OLD, pb::SubmitProofRequest { comm_r_old: b(), ..s() }),
            (COMM_R_NEW, pb::SubmitProofRequest { comm_r_new: b(), ..s() }),
            (COMM_D_NEW, pb::SubmitProofRequest { comm_d_new: b(), ..s() }),
        ] {
            assert_eq!(only_field(&m), want, "{m:?}");
        }
        let prove = pb::ProveRequest {
            submit: Some(pb::SubmitProofRequest::default()),
        };
        assert_eq!(only_field(&prove), pb::field::prove_request::SUBMIT);
        let job = "j".to_string();
        assert_eq!(
            only_field(&pb::AwaitProofRequest {
                job_id: job.clone(),
                ..Default::default()
            }),
            pb::field::await_proof_request::JOB_ID
        );
        assert_eq!(
            only_field(&pb::CancelProofRequest { job_id: job }),
            pb::field::cancel_proof_request::JOB_ID
        );
        let circuit = "c".to_string();
        assert_eq!(
            only_field(&pb::PreloadSrsRequest {
                circuit_id: circuit.clone()
            }),
            pb::field::preload_srs_request::CIRCUIT_ID
        );
        assert_eq!(
            only_field(&pb::EvictSrsRequest { circuit_id: circuit }),
            pb::field::evict_srs_request::CIRCUIT_ID
        );
    }

    #[test]
    fn counts_and_sizes_are_checked_against_the_kind_and_registered_proof() {
        // WinningPoSt 2 KiB (number 0): one vanilla proof.
        let mut s = submit(pb::ProofKind::WinningPost, 0);
        let one = wire_limits(ProofKind::WinningPoSt, 0).unwrap().element;
        s.vanilla_proofs = vec![vec![0; one]];
        check_submit(&s.encode_to_vec()).unwrap();
        s.vanilla_proofs.push(Vec::new());
        let e = refused(&s, check_submit);
        assert!(
            e.message().contains("holds 2 entries") && e.message().contains("at most 1"),
            "{e:?}"
        );
        s.vanilla_proofs = vec![vec![0; one + 1]];
        let e = refused(&s, check_submit);
        assert!(e.message().contains(&format!("{} bytes", one + 1)), "{e:?}");
        // A WindowPoSt partition of 2 KiB sectors (number 10) holds two.
        let mut w = submit(pb::ProofKind::WindowPostPartition, 10);
        w.vanilla_proofs = vec![Vec::new(); 3];
        assert!(refused(&w, check_submit).message().contains("at most 2"));
        // A million empty entries are refused before any is decoded.
        w.vanilla_proofs = vec![Vec::new(); 1_000_000];
        assert_eq!(refused(&w, check_submit).code(), tonic::Code::InvalidArgument);
        let mut p = submit(pb::ProofKind::PorepSealCommit, 5);
        p.vanilla_proofs = vec![vec![1]];
        assert!(refused(&p, check_submit).message().contains("in vanilla_proof"));
        p.vanilla_proofs.clear();
        p.vanilla_proof =
            vec![
                b' ';
                pinprove_filecoin::limits::porep_c1_bytes(pinprove_filecoin::kind::seal_proof(5).unwrap()).unwrap() + 1
            ];
        assert!(refused(&p, check_submit).message().contains("carries at most"));
        let mut r = submit(pb::ProofKind::WinningPost, 0);
        r.randomness = vec![0; 33];
        assert!(refused(&r, check_submit).message().contains("randomness is 33 bytes"));
        let n = submit(pb::ProofKind::WinningPost, 99);
        assert!(refused(&n, check_submit).message().contains("99"));
        let wrong = submit(pb::ProofKind::WinningPost, 10);
        assert!(refused(&wrong, check_submit).message().contains("not a winning proof"));
        let none = submit(pb::ProofKind::Unspecified, 0);
        assert!(refused(&none, check_submit).message().contains("proof_kind is not set"));
        let mut unknown = submit(pb::ProofKind::WinningPost, 0);
        unknown.proof_kind = 9;
        assert!(
            refused(&unknown, check_submit)
                .message()
                .contains("unknown proof_kind 9")
        );
        unknown.proof_kind = pb::ProofKind::WinningPost as i32;
        unknown.priority = 17;
        assert!(
            refused(&unknown, check_submit)
                .message()
                .contains("unknown priority 17")
        );
    }

    #[test]
    fn ids_are_short_printable_text() {
        let mut s = submit(pb::ProofKind::WinningPost, 0);
        s.request_id = "wdpost-1000-0-[0 1 2]".into();
        check_submit(&s.encode_to_vec()).unwrap();
        s.request_id = "x".repeat(MAX_ID_BYTES + 1);
        assert!(refused(&s, check_submit).message().contains("request_id is 257 bytes"));
        s.request_id = "a\nb".into();
        assert!(refused(&s, check_submit).message().contains("not printable"));
        let a = pb::AwaitProofRequest {
            job_id: "j".repeat(300),
            timeout_ms: 1,
        };
        assert!(refused(&a, pb::AwaitProofRequest::check).message().contains("job_id"));
        let big = pb::PreloadSrsRequest {
            circuit_id: "c".repeat(5000),
        };
        assert_eq!(
            refused(&big, pb::PreloadSrsRequest::check).code(),
            tonic::Code::ResourceExhausted
        );
        assert_eq!(shown(&"é".repeat(100)).chars().count(), 65);
        assert_eq!(shown("a\"b"), "a\\\"b");
    }

    #[test]
    fn malformed_wire_bytes_are_refused_not_decoded() {
        for raw in [
            &[0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f][..], // a length past the end
            &[0x0b],                                   // a group
            &[0x08, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01], // 11-byte varint
        ] {
            let e = check_submit(raw).expect_err("refused");
            assert!(e.message().contains("malformed"), "{e:?}");
        }
        // Two `submit` fields in one ProveRequest.
        let s = submit(pb::ProofKind::WinningPost, 0).encode_to_vec();
        let mut twice = Vec::new();
        for _ in 0..2 {
            twice.push(0x0a);
            prost::encoding::encode_varint(s.len() as u64, &mut twice);
            twice.extend_from_slice(&s);
        }
        assert!(pb::ProveRequest::check(&twice).is_err());
    }

    #[test]
    fn the_largest_legitimate_request_fits_the_transport_limit() {
        let most = max_message_bytes();
        for k in ProofKind::ALL {
            assert!(kind_limits(k).payload() < most, "{k}");
        }
        // A 32 GiB WindowPoSt partition: 2349 sectors of 10 challenges.
        let w = wire_limits(ProofKind::WindowPoSt, 13).unwrap();
        assert_eq!(w.vanilla_proofs, 2349);
    }
}
