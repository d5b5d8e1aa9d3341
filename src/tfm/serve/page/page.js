// The page of `tfm serve`: translate as the reader types, with the confidence of each
// translation (the sentence chrF expected of it, flagged when low), list the n best, and draw
// one layer's and head's attention weights over the tokens, on the colour scale of
// `tfm attention`.
"use strict";

const $ = (id) => document.getElementById(id);
const AXES = {
  cross: ["output token (query that produced it)", "source token (key)"],
  encoder: ["source token (query)", "source token (key)"],
  decoder: ["decoder input (query)", "decoder input (key)"],
};
const DEBOUNCE_MS = 300;
const state = { info: null, attention: null, shown: null, sequence: 0, timer: null };

function requestHeaders() {
  const headers = { "Content-Type": "application/json" };
  const key = $("api-key").value;
  if (key) headers.Authorization = "Bearer " + key;
  return headers;
}

// The answer of the API, or an error whose message is a sentence for the reader.
async function call(path, body) {
  const init = body === undefined
    ? { headers: requestHeaders() }
    : { method: "POST", headers: requestHeaders(), body: JSON.stringify(body) };
  let response;
  try {
    response = await fetch(path, init);
  } catch {
    throw new Error("The server did not answer; is it still running?");
  }
  const data = await response.json().catch(() => ({ error: response.statusText }));
  if (response.status === 401) {
    $("key-label").hidden = false;
    throw new Error("This server needs its API key: type it in the API key box.");
  }
  if (!response.ok) throw new Error(asSentence(withoutOptions(data.error || response.statusText)));
  return data;
}

// An error names the option of `tfm serve` that sets the limit it met, for whoever runs the
// server; the reader of the page cannot change it, so the page leaves it out.
function withoutOptions(text) {
  return text.replace(/ \(--[^)]*\)/g, "");
}

function asSentence(text) {
  const capital = text.charAt(0).toUpperCase() + text.slice(1);
  return /[.!?]$/.test(capital) ? capital : capital + ".";
}

// The colour of a weight: matplotlib's table of 256 colours at weight ** gamma, as tfm draws it.
function colour(weight) {
  const t = Math.pow(Math.min(Math.max(weight, 0), 1), TFM_COLOURS.gamma);
  return TFM_COLOURS.table[Math.min(Math.floor(t * 256), 255)];
}

function fillNumbers(select, count, first, keep) {
  const before = select.value;
  select.replaceChildren();
  for (let i = 0; i < count; i++) {
    const option = document.createElement("option");
    option.value = String(i);
    option.textContent = String(i + first);
    select.append(option);
  }
  if (keep && before !== "" && Number(before) < count) select.value = before;
}

async function loadInfo() {
  try {
    const info = await call("/info");
    state.info = info;
    const m = info.model;
    $("model-info").textContent =
      `${info.src_lang} → ${(info.tgt_langs ?? [info.tgt_lang]).join(", ")} · ${info.engine}` +
      (info.step === null ? "" : ` · step ${info.step}`) +
      ` · d_model ${m.d_model}, ${m.n_encoder_layers}+${m.n_decoder_layers} layers, ${m.n_heads} heads`;
    const languages = info.tgt_langs ?? [info.tgt_lang];
    $("tgt-lang").replaceChildren(...languages.map((lang) => {
      const option = document.createElement("option");
      option.value = option.textContent = lang;
      return option;
    }));
    $("tgt-label").hidden = languages.length < 2;  // a model of one target: no menu
    fillNumbers($("beam-size"), info.limits.max_beam_size, 1, false);
    const beam = info.decoding.beam_size ?? 1;  // a server that is not beam searching: 1
    $("beam-size").value = String(Math.min(beam, info.limits.max_beam_size) - 1);
    fillNumbers($("n-best"), 5, 1, false);
    $("length-penalty").value = info.decoding.length_penalty ?? "";
    $("attention-view").hidden = !info.attention;
    $("attention-absent").hidden = info.attention;
    $("attention-absent").textContent = info.attention ? "" :
      `No attention weights here: they need a torch run, and this server decodes a ${info.engine} ` +
      "export. Serve the run it was exported from to see them.";
    $("status").textContent = "";
    schedule(0);
  } catch (error) {
    $("status").textContent = error.message;
  }
}

function options() {
  const beam = Number($("beam-size").value) + 1;
  const nBest = Number($("n-best").value) + 1;
  const body = { beam_size: Math.max(beam, nBest) };
  if (!$("tgt-label").hidden) body.tgt_lang = $("tgt-lang").value;
  if (nBest > 1) body.n_best = nBest;
  const penalty = $("length-penalty").value;
  if (penalty !== "") body.length_penalty = Number(penalty);
  return body;
}

function attentionBody(text) {
  const body = { sentence: text };
  if (!$("tgt-label").hidden) body.tgt_lang = $("tgt-lang").value;
  return body;
}

async function translate() {
  const text = $("source").value.replace(/\s+/g, " ").trim();
  const sequence = ++state.sequence;
  if (!text || !state.info) {
    clearResults();
    $("status").textContent = "";
    return;
  }
  try {
    const [found, attention] = await Promise.all([
      call("/translate", { sentences: [text], ...options() }),
      state.info.attention ? call("/attention", attentionBody(text)) : Promise.resolve(null),
    ]);
    if (sequence !== state.sequence) return; // a newer sentence is on its way
    $("translation").textContent = found.translations[0];
    showConfidence(found.confidences[0], found.scores[0]);
    showNBest(found.n_best ? found.n_best[0] : []);
    if (attention) {
      state.attention = attention;
      state.shown = found.translations[0];
      fillNumbers($("layer"), attention.layers, 1, true);
      fillNumbers($("head"), attention.heads, 1, true);
      draw();
    }
    $("status").textContent = found.truncated
      ? `Only the first ${state.info.model.max_len} tokens of the sentence were translated.` : "";
    document.body.dataset.translated = text;
  } catch (error) {
    if (sequence !== state.sequence) return;
    clearResults();
    $("status").textContent = error.message;
  }
}

// No translation, n-best list or heatmap left from an earlier sentence.
function clearResults() {
  state.attention = null;
  $("translation").textContent = "";
  showConfidence(null, null);
  $("n-best-list").replaceChildren();
  $("heatmap").replaceChildren();
  delete $("heatmap").dataset.view;
  for (const id of ["attention-pair", "attention-note", "axes"]) $(id).textContent = "";
}

// Whether `confidence` (null: none) is below the low mark of the server's confidence map.
function isLow(confidence) {
  const map = state.info ? state.info.confidence : null;
  return confidence !== null && map !== null && map.map && confidence < map.low;
}

// The translation's confidence, flagged when low; its score where the server has no map.
function showConfidence(confidence, score) {
  const shown = $("confidence");
  const low = isLow(confidence);
  shown.classList.toggle("low", low);
  if (confidence !== null) {
    shown.textContent = `Confidence ${confidence.toFixed(0)}: the sentence chrF expected of ` +
      `this translation${low ? "; low, check it." : "."}`;
  } else if (score !== null && state.info && !state.info.confidence.map) {
    shown.textContent = `Score ${score.toFixed(4)}; no confidence: the model has no confidence map.`;
  } else {
    shown.textContent = "";
  }
}

function showNBest(hypotheses) {
  const list = $("n-best-list");
  list.replaceChildren();
  for (const { translation, score, confidence } of hypotheses) {
    const item = document.createElement("li");
    item.textContent = translation;
    const shown = document.createElement("span");
    shown.className = "score";
    shown.classList.toggle("low", isLow(confidence));
    shown.textContent = (score === null ? "" : score.toFixed(4)) +
      (confidence === null ? "" : ` · confidence ${confidence.toFixed(0)}`);
    item.append(shown);
    list.append(item);
  }
}

function draw() {
  const a = state.attention;
  if (!a) return;
  const kind = $("kind").value;
  const layer = Number($("layer").value);
  const head = Number($("head").value);
  const weights = a[kind][layer][head];
  const rows = readable({ cross: a.output_tokens, encoder: a.source_tokens, decoder: a.decoder_tokens }[kind]);
  const columns = readable(kind === "decoder" ? a.decoder_tokens : a.source_tokens);
  const table = $("heatmap");
  const head_row = document.createElement("tr");
  head_row.append(document.createElement("th"));
  for (const token of columns) {
    const th = document.createElement("th");
    th.textContent = token;
    head_row.append(th);
  }
  const thead = document.createElement("thead");
  thead.append(head_row);
  const tbody = document.createElement("tbody");
  rows.forEach((token, r) => {
    const tr = document.createElement("tr");
    const th = document.createElement("th");
    th.textContent = token;
    tr.append(th);
    columns.forEach((key, c) => {
      const td = document.createElement("td");
      const weight = weights[r][c];
      const masked = kind === "decoder" && c > r;
      td.className = "cell";
      td.dataset.weight = String(weight);
      td.style.background = masked ? TFM_COLOURS.masked : colour(weight);
      td.title = masked ? `${token} → ${key}: masked (future)` : `${token} → ${key}: ${weight.toFixed(4)}`;
      tr.append(td);
    });
    tbody.append(tr);
  });
  table.replaceChildren(thead, tbody);
  table.dataset.view = `${kind} ${layer} ${head}`;
  $("attention-pair").textContent = `“${a.source}” → “${a.translation}”`;
  $("attention-note").textContent = a.translation === state.shown
    ? "These are the weights of the translation shown above (greedy search finds it too)."
    : "These are the weights of greedy search's translation; beam search's, shown above, differs.";
  $("axes").textContent = `rows: ${AXES[kind][0]} · columns: ${AXES[kind][1]} · layer ${layer + 1}, head ${head + 1}`;
  $("masked-note").hidden = kind !== "decoder";
}

function drawLegend() {
  const canvas = $("legend-bar");
  const context = canvas.getContext("2d");
  for (let x = 0; x < canvas.width; x++) {
    context.fillStyle = colour(x / (canvas.width - 1));
    context.fillRect(x, 0, 1, canvas.height);
  }
}

function schedule(delay) {
  clearTimeout(state.timer);
  state.timer = setTimeout(translate, delay);
}

$("source").addEventListener("input", () => schedule(DEBOUNCE_MS));
$("source").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey) {
    event.preventDefault();
    schedule(0);
  }
});
for (const id of ["tgt-lang", "beam-size", "n-best", "length-penalty"]) $(id).addEventListener("change", () => schedule(0));
for (const id of ["kind", "layer", "head"]) $(id).addEventListener("change", draw);
$("api-key").addEventListener("change", loadInfo);
drawLegend();
loadInfo();
