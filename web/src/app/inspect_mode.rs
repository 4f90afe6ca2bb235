//! The controller's inspect mode and check: a model's header (a file, or a URL), its
//! metadata edited and written, and the data-free health check.

use super::*;

impl Controller {
    /// Checks a model (one file, or every shard of a split one) in this tab.
    pub fn check(self, files: Vec<web_sys::File>) {
        if files.is_empty() || self.busy() {
            return;
        }
        let files: Vec<gloo_file::File> = files.into_iter().map(gloo_file::File::from).collect();
        self.run_job(files[0].name(), move |c| async move {
            let chosen = pool::now_ms();
            let model = source::open(files).await?;
            c.phase.set(Phase::Checking(model.label.clone()));
            let o = check::check(&model, &|| c.cancel.get_untracked(), &|p| c.progress.set(p)).await?;
            let run = (pool::now_ms() - chosen, o.bytes_read, o.threads);
            Ok(Shown::Check(Arc::new(CheckData { report: o.report, run })))
        });
    }

    /// Reads the header of a model (one file, or every shard of a split one) for inspect
    /// mode: the memory view and the metadata editor.
    pub fn inspect(self, files: Vec<web_sys::File>) {
        if files.is_empty() || self.busy() {
            return;
        }
        let files: Vec<gloo_file::File> = files.into_iter().map(gloo_file::File::from).collect();
        self.run_job(files[0].name(), move |c| async move {
            let (model, cuts) = source::open_headers(files).await?;
            Ok(c.inspected(model, cuts))
        });
    }

    /// Reads the header of the model at a URL for inspect mode (its metadata is shown,
    /// not written: the bytes are not here to slice).
    pub fn inspect_url(self, url: String) {
        let url = url.trim().to_owned();
        if url.is_empty() || self.busy() {
            return;
        }
        self.run_job(url.clone(), move |c| async move { Ok(c.inspected(source::open_url(&url).await?, Vec::new())) });
    }

    /// Keeps the files of `model` for the editor, and its header for the view; `cuts`
    /// says what the files cut short lack.
    fn inspected(self, model: source::Model, cuts: Vec<String>) -> Shown {
        let source::Model { label, files, file_bytes, metadata, model } = model;
        let split = model.kvs.iter().find(|(k, _)| k == "split.count").and_then(|(_, v)| v.as_u64()).unwrap_or(1);
        let split = split.max(files.len() as u64);
        let not_editable = if matches!(files.first(), Some(source::Src::Url(_))) {
            Some(
                "A model at a URL: its metadata is shown, not written. Download it and drop the file to edit it."
                    .into(),
            )
        } else if !cuts.is_empty() {
            Some("Cut short (a partial download): organ meta edits a whole file. Download the rest first.".into())
        } else if split > files.len() as u64 {
            Some(format!(
                "{} of the {split} shards of a split model: drop them all to write the edited model.",
                files.len()
            ))
        } else {
            None
        };
        let names = files.iter().map(source::Src::name).collect();
        self.inspected.set(files);
        Shown::Inspect(Arc::new(InspectData { label, files: names, file_bytes, metadata, model, cuts, not_editable }))
    }

    /// Where writing the edited model is.
    pub fn writing(&self) -> ReadSignal<Writing> {
        self.writing.read_only()
    }

    /// Writes the model inspected with `pending` applied, offered as a download.
    pub fn write_edited(self, pending: Vec<PendingEdit>) {
        let files = self.inspected.get_untracked();
        if files.is_empty() || self.busy() || self.writing.get_untracked() == Writing::Busy {
            return;
        }
        self.writing.set(Writing::Busy);
        spawn_local(async move {
            let t0 = pool::now_ms();
            self.writing.set(match edit::write(&files, &pending).await {
                Ok(w) => Writing::Wrote {
                    bytes: w.bytes,
                    wrote: w.wrote,
                    changes: w.changes,
                    findings: w.findings,
                    ms: pool::now_ms() - t0,
                },
                Err(e) => Writing::Failed(e.to_string()),
            });
        });
    }
}
