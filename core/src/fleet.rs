//! The files a fleet of `organ measure` workers shares (`--fleet … --results`), and the
//! measure cache's entries (`--cache`): what a report was measured under
//! ([`Definition`]), the fleet's own file, a shard's index, a model's result. A face
//! stores, names and fetches them; their form and the bounds a reader keeps are here, so
//! every face reads and writes the same files.

use crate::report::ModelReport;
use crate::zmeasure::Mode;
use alloc::borrow::ToOwned;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use serde::{Deserialize, Serialize};

/// The version of the files below; a file of another version is refused by name. Format 1
/// (before results were tied to their models' identities in the indexes) is refused with
/// the advice to measure again.
pub const FORMAT: u32 = 2;

/// The most models a fleet holds (its list, `fleet.json`, the indexes together).
pub const MAX_FLEET_MODELS: usize = 100_000;

/// The version of the cached report's JSON form ([`crate::report::ModelReport`]);
/// bump it when that form changes, so older entries are not read as new ones.
/// 2: each expert's `standing`.
pub const REPORT_SCHEMA: u32 = 2;

/// Everything besides the model that decides what a report holds. A new option that
/// changes a report is a new field here (and nowhere else): it then goes into every key.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Definition {
    /// The measure's definition ([`crate::zmeasure::MEASURE`]).
    pub measure: String,
    /// [`REPORT_SCHEMA`].
    pub report_schema: u32,
    /// The mode, besides plain sampling (`"sigma"`, `"exact"`): a report with σ_θ, or with
    /// θ over every value, is another report. Absent for plain sampling, so the keys of
    /// entries made before modes existed stay what they were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Per-expert θ (`--experts`, §6): a report with it is another report. Absent (false)
    /// without, so earlier keys stay what they were.
    #[serde(default, skip_serializing_if = "core::ops::Not::not")]
    pub experts: bool,
}

impl Definition {
    /// The definition `organ measure` reports under in `mode`.
    pub fn current(mode: Mode) -> Definition {
        let name = match mode {
            Mode::Sampled => None,
            Mode::Sigma => Some("sigma"),
            Mode::Exact => Some("exact"),
        };
        Definition {
            measure: mode.label().to_owned(),
            report_schema: REPORT_SCHEMA,
            mode: name.map(str::to_owned),
            experts: false,
        }
    }
}

/// What a cache entry's file holds (a face's `--cache`).
#[derive(Serialize, Deserialize)]
pub struct CacheEntry<T> {
    /// What the report was measured under.
    pub definition: Definition,
    /// The model's identity.
    pub model_blake3: String,
    /// The report.
    pub report: T,
}

/// The fleet's file: what every worker measures, and how, so that workers started with
/// another list, shard count or definition are refused rather than mixed in.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct FleetFile {
    /// [`FORMAT`].
    pub organ_fleet: u32,
    /// What every model is measured under.
    pub definition: Definition,
    /// How many shards the fleet is cut into.
    pub shards: u64,
    /// Every model, sorted: model j is shard j mod `shards`'s. At most [`MAX_FLEET_MODELS`]
    /// (refused while parsing, before more are stored).
    #[serde(deserialize_with = "fleet_models")]
    pub models: Vec<String>,
}

/// A shard's index, written when the shard is done: which result holds each of its
/// models' reports (models with the same bytes share one), under which definition, and
/// each result's BLAKE3, which the merge checks.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct ShardIndex {
    /// [`FORMAT`].
    pub organ_fleet: u32,
    /// This shard.
    pub shard: u64,
    /// Of how many.
    pub shards: u64,
    /// The definition the shard was measured under: the fleet's.
    pub definition: Definition,
    /// Each of its models' results. At most [`MAX_FLEET_MODELS`] (refused while parsing).
    #[serde(deserialize_with = "index_entries")]
    pub results: Vec<Indexed>,
}

/// One model of a shard: its name in the fleet, its identity (a face's cache key:
/// the BLAKE3 of a local model's bytes, or a model at a URL's identity), the name of its
/// result, and the BLAKE3 of the result's bytes.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Indexed {
    /// The model's name in the fleet.
    pub model: String,
    /// Its identity.
    pub model_blake3: String,
    /// Its result's name.
    pub result: String,
    /// The BLAKE3 of the result's bytes.
    pub result_blake3: String,
}

/// A model's result: its report, and the key it was stored under (checked on reading).
#[derive(Serialize, Deserialize)]
pub struct ResultFile {
    /// [`FORMAT`].
    pub organ_fleet: u32,
    /// What the report was measured under.
    pub definition: Definition,
    /// The model's identity.
    pub model_blake3: String,
    /// The report.
    pub report: ModelReport,
}

/// A list of at most `max` entries, refused as soon as one more is seen (before it is
/// stored): memory stays proportional to the cap, whatever the file holds.
fn at_most<'de, D, T>(d: D, max: usize, what: &'static str) -> core::result::Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    struct Bounded<T> {
        max: usize,
        what: &'static str,
        t: core::marker::PhantomData<T>,
    }
    impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for Bounded<T> {
        type Value = Vec<T>;
        fn expecting(&self, f: &mut core::fmt::Formatter) -> core::fmt::Result {
            write!(f, "a list of at most {} {}", self.max, self.what)
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> core::result::Result<Vec<T>, A::Error> {
            let mut v = Vec::new();
            while let Some(x) = seq.next_element()? {
                if v.len() == self.max {
                    return Err(serde::de::Error::custom(format!("more than {} {}", self.max, self.what)));
                }
                v.push(x);
            }
            Ok(v)
        }
    }
    d.deserialize_seq(Bounded { max, what, t: core::marker::PhantomData })
}

fn fleet_models<'de, D: serde::Deserializer<'de>>(d: D) -> core::result::Result<Vec<String>, D::Error> {
    at_most(d, MAX_FLEET_MODELS, "models (a fleet's most)")
}

fn index_entries<'de, D: serde::Deserializer<'de>>(d: D) -> core::result::Result<Vec<Indexed>, D::Error> {
    at_most(d, MAX_FLEET_MODELS, "entries (a fleet's most models)")
}
