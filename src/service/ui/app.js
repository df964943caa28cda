"use strict";
// The page's state: the graph as the user gave it, inspect's report, the last result.
const state = { graph: null, report: null, result: null, job: null, url: null };
const $ = (id) => document.getElementById(id);

function human(bytes) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = Number(bytes), u = 0;
  while (v >= 1024 && u < units.length - 1) { v /= 1024; u += 1; }
  return (u === 0 ? String(v) : v.toFixed(2)) + " " + units[u];
}

function num(x) {
  return Number.isInteger(x) ? String(x) : Number(x).toPrecision(6).replace(/\.?0+$/, "");
}

function showError(text) {
  const box = $("error");
  box.textContent = text;
  box.hidden = false;
}

function clearError() {
  $("error").hidden = true;
  $("error").textContent = "";
}

// The text of a failed response: a problem document's detail and its listed problems.
async function problemText(response) {
  const text = await response.text();
  try {
    const p = JSON.parse(text);
    const lines = [p.detail || p.title || ("HTTP " + response.status)];
    for (const q of p.problems || []) {
      lines.push("• " + (q.node ? "node " + q.node + ": " : "") + q.message);
    }
    return lines.join("\n");
  } catch (_) {
    return "HTTP " + response.status + ": " + text.slice(0, 500);
  }
}

async function call(method, path, body) {
  const init = { method, headers: {} };
  if (body !== undefined) {
    init.headers["content-type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  if (!response.ok) {
    throw new Error(await problemText(response));
  }
  return response;
}

function figures(dl, rows) {
  dl.replaceChildren();
  for (const [name, value] of rows) {
    const dt = document.createElement("dt");
    dt.textContent = name;
    const dd = document.createElement("dd");
    dd.textContent = value;
    dl.append(dt, dd);
  }
}

function busy(on) {
  for (const id of ["solve", "tradeoff", "file"]) { $(id).disabled = on; }
}

async function loadFile(file) {
  clearError();
  let graph;
  try {
    graph = JSON.parse(await file.text());
  } catch (e) {
    showError(file.name + " is not JSON: " + e.message);
    return;
  }
  busy(true);
  try {
    const r = await (await call("POST", "/v1/inspect", { graph })).json();
    state.graph = graph;
    state.report = r;
    showGraph(file.name, r);
  } catch (e) {
    showError(file.name + ": " + e.message);
  } finally {
    busy(false);
  }
}

function showGraph(fileName, r) {
  const unit = r.cost_unit ? " " + r.cost_unit : "";
  $("graph-name").textContent = (r.name || fileName) + " (" + fileName + ")";
  figures($("figures"), [
    ["nodes", r.nodes + " (" + r.kinds.forward + " forward, " + r.kinds.loss + " loss, " + r.kinds.backward + " backward)"],
    ["edges", r.edges],
    ["structure", r.structure + (r.structure_detail ? ": " + r.structure_detail : "")],
    ["total cost", num(r.total_cost) + unit],
    ["fixed memory", human(r.fixed_memory)],
    ["checkpoint-all peak", human(r.checkpoint_all_peak)],
    ["minimum feasible budget", human(r.min_feasible_budget) + " (node " + r.min_feasible_budget_node + ")"],
  ]);
  $("graph").hidden = false;
  $("controls").hidden = false;
  for (const id of ["result", "timeline-fig", "stages-fig", "tradeoff-fig"]) { $(id).hidden = true; }
  $("download").hidden = true;
  const slider = $("slider");
  slider.value = 800;
  sliderMoved();
}

// The slider runs from the minimum feasible budget (0) to the checkpoint-all peak (1000).
function sliderMoved() {
  const r = state.report;
  if (!r) return;
  const lo = r.min_feasible_budget, hi = Math.max(r.checkpoint_all_peak, lo);
  const bytes = Math.floor(lo + (hi - lo) * Number($("slider").value) / 1000);
  $("budget").value = String(bytes);
  budgetTyped();
}

function budgetTyped() {
  const r = state.report, text = $("budget").value.trim();
  $("budget-note").textContent = /^\d+$/.test(text) && r
    ? human(Number(text)) + " = " + (100 * Number(text) / r.checkpoint_all_peak).toFixed(1) + "% of the checkpoint-all peak"
    : "";
}

function budgetValue() {
  const text = $("budget").value.trim();
  return /^\d+$/.test(text) ? Number(text) : text;
}

function timeLimit() {
  const t = Number($("time-limit").value);
  return t > 0 ? t : 5;
}

async function picture(kind, target, body) {
  const svg = await (await call("POST", "/v1/plot/" + kind, body)).text();
  $(target).innerHTML = svg;
  $(target + "-fig").hidden = false;
}

async function solve() {
  if (!state.graph) return;
  clearError();
  busy(true);
  try {
    const body = { graph: state.graph, budget: budgetValue(), solver: $("solver").value, time_limit_s: timeLimit() };
    const result = await (await call("POST", "/v1/solve", body)).json();
    state.result = result;
    showResult(result);
    if (!result.schedule) {
      throw new Error(result.status + ": " + (result.message || "no schedule within the budget"));
    }
    await picture("timeline", "timeline", { graph: state.graph, schedule: result });
    await picture("stages", "stages", { graph: state.graph, schedule: result });
  } catch (e) {
    showError(e.message);
  } finally {
    busy(false);
  }
}

function showResult(r) {
  const unit = state.report && state.report.cost_unit ? " " + state.report.cost_unit : "";
  const rows = [["status", r.status + (r.scope ? " (" + r.scope + ")" : "")], ["solver", r.solver], ["budget", human(r.budget)]];
  if (r.stats) {
    const recomputed = r.schedule.events.filter((e) => e.op === "compute").length - r.graph.nodes;
    rows.push(
      ["total cost", num(r.stats.total_cost) + unit + " (overhead " + r.stats.overhead.toFixed(3) + "×)"],
      ["recompute cost", num(r.stats.recompute_cost) + unit + " in " + recomputed + " recomputation(s)"],
      ["peak memory", human(r.stats.peak_memory) + " at event " + r.stats.peak_event],
    );
  }
  if (r.lower_bound !== undefined) { rows.push(["lower bound", num(r.lower_bound) + unit + " (" + r.lower_bound_scope + ")"]); }
  if (r.message) { rows.push(["note", r.message]); }
  rows.push(["time", r.solve_time_s.toFixed(3) + " s"]);
  figures($("result-figures"), rows);
  $("result").hidden = false;
  const link = $("download");
  if (state.url) { URL.revokeObjectURL(state.url); state.url = null; }
  if (r.schedule) {
    state.url = URL.createObjectURL(new Blob([JSON.stringify(r.schedule, null, 2)], { type: "application/json" }));
    link.href = state.url;
    link.hidden = false;
  } else {
    link.hidden = true;
  }
}

const sleep = (ms) => new Promise((done) => setTimeout(done, ms));

async function tradeoff() {
  if (!state.graph) return;
  clearError();
  busy(true);
  $("cancel").hidden = false;
  $("tradeoff-fig").hidden = false;
  const progress = $("tradeoff-progress");
  progress.textContent = "starting the sweep";
  try {
    const body = { graph: state.graph, points: 12, time_limit_s: Math.min(timeLimit(), 2) };
    const job = await (await call("POST", "/v1/plot/tradeoff", body)).json();
    state.job = job.id;
    for (;;) {
      await sleep(300);
      const view = await (await call("GET", "/v1/jobs/" + job.id)).json();
      if (view.progress) { progress.textContent = view.progress.message; }
      if (view.status === "succeeded") {
        $("tradeoff-svg").innerHTML = view.result.svg;
        progress.textContent = "";
        break;
      }
      if (view.status === "failed") { throw new Error(view.error ? view.error.detail : "the sweep failed"); }
      if (view.status === "cancelled") { progress.textContent = "cancelled"; break; }
    }
  } catch (e) {
    progress.textContent = "";
    showError(e.message);
  } finally {
    state.job = null;
    $("cancel").hidden = true;
    busy(false);
  }
}

async function cancelSweep() {
  if (state.job) {
    try { await call("DELETE", "/v1/jobs/" + state.job); } catch (e) { showError(e.message); }
  }
}

async function loadSolvers() {
  try {
    const list = await (await call("GET", "/v1/solvers")).json();
    const select = $("solver");
    select.replaceChildren();
    for (const s of list.solvers || list) {
      const option = document.createElement("option");
      option.textContent = s.name;
      select.append(option);
    }
    select.value = "auto";
  } catch (e) {
    showError("cannot list the solvers: " + e.message);
  }
}

function setup() {
  const drop = $("drop");
  $("file").addEventListener("change", (e) => { if (e.target.files[0]) loadFile(e.target.files[0]); });
  drop.addEventListener("dragover", (e) => { e.preventDefault(); drop.classList.add("over"); });
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", (e) => {
    e.preventDefault();
    drop.classList.remove("over");
    if (e.dataTransfer.files[0]) loadFile(e.dataTransfer.files[0]);
  });
  $("slider").addEventListener("input", sliderMoved);
  $("budget").addEventListener("input", budgetTyped);
  $("solve").addEventListener("click", solve);
  $("tradeoff").addEventListener("click", tradeoff);
  $("cancel").addEventListener("click", cancelSweep);
  loadSolvers();
}

setup();
