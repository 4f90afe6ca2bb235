//! Writing a GGUF whose tensors are made of pieces: byte ranges of input files copied in
//! the kernel ([`copy_range`], as cp), bytes made in memory, and ranges requantized on the
//! way (a row chunk at a time, by the core's quantizers). `organ moe` stacks its experts
//! this way, with no per-value work where nothing is requantized.

use super::copy::copy_range;
use super::gguf::lay_out;
use crate::atomic::Temp;
use crate::model_file::ModelFile;
use anyhow::{bail, Context, Result};
use organ_core::gguf::writer::{padding, TensorSpec};
use organ_core::model::OwnedValue;
use organ_core::GgmlType;
use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

/// Values requantized per chunk: bounds the memory a requantized piece takes.
const CHUNK_VALUES: u64 = 1 << 20;

/// One run of a tensor's bytes.
pub enum Piece {
    /// `len` bytes of `file` from `offset`, as they are.
    Range { file: Arc<ModelFile>, offset: u64, len: u64 },
    /// Bytes made in memory.
    Bytes(Vec<u8>),
    /// `len` bytes of `file` from `offset`, rows of `row` values of type `from`, written as `to`.
    Requantize { file: Arc<ModelFile>, offset: u64, len: u64, row: u64, from: GgmlType, to: GgmlType },
}

impl Piece {
    /// Bytes it writes.
    fn out_len(&self) -> Result<u64> {
        Ok(match self {
            Piece::Range { len, .. } => *len,
            Piece::Bytes(b) => b.len() as u64,
            Piece::Requantize { len, row, from, to, .. } => {
                let rows = rows(*len, *row, *from)?;
                rows * (row / to.block_size() as u64) * to.type_size() as u64
            }
        })
    }
}

/// How many rows of `row` values of `ty` `len` bytes hold, checked.
fn rows(len: u64, row: u64, ty: GgmlType) -> Result<u64> {
    let bs = ty.block_size() as u64;
    let row_bytes = (row / bs.max(1)) * ty.type_size() as u64;
    if row == 0 || row % bs != 0 || row_bytes == 0 || len % row_bytes != 0 {
        bail!("{len} bytes are not whole rows of {row} {ty} values");
    }
    Ok(len / row_bytes)
}

/// A tensor of the output: what the header says, and its pieces in order.
pub struct Planned {
    pub name: String,
    pub dims: Vec<u64>,
    pub ty: GgmlType,
    pub pieces: Vec<Piece>,
}

/// What the header says of each of `tensors`.
fn specs(tensors: &[Planned]) -> impl Iterator<Item = TensorSpec<'_>> {
    tensors.iter().map(|t| TensorSpec { name: &t.name, dims: &t.dims, ty: t.ty })
}

/// Writes the GGUF of `kvs` and `tensors` into a temp path beside `dest` and returns it
/// uncommitted, with the file's length.
pub fn stage(
    version: u32,
    kvs: &[(String, OwnedValue)],
    tensors: &[Planned],
    dest: &Path,
    force: bool,
) -> Result<(Temp, u64)> {
    let layout = lay_out(version, kvs, specs(tensors), dest)?;
    for (t, &(_, n)) in tensors.iter().zip(&layout.tensors) {
        let sum = t.pieces.iter().try_fold(0u64, |a, p| Ok::<_, anyhow::Error>(a.saturating_add(p.out_len()?)))?;
        if sum != n {
            bail!("{}: tensor {:?} is {n} bytes, its pieces {sum}", dest.display(), t.name);
        }
    }
    let (tmp, mut f) = Temp::file(dest, force)?;
    f.write_all(&layout.header)?;
    let zeros = vec![0u8; layout.alignment as usize];
    for (t, &(_, n)) in tensors.iter().zip(&layout.tensors) {
        for p in &t.pieces {
            write_piece(p, &mut f).with_context(|| format!("{}: writing tensor {:?}", tmp.path.display(), t.name))?;
        }
        f.write_all(&zeros[..padding(n, layout.alignment) as usize])?;
    }
    Ok((tmp, layout.file_len))
}

/// Writes the header of `kvs` and `tensors` again over a file [`stage`] wrote, whose
/// metadata differed only in values of the same encoded length (`len`, the file's length,
/// must come out the same).
pub fn rewrite_header(
    tmp: &Temp,
    version: u32,
    kvs: &[(String, OwnedValue)],
    tensors: &[Planned],
    len: u64,
) -> Result<()> {
    let layout = lay_out(version, kvs, specs(tensors), &tmp.path)?;
    if layout.file_len != len {
        bail!("{}: the header changed length ({} bytes, then {})", tmp.path.display(), len, layout.file_len);
    }
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&tmp.path)
        .with_context(|| format!("{}: cannot open to write its header", tmp.path.display()))?;
    std::os::unix::fs::FileExt::write_all_at(&f, &layout.header, 0)
        .with_context(|| format!("{}: cannot write its header", tmp.path.display()))
}

fn write_piece(p: &Piece, dst: &mut File) -> Result<()> {
    match p {
        Piece::Range { file, offset, len } => file.with_file(|src| copy_range(src, *offset, *len, dst)),
        Piece::Bytes(b) => Ok(dst.write_all(b)?),
        Piece::Requantize { file, offset, len, row, from, to } => {
            let row_bytes = len / rows(*len, *row, *from)?;
            let per_chunk = (CHUNK_VALUES / row).max(1) * row_bytes;
            let mut buf = Vec::new();
            let mut at = 0;
            while at < *len {
                let n = per_chunk.min(len - at);
                buf.resize(n as usize, 0);
                file.read_exact_at(&mut buf, offset + at)?;
                dst.write_all(&organ_core::surgery::moe::requantize(*from, &buf, *to)?)?;
                at += n;
            }
            Ok(())
        }
    }
}
