//! The controller's sensitivity mode: the prediction from the weights of the model on
//! screen, and a measured report opened beside it.

use super::*;

impl Controller {
    /// Sensitivity beside θ, for the model on screen.
    pub fn sens(&self) -> ReadSignal<SensData> {
        self.sens.read_only()
    }

    /// Predicts, from the weights alone, the sensitivity of the model measured in this tab
    /// to `ty`, and shows it beside θ; the report stays on screen.
    pub fn predict(self, ty: GgmlType) {
        if self.busy() {
            return;
        }
        let Some(model) = self.model.get_untracked() else {
            self.phase.set(Phase::Error("Measure a model in this tab first: the prediction reads its weights.".into()));
            return;
        };
        self.cancel.set(false);
        self.progress.set(Progress::default());
        self.phase.set(Phase::Predicting(model.label.clone()));
        spawn_local(async move {
            let c = self;
            match sensitivity::predict(&model, ty, &|| c.cancel.get_untracked(), &|p| c.progress.set(p)).await {
                Ok(r) => {
                    c.sens.update(|s| s.predicted = Some(Arc::new(r)));
                    c.phase.set(Phase::Done);
                }
                Err(Error::Cancelled) => c.phase.set(Phase::Cancelled),
                // An error that a stop brought about (a read cut off) is the stop's.
                Err(_) if c.cancel.get_untracked() => c.phase.set(Phase::Cancelled),
                Err(e) => c.phase.set(Phase::Error(e.to_string())),
            }
        });
    }

    /// Opens a measured sensitivity report (`organ sensitivity --json`) of the model
    /// measured in this tab, and shows it beside θ.
    pub fn open_sensitivity(self, files: Vec<web_sys::File>) {
        let Some(file) = files.into_iter().next() else { return };
        if self.busy() {
            return;
        }
        let Some(model) = self.model.get_untracked() else {
            self.phase.set(Phase::Error(
                "Measure a model in this tab first: a sensitivity report is read against its tensors.".into(),
            ));
            return;
        };
        let file = gloo_file::File::from(file);
        let name = file.name();
        if file.size() > sensitivity::MAX_REPORT_BYTES {
            let max = sensitivity::MAX_REPORT_BYTES;
            self.phase.set(Phase::Error(format!("{name}: more than {max} bytes, not a sensitivity report")));
            return;
        }
        spawn_local(async move {
            let c = self;
            let read = gloo_file::futures::read_as_text(&file).await.map_err(|e| Error::Read(format!("{name}: {e}")));
            match read.and_then(|text| sensitivity::read_measured(&name, &text, &model.tensors)) {
                Ok(m) => {
                    c.sens.update(|s| s.measured = Some(Arc::new(m)));
                    c.phase.set(Phase::Done);
                }
                Err(e) => c.phase.set(Phase::Error(e.to_string())),
            }
        });
    }
}
