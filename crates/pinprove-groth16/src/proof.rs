use blstrs::{G1Affine, G2Affine};

/// Bytes of an encoded proof: A (48), B (96), C (48), compressed.
pub const PROOF_BYTES: usize = 192;

/// A Groth16 proof.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Proof {
    /// A, in G1.
    pub a: G1Affine,
    /// B, in G2.
    pub b: G2Affine,
    /// C, in G1.
    pub c: G1Affine,
}

impl Proof {
    /// bellperson's encoding: the three points compressed, A, B, C.
    pub fn to_bytes(&self) -> [u8; PROOF_BYTES] {
        let mut out = [0u8; PROOF_BYTES];
        out[..48].copy_from_slice(&self.a.to_compressed());
        out[48..144].copy_from_slice(&self.b.to_compressed());
        out[144..].copy_from_slice(&self.c.to_compressed());
        out
    }

    /// Decodes and checks a proof (points on the curve and in the subgroup).
    pub fn from_bytes(bytes: &[u8; PROOF_BYTES]) -> Option<Proof> {
        let a = Option::from(G1Affine::from_compressed(bytes[..48].try_into().ok()?))?;
        let b = Option::from(G2Affine::from_compressed(bytes[48..144].try_into().ok()?))?;
        let c = Option::from(G1Affine::from_compressed(bytes[144..].try_into().ok()?))?;
        Some(Proof { a, b, c })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use group::{Curve, Group};

    #[test]
    fn round_trips() {
        let p = Proof {
            a: (blstrs::G1Projective::generator() * blstrs::Scalar::from(5u64)).to_affine(),
            b: blstrs::G2Projective::generator().to_affine(),
            c: blstrs::G1Projective::generator().to_affine(),
        };
        let bytes = p.to_bytes();
        assert_eq!(Proof::from_bytes(&bytes), Some(p));
        let mut bad = bytes;
        bad[10] ^= 0xff;
        assert_eq!(Proof::from_bytes(&bad), None);
    }
}
