// The operations dashboard: sign in with an API token, then watch the node live.
// No build step: ES modules from this folder (vendored, pinned; see manifest.json).
// Reads go through GraphQL queries, the live stream is the `events` subscription over
// graphql-ws (resumed after a reconnect by stateward-client.js, a copy of clients/js),
// claims are the `claimAssignment` mutation. Text from the server is set with
// textContent only (never parsed as HTML).
import { StatewardClient } from "./stateward-client.js";
import dagre from "./vendor/dagre/dagre.esm.js";

const WORKFLOWS = `{ workflows(first: 100) { nodes { path version graph {
  nodes { key label terminal initial assign }
  edges { id action source target selfEffect } } } } }`;
const INSTANCE_FIELDS = "instanceId workflowPath status state { key } slaWarnAt slaDueAt createdAt";
const INSTANCES = `query($after: String) { instances(first: 100, after: $after) {
  nodes { ${INSTANCE_FIELDS} } pageInfo { hasNextPage endCursor } } }`;
const INSTANCE = `query($i: ID!) { instance(id: $i) { ${INSTANCE_FIELDS} } }`;
const QUEUE = `query($t: String!) { assignments(filter: { team: $t, status: [UNASSIGNED] }, first: 50) {
  nodes { assignmentId instanceId state team createdAt } } }`;
const CLAIM = `mutation($id: ID!) { claimAssignment(id: $id) { assignmentId status assignee } }`;
// Counted by the server (GROUP BY), not from the instances this page happened to load.
const COUNTS = `{ instanceCounts(groupBy: [WORKFLOW, STATE],
  filter: { status: [ACTIVE, STALE, ERROR] }) { workflow state count } }`;
// Open incidents in the namespaces the viewer operates (issue 15); retried from the page.
const INCIDENTS = `{ incidents(filter: { resolved: false }, first: 50) { edges { node {
  incidentId kind instanceId workflowPath state message attempts createdAt } } } }`;
const RETRY = `mutation($id: ID!) { retryIncident(id: $id) { incident { incidentId attempts resolved } } }`;
const ENDED = new Set(["COMPLETED", "CANCELLED"]);
const MAX_EVENTS = 60;
const TOKEN_KEY = "stateward.dashboard.token";

const $ = (selector) => document.querySelector(selector);
const ui = {
  client: null,
  instances: new Map(),
  workflows: new Map(),
  queues: new Map(),
  counts: [],
  countsDue: null,
  incidents: [],
  incidentNote: "",
  selected: null,
  fresh: new Set(),
  stream: null,
  generation: 0,
};

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function setStatus(text, kind = "") {
  const status = $("#status");
  status.textContent = text;
  status.className = `status ${kind}`;
}

function slaOf(instance, now = Date.now()) {
  if (ENDED.has(instance.status)) return null;
  if (instance.slaDueAt && Date.parse(instance.slaDueAt) <= now) return "breached";
  if (instance.slaWarnAt && Date.parse(instance.slaWarnAt) <= now) return "warning";
  return null;
}

// -- sign in / out ---------------------------------------------------------------------

async function signIn(token) {
  $("#login-error").textContent = "";
  const url = new URL("graphql", document.baseURI).href;
  const client = new StatewardClient(url, { token });
  let viewer;
  try {
    viewer = (await client.query("{ viewer { id } }")).viewer;
  } catch (error) {
    $("#login-error").textContent = `sign-in failed: ${error.message}`;
    return;
  }
  if (!viewer) {
    $("#login-error").textContent = "this token is not accepted";
    return;
  }
  sessionStorage.setItem(TOKEN_KEY, token);
  ui.client = client;
  $("#viewer").textContent = viewer.id;
  $("#login").hidden = true;
  $("#app").hidden = false;
  $("#sign-out").hidden = false;
  listen(++ui.generation);
  await loadAll();
}

function signOut() {
  sessionStorage.removeItem(TOKEN_KEY);
  ui.generation++;
  ui.stream?.return?.();
  ui.client = null;
  $("#app").hidden = true;
  $("#login").hidden = false;
  $("#sign-out").hidden = true;
  $("#viewer").textContent = "";
  setStatus("signed out");
}

// -- loading ---------------------------------------------------------------------------

async function loadAll() {
  const data = await ui.client.query(WORKFLOWS);
  ui.workflows = new Map(data.workflows.nodes.map((w) => [w.path, w]));
  let after = null;
  for (let page = 0; page < 10; page++) {
    const { instances } = await ui.client.query(INSTANCES, { after });
    for (const instance of instances.nodes) ui.instances.set(instance.instanceId, instance);
    if (!instances.pageInfo.hasNextPage) break;
    after = instances.pageInfo.endCursor;
  }
  fillWorkflowPicker();
  await Promise.all([loadCounts(), loadIncidents(), ...[...teams()].map((team) => loadQueue(team))]);
  renderAll();
}

async function loadIncidents() {
  try {
    ui.incidents = (await ui.client.query(INCIDENTS)).incidents.edges.map((e) => e.node);
  } catch (error) {
    ui.incidents = [];
    ui.incidentNote = `incidents not readable: ${error.message}`;
  }
}

async function loadCounts() {
  try {
    ui.counts = (await ui.client.query(COUNTS)).instanceCounts;
  } catch {
    ui.counts = [];
  }
}

// A burst of events asks for one recount, not one per event.
function recountSoon() {
  if (ui.countsDue) return;
  ui.countsDue = setTimeout(async () => {
    ui.countsDue = null;
    await loadCounts();
    renderCounts();
  }, 250);
}

function teams() {
  const found = new Set();
  for (const workflow of ui.workflows.values()) {
    for (const node of workflow.graph.nodes) if (node.assign) found.add(node.assign);
  }
  return found;
}

async function loadQueue(team) {
  try {
    const data = await ui.client.query(QUEUE, { t: team });
    ui.queues.set(team, { items: data.assignments.nodes, error: null });
  } catch (error) {
    ui.queues.set(team, { items: [], error: error.code || error.message });
  }
}

async function refreshInstance(id) {
  try {
    const data = await ui.client.query(INSTANCE, { i: id });
    ui.instances.set(id, data.instance);
  } catch {
    ui.instances.delete(id);
  }
}

// -- the live stream -------------------------------------------------------------------

async function listen(generation) {
  setStatus("connecting");
  const onStatus = (status) => {
    if (generation !== ui.generation) return;
    if (status === "connected") setStatus("live", "live");
    else setStatus("reconnecting", "reconnecting");
  };
  ui.stream = ui.client.subscribe(null, { onStatus });
  try {
    for await (const event of ui.stream) {
      if (generation !== ui.generation) break;
      await onEvent(event);
    }
  } catch (error) {
    if (generation === ui.generation) setStatus(`stream stopped: ${error.message}`);
  }
}

async function onEvent(event) {
  const list = $("#events");
  const line = el(
    "li",
    { "data-cursor": event.cursor },
    el("span", { class: "mono" }, `#${event.cursor} `),
    el("strong", {}, event.type),
    event.instanceId ? ` ${event.instanceId.slice(0, 8)}` : "",
    event.workflow ? ` ${event.workflow}` : "",
    event.toState ? ` → ${event.toState}` : "",
  );
  list.prepend(line);
  while (list.children.length > MAX_EVENTS) list.lastChild.remove();
  if (event.type === "workflow.deployed") {
    const data = await ui.client.query(WORKFLOWS);
    ui.workflows = new Map(data.workflows.nodes.map((w) => [w.path, w]));
    fillWorkflowPicker();
  }
  if (event.instanceId && event.type.startsWith("workflow.") && event.type !== "workflow.deployed") {
    if (event.type === "workflow.started") ui.fresh.add(event.instanceId);
    await refreshInstance(event.instanceId);
    recountSoon();
  }
  if (event.team) await loadQueue(event.team);
  if (event.type.startsWith("incident.") || event.type === "workflow.error"
      || event.type === "workflow.retried") {
    await loadIncidents();
  }
  renderAll();
}

// -- rendering -------------------------------------------------------------------------

function renderAll() {
  renderCounts();
  renderInstances();
  renderSla();
  renderQueues();
  renderIncidents();
  renderGraph();
}

function renderIncidents() {
  const items = ui.incidents.map((item) =>
    el("li", { "data-incident": item.incidentId, "data-instance": item.instanceId, class: "incident" },
      el("strong", {}, item.kind), " ",
      el("span", { class: "mono" }, item.instanceId.slice(0, 8)),
      ` ${item.workflowPath} @ ${item.state} `,
      el("span", { class: "attempts" }, `attempts ${item.attempts}`), " ",
      el("span", { class: "muted" }, item.message.slice(0, 160)), " ",
      el("button", { "data-retry": item.incidentId, onclick: (event) => retry(event.target, item) },
        "Retry")));
  $("#incidents").replaceChildren(
    el("p", { id: "incident-result", class: "muted" }, ui.incidentNote || ""),
    el("ul", { class: "plain" }, ...(items.length ? items : [el("li", { class: "muted" }, "no open incidents")])),
  );
}

async function retry(button, item) {
  button.disabled = true;
  try {
    const done = (await ui.client.query(RETRY, { id: item.incidentId })).retryIncident.incident;
    ui.incidentNote = done.resolved
      ? `resolved ${done.incidentId.slice(0, 8)}`
      : `retried ${done.incidentId.slice(0, 8)}: attempts ${done.attempts}`;
  } catch (error) {
    ui.incidentNote = `retry failed: ${error.message}`;
  }
  await loadIncidents();
  renderIncidents();
}

function renderCounts() {
  $("#counts").replaceChildren(
    ...ui.counts.map(({ workflow, state, count }) =>
      el("tr", { "data-workflow": workflow, "data-state": state }, el("td", {}, workflow),
        el("td", {}, state), el("td", { class: "count" }, count)),
    ),
  );
}

function renderInstances() {
  const recent = [...ui.instances.values()]
    .sort((a, b) => Date.parse(b.createdAt) - Date.parse(a.createdAt))
    .slice(0, 30);
  $("#instances").replaceChildren(
    ...recent.map((instance) => {
      const sla = slaOf(instance);
      const row = el(
        "tr",
        {
          "data-instance": instance.instanceId,
          class: [sla ? `sla-${sla}` : "", instance.instanceId === ui.selected ? "selected" : "",
            ui.fresh.has(instance.instanceId) ? "fresh" : ""].join(" ").trim() || null,
          onclick: () => select(instance.instanceId),
        },
        el("td", { class: "mono" }, instance.instanceId.slice(0, 8)),
        el("td", {}, instance.workflowPath),
        el("td", { class: "state" }, instance.state.key),
        el("td", {}, instance.status),
        el("td", {}, sla ? el("span", { class: `badge ${sla}` }, sla) : ""),
      );
      return row;
    }),
  );
  ui.fresh.clear();
}

function renderSla() {
  const flagged = [...ui.instances.values()]
    .map((instance) => [instance, slaOf(instance)])
    .filter(([, sla]) => sla)
    .sort(([, a], [, b]) => (a === "breached" ? 0 : 1) - (b === "breached" ? 0 : 1));
  const items = flagged.map(([instance, sla]) =>
    el("li", { class: `sla-${sla}`, "data-sla": instance.instanceId },
      el("span", { class: `badge ${sla}` }, sla), " ", instance.workflowPath, " ",
      el("span", { class: "mono" }, instance.instanceId.slice(0, 8)), ` in ${instance.state.key}`),
  );
  $("#sla").replaceChildren(...(items.length ? items : [el("li", { class: "muted" }, "no warnings or breaches")]));
}

function renderQueues() {
  const blocks = [...ui.queues.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([team, queue]) =>
    el("div", { class: "queue", "data-team": team },
      el("h3", {}, `${team} (${queue.items.length})`),
      queue.error ? el("p", { class: "muted" }, `not readable: ${queue.error}`) : null,
      el("ul", { class: "plain" }, ...queue.items.map((item) =>
        el("li", { "data-assignment": item.assignmentId },
          el("span", { class: "mono" }, item.instanceId.slice(0, 8)), ` ${item.state} `,
          el("button", { "data-claim": item.assignmentId, "data-instance": item.instanceId,
            onclick: (event) => claim(event.target, item) }, "Claim")))),
    ),
  );
  $("#queues").replaceChildren(el("p", { id: "claim-result", class: "muted" }, ui.claimNote || ""), ...blocks);
}

async function claim(button, item) {
  button.disabled = true;
  try {
    const data = await ui.client.query(CLAIM, { id: item.assignmentId });
    ui.claimNote = `claimed ${data.claimAssignment.assignmentId.slice(0, 8)} (${item.team})`;
  } catch (error) {
    ui.claimNote = `claim failed: ${error.message}`;
  }
  await loadQueue(item.team);
  renderQueues();
}

function select(id) {
  ui.selected = id;
  const instance = ui.instances.get(id);
  if (instance) $("#graph-workflow").value = instance.workflowPath;
  renderInstances();
  renderGraph();
}

function fillWorkflowPicker() {
  const picker = $("#graph-workflow");
  const current = picker.value;
  picker.replaceChildren(...[...ui.workflows.keys()].sort().map((path) => el("option", { value: path }, path)));
  if (current && ui.workflows.has(current)) picker.value = current;
}

const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, String(value));
  for (const child of children) node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  return node;
}

function renderGraph() {
  const workflow = ui.workflows.get($("#graph-workflow").value);
  const box = $("#graph");
  if (!workflow) {
    box.replaceChildren(el("p", { class: "muted" }, "no workflow deployed"));
    return;
  }
  const selected = ui.instances.get(ui.selected);
  const current = selected && selected.workflowPath === workflow.path ? selected.state.key : null;
  const g = new dagre.graphlib.Graph({ multigraph: true });
  g.setGraph({ rankdir: "LR", nodesep: 24, ranksep: 70, marginx: 10, marginy: 10 });
  for (const node of workflow.graph.nodes) {
    const label = node.label || node.key;
    g.setNode(node.key, { label, width: Math.max(70, label.length * 7 + 24), height: 32, node });
  }
  for (const edge of workflow.graph.edges) {
    if (!g.hasNode(edge.source) || !g.hasNode(edge.target)) continue;
    g.setEdge(edge.source, edge.target, { label: edge.action, width: edge.action.length * 6, height: 12 }, edge.id);
  }
  dagre.layout(g);
  const { width, height } = g.graph();
  const picture = svg("svg", { viewBox: `0 0 ${width} ${height}`, role: "img",
    "aria-label": `graph of ${workflow.path}` });
  picture.append(svg("defs", {}, svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5,
    markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" }, svg("path", { d: "M0,0 L10,5 L0,10 z", fill: "#94a3b8" }))));
  for (const e of g.edges()) {
    const edge = g.edge(e);
    const d = edge.points.map((p, i) => `${i ? "L" : "M"}${p.x},${p.y}`).join(" ");
    picture.append(svg("g", { class: "edge" }, svg("path", { d }),
      svg("text", { x: edge.x, y: edge.y }, edge.label)));
  }
  for (const key of g.nodes()) {
    const n = g.node(key);
    const classes = ["node", n.node.terminal ? "terminal" : "", key === current ? "current" : ""].join(" ");
    picture.append(svg("g", { class: classes.trim(), "data-state": key },
      svg("rect", { x: n.x - n.width / 2, y: n.y - n.height / 2, width: n.width, height: n.height, rx: 6 }),
      svg("text", { x: n.x, y: n.y }, n.label)));
  }
  box.replaceChildren(picture);
}

// -- start -----------------------------------------------------------------------------

$("#login-form").addEventListener("submit", (event) => {
  event.preventDefault();
  signIn($("#token").value.trim());
});
$("#sign-out").addEventListener("click", signOut);
$("#graph-workflow").addEventListener("change", renderGraph);
setInterval(() => ui.client && (renderSla(), renderInstances()), 10000);
const saved = sessionStorage.getItem(TOKEN_KEY);
if (saved) signIn(saved);
