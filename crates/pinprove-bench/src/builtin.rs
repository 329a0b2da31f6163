//! The built-in circuits the binary can prove and benchmark.

use anyhow::Result;
use clap::{Args, ValueEnum};
use pinprove_groth16::circuits::{BenchCircuit, WitnessMix};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Builtin {
    /// Mostly random field elements: multiplication chains, sums, a few bits.
    BenchRandom,
    /// Mostly bits: boolean, XOR and AND gates packed into words.
    BenchBits,
}

impl Builtin {
    pub fn mix(self) -> WitnessMix {
        match self {
            Builtin::BenchRandom => WitnessMix::Random,
            Builtin::BenchBits => WitnessMix::Bits,
        }
    }
}

/// Which built-in circuit, and its size.
#[derive(Args, Debug, Clone)]
pub struct CircuitArgs {
    /// The built-in circuit.
    #[arg(long, value_enum, default_value_t = Builtin::BenchRandom)]
    pub circuit: Builtin,
    /// Constraints, including Groth16's input constraints (2^k fills a
    /// domain of 2^k exactly). Accepts "2^20".
    #[arg(long, value_parser = parse_count, default_value = "2^16")]
    pub constraints: usize,
    /// Public inputs besides the constant ONE.
    #[arg(long, default_value_t = 4)]
    pub inputs: usize,
}

impl CircuitArgs {
    pub fn build(&self) -> Result<BenchCircuit> {
        Ok(BenchCircuit::with_inputs(
            self.constraints,
            self.inputs,
            self.circuit.mix(),
        )?)
    }
}

/// Parses "1048576", "2^20" or "1M"-style counts.
pub fn parse_count(s: &str) -> Result<usize, String> {
    let s = s.trim();
    if let Some(exp) = s.strip_prefix("2^") {
        let e: u32 = exp.parse().map_err(|_| format!("bad exponent in {s:?}"))?;
        return 1usize
            .checked_shl(e)
            .filter(|_| e < 63)
            .ok_or_else(|| format!("{s} is too large"));
    }
    let (digits, mult) = match s.chars().last() {
        Some('k' | 'K') => (&s[..s.len() - 1], 1 << 10),
        Some('m' | 'M') => (&s[..s.len() - 1], 1 << 20),
        _ => (s, 1),
    };
    digits
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| format!("not a count: {s:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts() {
        assert_eq!(parse_count("2^20"), Ok(1 << 20));
        assert_eq!(parse_count("1000"), Ok(1000));
        assert_eq!(parse_count("4k"), Ok(4096));
        assert_eq!(parse_count("2M"), Ok(2 << 20));
        assert!(parse_count("2^99").is_err());
        assert!(parse_count("lots").is_err());
    }
}
