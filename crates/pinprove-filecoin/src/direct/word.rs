//! Bits and 32-bit words as the gadgets see them, and the bitwise gadget
//! operations on whole words.
//!
//! A gadget `Boolean` is a constant, an allocated bit, or the negation of
//! an allocated bit; which one it is decides whether an operation on it
//! allocates at all, and an allocation stores the value of the allocated
//! bit underneath, which for a negation is the opposite of the logical
//! value. A [`Word`] keeps the logical values of 32 such bits plus two
//! masks, so that one word operation stands for 32 bit operations, and the
//! values to allocate come out as one word, emitted least significant bit
//! first (the gadget's bit order).

use super::sink::AllocSink;

/// One gadget `Boolean`: its tag and value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Bit {
    /// `Boolean::Constant(value)`: nothing allocated.
    Constant(bool),
    /// `Boolean::Is(bit)`, with the allocated bit's value (also the
    /// logical value).
    Is(bool),
    /// `Boolean::Not(bit)`, with the *allocated* bit's value; the logical
    /// value is its negation.
    Not(bool),
}

impl Bit {
    /// The value the bit stands for (negated for [`Bit::Not`]).
    pub fn logical(self) -> bool {
        match self {
            Bit::Constant(v) | Bit::Is(v) => v,
            Bit::Not(v) => !v,
        }
    }
}

/// A gadget `UInt32`: bit `i` of each field is the gadget's bit `i` (least
/// significant first).
///
/// Invariant: `negated` is a subset of `allocated`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Word {
    /// The logical value of each bit.
    pub value: u32,
    /// Bits that are allocated (`Is` or `Not`); the others are constants.
    pub allocated: u32,
    /// Bits that are `Not` of an allocated bit.
    pub negated: u32,
}

impl Word {
    /// `UInt32::constant(value)`.
    pub const fn constant(value: u32) -> Self {
        Self {
            value,
            allocated: 0,
            negated: 0,
        }
    }

    /// Thirty-two `Is` bits holding `value`.
    pub const fn allocated(value: u32) -> Self {
        Self {
            value,
            allocated: u32::MAX,
            negated: 0,
        }
    }

    /// The values of the allocated bits underneath (a negated bit stores the
    /// opposite of its logical value); constants keep their value.
    #[inline]
    pub fn underlying(self) -> u32 {
        self.value ^ self.negated
    }

    /// Bit `i` (0 = least significant) as a [`Bit`]; `i` is taken mod 32.
    pub fn bit(self, i: u32) -> Bit {
        let i = i % 32;
        let v = (self.value >> i) & 1 == 1;
        if (self.allocated >> i) & 1 == 0 {
            Bit::Constant(v)
        } else if (self.negated >> i) & 1 == 1 {
            Bit::Not(!v)
        } else {
            Bit::Is(v)
        }
    }

    /// Sets bit `i` (mod 32) to `bit`.
    pub fn set_bit(&mut self, i: u32, bit: Bit) {
        let m = 1u32 << (i % 32);
        let (v, a, n) = match bit {
            Bit::Constant(v) => (v, false, false),
            Bit::Is(v) => (v, true, false),
            Bit::Not(u) => (!u, true, true),
        };
        self.value = (self.value & !m) | if v { m } else { 0 };
        self.allocated = (self.allocated & !m) | if a { m } else { 0 };
        self.negated = (self.negated & !m) | if n { m } else { 0 };
    }

    /// `UInt32::from_bits_be`: 32 bits, most significant first. `None`
    /// unless `bits` holds exactly 32.
    pub fn from_bits_be(bits: &[Bit]) -> Option<Self> {
        if bits.len() != 32 {
            return None;
        }
        let mut w = Word::constant(0);
        for (k, &b) in bits.iter().enumerate() {
            w.set_bit(31 - k as u32, b);
        }
        Some(w)
    }

    /// `UInt32::into_bits_be`: most significant first.
    pub fn to_bits_be(self) -> [Bit; 32] {
        std::array::from_fn(|k| self.bit(31 - k as u32))
    }

    #[inline]
    pub(super) fn rotr(self, by: u32) -> Self {
        Self {
            value: self.value.rotate_right(by),
            allocated: self.allocated.rotate_right(by),
            negated: self.negated.rotate_right(by),
        }
    }

    /// Shifted-in bits are constant zeros.
    #[inline]
    pub(super) fn shr(self, by: u32) -> Self {
        Self {
            value: self.value >> by,
            allocated: self.allocated >> by,
            negated: self.negated >> by,
        }
    }

    /// `Boolean::not` on every bit: free, flips constants and tags.
    #[inline]
    fn not(self) -> Self {
        Self {
            value: !self.value,
            allocated: self.allocated,
            negated: self.negated ^ self.allocated,
        }
    }

    /// Takes the bits of `other` where `mask` is set.
    #[inline]
    fn blend(self, other: Self, mask: u32) -> Self {
        Self {
            value: (self.value & !mask) | (other.value & mask),
            allocated: (self.allocated & !mask) | (other.allocated & mask),
            negated: (self.negated & !mask) | (other.negated & mask),
        }
    }
}

/// Emits bit `i` of `bits` for every set bit `i` of `mask`, in bit order.
#[inline]
fn emit_masked<S: AllocSink>(sink: &mut S, bits: u32, mask: u32) {
    if mask == u32::MAX {
        sink.push_bits(u64::from(bits), 32);
    } else if mask & mask.wrapping_add(1) == 0 {
        // A run from bit 0 (a shifted word's allocated bits), or nothing.
        if mask != 0 {
            sink.push_bits(u64::from(bits & mask), mask.count_ones());
        }
    } else {
        let (mut packed, mut n, mut m) = (0u64, 0u32, mask);
        while m != 0 {
            let i = m.trailing_zeros();
            packed |= u64::from((bits >> i) & 1) << n;
            n += 1;
            m &= m - 1;
        }
        sink.push_bits(packed, n);
    }
}

/// `UInt32::xor`: allocates where both bits are allocated; a constant
/// operand passes the other bit through, negated if the constant is one.
#[inline]
pub(super) fn xor<S: AllocSink>(x: Word, y: Word, sink: &mut S) -> Word {
    let both = x.allocated & y.allocated;
    let allocated = x.allocated | y.allocated;
    let const_ones = (x.value & !x.allocated) ^ (y.value & !y.allocated);
    let r = Word {
        value: x.value ^ y.value,
        allocated,
        negated: (x.negated ^ y.negated ^ const_ones) & allocated,
    };
    emit_masked(sink, r.underlying(), both);
    r
}

/// `Boolean::and` on every bit, without emitting: the result and the mask
/// of bits it allocates (where both operands are allocated; the result is
/// then `Is`). A constant zero gives zero, a constant one the other bit.
#[inline]
fn and(x: Word, y: Word) -> (Word, u32) {
    let both = x.allocated & y.allocated;
    let y_one = !y.allocated & y.value;
    let x_one = !x.allocated & x.value;
    let r = Word {
        value: x.value & y.value,
        allocated: both | (x.allocated & y_one) | (y.allocated & x_one),
        negated: (x.negated & y_one) | (y.negated & x_one),
    };
    (r, both)
}

/// The cases `sha256_ch` and `sha256_maj` tell apart per bit, in the
/// gadget's order of precedence: each mask holds the bits no earlier case
/// took; bits whose three operands are all constant are in none.
struct Cases {
    a_zero: u32,
    b_zero: u32,
    c_zero: u32,
    c_one: u32,
    b_one: u32,
    a_one: u32,
    all_allocated: u32,
}

impl Cases {
    #[inline]
    fn of(a: Word, b: Word, c: Word) -> Cases {
        let (ca, cb, cc) = (!a.allocated, !b.allocated, !c.allocated);
        let mut rest = !(ca & cb & cc);
        let mut take = |m: u32| {
            let t = rest & m;
            rest &= !t;
            t
        };
        Cases {
            a_zero: take(ca & !a.value),
            b_zero: take(cb & !b.value),
            c_zero: take(cc & !c.value),
            c_one: take(cc & c.value),
            b_one: take(cb & b.value),
            a_one: take(ca & a.value),
            all_allocated: rest,
        }
    }
}

/// `UInt32::sha256_ch`.
#[inline]
pub(super) fn ch<S: AllocSink>(a: Word, b: Word, c: Word, sink: &mut S) -> Word {
    let value = (a.value & b.value) ^ (!a.value & c.value);
    if a.allocated & b.allocated & c.allocated == u32::MAX {
        sink.push_bits(u64::from(value), 32);
        return Word::allocated(value);
    }
    let Cases {
        a_zero,
        b_zero,
        c_zero,
        c_one,
        b_one,
        a_one,
        all_allocated,
    } = Cases::of(a, b, c);
    // `a` a constant one (the gadget allocates anyway) or all three
    // allocated: either way a fresh `Is` bit.
    let fresh = a_one | all_allocated;

    let (r_b0, e_b0) = and(a.not(), c);
    let (r_c0, e_c0) = and(a, b);
    let (r_c1, e_c1) = and(a, b.not());
    let (r_b1, e_b1) = and(a.not(), c.not());
    let r = Word::constant(value)
        .blend(c, a_zero)
        .blend(r_b0, b_zero)
        .blend(r_c0, c_zero)
        .blend(r_c1.not(), c_one)
        .blend(r_b1.not(), b_one)
        .blend(Word::allocated(value), fresh);
    let emitted = (e_b0 & b_zero) | (e_c0 & c_zero) | (e_c1 & c_one) | (e_b1 & b_one) | fresh;
    emit_masked(sink, r.underlying(), emitted);
    r
}

/// Spreads the 32 bits of `x` to the even bit positions of a `u64`.
#[inline]
fn spread(x: u32) -> u64 {
    let mut x = u64::from(x);
    x = (x | (x << 16)) & 0x0000_FFFF_0000_FFFF;
    x = (x | (x << 8)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x << 4)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x << 2)) & 0x3333_3333_3333_3333;
    (x | (x << 1)) & 0x5555_5555_5555_5555
}

/// `UInt32::sha256_maj`. Where all three bits are allocated the gadget
/// allocates twice per bit: the majority, then `b AND c` for its
/// constraint.
#[inline]
pub(super) fn maj<S: AllocSink>(a: Word, b: Word, c: Word, sink: &mut S) -> Word {
    let value = (a.value & b.value) ^ (a.value & c.value) ^ (b.value & c.value);
    let bc = b.value & c.value;
    if a.allocated & b.allocated & c.allocated == u32::MAX {
        sink.push_bits(spread(value) | (spread(bc) << 1), 64);
        return Word::allocated(value);
    }
    let Cases {
        a_zero,
        b_zero,
        c_zero,
        c_one,
        b_one,
        a_one,
        all_allocated: all_alloc,
    } = Cases::of(a, b, c);

    let (r_a0, e_a0) = and(b, c);
    let (r_b0, e_b0) = and(a, c);
    let (r_c0, e_c0) = and(a, b);
    let (r_c1, e_c1) = and(a.not(), b.not());
    let (r_b1, e_b1) = and(a.not(), c.not());
    let (r_a1, e_a1) = and(b.not(), c.not());
    let r = Word::constant(value)
        .blend(r_a0, a_zero)
        .blend(r_b0, b_zero)
        .blend(r_c0, c_zero)
        .blend(r_c1.not(), c_one)
        .blend(r_b1.not(), b_one)
        .blend(r_a1.not(), a_one)
        .blend(Word::allocated(value), all_alloc);
    let single = (e_a0 & a_zero) | (e_b0 & b_zero) | (e_c0 & c_zero) | (e_c1 & c_one) | (e_b1 & b_one) | (e_a1 & a_one);
    let u = r.underlying();
    if all_alloc == 0 {
        emit_masked(sink, u, single);
    } else {
        // Mixed: some bits allocate once, some twice; go bit by bit.
        let (mut packed, mut n) = (0u64, 0u32);
        for i in 0..32 {
            if (single >> i) & 1 == 1 {
                packed |= u64::from((u >> i) & 1) << n;
                n += 1;
            } else if (all_alloc >> i) & 1 == 1 {
                packed |= u64::from((u >> i) & 1) << n;
                packed |= u64::from((bc >> i) & 1) << (n + 1);
                n += 2;
            }
        }
        // At most 64 values: two per bit at most.
        sink.push_bits(packed, n);
    }
    r
}

/// `UInt32::addmany` of 2 to 10 operands: constants fold; otherwise it
/// allocates every bit of the full (unreduced) sum up to the width of the
/// largest possible sum, and keeps the low 32 as `Is` bits.
#[inline]
pub(super) fn addmany<S: AllocSink>(ops: &[Word], sink: &mut S) -> Word {
    let sum: u64 = ops.iter().map(|w| u64::from(w.value)).sum();
    if ops.iter().all(|w| w.allocated == 0) {
        return Word::constant(sum as u32);
    }
    let max = ops.len() as u64 * u64::from(u32::MAX);
    sink.push_bits(sum, u64::BITS - max.leading_zeros());
    Word::allocated(sum as u32)
}
