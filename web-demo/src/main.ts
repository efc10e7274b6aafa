// The agui-gateway web demo: a website chatbot on @ag-ui/client's HttpAgent. It shows the AG-UI
// features a chatbot needs, each driven by the gateway's event stream:
// - agentic chat (streamed markdown, stop button) and a frontend tool that recolours the page;
// - backend tool cards drawn from TOOL_CALL_ARGS / TOOL_CALL_RESULT as they arrive;
// - human in the loop: a frontend tool whose steps stream into a checklist the user confirms;
// - agentic generative UI: a task-progress panel from STATE_SNAPSHOT then STATE_DELTA;
// - tool-based generative UI: a frontend tool drawn as a haiku card;
// - shared state: a recipe both the user and the agent edit;
// - predictive state: a document that fills in from a tool's streaming arguments (PredictState);
// - reasoning in a collapsible panel, image upload, and a reload that restores the thread;
// - a reload in the middle of a run re-attaches to it and the answer goes on (./reconnect);
// - subagents drawn nested under the tool call that spawned them (./subagents), and activities:
//   a plan checklist, tool progress, search sources (./activities);
// - a switch to receive the stream in the AG-UI protobuf encoding instead of SSE.

import type { AgentSubscriber } from '@ag-ui/client';
import { activityNode, toolCallOf } from './activities';
import { type Json, el, keptDetails } from './dom';
import { renderMarkdown } from './markdown';
import { parsePartialJson } from './partial-json';
import { type Checkpoint, ReconnectingAgent, RunKeeper } from './reconnect';
import { Layout, SubagentTree, subagentBlock } from './subagents';

const params = new URLSearchParams(location.search);
const AGENT_URL = params.get('agent') || '/agents/demo/agui';
const THREAD_KEY = `agui-demo-thread:${AGENT_URL}`;
const stateKey = (thread: string) => `agui-demo-state:${thread}`;
const runKey = (thread: string) => `agui-demo-run:${thread}`;
const subagentsKey = (thread: string) => `agui-demo-subagents:${thread}`;
const ENCODING_KEY = 'agui-demo-encoding';
/** Asks for the AG-UI protobuf encoding, SSE when the gateway does not stream it. */
const PROTO_ACCEPT = 'application/vnd.ag-ui.event+proto, text/event-stream';
const PROTO_TYPE = 'application/vnd.ag-ui.event+proto';

const DEFAULT_STATE = {
  recipe: {
    title: 'Tomato pasta',
    ingredients: [
      { name: 'Spaghetti', amount: '200 g' },
      { name: 'Tomatoes', amount: '4' },
      { name: 'Garlic', amount: '2 cloves' },
    ],
    instructions: ['Cook the pasta.', 'Simmer the tomatoes with the garlic.', 'Toss together.'],
  },
  document: '',
  steps: [] as Json[],
};

// Tools the page runs itself; a call to one ends the run and the page answers in the next.
const FRONTEND_TOOLS = [
  {
    name: 'change_background',
    description: 'Change the background colour of the chat page. Takes any CSS colour or gradient.',
    parameters: {
      type: 'object',
      properties: { background: { type: 'string', description: 'A CSS background value, e.g. "teal"' } },
      required: ['background'],
    },
  },
  {
    name: 'confirm_steps',
    description:
      'Propose a plan as a list of steps; the user ticks the steps to keep and confirms. Use it before doing a multi-step task.',
    parameters: {
      type: 'object',
      properties: {
        steps: {
          type: 'array',
          items: {
            type: 'object',
            properties: {
              description: { type: 'string' },
              status: { type: 'string', enum: ['enabled', 'disabled'] },
            },
            required: ['description', 'status'],
          },
        },
      },
      required: ['steps'],
    },
  },
  {
    name: 'generate_haiku',
    description: 'Show the user a haiku as a card: three lines in Japanese and their English translation.',
    parameters: {
      type: 'object',
      properties: {
        japanese: { type: 'array', items: { type: 'string' } },
        english: { type: 'array', items: { type: 'string' } },
      },
      required: ['japanese', 'english'],
    },
  },
];
const AUTO_ANSWERED = new Set(['change_background', 'generate_haiku']);

// ------------------------------------------------------------------------------------- state

let threadId = localStorage.getItem(THREAD_KEY) || crypto.randomUUID();
let agent: ReconnectingAgent;
/** What the SUBAGENT_* events of this thread said (kept for a reload). */
let subagents: SubagentTree;
/** How this render places the messages (subagents nested, activities in their tool's card). */
let layout: Layout;
/** The text and reasoning messages streaming now. */
const streaming = new Set<string>();
/** Collapsible blocks the user opened or closed, by key (kept across re-renders). */
const openDetails = new Map<string, boolean>();
/** The encoding the last stream arrived in ('' before the first). */
let lastEncoding: 'sse' | 'protobuf' | '' = '';
/** Where the page is in the run it receives, kept for a reload. */
const keeper = new RunKeeper(() => agent, () => runKey(threadId));
let running = false;
let stopped = false;
/** The gateway stopping the last run (the next run waits for the thread to be free). */
let stopping: Promise<void> = Promise.resolve();
/** Streaming arguments of the calls in flight, by tool call id. */
const liveArgs = new Map<string, { name: string; args: Json }>();
/** PredictState entries announced in this run. */
let predictions: Json[] = [];
/** The user's choices on confirm_steps checklists, by tool call id. */
const checklist = new Map<string, boolean[]>();
/** Images waiting to be sent with the next message. */
let attachments: { name: string; mimeType: string; data: string }[] = [];
let editingDocument = false;
/** Errors and notices shown under the conversation (kept across re-renders). */
const notes: { kind: 'error' | 'notice'; text: string }[] = [];

const $ = <T extends HTMLElement>(sel: string) => document.querySelector(sel) as T;

function loadState(thread: string): Json {
  try {
    const saved = localStorage.getItem(stateKey(thread));
    if (saved) return { ...structuredClone(DEFAULT_STATE), ...JSON.parse(saved) };
  } catch {
    // A corrupt saved state starts over.
  }
  return structuredClone(DEFAULT_STATE);
}

function saveState() {
  localStorage.setItem(stateKey(threadId), JSON.stringify(agent.state));
}

function wantsProto() {
  return localStorage.getItem(ENCODING_KEY) === 'proto';
}

/** fetch, noting which encoding each event stream (a run, a replay) arrived in. */
async function noteEncoding(url: string, init: RequestInit): Promise<Response> {
  const res = await fetch(url, init);
  const type = res.headers.get('content-type') ?? '';
  if (res.ok && (type.startsWith(PROTO_TYPE) || type.startsWith('text/event-stream'))) {
    lastEncoding = type.startsWith(PROTO_TYPE) ? 'protobuf' : 'sse';
    renderEncoding();
  }
  return res;
}

function makeAgent(thread: string) {
  agent = new ReconnectingAgent({
    url: AGENT_URL,
    threadId: thread,
    initialState: loadState(thread),
    headers: wantsProto() ? { Accept: PROTO_ACCEPT } : {},
    fetch: noteEncoding,
  });
  subagents = new SubagentTree(subagentsKey(thread));
  localStorage.setItem(THREAD_KEY, thread);
}

// ------------------------------------------------------------------------------------ render

let frame = 0;
function scheduleRender() {
  if (!frame) frame = requestAnimationFrame(() => {
    frame = 0;
    render();
  });
}

function textOf(content: Json): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return content.filter((p) => p.type === 'text').map((p) => p.text).join('\n');
  return '';
}

function parseJson(s: string): Json {
  try {
    return JSON.parse(s);
  } catch {
    return undefined;
  }
}

function resultFor(callId: string): Json | undefined {
  return agent.messages.find((m: Json) => m.role === 'tool' && m.toolCallId === callId);
}

function argsOf(call: Json): Json {
  return liveArgs.get(call.id)?.args ?? parseJson(call.function?.arguments ?? '') ?? {};
}

/** A tool call's card, then what the call spawned: its activities and subagents. */
function toolCallNodes(call: Json, depth: number): HTMLElement[] {
  const card = toolCard(call);
  const activities = layout.activitiesOf(call.id).map(activityNode).filter((n): n is HTMLElement => !!n);
  const spawned = layout.spawnedBy(call.id).map((id) => subagentNode(id, depth + 1));
  if (!card.classList.contains('tool-card')) return [card, ...activities, ...spawned];
  // In a backend tool's card: before its result, which they lead to.
  const result = card.querySelector('.tool-result, .citations');
  for (const n of [...activities, ...spawned]) card.insertBefore(n, result);
  return [card];
}

function subagentNode(id: string, depth: number): HTMLElement {
  // Bad data could nest without end: deep enough is drawn flat.
  const body = depth > 8 ? [] : drawEntries(layout.inside(id), depth);
  return subagentBlock(layout.info(id), body, openDetails);
}

function toolCard(call: Json): HTMLElement {
  const name: string = call.function?.name ?? '';
  const args = argsOf(call);
  const result = resultFor(call.id);
  switch (name) {
    case 'change_background':
      return el('div', { class: 'pill', 'data-testid': 'background-card' }, `🎨 Background: ${args.background ?? '…'}`);
    case 'generate_haiku':
      return haikuCard(args);
    case 'confirm_steps':
      return stepsCard(call, args, result);
  }
  // A backend tool: arguments as they stream, then the result.
  const card = el('div', { class: 'tool-card', 'data-testid': 'tool-card', 'data-tool': name });
  const interrupt = pendingInterrupts().find((i: Json) => i.toolCallId === call.id);
  if (interrupt && !result) {
    card.append(el('div', { class: 'tool-head' }, el('span', { class: 'tool-name' }, `🛡 ${name}`), el('span', { class: 'badge waiting' }, 'needs approval')));
    card.append(el('code', { class: 'tool-args', 'data-testid': 'tool-args' }, call.function?.arguments ?? ''));
    if (interrupt.message) card.append(el('div', { class: 'hint' }, interrupt.message));
    if (!running) {
      const approve = el('button', { class: 'primary', 'data-testid': 'approve' }, 'Approve');
      const reject = el('button', { 'data-testid': 'reject' }, 'Reject');
      approve.addEventListener('click', () => void run([{ interruptId: interrupt.id, status: 'resolved', payload: { approved: true } }]));
      reject.addEventListener('click', () => void run([{ interruptId: interrupt.id, status: 'cancelled' }]));
      card.append(el('div', { class: 'actions' }, approve, reject));
    }
    return card;
  }
  const status = result ? (result.error ? 'failed' : 'done') : liveArgs.has(call.id) ? 'running' : 'waiting';
  card.append(el('div', { class: 'tool-head' }, el('span', { class: 'tool-name' }, `🔧 ${name}`), el('span', { class: `badge ${status}` }, status)));
  const argText = liveArgs.get(call.id) ? JSON.stringify(liveArgs.get(call.id)!.args) : call.function?.arguments;
  if (argText) card.append(el('code', { class: 'tool-args', 'data-testid': 'tool-args' }, argText));
  if (result) {
    const hits = parseJson(result.content);
    const sourcesShown = layout.activitiesOf(call.id).some((a) => a.activityType === 'citations');
    if (sourcesShown) {
      // The search's citations activity lists them.
    } else if (Array.isArray(hits) && hits.length && hits.every((h) => h && typeof h.snippet === 'string')) {
      const list = el('ol', { class: 'citations', 'data-testid': 'citations' });
      hits.forEach((h: Json) => {
        list.append(el('li', {}, el('strong', {}, h.title || h.id), el('span', {}, ` ${h.snippet} `), el('cite', {}, `[${h.index}/${h.id}]`)));
      });
      card.append(list);
    } else if (!(name === 'update_state' || name === 'write_document')) {
      card.append(el('div', { class: 'tool-result', 'data-testid': 'tool-result' }, String(result.content)));
    }
  }
  return card;
}

/** Interrupts the last run ended with (calls waiting for the user's approval). */
function pendingInterrupts(): Json[] {
  const p = (agent as Json).pendingInterrupts;
  return Array.isArray(p) ? p : [];
}

function haikuCard(args: Json): HTMLElement {
  const card = el('div', { class: 'haiku', 'data-testid': 'haiku-card' });
  const ja = Array.isArray(args.japanese) ? args.japanese : [];
  const en = Array.isArray(args.english) ? args.english : [];
  for (let i = 0; i < Math.max(ja.length, en.length); i++) {
    card.append(el('div', { class: 'haiku-line' }, el('span', { class: 'ja' }, ja[i] ?? ''), el('span', { class: 'en' }, en[i] ?? '')));
  }
  return card;
}

function stepsCard(call: Json, args: Json, result: Json): HTMLElement {
  const steps: Json[] = Array.isArray(args.steps) ? args.steps.filter((s: Json) => s && s.description) : [];
  const streaming = liveArgs.has(call.id);
  const decided = !!result;
  const choice = checklist.get(call.id) ?? steps.map((s) => s.status !== 'disabled');
  if (!streaming && !decided) checklist.set(call.id, choice);
  const card = el('div', { class: 'steps-card', 'data-testid': 'steps-card' });
  card.append(el('div', { class: 'tool-head' }, el('span', { class: 'tool-name' }, '✅ Confirm the plan'), el('span', { class: `badge ${decided ? 'done' : streaming ? 'running' : 'waiting'}` }, decided ? 'confirmed' : streaming ? 'writing' : 'your turn')));
  steps.forEach((s, i) => {
    const box = el('input', { type: 'checkbox', 'data-testid': `step-${i}` }) as HTMLInputElement;
    box.checked = choice[i] ?? true;
    box.disabled = decided || streaming || running;
    box.addEventListener('change', () => {
      choice[i] = box.checked;
    });
    card.append(el('label', { class: 'step' }, box, ` ${s.description}`));
  });
  if (!decided && !streaming && !running) {
    const confirm = el('button', { class: 'primary', 'data-testid': 'confirm-steps' }, 'Confirm') as HTMLButtonElement;
    confirm.addEventListener('click', () => {
      const chosen = steps.filter((_, i) => choice[i]).map((s) => s.description);
      answer(call.id, chosen.length ? chosen.join('; ') : 'The user rejected every step.');
    });
    card.append(el('div', { class: 'actions' }, confirm));
  }
  return card;
}

function messageNode(m: Json, depth: number): HTMLElement | null {
  if (m.role === 'tool' || m.role === 'system' || m.role === 'developer') return null;
  if (m.role === 'activity') return activityNode(m);
  if (m.role === 'reasoning') {
    const d = keptDetails(openDetails, `reasoning:${m.id}`, false, { class: 'reasoning', 'data-testid': 'reasoning' });
    d.append(el('summary', {}, streaming.has(m.id) ? 'Thinking…' : 'Reasoning'), el('div', {}, textOf(m.content)));
    return d;
  }
  const node = el('div', { class: `msg ${m.role}`, 'data-testid': `msg-${m.role}` });
  if (m.role === 'user') {
    node.append(el('div', { class: 'bubble' }, textOf(m.content)));
    if (Array.isArray(m.content)) {
      for (const p of m.content) {
        if (p.type === 'image' && p.source?.type === 'data') {
          node.append(el('img', { class: 'thumb', alt: 'uploaded image', 'data-testid': 'sent-image', src: `data:${p.source.mimeType};base64,${p.source.value}` }));
        }
      }
    }
    return node;
  }
  const text = textOf(m.content);
  if (text) {
    const bubble = el('div', { class: 'bubble markdown' });
    bubble.innerHTML = renderMarkdown(text) + (streaming.has(m.id) ? '<span class="cursor">▍</span>' : '');
    node.append(bubble);
  }
  for (const call of m.toolCalls ?? []) node.append(...toolCallNodes(call, depth));
  return node.childElementCount ? node : null;
}

/** Draws a scope's messages and subagent blocks (the top level, or inside a subagent). */
function drawEntries(entries: ReturnType<Layout['top']>, depth: number): HTMLElement[] {
  const nodes: HTMLElement[] = [];
  for (const e of entries) {
    const n = e.kind === 'message' ? messageNode(e.message, depth) : subagentNode(e.id, depth + 1);
    if (n) nodes.push(n);
  }
  return nodes;
}

function render() {
  const list = $('#messages');
  const messages: Json[] = agent.messages;
  layout = new Layout(messages, subagents, toolCallOf);
  list.replaceChildren(...drawEntries(layout.top(), 0));
  if (!messages.length) list.append(el('div', { class: 'empty' }, 'Say hello to see what the demo agent can do.'));
  for (const n of notes) list.append(el('div', { class: n.kind, 'data-testid': n.kind }, n.text));
  list.scrollTop = list.scrollHeight;
  renderPanels();
  renderControls();
}

function renderPanels() {
  const state: Json = agent.state ?? {};
  // Task progress (agentic generative UI).
  const steps: Json[] = Array.isArray(state.steps) ? state.steps : [];
  const progress = $('#progress');
  progress.replaceChildren();
  if (!steps.length) progress.append(el('p', { class: 'hint' }, 'Ask the agent to research something.'));
  const done = steps.filter((s) => s.status === 'completed').length;
  if (steps.length) {
    const bar = el('div', { class: 'bar' }, el('div', { class: 'fill', style: `width:${Math.round((100 * done) / steps.length)}%` }));
    progress.append(bar, el('div', { class: 'hint', 'data-testid': 'progress-count' }, `${done} of ${steps.length} done`));
  }
  for (const s of steps) {
    const icon = s.status === 'completed' ? '✔' : s.status === 'in progress' ? '⏳' : '○';
    progress.append(el('div', { class: `task ${String(s.status).replace(' ', '-')}`, 'data-testid': 'task' }, `${icon} ${s.description}`));
  }
  renderRecipe(state.recipe);
  renderDocument(state.document);
}

function setState(mutate: (s: Json) => void) {
  const next = structuredClone(agent.state ?? {});
  mutate(next);
  agent.setState(next);
  saveState();
}

function renderRecipe(recipe: Json) {
  const box = $('#recipe');
  if (box.contains(document.activeElement)) return; // do not disturb typing
  box.replaceChildren();
  if (!recipe) return;
  const title = el('input', { class: 'title', 'data-testid': 'recipe-title', value: recipe.title ?? '' }) as HTMLInputElement;
  title.addEventListener('change', () => setState((s) => (s.recipe.title = title.value)));
  box.append(title);
  const ingredients = el('ul', { class: 'ingredients', 'data-testid': 'ingredients' });
  (recipe.ingredients ?? []).forEach((ing: Json, i: number) => {
    const amount = el('input', { class: 'amount', value: ing.amount ?? '', 'aria-label': 'amount' }) as HTMLInputElement;
    const name = el('input', { class: 'name', value: ing.name ?? '', 'aria-label': 'ingredient', 'data-testid': `ingredient-${i}` }) as HTMLInputElement;
    const remove = el('button', { class: 'icon', title: 'remove', 'data-testid': `remove-ingredient-${i}` }, '✕');
    amount.addEventListener('change', () => setState((s) => (s.recipe.ingredients[i].amount = amount.value)));
    name.addEventListener('change', () => setState((s) => (s.recipe.ingredients[i].name = name.value)));
    remove.addEventListener('click', () => {
      setState((s) => s.recipe.ingredients.splice(i, 1));
      renderRecipe(agent.state.recipe);
    });
    ingredients.append(el('li', {}, amount, name, remove));
  });
  const add = el('button', { class: 'link', 'data-testid': 'add-ingredient' }, '+ ingredient');
  add.addEventListener('click', () => {
    setState((s) => s.recipe.ingredients.push({ name: '', amount: '' }));
    renderRecipe(agent.state.recipe);
    (box.querySelector('.ingredients li:last-child .name') as HTMLInputElement | null)?.focus();
  });
  const steps = el('ol', { class: 'instructions' });
  for (const step of recipe.instructions ?? []) steps.append(el('li', {}, step));
  box.append(ingredients, add, steps);
}

function renderDocument(text: string | undefined) {
  const box = $('#document');
  const prediction = predictions.find((p) => [...liveArgs.values()].some((c) => c.name === p.tool));
  let shown = text ?? '';
  let live = false;
  if (prediction) {
    const call = [...liveArgs.values()].find((c) => c.name === prediction.tool);
    const partial = call?.args?.[prediction.tool_argument];
    if (typeof partial === 'string') {
      shown = partial;
      live = true;
    }
  }
  $('#document-badge').textContent = live ? 'writing…' : '';
  if (editingDocument) return;
  box.replaceChildren();
  if (!shown) {
    box.append(el('p', { class: 'hint' }, 'Ask the agent to write something.'));
    return;
  }
  const view = el('div', { class: 'markdown', 'data-testid': 'document' });
  view.innerHTML = renderMarkdown(shown);
  box.append(view);
}

function renderControls() {
  ($('#send') as HTMLButtonElement).hidden = running;
  ($('#stop') as HTMLButtonElement).hidden = !running;
  ($('#input') as HTMLTextAreaElement).disabled = running;
  const chips = $('#attachments');
  chips.replaceChildren(
    ...attachments.map((a, i) => {
      const x = el('button', { class: 'icon', title: 'remove' }, '✕');
      x.addEventListener('click', () => {
        attachments.splice(i, 1);
        renderControls();
      });
      return el('span', { class: 'chip', 'data-testid': 'attachment' }, el('img', { src: `data:${a.mimeType};base64,${a.data}`, alt: a.name }), x);
    }),
  );
}

function renderEncoding() {
  const badge = $('#encoding');
  badge.textContent = lastEncoding === 'protobuf' ? '⇣ protobuf' : lastEncoding === 'sse' ? '⇣ SSE' : '';
  badge.dataset.encoding = lastEncoding;
}

function showError(message: string) {
  notes.push({ kind: 'error', text: message });
  scheduleRender();
}

// --------------------------------------------------------------------------------------- runs

/** What the page does with a run's events, as they stream or as a re-attached run replays. */
function handlers(): AgentSubscriber {
  return {
    onMessagesChanged: scheduleRender,
    onTextMessageStartEvent: ({ event }) => void streaming.add(event.messageId),
    onTextMessageContentEvent: () => scheduleRender(),
    onTextMessageEndEvent: ({ event }) => void streaming.delete(event.messageId),
    onReasoningMessageStartEvent: ({ event }) => void streaming.add(event.messageId),
    onReasoningMessageEndEvent: ({ event }) => void streaming.delete(event.messageId),
    onSubagentStartedEvent: ({ event }) => {
      subagents.started(event);
      scheduleRender();
    },
    onSubagentFinishedEvent: ({ event }) => {
      subagents.finished(event.subagentRunId);
      scheduleRender();
    },
    onSubagentErrorEvent: ({ event }) => {
      subagents.failed(event);
      scheduleRender();
    },
    onToolCallStartEvent: ({ event }) => {
      liveArgs.set(event.toolCallId, { name: event.toolCallName, args: {} });
      scheduleRender();
    },
    onToolCallArgsEvent: ({ event, toolCallName, toolCallBuffer }) => {
      liveArgs.set(event.toolCallId, { name: toolCallName, args: parsePartialJson(toolCallBuffer) ?? {} });
      scheduleRender();
    },
    onToolCallEndEvent: ({ event, toolCallName, toolCallArgs }) => {
      liveArgs.delete(event.toolCallId);
      if (toolCallName === 'change_background' && toolCallArgs?.background) applyBackground(String(toolCallArgs.background));
      scheduleRender();
    },
    onCustomEvent: ({ event }) => {
      if (event.name === 'PredictState' && Array.isArray(event.value)) predictions = event.value;
    },
    onStateChanged: () => {
      saveState();
      scheduleRender();
    },
    onRunErrorEvent: ({ event }) => {
      showError(`The run failed (${event.code ?? 'error'}): ${event.message}`);
    },
  };
}

async function run(resume?: Json[]) {
  await receive(() => {
    const done = agent.runAgent(
      {
        tools: FRONTEND_TOOLS,
        context: [{ description: 'The page the user is on', value: 'the agui-gateway web demo' }],
        ...(resume ? { resume } : {}),
      } as Json,
      handlers(),
    );
    // The run has its id and its input: from here a reload re-attaches to it.
    keeper.start();
    return done;
  });
}

/** Re-attaches to the run this page was receiving before a reload: the rest of it streams in. */
async function reattach(checkpoint: Checkpoint) {
  agent.restore(checkpoint);
  await receive(() => {
    keeper.start();
    return agent.connectAgent({}, handlers());
  });
  if (agent.replayGone) {
    // Kept no longer (or never logged): the thread as the gateway stored it.
    agent.setMessages([]);
    void run();
  }
}

/** Receives one run's events (`start` begins them), then lets the agent go on. */
async function receive(start: () => Promise<unknown>) {
  await stopping;
  running = true;
  stopped = false;
  predictions = [];
  notes.length = 0;
  render();
  try {
    await start();
  } catch (e) {
    if (!stopped) showError(`The run failed: ${e instanceof Error ? e.message : String(e)}`);
  } finally {
    keeper.end();
    if (stopped) showNotice('Stopped.');
    running = false;
    liveArgs.clear();
    streaming.clear();
    subagents.interrupted();
    saveState();
    render();
  }
  if (!stopped && !agent.replayGone) continueAfterFrontendTools();
}

function showNotice(text: string) {
  notes.push({ kind: 'notice', text });
  scheduleRender();
}

/** Answers the frontend calls that need no user decision, then lets the agent go on. */
function continueAfterFrontendTools() {
  const last: Json = agent.messages[agent.messages.length - 1];
  if (!last || last.role !== 'assistant' || !last.toolCalls?.length) return;
  const open = last.toolCalls.filter((c: Json) => !resultFor(c.id));
  if (!open.length || !open.every((c: Json) => AUTO_ANSWERED.has(c.function?.name))) return;
  for (const c of open) {
    const args = parseJson(c.function.arguments) ?? {};
    const content = c.function.name === 'change_background' ? `The background is now ${args.background}.` : 'The haiku is shown to the user.';
    agent.addMessage({ id: crypto.randomUUID(), role: 'tool', toolCallId: c.id, content } as Json);
  }
  void run();
}

/** The user's answer to a frontend call, then the next run. */
function answer(toolCallId: string, content: string) {
  agent.addMessage({ id: crypto.randomUUID(), role: 'tool', toolCallId, content } as Json);
  void run();
}

function applyBackground(bg: string) {
  document.body.style.background = bg;
  localStorage.setItem(`agui-demo-bg:${threadId}`, bg);
}

function send() {
  const input = $('#input') as HTMLTextAreaElement;
  const text = input.value.trim();
  if (running || (!text && !attachments.length)) return;
  const content: Json = attachments.length
    ? [
        { type: 'text', text: text || 'What is in this image?' },
        ...attachments.map((a) => ({ type: 'image', source: { type: 'data', value: a.data, mimeType: a.mimeType } })),
      ]
    : text;
  agent.addMessage({ id: crypto.randomUUID(), role: 'user', content } as Json);
  input.value = '';
  attachments = [];
  void run();
}

function newChat() {
  if (running) {
    stopping = agent.stopRun();
    keeper.end();
  }
  localStorage.removeItem(`agui-demo-bg:${threadId}`);
  localStorage.removeItem(subagentsKey(threadId));
  threadId = crypto.randomUUID();
  document.body.style.background = '';
  checklist.clear();
  openDetails.clear();
  notes.length = 0;
  makeAgent(threadId);
  render();
}

// -------------------------------------------------------------------------------------- start

/** The agent picker: every agent the gateway serves (config file and registered). */
async function listAgents() {
  const select = $('#agent') as HTMLSelectElement;
  try {
    const res = await fetch('/agents');
    const { agents } = await res.json();
    for (const a of agents ?? []) {
      const option = el('option', { value: a.endpoint }, a.name || a.id) as HTMLOptionElement;
      option.selected = a.endpoint === AGENT_URL;
      select.append(option);
    }
  } catch {
    // Served elsewhere: the picker stays empty.
  }
  select.hidden = select.options.length < 2;
  select.addEventListener('change', () => {
    const url = new URL(location.href);
    url.searchParams.set('agent', select.value);
    location.href = url.toString();
  });
}

function wire() {
  $('#send').addEventListener('click', send);
  $('#stop').addEventListener('click', () => {
    stopped = true;
    // The gateway keeps a run going when its connection drops (so a reload can re-attach): stop
    // it there too.
    stopping = agent.stopRun();
  });
  $('#new-chat').addEventListener('click', newChat);
  const proto = $('#proto') as HTMLInputElement;
  proto.checked = wantsProto();
  proto.addEventListener('change', () => {
    localStorage.setItem(ENCODING_KEY, proto.checked ? 'proto' : 'sse');
    // From the next request on (a run, a replay).
    agent.headers = proto.checked ? { Accept: PROTO_ACCEPT } : {};
  });
  $('#input').addEventListener('keydown', (e) => {
    const k = e as KeyboardEvent;
    if (k.key === 'Enter' && !k.shiftKey) {
      k.preventDefault();
      send();
    }
  });
  const file = $('#file') as HTMLInputElement;
  $('#attach').addEventListener('click', () => file.click());
  file.addEventListener('change', async () => {
    for (const f of Array.from(file.files ?? [])) {
      if (!f.type.startsWith('image/')) continue;
      const url: string = await new Promise((resolve) => {
        const r = new FileReader();
        r.onload = () => resolve(String(r.result));
        r.readAsDataURL(f);
      });
      attachments.push({ name: f.name, mimeType: f.type, data: url.slice(url.indexOf(',') + 1) });
    }
    file.value = '';
    renderControls();
  });
  $('#edit-document').addEventListener('click', () => {
    const box = $('#document');
    if (editingDocument) {
      const area = box.querySelector('textarea') as HTMLTextAreaElement;
      setState((s) => (s.document = area.value));
      editingDocument = false;
      $('#edit-document').textContent = 'Edit';
      renderDocument(agent.state.document);
    } else {
      editingDocument = true;
      $('#edit-document').textContent = 'Save';
      const area = el('textarea', { 'data-testid': 'document-editor' }) as HTMLTextAreaElement;
      area.value = agent.state.document ?? '';
      box.replaceChildren(area);
      area.focus();
    }
  });
}

wire();
void listAgents();
makeAgent(threadId);
const bg = localStorage.getItem(`agui-demo-bg:${threadId}`);
if (bg) document.body.style.background = bg;
render();
const checkpoint = keeper.load();
// A reload in the middle of a run re-attaches to it; otherwise it asks for the stored thread: a
// run with no messages answers with MESSAGES_SNAPSHOT.
if (checkpoint) void reattach(checkpoint);
else if (localStorage.getItem(stateKey(threadId)) || params.has('restore')) void run();
