//! A byte-level GGUF builder for tests: it writes exactly what it is told, so tests can
//! build both valid files and hostile ones (lengths that lie, counts that overflow…).
#![allow(dead_code)]

#[derive(Default, Clone)]
pub struct Raw(pub Vec<u8>);

impl Raw {
    /// Magic, version, tensor count, kv count.
    pub fn header(version: u32, n_tensors: u64, n_kv: u64) -> Raw {
        Raw::default().bytes(b"GGUF").u32(version).u64(n_tensors).u64(n_kv)
    }
    pub fn bytes(mut self, b: &[u8]) -> Raw {
        self.0.extend_from_slice(b);
        self
    }
    pub fn u8(self, v: u8) -> Raw {
        self.bytes(&[v])
    }
    pub fn u32(self, v: u32) -> Raw {
        self.bytes(&v.to_le_bytes())
    }
    pub fn u64(self, v: u64) -> Raw {
        self.bytes(&v.to_le_bytes())
    }
    pub fn string(self, s: &str) -> Raw {
        self.u64(s.len() as u64).bytes(s.as_bytes())
    }
    /// A key and a u32 value.
    pub fn kv_u32(self, key: &str, v: u32) -> Raw {
        self.string(key).u32(4).u32(v)
    }
    /// A key and a string value.
    pub fn kv_str(self, key: &str, v: &str) -> Raw {
        self.string(key).u32(8).string(v)
    }
    /// A tensor info.
    pub fn tensor(self, name: &str, dims: &[u64], ty: u32, offset: u64) -> Raw {
        let mut r = self.string(name).u32(dims.len() as u32);
        for &d in dims {
            r = r.u64(d);
        }
        r.u32(ty).u64(offset)
    }
    /// Zero padding up to a multiple of `align`.
    pub fn pad(self, align: usize) -> Raw {
        let n = (align - self.0.len() % align) % align;
        self.bytes(&vec![0; n])
    }
    pub fn len(&self) -> u64 {
        self.0.len() as u64
    }
}

/// A small valid file: 2 metadata keys, one F32 tensor [4, 2] and one Q8_0 tensor [32].
pub fn small_valid() -> Vec<u8> {
    let mut r = Raw::header(3, 2, 2)
        .kv_str("general.architecture", "llama")
        .kv_u32("general.alignment", 32)
        .tensor("blk.0.attn_q.weight", &[4, 2], 0, 0)
        .tensor("blk.0.ffn_up.weight", &[32], 8, 32)
        .pad(32);
    let data: Vec<u8> = (0..8u32).flat_map(|i| (i as f32).to_le_bytes()).collect();
    r = r.bytes(&data).pad(32);
    let mut q8 = vec![0u8; 34];
    q8[0..2].copy_from_slice(&0x3C00u16.to_le_bytes()); // d = 1.0
    for (i, b) in q8[2..].iter_mut().enumerate() {
        *b = i as u8;
    }
    r.bytes(&q8).pad(32).0
}
