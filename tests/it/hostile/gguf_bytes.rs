//! GGUF bytes written by hand, so that any field can be wrong: a header, keys, tensor
//! infos, and the small files the cases start from.

pub(super) const STRING: u32 = 8;
pub(super) const ARRAY: u32 = 9;
pub(super) const U8: u32 = 0;
pub(super) const U32: u32 = 4;
pub(super) const F32_TY: u32 = 0;

pub(super) fn header(tensors: u64, kvs: u64) -> Vec<u8> {
    let mut b = b"GGUF".to_vec();
    b.extend(3u32.to_le_bytes());
    b.extend(tensors.to_le_bytes());
    b.extend(kvs.to_le_bytes());
    b
}

pub(super) fn put_str(b: &mut Vec<u8>, s: &[u8]) {
    b.extend((s.len() as u64).to_le_bytes());
    b.extend(s);
}

/// A key and its type code; the value follows.
pub(super) fn put_key(b: &mut Vec<u8>, key: &str, ty: u32) {
    put_str(b, key.as_bytes());
    b.extend(ty.to_le_bytes());
}

pub(super) fn put_tensor(b: &mut Vec<u8>, name: &[u8], dims: &[u64], ty: u32, offset: u64) {
    put_str(b, name);
    b.extend((dims.len() as u32).to_le_bytes());
    for d in dims {
        b.extend(d.to_le_bytes());
    }
    b.extend(ty.to_le_bytes());
    b.extend(offset.to_le_bytes());
}

pub(super) fn pad(b: &mut Vec<u8>, align: usize) {
    while b.len() % align != 0 {
        b.push(0);
    }
}

/// An F32 tensor's data: `n` small floats.
pub(super) fn floats(b: &mut Vec<u8>, n: usize) {
    for i in 0..n {
        b.extend((i as f32 * 0.25 - 1.0).to_le_bytes());
    }
}

/// A small valid model: an architecture, a vocabulary, two F32 tensors.
pub(super) fn valid() -> Vec<u8> {
    let mut b = header(2, 2);
    put_key(&mut b, "general.architecture", STRING);
    put_str(&mut b, b"llama");
    put_key(&mut b, "tokenizer.ggml.tokens", ARRAY);
    b.extend(STRING.to_le_bytes());
    b.extend(3u64.to_le_bytes());
    for t in [&b"a"[..], b"b", b"<s>"] {
        put_str(&mut b, t);
    }
    put_tensor(&mut b, b"token_embd.weight", &[32, 2], F32_TY, 0);
    put_tensor(&mut b, b"blk.0.attn_q.weight", &[32, 2], F32_TY, 256);
    pad(&mut b, 32);
    floats(&mut b, 128);
    b
}

/// One metadata key holding `n` empty arrays (an array of arrays), 12 bytes each.
pub(super) fn nested_empty_arrays(n: u64) -> Vec<u8> {
    let mut b = header(0, 1);
    put_key(&mut b, "x", ARRAY);
    b.extend(ARRAY.to_le_bytes());
    b.extend(n.to_le_bytes());
    for _ in 0..n {
        b.extend(U8.to_le_bytes());
        b.extend(0u64.to_le_bytes());
    }
    b
}

/// Arrays nested `depth` deep, the innermost empty.
pub(super) fn deep_arrays(depth: u32) -> Vec<u8> {
    let mut b = header(0, 1);
    put_key(&mut b, "deep", ARRAY);
    for _ in 1..depth {
        b.extend(ARRAY.to_le_bytes());
        b.extend(1u64.to_le_bytes());
    }
    b.extend(U8.to_le_bytes());
    b.extend(0u64.to_le_bytes());
    b
}

/// One metadata key holding a u8 array of `n` elements.
pub(super) fn long_u8_array(n: u64) -> Vec<u8> {
    let mut b = header(0, 1);
    put_key(&mut b, "long", ARRAY);
    b.extend(U8.to_le_bytes());
    b.extend(n.to_le_bytes());
    b.extend((0..n).map(|i| i as u8));
    b
}

/// A one-tensor model whose tensor is described by `dims`, `ty` and `offset`, with
/// `data` bytes of data and `align` as general.alignment when given.
pub(super) fn one_tensor(name: &[u8], dims: &[u64], ty: u32, offset: u64, data: usize, align: Option<u32>) -> Vec<u8> {
    let mut b = header(1, u64::from(align.is_some()));
    if let Some(a) = align {
        put_key(&mut b, "general.alignment", U32);
        b.extend(a.to_le_bytes());
    }
    put_tensor(&mut b, name, dims, ty, offset);
    let a = match align {
        Some(a) if a.is_power_of_two() && a <= 1 << 20 => a as usize,
        _ => 32,
    };
    pad(&mut b, a);
    b.resize(b.len() + data, 0x3c);
    b
}
