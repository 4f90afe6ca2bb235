//! What a view is, as the URL fragment says it: the page's mode, the tensor table's sort,
//! filter and selected tensor (never model bytes, nor anything read from a model but a
//! tensor's name). The browser app writes it as the view changes and reads it when a page
//! opens, so a link reopens the same view once the same file is opened; the static pages'
//! script reads the same keys ([`super::page`]).
//!
//! `#mode=measure&sort=-theta&q=attn&group=organ&layer=3&tensor=blk.3.attn_q.weight`: keys
//! in any order, values percent-encoded, a `-` before the sort key for descending order.
//! A fragment is untrusted text: an unknown key, a value that does not parse or one longer
//! than [`MAX_VALUE`] is left out, never an error.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

/// The longest value read from a fragment, in bytes once decoded (a tensor's name is far
/// shorter).
pub const MAX_VALUE: usize = 1024;

/// A view as a URL fragment holds it. Empty strings and `None` are "not said".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ViewState {
    /// The page's mode: `measure`, `compare`, `check`, `inspect` or `quantize`.
    pub mode: Option<String>,
    /// The column the tensor table is sorted by (its key), and whether ascending.
    pub sort: Option<(String, bool)>,
    /// The table's text filter: a name's substring or a type.
    pub query: String,
    /// The table's group filter: a group's name.
    pub group: String,
    /// The table's layer filter.
    pub layer: Option<u32>,
    /// The selected tensor's name.
    pub tensor: Option<String>,
}

impl ViewState {
    /// The view a fragment (with or without its `#`) describes.
    pub fn parse(fragment: &str) -> ViewState {
        let mut v = ViewState::default();
        let body = fragment.strip_prefix('#').unwrap_or(fragment);
        for part in body.split('&') {
            let Some((key, raw)) = part.split_once('=') else { continue };
            let Some(value) = decode(raw) else { continue };
            match key {
                "mode" if matches!(value.as_str(), "measure" | "compare" | "check" | "inspect" | "quantize") => {
                    v.mode = Some(value)
                }
                "sort" => {
                    let (key, asc) = value.strip_prefix('-').map_or((value.as_str(), true), |k| (k, false));
                    if !key.is_empty() && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                        v.sort = Some((key.into(), asc));
                    }
                }
                "q" => v.query = value,
                "group" => v.group = value,
                "layer" => v.layer = value.parse().ok(),
                "tensor" if !value.is_empty() => v.tensor = Some(value),
                _ => {}
            }
        }
        v
    }

    /// The fragment, `#` first, of what is said; `""` when nothing is.
    pub fn to_fragment(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        if let Some(m) = &self.mode {
            parts.push(format!("mode={}", encode(m)));
        }
        if let Some((k, asc)) = &self.sort {
            parts.push(format!("sort={}{}", if *asc { "" } else { "-" }, encode(k)));
        }
        if !self.query.is_empty() {
            parts.push(format!("q={}", encode(&self.query)));
        }
        if !self.group.is_empty() {
            parts.push(format!("group={}", encode(&self.group)));
        }
        if let Some(l) = self.layer {
            parts.push(format!("layer={l}"));
        }
        if let Some(t) = &self.tensor {
            parts.push(format!("tensor={}", encode(t)));
        }
        if parts.is_empty() {
            String::new()
        } else {
            format!("#{}", parts.join("&"))
        }
    }
}

/// `s` with every byte but the unreserved ones (RFC 3986: letters, digits, `-._~`) as `%XX`.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A percent-encoded value (`+` is a space, as forms write it); `None` when a `%` is not
/// followed by two hex digits, the bytes are not UTF-8, or it is longer than [`MAX_VALUE`].
fn decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hex = core::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
        if out.len() > MAX_VALUE {
            return None;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full() -> ViewState {
        ViewState {
            mode: Some("measure".into()),
            sort: Some(("theta".into(), false)),
            query: "attn q&x=1#é".into(),
            group: "organ".into(),
            layer: Some(3),
            tensor: Some("blk.3.attn_q.weight".into()),
        }
    }

    #[test]
    fn a_view_round_trips_through_its_fragment() {
        let f = full().to_fragment();
        assert_eq!(
            f,
            "#mode=measure&sort=-theta&q=attn%20q%26x%3D1%23%C3%A9&group=organ&layer=3&tensor=blk.3.attn_q.weight"
        );
        assert_eq!(ViewState::parse(&f), full());
        assert_eq!(ViewState::parse(&f[1..]), full(), "the # is optional");
        assert_eq!(ViewState::default().to_fragment(), "");
        assert_eq!(ViewState::parse(""), ViewState::default());
    }

    #[test]
    fn what_does_not_parse_is_left_out() {
        let v = ViewState::parse("#mode=upload&sort=-&layer=x&tensor=%ZZ&q=%C3&group=a%2&x=1&noequals&sort2=theta");
        assert_eq!(v, ViewState::default());
        let v = ViewState::parse("#sort=%3Cscript%3E&q=a+b&layer=-1");
        assert_eq!((v.sort, v.query.as_str(), v.layer), (None, "a b", None));
        let long = "a".repeat(MAX_VALUE + 1);
        assert_eq!(ViewState::parse(&format!("#q={long}")).query, "");
        assert_eq!(ViewState::parse(&format!("#q={}", &long[1..])).query.len(), MAX_VALUE);
    }
}
