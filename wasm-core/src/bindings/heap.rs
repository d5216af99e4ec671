//! Memory made ready before a worker needs it (`HeapReserve`).
//!
//! A Wasm module's memory only grows, and the browser backs each page it grows by with
//! memory the operating system hands out on first touch, one fault per 4 KiB page. A
//! worker that decodes tens of megabytes into a fresh heap pays those faults inside its
//! decoder and its allocator (`memory.grow`, then the first write of every page), on the
//! path of the work that asked for the memory. A reserve grows the heap ahead of that work,
//! touches each page of what it grew, and gives it all back to the allocator: the work
//! then allocates from touched pages. The allocator keeps freed memory (Wasm memory never
//! shrinks), so nothing is lost but what the heap would have grown by anyway.

use wasm_bindgen::prelude::*;

/// Bytes between touches: the smallest page an operating system backs memory with.
const PAGE: usize = 4096;

/// Heap grown ahead of a worker's work, touched a slice at a time, freed when dropped.
#[wasm_bindgen]
pub struct HeapReserve {
    buf: Vec<u8>,
    touched: usize,
}

#[wasm_bindgen]
impl HeapReserve {
    /// Grows the heap by `bytes`: by half as much, a quarter, ... if the memory cannot grow
    /// that far, by nothing below a page (a reserve is a hint; the work that follows gets
    /// the usual error if memory runs out).
    #[wasm_bindgen(constructor)]
    pub fn new(bytes: f64) -> HeapReserve {
        let mut buf = Vec::new();
        let mut want = bytes.max(0.0) as usize;
        while want >= PAGE && buf.try_reserve_exact(want).is_err() {
            want /= 2;
        }
        HeapReserve { buf, touched: 0 }
    }

    /// Bytes the reserve holds.
    pub fn bytes(&self) -> f64 {
        self.buf.capacity() as f64
    }

    /// Touches the next `max_bytes` of the reserve; answers whether any is left untouched.
    pub fn touch(&mut self, max_bytes: f64) -> bool {
        let spare = self.buf.spare_capacity_mut();
        let end = spare.len().min(self.touched + max_bytes.max(0.0) as usize);
        let mut at = self.touched;
        while at < end {
            // A volatile write: the compiler would drop a plain store to memory that is
            // freed unread, and the store is all this is for.
            unsafe { spare[at].as_mut_ptr().write_volatile(0) };
            at += PAGE;
        }
        self.touched = end;
        end < spare.len()
    }
}
