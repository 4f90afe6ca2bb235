//! organ in the browser: drop a GGUF into a tab, get its θ report, privately; or drop two
//! and compare them tensor by tensor. Files are read in byte ranges through the File API
//! and measured or compared on a pool of Web Workers by the same organ-core functions as
//! the CLI; nothing is uploaded. Or drop one to read its header alone: the memory it
//! needs, and its metadata edited and written as a new file.

mod adapter;
mod app;
mod check;
mod compare;
mod edit;
mod error;
mod experts;
mod export;
mod measure;
mod pool;
mod quantize;
mod reads;
mod sensitivity;
mod source;
mod state;
mod url_source;
mod view;

fn main() {
    console_error_panic_hook::set_once();
    leptos::mount::mount_to_body(app::App);
}
