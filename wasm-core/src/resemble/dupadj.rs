//! DupAdj: candidate bases from duplicate adjacency (DARE §3.2).
//!
//! When chunk `A[i]` of a new version is a duplicate of chunk `B[j]` of an older version, the
//! two streams are aligned there, so the new chunk next to it, `A[i+1]`, is probably an edited
//! `B[j+1]` (and `A[i-1]` an edited `B[j-1]`). DupAdj walks outwards from every duplicate in
//! both directions, pairing neighbours one for one, until it meets a chunk that is a
//! duplicate (it anchors a walk of its own), a chunk already paired, the end of a recipe, or a
//! pair the caller rejects as dissimilar. No feature is computed and no index is consulted:
//! the recipes are the whole input.
//!
//! A recipe here is a sequence of fingerprints (a version's chunks in stream order). The
//! function is pure: the caller supplies which new chunks need a base, the older recipes, and
//! the similarity test (in the delta pass: encode the delta and keep it if it pays), which the
//! paper uses to end a walk at the first dissimilar pair.

use crate::hash::Fingerprint;
use std::collections::HashMap;

/// A chunk of an older recipe: `recipe` indexes the `old` slice given to [`pairs`], `index`
/// the chunk within it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Loc {
    pub recipe: usize,
    pub index: usize,
}

/// DupAdj pairs for a new recipe.
///
/// - `new`: the new version's fingerprints in order; `needs_base[i]` is true for the chunks
///   stored for the first time by this version (the delta candidates), false for duplicates.
/// - `old`: older recipes; a duplicate is located in the newest recipe holding it (the later
///   in `old`, the newer).
/// - `similar(i, loc)`: whether new chunk `i` and old chunk `loc` are similar enough; a walk
///   stops at the first pair it rejects.
///
/// Returns `(i, loc)` pairs, each new chunk at most once, in the order found. Walks start at
/// each duplicate in recipe order, forwards then backwards. An old neighbour that is the very
/// chunk being paired (same fingerprint) is never proposed.
pub fn pairs(
    new: &[Fingerprint],
    needs_base: &[bool],
    old: &[&[Fingerprint]],
    mut similar: impl FnMut(usize, Loc) -> bool,
) -> Vec<(usize, Loc)> {
    assert_eq!(new.len(), needs_base.len(), "one flag per new chunk");
    let mut at: HashMap<&Fingerprint, Loc> = HashMap::new();
    for (r, recipe) in old.iter().enumerate() {
        for (j, fp) in recipe.iter().enumerate() {
            at.insert(
                fp,
                Loc {
                    recipe: r,
                    index: j,
                },
            );
        }
    }
    let mut paired = vec![false; new.len()];
    let mut out = Vec::new();
    for i in 0..new.len() {
        if needs_base[i] {
            continue;
        }
        let Some(&anchor) = at.get(&new[i]) else {
            continue;
        };
        let old_recipe = old[anchor.recipe];
        for step in [1isize, -1] {
            let mut k: isize = 1;
            while let (Some(ni), Some(oj)) = (
                i.checked_add_signed(step * k),
                anchor.index.checked_add_signed(step * k),
            ) {
                if ni >= new.len() || oj >= old_recipe.len() {
                    break;
                }
                if !needs_base[ni] || paired[ni] || old_recipe[oj] == new[ni] {
                    break;
                }
                let loc = Loc {
                    recipe: anchor.recipe,
                    index: oj,
                };
                if !similar(ni, loc) {
                    break;
                }
                paired[ni] = true;
                out.push((ni, loc));
                k += 1;
            }
        }
    }
    out
}
