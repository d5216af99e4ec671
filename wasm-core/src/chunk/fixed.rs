//! Fixed-size chunking: every chunk is `size` bytes except the last. Used for file types
//! whose content is already compressed or never edited in place (see [`super::policy`]),
//! where content-defined cut points buy no dedup and cost time.

use super::CutPoint;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fixed {
    size: usize,
}

impl Fixed {
    pub fn new(size: usize) -> Result<Self, String> {
        if size == 0 || size > 16 << 20 {
            return Err(format!("fixed: size {size} out of range 1..=16 MiB"));
        }
        Ok(Fixed { size })
    }
}

impl CutPoint for Fixed {
    fn max_size(&self) -> usize {
        self.size
    }
    fn cut(&self, buf: &[u8], start: usize) -> usize {
        (start + self.size).min(buf.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_sizes() {
        let data = vec![7u8; 10_001];
        let got = crate::chunk::chunk_all(&Fixed::new(4096).unwrap(), &data);
        assert_eq!(got, vec![(0, 4096), (4096, 4096), (8192, 1809)]);
        assert!(Fixed::new(0).is_err());
    }
}
