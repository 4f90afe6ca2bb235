//! Sensitivity in the browser: the data-free prediction of each weight's sensitivity, by
//! the core's steps (`organ_core::predict::steps`) as `organ sensitivity --predict` runs
//! them, each tensor read whole through the read scheduler and each job run on the worker
//! pool; and a measured report (`organ sensitivity --json`) opened beside θ, checked
//! against the model by the core as `organ recipe --from` checks it.

use crate::error::Error;
use crate::pool;
use crate::reads::{Jobs, Meter, Progress, Read, Reads, Slot, MAX_READ};
use crate::source::Model;
use organ_core::imatrix::Imatrix;
use organ_core::model::TensorEntry;
use organ_core::predict::steps::{self, Energy, EnergyJob, RoundTripJob, Stream};
use organ_core::predict::{Calibration, Prediction, Predictor};
use organ_core::sensitivity::is_weight;
use organ_core::sensitivity::predicted::{rows, PredictionReport, SCHEMA};
use organ_core::sensitivity::report::{ReadBack, ReadError};
use organ_core::zmeasure::ReadPlan;
use organ_core::GgmlType;
use std::borrow::Cow;
use std::sync::Arc;

/// The largest sensitivity report opened, as `organ recipe --from` reads at most.
pub use organ_core::sensitivity::report::MAX_REPORT_BYTES;

/// A measured report opened beside θ: its file, its change, and each tensor's mean KLD.
#[derive(Clone, Debug, PartialEq)]
pub struct Measured {
    pub file: String,
    pub change: String,
    pub klds: Vec<(String, f64)>,
}

/// Reads a measured sensitivity report (`organ sensitivity --json`) of `model`: its rows
/// must name the model's tensors in their types and shapes.
pub fn read_measured(file: &str, text: &str, model: &[TensorEntry]) -> Result<Measured, Error> {
    let (r, klds) = ReadBack::read_checked(text, model, None).map_err(|e| match e {
        ReadError::Row(e) => Error::Refused(format!("{file}: {e} (a report of another model?)")),
        e => Error::Refused(format!("{file}: {e}")),
    })?;
    Ok(Measured { file: file.to_owned(), change: r.change, klds })
}

/// The core's step-1 jobs, for the read scheduler: a job is a block weight (and its norm)
/// or the token embedding, each read whole.
struct Step1<'m> {
    model: &'m Model,
    p: Arc<Predictor<'static>>,
    jobs: Vec<EnergyJob>,
    entries: Vec<Vec<TensorEntry>>,
    out: Vec<Option<Energy>>,
}

impl Jobs for Step1<'_> {
    type In = (Arc<Predictor<'static>>, EnergyJob, Vec<TensorEntry>);
    type Out = Energy;

    fn input(&self, j: usize) -> Self::In {
        (self.p.clone(), self.jobs[j].clone(), self.entries[j].clone())
    }

    fn run((p, job, entries): Self::In, slots: &[Slot]) -> Result<Energy, Error> {
        let values = slots.iter().map(|s| s.plan.values(s.bytes())).collect::<Result<Vec<_>, _>>();
        let values = values.map_err(Error::refused)?;
        let tensors: Vec<&TensorEntry> = entries.iter().collect();
        let values: Vec<&[f32]> = values.iter().map(Vec::as_slice).collect();
        p.energy(&job, &tensors, &values).map_err(Error::refused)
    }

    fn done(&mut self, j: usize, out: Energy) -> bool {
        self.out[j] = Some(out);
        true
    }

    fn err(&self, j: usize, e: Error) -> Error {
        e.at(format_args!(
            "{}: tensor {:?}",
            self.model.label,
            self.jobs[j].reads().first().copied().unwrap_or_default()
        ))
    }
}

/// The core's step-3 jobs: a selected weight, read whole and round-tripped.
struct Step3<'m> {
    model: &'m Model,
    p: Arc<Predictor<'static>>,
    stream: Arc<Stream>,
    jobs: Vec<RoundTripJob>,
    out: Vec<Option<Prediction>>,
}

impl Jobs for Step3<'_> {
    type In = (Arc<Predictor<'static>>, Arc<Stream>, RoundTripJob, TensorEntry);
    type Out = Prediction;

    fn input(&self, j: usize) -> Self::In {
        let job = self.jobs[j].clone();
        let t = self.model.tensors[job.tensor].clone();
        (self.p.clone(), self.stream.clone(), job, t)
    }

    fn run((p, stream, job, t): Self::In, slots: &[Slot]) -> Result<Prediction, Error> {
        let slot = slots.first().ok_or(Error::Internal("a job without its bytes"))?;
        let values = slot.plan.values(slot.bytes()).map_err(Error::refused)?;
        p.predict(&stream, &job, &t, &values).map_err(Error::refused)
    }

    fn done(&mut self, j: usize, out: Prediction) -> bool {
        self.out[j] = Some(out);
        true
    }

    fn err(&self, j: usize, e: Error) -> Error {
        e.at(format_args!("{}: tensor {:?}", self.model.label, self.model.tensors[self.jobs[j].tensor].name))
    }
}

/// Predicts the KLD of `model` with each weight `select` picks alone in each of `types`,
/// by the core's steps, from `imatrix`'s column mean squares (its round trips steered by
/// it, as the file is written) or, without one, from the weights alone; each source with
/// its own calibration (`Calibration::for_source`), as `organ recipe --imatrix` and
/// `--data-free` predict. `cancelled` stops it between reads.
pub async fn predictions(
    model: &Model,
    imatrix: Option<&Imatrix>,
    types: &[GgmlType],
    select: impl Fn(&str) -> bool,
    cancelled: &dyn Fn() -> bool,
    on_progress: &dyn Fn(Progress),
) -> Result<Vec<Prediction>, Error> {
    let t0 = pool::now_ms();
    let threads = pool::start().await?;
    // The jobs outlive this call on the worker pool: the matrix goes with them, owned.
    let imatrix = imatrix.map(|m| Cow::Owned(m.clone()));
    let calibration = Calibration::for_source(imatrix.is_some());
    let p = Predictor::new(&model.model, types, calibration, imatrix)
        .map_err(|e| Error::Refused(format!("{}: {e}", model.label)))?;
    let p = Arc::new(p);
    let energy_jobs = p.energy_jobs();
    let trip_jobs = p.round_trip_jobs(&model.model, select);
    // A job holds a whole tensor, its values and what it derives: one per thread.
    let window = threads.max(1);
    let meter = Meter::new(energy_jobs.len() + trip_jobs.len(), t0, on_progress);
    let entries = energy_jobs
        .iter()
        .map(|j| j.reads().into_iter().map(|n| steps::tensor(&model.model, n).cloned()).collect::<Result<Vec<_>, _>>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Error::Refused(format!("{}: {e}", model.label)))?;
    let n1 = energy_jobs.len();
    let step1 = Step1 { model, p: p.clone(), jobs: energy_jobs, out: vec![None; n1], entries };
    let mut s = Reads::new(vec![model], window, step1, meter);
    for j in 0..n1 {
        if cancelled() {
            return Err(Error::Cancelled);
        }
        let reads = s.jobs.entries[j].iter().map(|t| whole(model, t)).collect::<Result<Vec<_>, _>>()?;
        s.add(j, reads).await?;
    }
    let (step1, _) = s.finish().await?;
    let energies: Vec<Energy> =
        step1.out.into_iter().collect::<Option<_>>().ok_or(Error::Internal("a job without its result"))?;
    let stream = p.stream(&model.model, energies).map_err(|e| Error::Refused(format!("{}: {e}", model.label)))?;
    let n3 = trip_jobs.len();
    let mut meter = Meter::new(n1 + n3, t0, on_progress);
    meter.progress.done = n1;
    let step3 = Step3 { model, p: p.clone(), stream: Arc::new(stream), jobs: trip_jobs, out: vec![None; n3] };
    let mut s = Reads::new(vec![model], window, step3, meter);
    for j in 0..n3 {
        if cancelled() {
            return Err(Error::Cancelled);
        }
        let read = whole(model, &model.tensors[s.jobs.jobs[j].tensor])?;
        s.add(j, vec![read]).await?;
    }
    let (step3, _) = s.finish().await?;
    step3.out.into_iter().collect::<Option<_>>().ok_or(Error::Internal("a job without its result"))
}

/// The read of tensor `t`, whole.
fn whole(model: &Model, t: &TensorEntry) -> Result<Read, Error> {
    let plan =
        ReadPlan::exact(t.ty, t.n_elements, MAX_READ).map_err(|e| Error::Refused(format!("{}: {e}", model.label)))?;
    Ok(Read { model: 0, file: t.file, offset: t.offset, plan })
}

/// Predicts, from the weights alone, the KLD of `model` with each 2-D block weight alone
/// in `ty`: `organ sensitivity MODEL --predict --to TY`'s report. `cancelled` stops it
/// between reads.
pub async fn predict(
    model: &Model,
    ty: GgmlType,
    cancelled: &dyn Fn() -> bool,
    on_progress: &dyn Fn(Progress),
) -> Result<PredictionReport, Error> {
    let picked: Vec<&str> =
        model.tensors.iter().filter(|t| is_weight(&t.name, &t.dims)).map(|t| t.name.as_str()).collect();
    let calibration = Calibration::DATA_FREE;
    let predictions = predictions(model, None, &[ty], |n| picked.contains(&n), cancelled, on_progress).await?;
    let (tensors, not_predicted) = rows(predictions, &picked);
    Ok(PredictionReport {
        organ_sensitivity_prediction: SCHEMA,
        model: model.label.clone(),
        change: ty.name().to_owned(),
        source: "data-free".to_owned(),
        imatrix: None,
        calibration,
        truth: None,
        ranking: None,
        not_predicted,
        tensors,
    })
}
