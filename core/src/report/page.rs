//! What every static page shares (the θ report's, [`super::html`], and the compare
//! report's, [`super::render_compare`]): HTML escaping, the report embedded as JSON and read
//! back, the CSS, and the script that sorts and filters tables and keeps the first table's
//! view in the URL fragment, with the app's keys ([`super::ViewState`]): a link to the page
//! with a fragment reopens its view.

use alloc::format;
use alloc::string::String;

/// The Content-Security-Policy every static page carries: nothing is fetched (no network,
/// no other file), only the page's own inline style and script run, images only as data.
pub const CSP_META: &str = "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
                            style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">";

/// Escapes text for HTML element content and quoted attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A report (θ or compare) as JSON that is safe inside a `<script>` element (no `<` at all).
pub fn embeddable_json<T: serde::Serialize + ?Sized>(report: &T) -> String {
    // Serializing plain data structures cannot fail.
    let json = serde_json::to_string(report).unwrap_or_default();
    json.replace('<', "\\u003c")
}

pub(crate) const STYLE: &str = "
:root{--bg:#fbfaf7;--fg:#1d232b;--mute:#5b6673;--line:#d9dde2;--card:#fff}
*{box-sizing:border-box}body{margin:0;font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;background:var(--bg);color:var(--fg)}
header{padding:18px 28px;border-bottom:1px solid var(--line);background:var(--card)}h1{font-size:20px;margin:0}
h2{font-size:17px;margin:28px 0 8px}h3{font-size:15px;margin:18px 0 6px;color:var(--mute)}
main{padding:0 28px 40px;max-width:1400px}.mute{color:var(--mute)}
.cards{display:flex;flex-wrap:wrap;gap:10px}.card{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:10px 14px;min-width:130px}
.card b{display:block;font-size:18px}table{border-collapse:collapse;background:var(--card)}
th,td{border:1px solid var(--line);padding:3px 8px;text-align:left;white-space:nowrap}th{background:#eef0f3;cursor:pointer;user-select:none}
td.n{text-align:right;font-variant-numeric:tabular-nums}.heat td{width:64px;text-align:center;font-size:12px}
.scroll{max-height:640px;overflow:auto;border:1px solid var(--line)}input.filter{padding:5px 8px;margin:4px 0 8px;width:320px;border:1px solid var(--line);border-radius:6px}
.legend{display:inline-block;width:160px;height:10px;vertical-align:middle;border-radius:3px}.hscroll{overflow-x:auto}
";

pub(crate) const SCRIPT: &str = "
document.querySelectorAll('table.sortable').forEach(function(t){t.querySelectorAll('th').forEach(function(th,i){th.addEventListener('click',function(){
var b=t.tBodies[0],rows=Array.prototype.slice.call(b.rows),num=th.hasAttribute('data-num'),dir=th.dataset.dir=th.dataset.dir==='asc'?'desc':'asc';
rows.sort(function(x,y){var a=x.cells[i].getAttribute('data-v'),c=y.cells[i].getAttribute('data-v');if(a===null)a=x.cells[i].textContent;if(c===null)c=y.cells[i].textContent;
if(num){a=parseFloat(a);c=parseFloat(c);if(isNaN(a))a=-1e300;if(isNaN(c))c=-1e300;return dir==='asc'?a-c:c-a}return dir==='asc'?a.localeCompare(c):c.localeCompare(a)});
rows.forEach(function(r){b.appendChild(r)})})})});
function organFilter(inp){var q=inp.value.toLowerCase(),g=inp.dataset.group||'',l=inp.dataset.layer||'';
document.getElementById(inp.dataset.table).querySelectorAll('tbody tr').forEach(function(r){
r.hidden=(q!==''&&r.textContent.toLowerCase().indexOf(q)<0)||(g!==''&&r.dataset.group!==g)||(l!==''&&r.dataset.layer!==l)})}
document.querySelectorAll('input.filter').forEach(function(inp){inp.addEventListener('input',function(){organFilter(inp)})});
(function(){var inp=document.querySelector('input.filter');if(!inp)return;var t=document.getElementById(inp.dataset.table),v={},cur=null,sel=null;
location.hash.slice(1).split('&').forEach(function(p){var i=p.indexOf('=');if(i>0)try{v[p.slice(0,i)]=decodeURIComponent(p.slice(i+1).replace(/\\+/g,' '))}catch(e){}});
var ths=Array.prototype.slice.call(t.tHead.rows[0].cells);
function select(r){if(sel)sel.style.outline='';sel=r;r.style.outline='2px solid #4a78b5'}
function save(){var p=[];function a(k,x){if(x)p.push(k+'='+encodeURIComponent(x))}a('mode',v.mode);a('sort',cur);a('q',inp.value);
a('group',inp.dataset.group);a('layer',inp.dataset.layer);a('tensor',sel&&sel.dataset.name);
history.replaceState(null,'',p.length?'#'+p.join('&'):location.pathname+location.search)}
ths.forEach(function(th){th.addEventListener('click',function(){if(th.dataset.key)cur=(th.dataset.dir==='desc'?'-':'')+th.dataset.key;save()})});
inp.addEventListener('input',save);
t.tBodies[0].addEventListener('click',function(e){var r=e.target.closest('tr');if(r){select(r);save()}});
if(v.group)inp.dataset.group=v.group;if(/^[0-9]+$/.test(v.layer||''))inp.dataset.layer=v.layer;if(v.q)inp.value=v.q;organFilter(inp);
if(v.sort){var d=v.sort.charAt(0)==='-',k=d?v.sort.slice(1):v.sort;ths.forEach(function(th){if(th.dataset.key===k){th.click();if(d)th.click()}})}
Array.prototype.forEach.call(t.tBodies[0].rows,function(r){if(v.tensor&&r.dataset.name===v.tensor){select(r);r.scrollIntoView({block:'center'})}});
})();
";

pub(crate) fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(String::new, |x| format!("{x:.digits$}"))
}

/// The report embedded in a page made by [`super::html::render`] or [`super::render_compare`],
/// if there is one.
pub fn extract_json(page: &str) -> Option<&str> {
    let start = page.find("<script type=\"application/json\" id=\"organ-report\">")?;
    let rest = &page[start..];
    let open = rest.find('>')? + 1;
    let close = rest[open..].find("</script>")?;
    Some(&rest[open..open + close])
}
