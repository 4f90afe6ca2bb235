//! Expert counts in metadata (`expert_count`, `expert_used_count`): integers of any
//! width, or per-layer arrays of them, changed in place keeping their type.

use crate::gguf::{MetaArray, MetaValue, ValueType};
use crate::model::OwnedValue;
use alloc::vec;
use alloc::vec::Vec;

/// `v`, an unsigned count of any integer type, set to `f(old)` in the same type; arrays
/// (per-layer counts) element by element.
pub(super) fn map_count(v: &OwnedValue, f: impl Fn(u64) -> u64) -> Option<OwnedValue> {
    let scalar = |m: &MetaValue<'_>| -> Option<MetaValue<'static>> {
        let n = f(m.as_u64()?);
        Some(match m {
            MetaValue::U8(_) => MetaValue::U8(n.try_into().ok()?),
            MetaValue::U16(_) => MetaValue::U16(n.try_into().ok()?),
            MetaValue::U32(_) => MetaValue::U32(n.try_into().ok()?),
            MetaValue::U64(_) => MetaValue::U64(n),
            MetaValue::I8(_) => MetaValue::I8(n.try_into().ok()?),
            MetaValue::I16(_) => MetaValue::I16(n.try_into().ok()?),
            MetaValue::I32(_) => MetaValue::I32(n.try_into().ok()?),
            MetaValue::I64(_) => MetaValue::I64(n.try_into().ok()?),
            _ => return None,
        })
    };
    match v {
        OwnedValue::Scalar(m) => scalar(m).map(OwnedValue::Scalar),
        OwnedValue::Array { elem_type, len, raw } => {
            let size = match elem_type {
                ValueType::U8 | ValueType::I8 => 1,
                ValueType::U16 | ValueType::I16 => 2,
                ValueType::U32 | ValueType::I32 => 4,
                ValueType::U64 | ValueType::I64 => 8,
                _ => return None,
            };
            MetaArray::from_raw(*elem_type, *len, raw).ok()?;
            let mut out = Vec::with_capacity(raw.len());
            for chunk in raw.chunks_exact(size) {
                let m = scalar(&MetaValue::decode(*elem_type, chunk).ok()?)?;
                let bytes = OwnedValue::Scalar(m);
                out.extend_from_slice(&encode_scalar(&bytes)?);
            }
            Some(OwnedValue::Array { elem_type: *elem_type, len: *len, raw: out.into() })
        }
        OwnedValue::Str(_) => None,
    }
}

/// The GGUF bytes of an integer scalar.
fn encode_scalar(v: &OwnedValue) -> Option<Vec<u8>> {
    let OwnedValue::Scalar(m) = v else { return None };
    Some(match *m {
        MetaValue::U8(x) => vec![x],
        MetaValue::I8(x) => x.to_le_bytes().to_vec(),
        MetaValue::U16(x) => x.to_le_bytes().to_vec(),
        MetaValue::I16(x) => x.to_le_bytes().to_vec(),
        MetaValue::U32(x) => x.to_le_bytes().to_vec(),
        MetaValue::I32(x) => x.to_le_bytes().to_vec(),
        MetaValue::U64(x) => x.to_le_bytes().to_vec(),
        MetaValue::I64(x) => x.to_le_bytes().to_vec(),
        _ => return None,
    })
}

/// The largest count `v` holds (a scalar, or the largest of a per-layer array).
pub(super) fn max_count(v: &OwnedValue) -> Option<u64> {
    let max = core::cell::Cell::new(None::<u64>);
    map_count(v, |n| {
        max.set(Some(max.get().map_or(n, |m| m.max(n))));
        n
    })?;
    max.get()
}
