//! Copying tensor data into an output file: in the kernel where it can.

use crate::model::Tensor;
use anyhow::{bail, Result};
use std::fs::File;
use std::io::Write;

/// Appends a tensor's bytes to `dst`: in memory ones directly, file-backed ones in the kernel.
pub(crate) fn write_tensor_data(t: &Tensor, dst: &mut File) -> Result<()> {
    match &t.owned {
        Some(b) => Ok(dst.write_all(b)?),
        None => t.in_file.with_file(|src| copy_range(src, t.offset, t.n_bytes, dst)),
    }
}

/// Copies `len` bytes of `src` from `offset` to the current end of `dst`, in the kernel
/// (`copy_file_range`, as cp does) where it can, else through a buffer.
pub fn copy_range(src: &File, offset: u64, len: u64, dst: &mut File) -> Result<()> {
    let mut off = offset;
    let mut left = len;
    while left > 0 {
        let chunk = usize::try_from(left.min(1 << 30)).unwrap_or(1 << 30);
        match rustix::fs::copy_file_range(src, Some(&mut off), &*dst, None, chunk) {
            Ok(0) => bail!("source ended {left} bytes early"),
            Ok(n) => left -= n as u64,
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => {
                // Not supported here (another filesystem, an old kernel): copy by hand.
                use std::io::Write;
                use std::os::unix::fs::FileExt;
                let mut buf = vec![0u8; (1 << 20).min(left as usize)];
                while left > 0 {
                    let n = buf.len().min(left as usize);
                    src.read_exact_at(&mut buf[..n], off)?;
                    dst.write_all(&buf[..n])?;
                    off += n as u64;
                    left -= n as u64;
                }
            }
        }
    }
    Ok(())
}
