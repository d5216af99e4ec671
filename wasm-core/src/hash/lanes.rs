//! 4-lane u32 vectors for the multi-buffer SHA-1: one message per lane.
//!
//! [`Lanes`] is implemented twice: with `core::arch::wasm32` simd128 (the browser build)
//! and with plain `[u32; 4]` arrays (every other target; LLVM turns them into SSE/NEON
//! vector code). The SHA-1 rounds are written once, generically, in `multi.rs`.

/// Operations the SHA-1 rounds need, on four independent u32 lanes.
pub(crate) trait Lanes: Copy {
    fn splat(v: u32) -> Self;
    fn add(self, o: Self) -> Self;
    fn xor(self, o: Self) -> Self;
    /// Bitwise select: bits of `a` where `mask` is 1, bits of `b` where it is 0.
    fn select(a: Self, b: Self, mask: Self) -> Self;
    fn rotl<const N: u32>(self) -> Self;
    /// Loads one 64-byte block from each lane's slice as 16 big-endian words per lane,
    /// transposed so that word `t` of all four messages sits in element `t`.
    fn load_blocks(blocks: [&[u8; 64]; 4]) -> [Self; 16];
    fn lane(self, i: usize) -> u32;
    fn with_lane(self, i: usize, v: u32) -> Self;
}

/// The lanes the multi-buffer path uses in Wasm (natively the `sha1` crate is used per
/// chunk, and the portable lanes only through `sha1_many_portable`).
#[cfg(target_arch = "wasm32")]
pub(crate) type Vec4 = Simd;

/// Portable lanes: four u32 in an array.
#[derive(Clone, Copy)]
pub(crate) struct Portable([u32; 4]);

impl Lanes for Portable {
    #[inline(always)]
    fn splat(v: u32) -> Self {
        Portable([v; 4])
    }
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        Portable(std::array::from_fn(|i| self.0[i].wrapping_add(o.0[i])))
    }
    #[inline(always)]
    fn xor(self, o: Self) -> Self {
        Portable(std::array::from_fn(|i| self.0[i] ^ o.0[i]))
    }
    #[inline(always)]
    fn select(a: Self, b: Self, m: Self) -> Self {
        Portable(std::array::from_fn(|i| {
            (a.0[i] & m.0[i]) | (b.0[i] & !m.0[i])
        }))
    }
    #[inline(always)]
    fn rotl<const N: u32>(self) -> Self {
        Portable(std::array::from_fn(|i| self.0[i].rotate_left(N)))
    }
    #[inline(always)]
    fn load_blocks(blocks: [&[u8; 64]; 4]) -> [Self; 16] {
        std::array::from_fn(|t| {
            Portable(std::array::from_fn(|l| {
                let b = blocks[l];
                u32::from_be_bytes([b[4 * t], b[4 * t + 1], b[4 * t + 2], b[4 * t + 3]])
            }))
        })
    }
    fn lane(self, i: usize) -> u32 {
        self.0[i]
    }
    fn with_lane(mut self, i: usize, v: u32) -> Self {
        self.0[i] = v;
        self
    }
}

#[cfg(target_arch = "wasm32")]
pub(crate) use simd::Simd;

#[cfg(target_arch = "wasm32")]
mod simd {
    use super::Lanes;
    use core::arch::wasm32::*;

    /// simd128 lanes.
    #[derive(Clone, Copy)]
    pub(crate) struct Simd(pub v128);

    /// Byte-reverses each u32. Kept in a static and read through a volatile load so the
    /// compiler emits a run-time `i8x16.swizzle` rather than a constant shuffle, which V8
    /// lowers to a longer instruction sequence (measured, see FINDINGS).
    #[repr(align(16))]
    #[allow(dead_code)] // read through a pointer cast only
    struct Aligned([u8; 16]);
    static BSWAP: Aligned = Aligned([3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12]);

    #[inline(always)]
    fn bswap_mask() -> v128 {
        // SAFETY: BSWAP is a 16-byte, 16-aligned static.
        unsafe { core::ptr::read_volatile(&BSWAP as *const Aligned as *const v128) }
    }

    impl Lanes for Simd {
        #[inline(always)]
        fn splat(v: u32) -> Self {
            Simd(u32x4_splat(v))
        }
        #[inline(always)]
        fn add(self, o: Self) -> Self {
            Simd(i32x4_add(self.0, o.0))
        }
        #[inline(always)]
        fn xor(self, o: Self) -> Self {
            Simd(v128_xor(self.0, o.0))
        }
        #[inline(always)]
        fn select(a: Self, b: Self, m: Self) -> Self {
            Simd(v128_bitselect(a.0, b.0, m.0))
        }
        #[inline(always)]
        fn rotl<const N: u32>(self) -> Self {
            Simd(v128_or(i32x4_shl(self.0, N), u32x4_shr(self.0, 32 - N)))
        }
        #[inline(always)]
        fn load_blocks(blocks: [&[u8; 64]; 4]) -> [Self; 16] {
            let m = bswap_mask();
            let ld = |l: usize, q: usize| -> v128 {
                // SAFETY: each block is 64 bytes, q < 4; v128_load allows unaligned.
                let v = unsafe { v128_load(blocks[l].as_ptr().add(16 * q) as *const v128) };
                i8x16_swizzle(v, m)
            };
            let mut out = [Simd(u32x4_splat(0)); 16];
            for q in 0..4 {
                let (a, b, c, d) = (ld(0, q), ld(1, q), ld(2, q), ld(3, q));
                let t0 = i32x4_shuffle::<0, 4, 1, 5>(a, b);
                let t1 = i32x4_shuffle::<2, 6, 3, 7>(a, b);
                let t2 = i32x4_shuffle::<0, 4, 1, 5>(c, d);
                let t3 = i32x4_shuffle::<2, 6, 3, 7>(c, d);
                out[4 * q] = Simd(i32x4_shuffle::<0, 1, 4, 5>(t0, t2));
                out[4 * q + 1] = Simd(i32x4_shuffle::<2, 3, 6, 7>(t0, t2));
                out[4 * q + 2] = Simd(i32x4_shuffle::<0, 1, 4, 5>(t1, t3));
                out[4 * q + 3] = Simd(i32x4_shuffle::<2, 3, 6, 7>(t1, t3));
            }
            out
        }
        fn lane(self, i: usize) -> u32 {
            let mut a = [0u32; 4];
            // SAFETY: 16-byte destination.
            unsafe { v128_store(a.as_mut_ptr() as *mut v128, self.0) };
            a[i]
        }
        fn with_lane(self, i: usize, v: u32) -> Self {
            let mut a = [0u32; 4];
            // SAFETY: 16-byte buffers.
            unsafe {
                v128_store(a.as_mut_ptr() as *mut v128, self.0);
                a[i] = v;
                Simd(v128_load(a.as_ptr() as *const v128))
            }
        }
    }
}
