"""The class page's HTML: the settings as a form (a GET of the page's own link, read by the dashboard's
converter), Start / Pause / Step / Reset, the progress, the latest held-out numbers and the curves.

The page is one response: its style and script are inline, allowed by the Content-Security-Policy by their
hashes (:data:`CSP`); nothing else runs. Every value the page quotes is escaped here (``html.escape``) or set as
text by the script; the only markup it inserts is the server's SVG curves and latest numbers (numbers and
escaped labels, :mod:`lab.dashboard.class_pages`).
"""
from __future__ import annotations

import base64
import hashlib
import html
from typing import Any, Mapping

from ..data import EMBEDDED
from ..losses import LOSSES
from ..viz.training_curves import LATEST_STYLE
from .served import dataset_label, offered
from .settings import MODEL_EXAMPLES, Settings
from .urlstate import from_query, to_query

TITLE = "RankLab · live training"
# The form's fields: query key -> (label, input type); every other key of the link rides along hidden.
FIELDS = {"dataset": ("Dataset", "select"), "root": ("Dataset folder", "select"),
          "classes": ("Glyph classes", "number"), "model": ("Model", "model"), "loss": ("Loss", "select"),
          "compare": ("Compare with a second loss (same seed)", "checkbox"),
          "loss_b": ("Second loss (run B)", "select"),
          "batch": ("Batch size", "number"), "m": ("Images per class in a batch (m)", "number"),
          "lr": ("Learning rate (Adam)", "text"), "seed": ("Seed", "number"), "steps": ("Run length (steps)", "number")}

SCRIPT = """"use strict";
const $ = id => document.getElementById(id);
const BUTTONS = ["start", "pause", "step", "reset"], KEY = "ranklab-class-token";
let token = null, have = "", loop = 0;
async function post(path, body) {
  const r = await fetch("/api/" + path, {method: "POST", headers: {"Content-Type": "application/json"},
                                         body: JSON.stringify(body)});
  const j = await r.json().catch(() => ({error: "the server answered " + r.status}));
  if (!r.ok) throw Object.assign(new Error(j.error || "the server answered " + r.status), {status: r.status});
  return j;
}
function list(id, items) {
  $(id).replaceChildren(...items.map(t => { const li = document.createElement("li"); li.textContent = t; return li; }));
}
function draw(v) {
  $("progress").textContent = v.text;
  $("bar").value = v.progress;
  for (const b of BUTTONS) $(b).disabled = !v.enabled[b];
  $("latest").innerHTML = v.latest;
  $("error").textContent = v.error ? v.error + " Change the settings (e.g. a lower learning rate) or press Reset." : "";
  $("notice").textContent = v.notice || "";
  $("message").textContent = v.message || "";
  if (v.message !== null) { $("curves").replaceChildren(); have = ""; }
  else if (v.curves !== null) { $("curves").innerHTML = v.curves; have = v.version; }
  return v;
}
function fail(e) {
  loop++;
  list("errors", [e.message]);
  for (const b of BUTTONS) $(b).disabled = true;
}
async function poll() {
  const mine = ++loop;
  try {
    const v = await post("view", {token, have});
    if (mine !== loop) return;
    draw(v);
    setTimeout(() => { if (mine === loop) poll(); }, v.running || v.waiting ? 1000 : 3000);
  } catch (e) {
    if (mine !== loop) return;
    if (e.status) return fail(e);  // the server's answer: the run is gone, or the request was wrong
    $("error").textContent = "The server did not answer (" + e.message + "): trying again.";
    setTimeout(() => { if (mine === loop) poll(); }, 3000);
  }
}
async function act(action) {
  loop++;
  try { draw(await post("act", {token, action})); poll(); } catch (e) { fail(e); }
}
async function open() {
  const query = Object.fromEntries(new URLSearchParams(location.search));
  try {
    const j = await post("open", {query, token: sessionStorage.getItem(KEY)});
    list("notes", j.notes);
    list("errors", j.errors);
    if (!j.token) { $("progress").textContent = "Nothing can train with these settings: see above."; return; }
    token = j.token;
    sessionStorage.setItem(KEY, token);
    for (const b of BUTTONS) $(b).onclick = () => act(b);
    poll();
  } catch (e) { fail(e); }
}
addEventListener("pagehide", () => {
  if (token) fetch("/api/leave", {method: "POST", keepalive: true, headers: {"Content-Type": "application/json"},
                                  body: JSON.stringify({token})});
});
addEventListener("pageshow", e => { if (e.persisted && token) poll(); });
open();
"""

STYLE = LATEST_STYLE.removeprefix("<style>").removesuffix("</style>") + """
body {font-family: system-ui, sans-serif; margin: 0; color: #262730;}
header {padding: 6px 16px; border-bottom: 1px solid #ddd;} header h2 {margin: 4px 0; font-size: 24px;}
main {display: flex; gap: 16px; padding: 8px 16px;}
aside {flex: 0 0 250px; font-size: 14px;} section {flex: 1; min-width: 0;}
aside label {display: block; margin: 6px 0 2px;} aside input, aside select {width: 100%; box-sizing: border-box;}
aside label.check input {width: auto;}
.buttons {display: grid; grid-template-columns: 1fr 1fr; gap: 6px; margin-bottom: 8px;}
.buttons button {font-size: 16px; padding: 6px;} #start {background: #ff4b4b; color: #fff; border: 0;}
#start:disabled {background: #f4a3a3;}
.top {display: flex; align-items: center; gap: 16px;} .top > div:first-child {flex: 3;}
#bar {width: 100%; height: 10px;} #progress {font-size: 15px; margin-top: 4px;}
#errors, #error {color: #b00020;} #notes {color: #7a5a00;} ul {margin: 4px 0; padding-left: 18px;}
#curves svg {width: 100%; display: block;}
"""


def _hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


# Only the page's own script (by its hash); styles inline (the SVG's and the numbers' colours are attributes, which
# a style hash would forbid); requests to this server only; no frames, no forms elsewhere.
CSP = (f"default-src 'none'; script-src {_hash(SCRIPT)}; style-src 'unsafe-inline'; "
       "connect-src 'self'; img-src 'self' data:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")


def _field(key: str, value: str, s: Settings) -> str:
    label, kind = FIELDS[key]
    e = html.escape
    if kind == "checkbox":
        checked = " checked" if value == "true" else ""
        return f'<label class="check"><input type="checkbox" name="{key}" value="true"{checked}> {e(label)}</label>'
    head = f'<label for="f-{key}">{e(label)}</label>'
    if kind == "select":
        options = _options(key, s)
        return head + f'<select id="f-{key}" name="{key}">' + "".join(
            f'<option value="{e(o)}"{" selected" if o == value else ""}>{e(shown)}</option>'
            for o, shown in options) + "</select>"
    if kind == "model":
        return head + (f'<input id="f-{key}" name="{key}" value="{e(value)}" list="models">'
                       '<datalist id="models">' + "".join(f'<option value="{e(m)}">' for m in MODEL_EXAMPLES)
                       + "</datalist>")
    step = ' step="any"' if kind == "text" else ""
    return head + f'<input id="f-{key}" name="{key}" value="{e(value)}" type="{kind}"{step}>'


def _options(key: str, s: Settings) -> list[tuple[str, str]]:
    served = offered()
    if key == "dataset":
        return [(d, dataset_label(d)) for d in served]
    if key == "root":
        return [(f, f) for f in served.get(s.dataset, ())]
    return [(name, name) for name in sorted(LOSSES)]


def page_html(query: Mapping[str, Any]) -> str:
    """The page for the link's ``query`` (its settings in the form, as the dashboard reads them)."""
    s, _ = from_query(query)
    values = {**to_query(s), "compare": "true" if s.compare else "", "loss_b": s.loss_b, "root": s.data_root,
              "classes": str(s.classes), "steps": str(s.steps)}
    shown = [k for k in FIELDS if not (k == "root" and s.dataset in EMBEDDED) and not (k == "classes" and
                                                                                         s.dataset != "glyphs")]
    fields = "".join(_field(k, values.get(k, ""), s) for k in shown)
    hidden = "".join(f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">'
                     for k, v in to_query(s).items() if k not in FIELDS)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{TITLE}</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>{STYLE}</style></head>
<body><header><h2>{TITLE}</h2></header>
<main><aside>
<div class="buttons"><button id="start" disabled>Start</button><button id="pause" disabled>Pause</button>
<button id="step" disabled title="One tick of training, then pause">Step</button>
<button id="reset" disabled title="Back to the untrained model (step 0)">Reset</button></div>
<form method="get" action="/">{fields}{hidden}
<p><button type="submit">Apply the settings (a new run)</button></p></form>
<p>The embeddings, scores, toy losses and the reproduction are in the full dashboard (<code>make app</code>).</p>
</aside>
<section><ul id="notes"></ul><ul id="errors"></ul>
<div class="top"><div><progress id="bar" max="1" value="0"></progress><div id="progress">Opening this page's run…</div>
</div><div id="latest"></div></div>
<p id="error"></p><p id="notice"></p><p id="message"></p><div id="curves"></div></section></main>
<script>{SCRIPT}</script></body></html>
"""
