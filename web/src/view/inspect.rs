//! Inspect mode: one model's header, read alone. The memory llama.cpp needs to run it, for
//! the settings chosen (the core's estimate, `organ inspect --memory`'s rows), and its
//! metadata as a table to edit (`organ meta`'s set, remove, rename and add) and its tensors
//! to rename by a regular expression, remove or convert to another type, written as a new
//! file the browser downloads: the new header and the dropped file's tensor data, never
//! read but for a tensor converted (`crate::edit`).

use super::metadata::{shown, value};
use crate::edit;
use crate::error::Error;
use crate::state::{InspectData, PendingEdit, Writing};
use leptos::prelude::*;
use organ_core::memory::{self, Settings, KV_TYPES};
use organ_core::report::human_bytes;
use std::sync::Arc;

/// The model's header on screen: its facts, the memory view and the metadata editor.
#[component]
pub fn InspectView(
    data: Arc<InspectData>,
    /// Where writing the edited model is.
    writing: ReadSignal<Writing>,
    /// Called with the edits to write.
    on_write: Callback<Vec<PendingEdit>>,
) -> impl IntoView {
    let m = &data.model;
    let arch = m.kvs.iter().find(|(k, _)| k == "general.architecture").and_then(|(_, v)| v.as_str().map(str::to_owned));
    let shards = if data.files.len() > 1 { format!(" in {} shards", data.files.len()) } else { String::new() };
    let facts = format!(
        "GGUF v{} · {} tensors · {} keys · {}{shards}. Only the header was read.",
        m.version,
        m.tensors.len(),
        m.kvs.len(),
        human_bytes(data.file_bytes)
    );
    view! {
        <section id="inspect" data-done="1">
            <h2>{format!("{} · {}", data.label, arch.unwrap_or_else(|| "?".into()))}</h2>
            <p class="mute" id="inspect-facts">{facts}</p>
            {(!data.cuts.is_empty()).then(|| view! {
                <ul id="inspect-cut" class="warnings">
                    {data.cuts.iter().map(|c| view! { <li>{c.clone()}</li> }).collect_view()}
                    <li>"Measure, compare, check and the surgeries need every byte: download the rest first."</li>
                </ul>
            })}
            <MemoryView data=data.clone() />
            <MetaEditor data writing on_write />
        </section>
    }
}

/// A whole number from an input, or the setting's name and what was wrong.
fn number(name: &str, text: &str) -> Result<u32, Error> {
    text.trim().parse().map_err(|_| Error::Refused(format!("{name}: {text:?} is not a whole number")))
}

/// The estimate for the settings as the inputs hold them.
fn estimate(
    data: &InspectData,
    ctx: &str,
    kv: &str,
    batch: &str,
    ubatch: &str,
    ngl: &str,
) -> Result<memory::Estimate, Error> {
    let s = Settings {
        ctx: if ctx.trim().is_empty() { None } else { Some(number("--ctx", ctx)?) },
        kv_type: KV_TYPES
            .iter()
            .copied()
            .find(|t| t.name().eq_ignore_ascii_case(kv))
            .unwrap_or(organ_core::GgmlType::F16),
        batch: number("--batch", batch)?,
        ubatch: number("--ubatch", ubatch)?,
        gpu_layers: number("--gpu-layers", ngl)?,
    };
    // A setting by the label of its field, which is the CLI's flag.
    let flagged = |e: memory::MemoryError| match e {
        memory::MemoryError::Setting(..) => Error::Refused(format!("--{e}")),
        e => Error::refused(e),
    };
    s.check().map_err(flagged)?;
    memory::estimate(&data.model, &s).map_err(|e| flagged(e).at(&data.label))
}

/// What llama.cpp allocates to run the model, per buffer, for the settings chosen.
#[component]
fn MemoryView(data: Arc<InspectData>) -> impl IntoView {
    let ctx = RwSignal::new(String::new());
    let kv = RwSignal::new("f16".to_owned());
    let batch = RwSignal::new(memory::DEFAULT_BATCH.to_string());
    let ubatch = RwSignal::new(memory::DEFAULT_UBATCH.to_string());
    let ngl = RwSignal::new("0".to_owned());
    let result = Memo::new(move |_| estimate(&data, &ctx.get(), &kv.get(), &batch.get(), &ubatch.get(), &ngl.get()));
    let field = |id: &'static str, label: &'static str, value: RwSignal<String>, placeholder: &'static str| {
        view! {
            <label>{label}" "<input id=id type="text" inputmode="numeric" size="7" placeholder=placeholder
                prop:value=move || value.get() on:input=move |ev| value.set(event_target_value(&ev)) /></label>
        }
    };
    view! {
        <section id="memory-view">
            <h3>"Memory to run it in llama.cpp"</h3>
            <p class="row filters">
                {field("mem-ctx", "context", ctx, "the model's")}
                <label>"KV type "<select id="mem-kv" on:change=move |ev| kv.set(event_target_value(&ev))>
                    {KV_TYPES.iter().map(|t| {
                        let name = t.name().to_ascii_lowercase();
                        view! { <option value=name.clone() selected=name == "f16">{name.clone()}</option> }
                    }).collect_view()}
                </select></label>
                {field("mem-batch", "batch", batch, "")}
                {field("mem-ubatch", "ubatch", ubatch, "")}
                {field("mem-ngl", "GPU layers", ngl, "")}
            </p>
            {move || match result.get() {
                Err(e) => view! { <p class="error" id="memory-error">{e.to_string()}</p> }.into_any(),
                Ok(e) => view! {
                    <p id="memory-settings" class="mute">{format!("What llama.cpp allocates at {}:", e.settings_text())}</p>
                    <table id="memory"><tbody>
                        {e.lines().into_iter().map(|l| view! {
                            <tr data-part=l.part data-bytes=l.bytes.to_string()>
                                <td>{l.what}</td><td class="n">{memory::mib(l.bytes)}</td><td class="mute">{l.note}</td>
                            </tr>
                        }).collect_view()}
                    </tbody></table>
                    <p class="mute">"Weights and KV cache as llama.cpp sizes them; the compute buffer approximated (organ inspect --memory, docs/surgery.md)."</p>
                }.into_any(),
            }}
        </section>
    }
}

/// An edit as the pending list says it.
fn describe(p: &PendingEdit) -> String {
    match p {
        PendingEdit::Set { key, text, ty } => {
            let cut: String = text.chars().take(60).collect();
            let more = if cut.len() < text.len() { format!("… ({} bytes)", text.len()) } else { String::new() };
            let ty = if ty.trim().is_empty() { String::new() } else { format!(" as {}", ty.trim()) };
            format!("set {key} = {cut:?}{more}{ty}")
        }
        PendingEdit::Remove { key } => format!("remove {key}"),
        PendingEdit::Rename { from, to } => format!("rename {from} → {to}"),
        PendingEdit::RenameTensors { pattern, replacement } => format!("rename tensors {pattern} → {replacement}"),
        PendingEdit::RemoveTensors { pattern } => format!("remove tensors {pattern}"),
        PendingEdit::RetypeTensors { pattern, ty } => format!("convert tensors {pattern} to {ty}"),
    }
}

/// The types a tensor can be converted to here: those organ quantize writes without an
/// importance matrix.
fn retype_names() -> Vec<&'static str> {
    organ_core::GgmlType::ALL
        .iter()
        .copied()
        .filter(|&t| organ_core::quant::quantize::can_quantize(t) && !organ_core::recipe::accept::needs_imatrix("x", t))
        .map(organ_core::GgmlType::name)
        .collect()
}

/// The tensor edits' inputs: rename by a regular expression, remove, convert.
#[component]
fn TensorEditor(pending: RwSignal<Vec<PendingEdit>>, tensors: usize) -> impl IntoView {
    let (pattern, replacement) = (RwSignal::new(String::new()), RwSignal::new(String::new()));
    let removed = RwSignal::new(String::new());
    let (retyped, ty) = (RwSignal::new(String::new()), RwSignal::new("Q8_0".to_owned()));
    let input = |id: &'static str, v: RwSignal<String>, placeholder: &'static str| {
        view! { <input id=id type="text" size="32" placeholder=placeholder prop:value=move || v.get() on:input=move |ev| v.set(event_target_value(&ev)) /> }
    };
    let add = move |e: PendingEdit, clear: &[RwSignal<String>]| {
        if !e.key().is_empty() {
            push(pending, e);
            for c in clear {
                c.set(String::new());
            }
        }
    };
    let rename = move |_| {
        let e =
            PendingEdit::RenameTensors { pattern: pattern.get_untracked(), replacement: replacement.get_untracked() };
        add(e, &[pattern, replacement]);
    };
    let remove = move |_| add(PendingEdit::RemoveTensors { pattern: removed.get_untracked() }, &[removed]);
    let retype = move |_| {
        add(PendingEdit::RetypeTensors { pattern: retyped.get_untracked(), ty: ty.get_untracked() }, &[retyped]);
    };
    view! {
        <h3>{format!("Tensors ({tensors})")}</h3>
        <p class="mute">"A pattern is a tensor's name, or a regular expression (the regex crate's) matching whole names: blk\\.(\\d+)\\.attn_q\\.weight. A rename's replacement takes $1 for a group."</p>
        <p class="row filters" id="tensor-rename-row">"Rename tensors: "
            {input("tensor-rename-pattern", pattern, "regex (blk\\.(\\d+)\\.attn_q\\.weight)")}" → "
            {input("tensor-rename-to", replacement, "replacement (blk.$1.attn_query.weight)")}
            <button id="tensor-rename" on:click=rename>"rename"</button></p>
        <p class="row filters" id="tensor-remove-row">"Remove tensors: "
            {input("tensor-remove-pattern", removed, "name or regex (output.weight)")}
            <button id="tensor-remove" on:click=remove>"remove"</button></p>
        <p class="row filters" id="tensor-retype-row">"Convert tensors: "
            {input("tensor-retype-pattern", retyped, "name or regex (blk\\.0\\.ffn_down\\.weight)")}" to "
            <select id="tensor-retype-type" on:change=move |ev| ty.set(event_target_value(&ev))>
                {retype_names().into_iter().map(|t| view! { <option value=t selected=t == "Q8_0">{t}</option> }).collect_view()}
            </select>
            <button id="tensor-retype" on:click=retype>"convert"</button></p>
    }
}

/// Adds `e` to the pending edits, in place of an edit of the same kind of the same key.
fn push(pending: RwSignal<Vec<PendingEdit>>, e: PendingEdit) {
    pending.update(|p| {
        let same = |x: &PendingEdit| x.key() == e.key() && std::mem::discriminant(x) == std::mem::discriminant(&e);
        match p.iter().position(same) {
            Some(i) => p[i] = e,
            None => p.push(e),
        }
    });
}

/// The metadata as a table to edit, the edits pending, and the write.
#[component]
fn MetaEditor(
    data: Arc<InspectData>,
    writing: ReadSignal<Writing>,
    on_write: Callback<Vec<PendingEdit>>,
) -> impl IntoView {
    let query = RwSignal::new(String::new());
    let pending: RwSignal<Vec<PendingEdit>> = RwSignal::new(Vec::new());
    let total = data.metadata.len();
    let editable = data.not_editable.is_none();
    let what_is_written = match data.files.len() {
        1 => "The new header, then this file's tensor data as it is: nothing is read into memory or sent (but a \
              tensor to convert, converted here)."
            .to_owned(),
        n => format!(
            "The first shard's new header and tensor data, then the other {} shards as they are, each a download \
             (the browser may ask to allow several): nothing is read into memory or sent.",
            n - 1
        ),
    };
    let rows = data.metadata.iter().map(|r| {
        let key = r.key.clone();
        // Which of the row's editors is open: the value's or the key's.
        let open: RwSignal<Option<&'static str>> = RwSignal::new(None);
        let text = RwSignal::new(String::new());
        let data = data.clone();
        let begin_edit = {
            let key = key.clone();
            move |_| {
                text.set(edit::start_text(&data.model, &key).unwrap_or_default());
                open.set(Some("edit"));
            }
        };
        let begin_rename = {
            let key = key.clone();
            move |_| {
                text.set(key.clone());
                open.set(Some("rename"));
            }
        };
        let keep = {
            let key = key.clone();
            move |_| {
                let t = text.get_untracked();
                match open.get_untracked() {
                    Some("rename") => push(pending, PendingEdit::Rename { from: key.clone(), to: t }),
                    _ => push(pending, PendingEdit::Set { key: key.clone(), text: t, ty: String::new() }),
                }
                open.set(None);
            }
        };
        let remove = {
            let key = key.clone();
            move |_| push(pending, PendingEdit::Remove { key: key.clone() })
        };
        let touched = {
            let key = key.clone();
            move || pending.with(|p| p.iter().any(|e| e.key() == key))
        };
        let hidden = {
            let key = key.clone();
            move || !shown(&key, &query.get())
        };
        let value = value(r);
        let big = r.whole.is_some() || r.ty.starts_with("array");
        view! {
            <tr data-key=r.key.clone() hidden=hidden class:touched=touched>
                <td><code>{r.key.clone()}</code></td><td>{r.ty.clone()}</td>
                <td class="val">
                    {value}
                    {move || open.get().map(|what| view! {
                        <div class="editing" data-editing=what>
                            {if big || what == "edit" {
                                view! { <textarea class="edit-text" rows=if big { 8 } else { 1 } cols="80"
                                    prop:value=move || text.get() on:input=move |ev| text.set(event_target_value(&ev))></textarea> }.into_any()
                            } else {
                                view! { <input class="edit-text" type="text" prop:value=move || text.get()
                                    on:input=move |ev| text.set(event_target_value(&ev)) /> }.into_any()
                            }}
                            <button class="keep" on:click=keep.clone()>"keep"</button>
                            <button class="cancel" on:click=move |_| open.set(None)>"cancel"</button>
                        </div>
                    })}
                </td>
                {editable.then(|| view! {
                    <td class="acts">
                        <button class="edit" on:click=begin_edit.clone()>"edit"</button>
                        <button class="rename" on:click=begin_rename.clone()>"rename"</button>
                        <button class="rm" on:click=remove.clone()>"remove"</button>
                    </td>
                })}
            </tr>
        }
    }).collect_view();
    let keys: Vec<String> = data.metadata.iter().map(|r| r.key.clone()).collect();
    let count = move || {
        let q = query.get();
        if q.is_empty() {
            String::new()
        } else {
            format!("{} of {total} keys", keys.iter().filter(|k| shown(k, &q)).count())
        }
    };
    let (add_key, add_text, add_ty) =
        (RwSignal::new(String::new()), RwSignal::new(String::new()), RwSignal::new(String::new()));
    let add = move |_| {
        let key = add_key.get_untracked();
        if !key.is_empty() {
            push(pending, PendingEdit::Set { key, text: add_text.get_untracked(), ty: add_ty.get_untracked() });
            add_key.set(String::new());
            add_text.set(String::new());
            add_ty.set(String::new());
        }
    };
    let input = |id: &'static str, v: RwSignal<String>, placeholder: &'static str| {
        view! { <input id=id type="text" placeholder=placeholder prop:value=move || v.get() on:input=move |ev| v.set(event_target_value(&ev)) /> }
    };
    let busy = move || writing.get() == Writing::Busy;
    view! {
        <section id="meta-editor">
            <h3>{format!("Metadata ({total} keys)")}</h3>
            {data.not_editable.clone().map(|why| view! { <p class="mute" id="meta-not-editable">{why}</p> })}
            <p class="row filters"><input id="meta-filter" type="search" placeholder="filter keys (tokenizer, rope, chat_template…)"
                on:input=move |ev| query.set(event_target_value(&ev)) />
                <span class="mute" id="meta-count">{count}</span></p>
            <table id="metadata"><thead><tr><th>"key"</th><th>"type"</th><th>"value"</th>{editable.then(|| view! { <th></th> })}</tr></thead>
                <tbody>{rows}</tbody></table>
            {editable.then(|| view! {
                <p class="row filters" id="meta-add-row">"Add a key: "
                    {input("meta-add-key", add_key, "key (general.url)")}
                    <textarea id="meta-add-value" rows="1" cols="40" placeholder="value (an array as JSON)"
                        prop:value=move || add_text.get() on:input=move |ev| add_text.set(event_target_value(&ev))></textarea>
                    {input("meta-add-type", add_ty, "type: u32, f32, str, arr[i32]… (optional)")}
                    <button id="meta-add" on:click=add>"add"</button>
                </p>
                <TensorEditor pending tensors=data.model.tensors.len() />
                <h3>"Edits"</h3>
                <ol id="meta-pending">
                    {move || pending.get().into_iter().enumerate().map(|(i, e)| view! {
                        <li>{describe(&e)}" "<button class="undo" on:click=move |_| pending.update(|p| { p.remove(i); })>"undo"</button></li>
                    }).collect_view()}
                </ol>
                <p class="row"><button id="meta-write" disabled=move || busy() || pending.with(Vec::is_empty)
                    on:click=move |_| on_write.run(pending.get_untracked())>"Write the edited model"</button>
                    <span class="mute">{what_is_written.clone()}</span></p>
                {move || match writing.get() {
                    Writing::Idle => None,
                    Writing::Busy => Some(view! { <p id="meta-status" class="mute">"Writing…"</p> }.into_any()),
                    Writing::Failed(e) => Some(view! { <p class="error" id="meta-error">{e}</p> }.into_any()),
                    Writing::Wrote { bytes, wrote, changes, findings, ms } => Some(view! {
                        <div id="meta-status" data-done="1" data-bytes=bytes.to_string() data-ms=format!("{ms:.0}")>
                            <pre id="meta-changes">{changes.join("\n")}</pre>
                            <p>{format!("{wrote} ({ms:.0} ms)")}</p>
                            {(!findings.is_empty()).then(|| view! { <pre id="meta-findings" class="warnings">{findings.join("\n")}</pre> })}
                        </div>
                    }.into_any()),
                }}
            })}
        </section>
    }
}
