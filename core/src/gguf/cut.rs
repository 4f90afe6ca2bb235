//! A GGUF cut short: a partial download, or a copy stopped midway. The header is whole
//! (else nothing can be said), the data is not: [`Cut::of`] says how many bytes the
//! header implies, how many the file has, and which tensors are whole, cut or absent.

use super::Gguf;
use alloc::string::String;
use alloc::vec::Vec;
use serde::Serialize;

/// What a file cut short lacks (as `inspect --json` shows it: fields in key order).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cut {
    /// Tensors none of whose bytes are in the file, in file order of their data.
    pub absent: Vec<String>,
    /// The tensor the end of the file falls in, if any, with the bytes of it the file
    /// holds and its size.
    pub cut: Option<(String, u64, u64)>,
    /// The length the header implies: the end of the tensor whose data ends last.
    #[serde(rename = "expected_bytes")]
    pub expected_len: u64,
    /// The file's length.
    #[serde(rename = "file_bytes")]
    pub file_len: u64,
    /// Tensors whose bytes are all in the file.
    pub whole: usize,
}

impl Cut {
    /// What `g` (parsed by [`Gguf::parse_cut_short`]) lacks, or `None` when every
    /// tensor's bytes are in the file.
    pub fn of(g: &Gguf<'_>) -> Option<Cut> {
        let len = g.file_len;
        let end = |t: &super::TensorInfo<'_>| t.file_offset.saturating_add(t.n_bytes);
        let expected_len = g.tensors.iter().map(end).max()?;
        if expected_len <= len {
            return None;
        }
        let mut by_offset: Vec<&super::TensorInfo<'_>> = g.tensors.iter().collect();
        by_offset.sort_by_key(|t| t.file_offset);
        let mut c = Cut { absent: Vec::new(), cut: None, expected_len, file_len: len, whole: 0 };
        for t in by_offset {
            if end(t) <= len {
                c.whole += 1;
            } else if t.file_offset < len {
                // At most one tensor straddles the end, unless tensors overlap (which the
                // parser does not forbid): the first found is named, later ones are absent.
                if c.cut.is_none() {
                    c.cut = Some((t.name.into(), len - t.file_offset, t.n_bytes));
                } else {
                    c.absent.push(t.name.into());
                }
            } else {
                c.absent.push(t.name.into());
            }
        }
        Some(c)
    }

    /// Bytes the file lacks.
    pub fn missing_bytes(&self) -> u64 {
        self.expected_len - self.file_len
    }

    /// One line saying what is missing: the bytes, the tensor cut, the tensors absent.
    pub fn describe(&self) -> String {
        let pct = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 * 100.0 / b as f64 };
        let mut s = alloc::format!(
            "cut short: {} of the {} bytes its header implies ({:.1}%), {} missing; {} tensors whole",
            self.file_len,
            self.expected_len,
            pct(self.file_len, self.expected_len),
            self.missing_bytes(),
            self.whole
        );
        if let Some((name, have, of)) = &self.cut {
            s.push_str(&alloc::format!(", {name} cut ({have} of {of} bytes)"));
        }
        match self.absent.as_slice() {
            [] => {}
            [one] => s.push_str(&alloc::format!(", {one} absent")),
            [first, .., last] => s.push_str(&alloc::format!(", {} absent ({first} to {last})", self.absent.len())),
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::writer::plan;
    use crate::gguf::MetaValue;
    use crate::GgmlType;

    /// A GGUF of three F32 tensors of 64 values (256 bytes each), data zero.
    fn three() -> Vec<u8> {
        let kvs = [("general.architecture", MetaValue::Str(b"llama"))];
        let dims = [64u64];
        let t = |name: &'static str| crate::gguf::writer::TensorSpec { name, dims: &dims, ty: GgmlType::F32 };
        let tensors = [t("a"), t("b"), t("c")];
        let l = plan(3, &kvs, &tensors).expect("a header");
        let mut out = l.header.clone();
        out.resize(l.file_len as usize, 0);
        out
    }

    #[test]
    fn a_file_cut_in_its_data_says_which_tensors_are_whole_cut_and_absent() {
        let whole = three();
        let g = Gguf::parse(&whole, whole.len() as u64).unwrap();
        assert_eq!(Cut::of(&g), None, "nothing is missing from the whole file");
        let data = g.data_offset as usize;
        let cut_at = data + 256 + 100;
        let part = &whole[..cut_at];
        assert!(Gguf::parse(part, part.len() as u64).is_err(), "the strict parse refuses it");
        let g = Gguf::parse_cut_short(part, part.len() as u64).unwrap();
        let c = Cut::of(&g).unwrap();
        assert_eq!((c.file_len, c.expected_len, c.whole), (cut_at as u64, whole.len() as u64, 1));
        assert_eq!(c.cut, Some(("b".into(), 100, 256)));
        assert_eq!(c.absent, [String::from("c")]);
        assert!(c.describe().contains("b cut (100 of 256 bytes), c absent"), "{}", c.describe());
        let kept: Vec<&str> = g.within_file().tensors.iter().map(|t| t.name).collect();
        assert_eq!(kept, ["a"]);
    }

    #[test]
    fn a_file_cut_in_its_padding_has_every_tensor_absent_and_one_cut_in_its_header_is_refused() {
        let whole = three();
        let g = Gguf::parse(&whole, whole.len() as u64).unwrap();
        let header_end = g.data_offset as usize - 1;
        let part = &whole[..header_end];
        let c = Cut::of(&Gguf::parse_cut_short(part, part.len() as u64).unwrap()).unwrap();
        assert_eq!((c.whole, c.cut.clone(), c.absent.len()), (0, None, 3));
        let part = &whole[..40];
        assert!(Gguf::parse_cut_short(part, part.len() as u64).is_err(), "no header, nothing to show");
    }
}
