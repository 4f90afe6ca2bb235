//! Writing a GGUF some of whose tensors are made in memory (merged with adapters, merged
//! across models) and the rest copied from their files in the kernel: the made ones in
//! batches, in parallel, written in order, so memory holds a batch and never the model.

use super::copy::write_tensor_data;
use crate::atomic::Temp;
use crate::model::Model;
use anyhow::{bail, Context, Result};
use organ_core::gguf::writer::{padding, TensorSpec};
use organ_core::model::OwnedValue;
use organ_core::GgmlType;
use rayon::prelude::*;
use std::collections::VecDeque;
use std::io::Write;
use std::path::Path;

/// A tensor to make: its type in the output, and the bytes making it holds at its peak
/// (what a batch's budget counts; 0 when small).
#[derive(Clone, Copy, Debug)]
pub struct Made {
    pub ty: GgmlType,
    pub holds: u64,
}

/// Writes to `out` (through a temp file) the GGUF of `kvs` and the tensors of `like` (in
/// its GGUF version), in order: each tensor `i` with `made[i]` set is `make(i)`'s bytes,
/// in its type; every other one is copied from its file. Made tensors are made a batch
/// at a time in parallel: at most 2 × threads of them, holding at most `budget` bytes
/// together, and never none. Returns the file's length.
///
/// # Errors
/// The layout, a made tensor's error, or one of the wrong length; the temp file is then
/// removed and `out` left as it was.
pub fn write_made(
    out: &Path,
    force: bool,
    like: &Model,
    kvs: &[(String, OwnedValue)],
    made: &[Option<Made>],
    budget: u64,
    make: impl Fn(usize) -> Result<Vec<u8>> + Sync,
) -> Result<u64> {
    let tensors = &like.tensors;
    let specs = tensors.iter().zip(made).map(|(t, m)| TensorSpec {
        name: &t.name,
        dims: &t.dims,
        ty: m.map_or(t.ty, |m| m.ty),
    });
    let layout = super::gguf::lay_out(like.version, kvs, specs, out)?;
    let (tmp, mut f) = Temp::file(out, force)?;
    f.write_all(&layout.header)?;
    let zeros = vec![0u8; layout.alignment as usize];
    let todo: Vec<usize> = (0..tensors.len()).filter(|&i| made[i].is_some()).collect();
    let holds = |i: usize| made[i].map_or(0, |m| m.holds);
    let window = 2 * rayon::current_num_threads();
    let (mut next, mut ready) = (0, VecDeque::new());
    for (i, (t, &(_, n))) in tensors.iter().zip(&layout.tensors).enumerate() {
        if made[i].is_none() {
            write_tensor_data(t, &mut f)
                .with_context(|| format!("{}: copying tensor {:?}", tmp.path.display(), t.name))?;
        } else {
            if ready.is_empty() {
                let mut end = next + 1;
                let mut held = holds(todo[next]);
                while end < todo.len() && end - next < window {
                    held = held.saturating_add(holds(todo[end]));
                    if held > budget {
                        break;
                    }
                    end += 1;
                }
                let batch: Vec<Vec<u8>> = todo[next..end].par_iter().map(|&i| make(i)).collect::<Result<_>>()?;
                ready.extend(batch);
                next = end;
            }
            let bytes = ready.pop_front().unwrap_or_default();
            if bytes.len() as u64 != n {
                bail!("{}: made tensor {:?} is {} bytes, its header says {n}", out.display(), t.name, bytes.len());
            }
            f.write_all(&bytes)?;
        }
        f.write_all(&zeros[..padding(n, layout.alignment) as usize])?;
    }
    tmp.commit()?;
    Ok(layout.file_len)
}
