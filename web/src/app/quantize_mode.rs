//! The controller's quantize mode: a model opened (its headers), an importance matrix
//! beside it, the plan of a type previewed as the user picks it, and the model quantized
//! into a file the user chose (`crate::quantize`).

use super::*;
use crate::quantize::{self as quant, Request, Sink};
use crate::state::{QuantizeData, Quantized};
use organ_core::quantize::report::QuantizeReport;
use organ_core::quantize::Ftype;
use organ_core::recipe::accept::DEFAULT_FTYPE;
use organ_core::recipe::predicted::candidate_types;
use organ_core::recipe::report::Recipe;
use organ_core::report::formats::{AnyReport, Shown as Parts, TEXT};

impl Controller {
    /// Opens a model (one file, or every shard of a split one) to quantize; an importance
    /// matrix kept from before stays.
    pub fn quantize_open(self, files: Vec<web_sys::File>) {
        if files.is_empty() || self.busy() {
            return;
        }
        let files: Vec<gloo_file::File> = files.into_iter().map(gloo_file::File::from).collect();
        self.run_job(files[0].name(), move |c| async move {
            let model = source::open(files).await?;
            let types = tally(model.tensors.iter().map(|t| t.ty));
            let data = QuantizeData {
                label: model.label.clone(),
                file_bytes: model.file_bytes,
                n_tensors: model.tensors.len(),
                types,
            };
            c.quant_model.set(Some(Rc::new(model)));
            c.quantized.set(Quantized::Idle);
            Ok(Shown::Quantize(Arc::new(data)))
        });
    }

    /// Reads an importance matrix to steer the quantizers (the first file of `files`).
    pub fn quantize_imatrix(self, files: Vec<web_sys::File>) {
        let Some(file) = files.into_iter().next() else { return };
        if self.busy() {
            return;
        }
        let file = gloo_file::File::from(file);
        spawn_local(async move {
            match quant::read_imatrix(&file).await {
                Ok(m) => {
                    self.quant_imatrix_name.set(m.name.clone());
                    self.quant_imatrix.set(Some(Rc::new(m)));
                    // A recipe is predicted from the matrix beside it (or none): chosen again.
                    self.quant_recipe.set(None);
                    self.quantized.set(Quantized::Idle);
                }
                Err(e) => self.phase.set(Phase::Error(e.to_string())),
            }
        });
    }

    /// Lets go of the importance matrix.
    pub fn quantize_no_imatrix(self) {
        if !self.busy() {
            self.quant_imatrix.set(None);
            self.quant_imatrix_name.set(String::new());
            self.quant_recipe.set(None);
        }
    }

    /// The importance matrix's file name (empty: none).
    pub fn quant_imatrix_name(&self) -> ReadSignal<String> {
        self.quant_imatrix_name.read_only()
    }

    /// Where quantizing the model on screen is.
    pub fn quantized(&self) -> ReadSignal<Quantized> {
        self.quantized.read_only()
    }

    /// The plan of `ftype` for the model opened, as `organ quantize --dry-run` prints its
    /// sizes, and how many tensors each type gets; or why the core refuses it.
    pub fn quantize_preview(self, choice: String) -> Result<String, String> {
        let Some(model) = self.quant_model.get_untracked() else { return Err(String::new()) };
        let im = self.quant_imatrix.get_untracked();
        let (req, recipe) = self.request(&choice).map_err(|e| e.to_string())?;
        let params = quant::params(&req, im.as_deref()).map_err(|e| e.to_string())?;
        let plan = quant::plan(&model, &params).map_err(|e| e.to_string())?;
        if let Some(r) = &recipe {
            plan.check_recipe(r).map_err(|e| format!("{}: the recipe's plan: {e}", model.label))?;
        }
        let n_elements = model.tensors.iter().map(|t| t.n_elements).sum();
        let out = quant::out_name(&model.label, &out_type(&req));
        let report = QuantizeReport::new(&plan, &params, model.label.clone(), vec![out], n_elements);
        let mut text = String::new();
        let _ = (TEXT.render)(AnyReport::Quantize(&report), &Parts::WHOLE, &mut text);
        let mut counts = tally(report.tensors.iter().map(|t| t.to));
        counts.sort_by_key(|&(ty, n)| (std::cmp::Reverse(n), ty.name()));
        let counts: Vec<String> = counts.iter().map(|(ty, n)| format!("{n} {}", ty.name())).collect();
        text.push_str(&format!("tensors: {}\n", counts.join(", ")));
        Ok(text)
    }

    /// Quantizes the model opened to `ftype` into a file the user chooses (a save dialog
    /// where the browser has one, else a download).
    pub fn quantize_run(self, choice: String) {
        let Some(model) = self.quant_model.get_untracked() else { return };
        if self.busy() {
            return;
        }
        let im = self.quant_imatrix.get_untracked();
        self.cancel.set(false);
        self.quantized.set(Quantized::Idle);
        spawn_local(async move {
            let t0 = pool::now_ms();
            let r = async {
                let (req, recipe) = self.request(&choice)?;
                let params = quant::params(&req, im.as_deref())?;
                // Planned before the dialog: no file is made for a plan the core refuses.
                let plan = quant::plan(&model, &params)?;
                if let Some(r) = &recipe {
                    plan.check_recipe(r)
                        .map_err(|e| Error::Refused(format!("{}: the recipe's plan: {e}", model.label)))?;
                }
                let sink = Sink::choose(&quant::out_name(&model.label, &out_type(&req))).await?;
                let file = sink.name().to_owned();
                self.progress.set(Progress::default());
                self.phase.set(Phase::Quantizing(model.label.clone()));
                let (cancelled, progress) = (&|| self.cancel.get_untracked(), &|p| self.progress.set(p));
                let o = quant::quantize(&model, params, &plan, sink, cancelled, progress).await?;
                Ok::<_, Error>((o, file))
            }
            .await;
            match r {
                Ok((o, file)) => {
                    let run = (pool::now_ms() - t0, o.bytes_read, o.threads);
                    let report = Arc::new(o.report);
                    self.quantized.set(Quantized::Wrote { report, file, run, heap: heap() });
                    self.phase.set(Phase::Done);
                }
                Err(Error::Cancelled) => self.phase.set(Phase::Cancelled),
                Err(e) => self.phase.set(Phase::Error(e.to_string())),
            }
        });
    }
}

impl Controller {
    /// What `choice` asks for: a type of llama-quantize's, or (`recipe`) the recipe chosen
    /// last, its lines over Q8_0 as `organ recipe --apply` quantizes.
    fn request(self, choice: &str) -> Result<(Request, Option<Arc<Recipe>>), Error> {
        if choice == RECIPE {
            let r = self.quant_recipe.get_untracked().ok_or_else(|| {
                Error::Refused(
                    "No recipe yet: give a target and choose one (it is predicted from the importance matrix dropped, or from the weights alone).".into(),
                )
            })?;
            let ftype = Ftype::from_id(DEFAULT_FTYPE.1).ok_or(Error::Internal("the recipe's file type"))?;
            return Ok((Request { ftype, lines: r.lines.clone() }, Some(r)));
        }
        let ftype =
            Ftype::parse(choice).ok_or_else(|| Error::Refused(format!("{choice}: not a type llama-quantize takes")))?;
        Ok((Request { ftype, lines: Vec::new() }, None))
    }

    /// The recipe chosen last, if any.
    pub fn quant_recipe(&self) -> ReadSignal<Option<Arc<Recipe>>, LocalStorage> {
        self.quant_recipe.read_only()
    }

    /// Chooses the recipe for the model opened within `target` (`5.5bpw`, `90M`) among
    /// `types` (comma-separated; empty: `organ recipe`'s default list), predicted from the
    /// importance matrix dropped or from the weights alone, as `organ recipe MODEL
    /// --imatrix I` or `--data-free`, `--types … --target-…` chooses it; the preview then
    /// shows its plan, and the file is quantized under the same matrix, as `--apply` does.
    pub fn quantize_recipe(self, (target, types): (String, String)) {
        let Some(model) = self.quant_model.get_untracked() else { return };
        if self.busy() {
            return;
        }
        let im = self.quant_imatrix.get_untracked();
        self.cancel.set(false);
        self.quantized.set(Quantized::Idle);
        spawn_local(async move {
            let r = async {
                let (target, asked) = quant::target(&target)?;
                let names: Vec<&str> = types.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
                let types = candidate_types(&names).map_err(Error::refused)?;
                self.progress.set(Progress::default());
                self.phase.set(Phase::Predicting(model.label.clone()));
                let (cancelled, progress) = (&|| self.cancel.get_untracked(), &|p| self.progress.set(p));
                quant::recipe(&model, im.as_deref(), &types, (target, &asked), cancelled, progress).await
            }
            .await;
            match r {
                Ok(r) => {
                    self.quant_recipe.set(Some(Arc::new(r)));
                    self.phase.set(Phase::Done);
                }
                Err(Error::Cancelled) => self.phase.set(Phase::Cancelled),
                Err(e) => self.phase.set(Phase::Error(e.to_string())),
            }
        });
    }
}

/// How many of `types` are each type, in the order each first comes.
fn tally(types: impl Iterator<Item = GgmlType>) -> Vec<(GgmlType, usize)> {
    let mut counts: Vec<(GgmlType, usize)> = Vec::new();
    for ty in types {
        match counts.iter_mut().find(|(t, _)| *t == ty) {
            Some((_, n)) => *n += 1,
            None => counts.push((ty, 1)),
        }
    }
    counts
}

/// What the choice `recipe` is called in the type list.
pub const RECIPE: &str = "recipe";

/// The output's type in its name: the file type, `recipe` for a recipe's.
fn out_type(req: &Request) -> String {
    if req.lines.is_empty() {
        format!("{:?}", req.ftype)
    } else {
        RECIPE.to_owned()
    }
}

/// The page's memory now, where Chromium says it: the JS heap in use
/// (`performance.memory.usedJSHeapSize`) and the wasm memory's size, bytes.
fn heap() -> Option<(f64, f64)> {
    let perf = web_sys::window()?.performance()?;
    let mem = js_sys::Reflect::get(&perf, &"memory".into()).ok()?;
    let js = js_sys::Reflect::get(&mem, &"usedJSHeapSize".into()).ok()?.as_f64()?;
    // A SharedArrayBuffer under the worker pool: its length read as a property.
    let buffer = js_sys::Reflect::get(&wasm_bindgen::memory(), &"buffer".into()).ok()?;
    let wasm = js_sys::Reflect::get(&buffer, &"byteLength".into()).ok()?.as_f64()?;
    Some((js, wasm))
}
