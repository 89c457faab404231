// corral playground: builds an OpenAI-style request from the form, streams it from this server
// with the corral_trace extension, and renders each output token coloured by how it came
// (sampled under the mask, or forced by jump-ahead), with the step's allowed-token count, the
// masked top choices and the model's top choices that the mask removed. No dependencies.
"use strict";

const EXAMPLES = {
  "invoice (JSON Schema)": {
    kind: "json_schema",
    prompt: "Extract the invoice: ACME Corp billed 2 widgets at 49.50 EUR each.",
    constraint: JSON.stringify({
      type: "object",
      properties: {
        vendor: { type: "string", maxLength: 40 },
        currency: { enum: ["EUR", "USD", "GBP"] },
        items: {
          type: "array", maxItems: 3,
          items: {
            type: "object",
            properties: { name: { type: "string", maxLength: 30 }, quantity: { type: "integer" }, unit_price: { type: "number" } },
            required: ["name", "quantity", "unit_price"],
          },
        },
      },
      required: ["vendor", "currency", "items"],
    }, null, 2),
  },
  "order id (regex)": { kind: "regex", prompt: "The order id is", constraint: "ORD-[0-9]{5}" },
  "yes/no (GBNF)": {
    kind: "gbnf",
    prompt: "Is the sky blue? Answer:",
    constraint: 'root ::= " " answer "."\nanswer ::= "yes" | "no"',
  },
  "date (Lark)": {
    kind: "lark",
    prompt: "Today's date in ISO format:",
    constraint: 'start: " " DATE\nDATE: /20[0-9]{2}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])/',
  },
  "free text": { kind: "none", prompt: "Say hello in five words.", constraint: "" },
};

const $ = (id) => document.getElementById(id);
let model = null;
let controller = null;
const state = { trace: [], text: "", validation: null, stats: null, error: null, request: null };
window.corralPlayground = state; // read by the browser test and handy in the console

function setStatus(msg, isError) {
  $("status").textContent = msg;
  $("status").className = isError ? "error" : "muted";
}

function fillExample(name) {
  const ex = EXAMPLES[name];
  $("kind").value = ex.kind;
  $("constraint").value = ex.constraint;
  $("prompt").value = ex.prompt;
  showRoute();
}

function showRoute() {
  const kind = $("kind").value;
  $("constraint").disabled = kind === "none";
  $("route").textContent = kind === "json_schema" || kind === "none"
    ? "Sent to /v1/chat/completions (the model's chat template)."
    : "Sent to /v1/completions (the prompt is raw text) with corral's " + (kind === "regex" ? "regex" : "grammar") + " extension.";
}

function numberOr(id, fallback) {
  const v = $(id).value.trim();
  return v === "" ? fallback : Number(v);
}

// The request for the form: [path, body]. Throws an Error with a message for bad input.
function buildRequest() {
  const kind = $("kind").value;
  const text = $("constraint").value;
  const top = numberOr("top_logprobs", 0);
  const body = {
    model: model,
    stream: true,
    max_tokens: numberOr("max_tokens", 128),
    temperature: numberOr("temperature", 0),
    top_p: numberOr("top_p", 1),
    corral_trace: true,
  };
  const seed = numberOr("seed", null);
  if (seed !== null) body.seed = seed;
  if (kind === "json_schema" || kind === "none") {
    body.messages = [{ role: "user", content: $("prompt").value }];
    body.logprobs = true;
    body.top_logprobs = top;
    if (kind === "json_schema") {
      let schema;
      try {
        schema = JSON.parse(text);
      } catch (e) {
        throw new Error("The JSON Schema is not valid JSON: " + e.message);
      }
      body.response_format = { type: "json_schema", json_schema: { name: "playground", schema: schema } };
    }
    return ["/v1/chat/completions", body];
  }
  body.prompt = $("prompt").value;
  body.logprobs = top;
  body[kind === "regex" ? "regex" : "grammar"] = text;
  return ["/v1/completions", body];
}

function reset() {
  state.trace = [];
  state.text = "";
  state.validation = null;
  state.stats = null;
  state.error = null;
  $("output").textContent = "";
  $("steps").tBodies[0].textContent = "";
  $("validation").textContent = "";
  $("validation").className = "";
  $("stats").textContent = "";
  $("step").textContent = "No token selected.";
}

function fmt(lp) {
  return lp === null || lp === undefined ? "" : lp.toFixed(3);
}

function choicesText(list) {
  return (list || []).map((c) => JSON.stringify(c.token) + " " + fmt(c.logprob)).join(", ");
}

function showStep(i) {
  const s = state.trace[i];
  document.querySelectorAll(".tok.selected").forEach((el) => el.classList.remove("selected"));
  const span = document.querySelector('.tok[data-step="' + i + '"]');
  if (span) span.classList.add("selected");
  $("step").textContent = "token " + i + " " + JSON.stringify(s.token) + ": " +
    (s.forced ? "forced by jump-ahead (no forward pass)" :
      "sampled among " + s.allowed + " allowed tokens, logprob " + fmt(s.logprob)) +
    (s.removed && s.removed.length ? "; removed by the mask: " + choicesText(s.removed) : "");
}

function addToken(s) {
  const i = state.trace.length;
  state.trace.push(s);
  state.text += s.token;
  const span = document.createElement("span");
  span.className = "tok " + (s.forced ? "forced" : "sampled");
  span.dataset.step = String(i);
  span.textContent = s.token;
  span.title = s.forced ? "forced" : "sampled; " + s.allowed + " allowed; logprob " + fmt(s.logprob);
  span.addEventListener("mouseenter", () => showStep(i));
  span.addEventListener("click", () => showStep(i));
  $("output").appendChild(span);
  const row = $("steps").tBodies[0].insertRow();
  row.className = s.forced ? "forced" : "sampled";
  const cells = [String(i), null, s.forced ? "forced" : "sampled",
    s.allowed === null || s.allowed === undefined ? "" : String(s.allowed), fmt(s.logprob),
    choicesText(s.top), choicesText(s.removed)];
  cells.forEach((c, k) => {
    const td = row.insertCell();
    if (k === 1) {
      const code = document.createElement("code");
      code.textContent = JSON.stringify(s.token);
      td.appendChild(code);
    } else {
      td.textContent = c;
    }
  });
}

function finish() {
  const v = state.validation;
  const el = $("validation");
  if (v === null) {
    el.textContent = "No constraint: nothing to validate.";
  } else if (v.valid) {
    el.textContent = "Valid: the output matches the constraint.";
    el.className = "valid";
  } else {
    el.textContent = "Invalid: " + v.error;
    el.className = "invalid";
  }
  const st = state.stats;
  if (st) {
    const mean = st.masked_steps ? (st.allowed_total / st.masked_steps).toFixed(1) : "n/a";
    $("stats").textContent = st.tokens + " tokens: " + st.sampled + " sampled, " + st.forced +
      " forced; " + st.forward_passes + " forward passes; mean allowed tokens per masked step " + mean +
      "; stop: " + st.stop_reason;
  }
  document.body.dataset.state = "done";
}

function handleChunk(obj) {
  if (obj.error) {
    throw new Error(obj.error.message || JSON.stringify(obj.error));
  }
  for (const c of obj.choices || []) {
    const ext = c.corral || {};
    for (const s of ext.trace || []) addToken(s);
    if ("validation" in ext) state.validation = ext.validation;
    if (ext.stats) state.stats = ext.stats;
  }
}

async function run(ev) {
  ev.preventDefault();
  reset();
  document.body.dataset.state = "running";
  let path, body;
  try {
    [path, body] = buildRequest();
  } catch (e) {
    state.error = e.message;
    setStatus(e.message, true);
    document.body.dataset.state = "error";
    return;
  }
  state.request = { path: path, body: body };
  controller = new AbortController();
  $("run").disabled = true;
  $("stop").disabled = false;
  setStatus("Generating…", false);
  const t0 = performance.now();
  try {
    const resp = await fetch(path, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
      signal: controller.signal,
    });
    if (!resp.ok) {
      let msg = resp.status + " " + resp.statusText;
      try {
        const err = await resp.json();
        msg = err.error.message + (err.error.param ? " (" + err.error.param + ")" : "");
      } catch (e) { /* not JSON */ }
      throw new Error(msg);
    }
    const reader = resp.body.getReader();
    const decoder = new TextDecoder();
    let buf = "";
    let done = false;
    while (!done) {
      const { value, done: end } = await reader.read();
      if (end) break;
      buf += decoder.decode(value, { stream: true });
      let k;
      while ((k = buf.indexOf("\n\n")) >= 0) {
        const event = buf.slice(0, k);
        buf = buf.slice(k + 2);
        for (const line of event.split("\n")) {
          if (!line.startsWith("data: ")) continue;
          const data = line.slice(6);
          if (data === "[DONE]") { done = true; break; }
          handleChunk(JSON.parse(data));
        }
      }
    }
    setStatus("Done in " + ((performance.now() - t0) / 1000).toFixed(2) + " s.", false);
    finish();
  } catch (e) {
    state.error = e.message;
    setStatus(e.name === "AbortError" ? "Stopped." : "Error: " + e.message, e.name !== "AbortError");
    document.body.dataset.state = "error";
  } finally {
    $("run").disabled = false;
    $("stop").disabled = true;
    controller = null;
  }
}

async function init() {
  const sel = $("example");
  for (const name of Object.keys(EXAMPLES)) {
    const opt = document.createElement("option");
    opt.value = opt.textContent = name;
    sel.appendChild(opt);
  }
  sel.addEventListener("change", () => fillExample(sel.value));
  $("kind").addEventListener("change", showRoute);
  $("form").addEventListener("submit", run);
  $("stop").addEventListener("click", () => controller && controller.abort());
  fillExample(sel.value);
  try {
    const r = await fetch("/v1/models");
    model = (await r.json()).data[0].id;
    $("model").textContent = "model: " + model;
    document.body.dataset.state = "ready";
  } catch (e) {
    setStatus("Cannot reach the server's /v1/models: " + e.message, true);
    document.body.dataset.state = "error";
  }
}

init();
