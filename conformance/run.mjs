#!/usr/bin/env node
// AG-UI conformance harness for agui-gateway.
//
// Usage: node run.mjs <baseUrl> [path ...]   e.g. node run.mjs http://127.0.0.1:41234
// (a path given as `per:<path>` runs the plan-execute-reflect scenario only, see SCENARIOS)
//
// Drives the gateway's `demo` agent (POST <baseUrl>/agents/demo/agui, or each
// given path, e.g. /_plugins/_ml/agents/<id>/_execute/stream, on an agent with
// the demo's model and tools) with the real AG-UI client packages from npm, in
// two versions:
//   1.0.0  -> "@ag-ui/client"            (sends protocolVersion "1.0")
//   0.0.58 -> "agui0" = @ag-ui/client@0.0.58 (sends no protocolVersion)
//
// A scenario fails on any of:
//   - an error thrown by runAgent (the client's own schema validation and
//     verifyEvents sequencing checks surface this way), RUN_ERROR, onRunFailed;
//   - any console.warn / console.error emitted while the client runs (1.0.0
//     *strips* unknown fields and legacy shapes with a warning instead of
//     failing; 0.0.58 warns on dangling message / tool-call ids);
//   - independent checks on the raw wire frames and on the events delivered to
//     the subscriber: integer-or-absent timestamp, no `null` anywhere (except
//     inside opaque payloads), first event RUN_STARTED, last RUN_FINISHED,
//     thread/run ids echoed;
//   - the scenario's own assertions on events and agent.messages.
//
// Every scenario runs twice per client: over SSE (the default) and asking for the
// AG-UI protobuf encoding (`Accept: application/vnd.ag-ui.event+proto`). The 1.0.0
// client then gets protobuf frames (decoded by @ag-ui/client itself, picked by the
// response content type; the harness decodes the raw frames with @ag-ui/proto for
// its wire checks), and the events it delivers must equal those of the SSE run
// (ids, timestamps and how deltas were split aside). The 0.0.58 client's protobuf
// schema lacks TOOL_CALL_RESULT and the REASONING_* events, so the gateway answers
// pre-1.0 clients with SSE even when they ask for protobuf: its protobuf runs
// check exactly that (content type text/event-stream) and the same equality.
//
// Exit code 0 if every scenario passes, 1 otherwise. The last line of output is
// "<n> passed, <m> failed".
//
// Env: AGUI_CONFORMANCE_TIMEOUT_MS (default 30000) per run;
//      AGUI_CONFORMANCE_VERBOSE=1 prints the trace for passing scenarios too.

import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { HttpAgent as HttpAgentV1 } from '@ag-ui/client';
import { HttpAgent as HttpAgentV0 } from 'agui0';
import { AGUI_MEDIA_TYPE, decode as decodeProto } from '@ag-ui/proto';

// The 1.0.0 client only *warns* about stripped material; never let the
// environment silence those warnings.
delete process.env.SUPPRESS_TRANSFORMATION_WARNINGS;

const TIMEOUT_MS = Number(process.env.AGUI_CONFORMANCE_TIMEOUT_MS || 30000);
const VERBOSE = !!process.env.AGUI_CONFORMANCE_VERBOSE;

function installedVersion(pkgDir) {
  const url = new URL(`./node_modules/${pkgDir}/package.json`, import.meta.url);
  return JSON.parse(readFileSync(url, 'utf8')).version;
}

// `proto`: whether the gateway answers this client's protobuf request with protobuf.
const CLIENTS = [
  { version: '1.0.0', HttpAgent: HttpAgentV1, pkg: '@ag-ui/client', modern: true, proto: true },
  { version: '0.0.58', HttpAgent: HttpAgentV0, pkg: 'agui0', modern: false, proto: false },
];

const SSE_CONTENT_TYPE = 'text/event-stream';
// @ag-ui/client refuses a protobuf message larger than this.
const MAX_PROTO_MESSAGE = 10 * 1024 * 1024;

// The demo model's scripted reasoning signature (base64 of "scripted-signature").
const DEMO_REASONING_SIGNATURE = 'c2NyaXB0ZWQtc2lnbmF0dXJl';

// A valid 1x1 transparent PNG.
const TINY_PNG_BASE64 =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==';

// The demo agent's approval-gated backend tool and what the demo model says
// around it (fixtures/demo.json).
const PUBLISH_TOOL_NAME = 'publish_message';
const PUBLISH_PROMPT = 'please publish hello team';
const PUBLISH_ARGS = { text: 'hello team' };
const PUBLISH_ANNOUNCEMENT = 'I will publish that once you approve.';
const PUBLISH_REPLY_PREFIX = 'Publishing result: ';

const CHANGE_BACKGROUND_TOOL = {
  name: 'change_background',
  description: 'Change the page background colour',
  parameters: {
    type: 'object',
    properties: { background: { type: 'string' } },
    required: ['background'],
  },
};

// ---------------------------------------------------------------------------
// Small helpers

class ScenarioFailure extends Error {}

function check(cond, msg) {
  if (!cond) throw new ScenarioFailure(msg);
}

function trunc(s, n = 60) {
  s = String(s);
  return s.length > n ? `${s.slice(0, n)}…` : s;
}

function errText(e) {
  if (e === undefined) return 'undefined';
  if (e instanceof Error) {
    // zod errors carry a long JSON message; keep it on one line.
    return `${e.name && e.name !== 'Error' ? `${e.name}: ` : ''}${e.message}`.replace(/\s+/g, ' ');
  }
  return typeof e === 'string' ? e : JSON.stringify(e);
}

// Structural equality of JSON values (object key order does not matter).
function canonicalJson(v) {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  if (v && typeof v === 'object') {
    return `{${Object.keys(v)
      .filter((k) => v[k] !== undefined)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson(v[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v);
}

function deepEqual(a, b) {
  return canonicalJson(a) === canonicalJson(b);
}

function isNonEmptyString(v) {
  return typeof v === 'string' && v.trim().length > 0;
}

// Paths below which `null` is legitimate data (opaque JSON payloads).
function nullAllowedAt(event, path) {
  const [top, second] = path;
  switch (event.type) {
    case 'CUSTOM':
      if (top === 'value') return true;
      break;
    case 'RAW':
      if (top === 'event') return true;
      break;
    case 'STATE_SNAPSHOT':
      if (top === 'snapshot') return true;
      break;
    case 'STATE_DELTA':
      if (top === 'delta') return true; // JSON Patch values
      break;
    case 'ACTIVITY_SNAPSHOT':
      if (top === 'content') return true;
      break;
    case 'ACTIVITY_DELTA':
      if (top === 'patch') return true;
      break;
    case 'RUN_STARTED':
      // echoed RunAgentInput: state/forwardedProps/tool schemas are opaque JSON
      if (top === 'input' && ['state', 'forwardedProps', 'tools', 'context'].includes(second)) return true;
      break;
    case 'RUN_FINISHED':
      // an interrupt's responseSchema is an opaque JSON Schema
      if (top === 'outcome' && second === 'interrupts' && path[3] === 'responseSchema' && path.length > 4) return true;
      break;
    default:
      break;
  }
  // metadata is open by key; a null value under a key is meaningful data
  const mi = path.indexOf('metadata');
  if (mi !== -1 && path.length > mi + 1) return true;
  return false;
}

function findNulls(event, value, path, out) {
  if (value === null) {
    if (!nullAllowedAt(event, path)) out.push(path.join('.') || '<root>');
    return;
  }
  if (Array.isArray(value)) {
    value.forEach((v, i) => findNulls(event, v, [...path, i], out));
  } else if (typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) findNulls(event, v, [...path, k], out);
  }
}

// Generic per-event checks shared by the raw wire stream and subscriber view.
function checkEventList(events, where, ctx) {
  const problems = [];
  if (events.length === 0) {
    problems.push(`${where}: no events`);
    return problems;
  }
  events.forEach((ev, i) => {
    if (typeof ev !== 'object' || ev === null || Array.isArray(ev)) {
      problems.push(`${where}[${i}]: not a JSON object`);
      return;
    }
    if (typeof ev.type !== 'string') problems.push(`${where}[${i}]: missing string type`);
    if ('timestamp' in ev && !Number.isInteger(ev.timestamp)) {
      problems.push(`${where}[${i}] ${ev.type}: timestamp ${JSON.stringify(ev.timestamp)} is not an integer`);
    }
    const nulls = [];
    findNulls(ev, ev, [], nulls);
    for (const p of nulls) problems.push(`${where}[${i}] ${ev.type}: null at '${p}'`);
  });
  const first = events[0];
  const last = events[events.length - 1];
  if (first?.type !== 'RUN_STARTED') problems.push(`${where}: first event is ${first?.type}, expected RUN_STARTED`);
  if (last?.type !== 'RUN_FINISHED') problems.push(`${where}: last event is ${last?.type}, expected RUN_FINISHED`);
  for (const ev of events) {
    if (ev?.type === 'RUN_STARTED' || ev?.type === 'RUN_FINISHED') {
      if (ev.threadId !== ctx.threadId) problems.push(`${where}: ${ev.type}.threadId ${JSON.stringify(ev.threadId)} != ${ctx.threadId}`);
      if (ctx.runId && ev.runId !== ctx.runId) problems.push(`${where}: ${ev.type}.runId ${JSON.stringify(ev.runId)} != ${ctx.runId}`);
    }
    if (ev?.type === 'RUN_ERROR') problems.push(`${where}: RUN_ERROR ${JSON.stringify(ev.message)} code=${ev.code}`);
  }
  return problems;
}

// Parse an SSE body the way both clients do (frames split on a blank line,
// `data:` lines joined), but strictly: every frame must hold exactly one JSON
// object.
function parseSse(text) {
  const problems = [];
  const events = [];
  if (text.includes('\r')) problems.push('wire: stream contains \\r (clients split frames on "\\n\\n" only)');
  const frames = text.split('\n\n');
  const tail = frames.pop();
  if (tail.trim() !== '') problems.push(`wire: trailing unterminated frame ${JSON.stringify(trunc(tail))}`);
  for (const frame of frames) {
    if (frame.trim() === '') continue;
    const data = [];
    for (const line of frame.split('\n')) {
      if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
      else if (line.startsWith(':') || /^(event|id|retry):/.test(line)) continue;
      else problems.push(`wire: unexpected SSE line ${JSON.stringify(trunc(line))}`);
    }
    if (data.length === 0) continue; // comment / keep-alive frame
    try {
      events.push(JSON.parse(data.join('\n')));
    } catch (e) {
      problems.push(`wire: frame is not JSON: ${JSON.stringify(trunc(data.join('\n')))}`);
    }
  }
  return { events, problems };
}

// Split a protobuf body into its frames (4-byte big-endian length, then one
// ag_ui.Event) and decode each with @ag-ui/proto, strictly.
function parseProto(bytes) {
  const problems = [];
  const events = [];
  let at = 0;
  while (at < bytes.length) {
    if (bytes.length - at < 4) {
      problems.push(`wire: ${bytes.length - at} trailing bytes, not a frame`);
      break;
    }
    const len = new DataView(bytes.buffer, bytes.byteOffset + at, 4).getUint32(0, false);
    if (len > MAX_PROTO_MESSAGE) {
      problems.push(`wire: a ${len}-byte message is over the client's limit`);
      break;
    }
    if (at + 4 + len > bytes.length) {
      problems.push(`wire: the body ends inside a ${len}-byte frame`);
      break;
    }
    try {
      events.push(decodeProto(bytes.subarray(at + 4, at + 4 + len)));
    } catch (e) {
      problems.push(`wire: frame ${events.length} does not decode: ${errText(e)}`);
    }
    at += 4 + len;
  }
  return { events, problems };
}

// A run's delivered events with what legitimately differs between two runs of
// one scenario taken out: timestamps, ids (the gateway's and the harness's,
// named by order of first appearance, also where they appear inside other
// strings), and how a text, reasoning or argument stream was split into deltas.
function comparable(events) {
  const ids = new Map();
  const collect = (v, key) => {
    if (typeof v === 'string') {
      if (key && (key === 'id' || /Ids?$/.test(key)) && v.length > 0 && !ids.has(v)) ids.set(v, `<id${ids.size}>`);
    } else if (Array.isArray(v)) v.forEach((x) => collect(x, key));
    else if (v && typeof v === 'object') for (const [k, x] of Object.entries(v)) collect(x, k);
  };
  events.forEach((e) => collect(e));
  const known = [...ids.keys()].sort((a, b) => b.length - a.length);
  const rename = (v) => {
    if (typeof v === 'string') return known.reduce((t, id) => t.split(id).join(ids.get(id)), v);
    if (Array.isArray(v)) return v.map(rename);
    if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, rename(x)]));
    return v;
  };
  const merged = [];
  for (const ev of events) {
    const { timestamp, ...rest } = ev;
    const prev = merged[merged.length - 1];
    const key = { TEXT_MESSAGE_CONTENT: 'messageId', REASONING_MESSAGE_CONTENT: 'messageId', TOOL_CALL_ARGS: 'toolCallId' }[ev.type];
    if (key && prev?.type === ev.type && prev[key] === ev[key]) prev.delta += ev.delta;
    else merged.push(rest);
  }
  return merged.map(rename);
}

// The protobuf trace must deliver what the SSE trace delivered, run by run.
function compareTraces(sse, proto) {
  if (sse.runs.length !== proto.runs.length) return `SSE made ${sse.runs.length} runs, protobuf ${proto.runs.length}`;
  for (let i = 0; i < sse.runs.length; i++) {
    const a = comparable(sse.runs[i].events);
    const b = comparable(proto.runs[i].events);
    if (a.length !== b.length) return `${proto.runs[i].label}: SSE delivered ${a.length} events, protobuf ${b.length}`;
    for (let j = 0; j < a.length; j++) {
      if (!deepEqual(a[j], b[j])) {
        return `${proto.runs[i].label}: event ${j} differs: SSE ${trunc(canonicalJson(a[j]), 300)} vs protobuf ${trunc(canonicalJson(b[j]), 300)}`;
      }
    }
  }
  return undefined;
}

function describeEvent(ev) {
  const bits = [ev.type];
  switch (ev.type) {
    case 'RUN_STARTED':
      bits.push(`run=${trunc(ev.runId, 12)}`);
      break;
    case 'RUN_FINISHED':
      if (ev.outcome !== undefined) bits.push(`outcome=${JSON.stringify(ev.outcome)}`);
      if (ev.result !== undefined) bits.push(`result=${trunc(JSON.stringify(ev.result), 40)}`);
      break;
    case 'RUN_ERROR':
      bits.push(JSON.stringify(ev.message), `code=${ev.code}`);
      break;
    case 'TEXT_MESSAGE_START':
      bits.push(`msg=${trunc(ev.messageId, 12)}`, `role=${ev.role}`);
      break;
    case 'TEXT_MESSAGE_CONTENT':
      bits.push(`msg=${trunc(ev.messageId, 12)}`, JSON.stringify(trunc(ev.delta, 40)));
      break;
    case 'TEXT_MESSAGE_END':
      bits.push(`msg=${trunc(ev.messageId, 12)}`);
      break;
    case 'TOOL_CALL_START':
      bits.push(`call=${trunc(ev.toolCallId, 12)}`, `name=${ev.toolCallName}`, `parent=${ev.parentMessageId === undefined ? '-' : trunc(ev.parentMessageId, 12)}`);
      break;
    case 'TOOL_CALL_ARGS':
      bits.push(`call=${trunc(ev.toolCallId, 12)}`, JSON.stringify(trunc(ev.delta, 40)));
      break;
    case 'TOOL_CALL_END':
      bits.push(`call=${trunc(ev.toolCallId, 12)}`);
      break;
    case 'TOOL_CALL_RESULT':
      bits.push(`call=${trunc(ev.toolCallId, 12)}`, `msg=${trunc(ev.messageId, 12)}`, JSON.stringify(trunc(typeof ev.content === 'string' ? ev.content : JSON.stringify(ev.content), 40)));
      break;
    default: {
      const rest = { ...ev };
      delete rest.type;
      delete rest.timestamp;
      bits.push(trunc(JSON.stringify(rest), 80));
    }
  }
  return bits.join(' ');
}

// ---------------------------------------------------------------------------
// Running one agent run with full capture

// Route console.warn / console.error into the current run's capture.
let activeCapture = null;
const realWarn = console.warn;
const realError = console.error;
console.warn = (...args) => {
  if (activeCapture) activeCapture.push(`console.warn: ${args.map(errText).join(' ')}`);
  else realWarn(...args);
};
console.error = (...args) => {
  if (activeCapture) activeCapture.push(`console.error: ${args.map(errText).join(' ')}`);
  else realError(...args);
};

function makeAgent(client, threadId, initialMessages, trace) {
  // Wrap fetch to capture the exact request body and tee the raw response; a
  // protobuf trace asks for protobuf (HttpAgent always sends
  // `Accept: text/event-stream`, whatever its headers say).
  const fetchWrapper = async (url, init) => {
    if (trace.encoding === 'proto') init = { ...init, headers: { ...init.headers, Accept: AGUI_MEDIA_TYPE } };
    const rec = { url: String(url), request: undefined, status: undefined, contentType: undefined, rawText: undefined };
    trace.http.push(rec);
    try {
      rec.request = JSON.parse(init.body);
    } catch {
      rec.request = init.body;
    }
    const res = await fetch(url, init);
    rec.status = res.status;
    rec.contentType = res.headers.get('content-type');
    if (!res.body) return res;
    const [forClient, forUs] = res.body.tee();
    rec.rawPromise = new Response(forUs).arrayBuffer().then(
      (b) => {
        rec.rawBytes = new Uint8Array(b);
        rec.rawText = new TextDecoder().decode(rec.rawBytes);
      },
      (e) => {
        rec.rawError = errText(e);
      },
    );
    return new Response(forClient, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
  return new client.HttpAgent({
    url: trace.url,
    threadId,
    initialMessages,
    fetch: fetchWrapper,
  });
}

/**
 * Runs agent.runAgent once and returns a record of everything observed.
 * Never throws; problems are collected in run.problems.
 */
async function doRun(agent, trace, params, label) {
  const run = {
    label,
    events: [],
    problems: [],
    captured: [],
    finished: undefined,
    threadId: agent.threadId,
    runId: randomUUID(),
  };
  trace.runs.push(run);
  const httpBefore = trace.http.length;
  const subscriber = {
    onEvent: ({ event }) => {
      run.events.push(structuredClone(event));
    },
    onRunErrorEvent: ({ event }) => {
      run.problems.push(`onRunErrorEvent: ${JSON.stringify(event.message)} code=${event.code}`);
    },
    onRunFailed: ({ error }) => {
      run.problems.push(`onRunFailed: ${errText(error)}`);
    },
    onRunFinishedEvent: (e) => {
      run.finished = { outcome: e.outcome, pendingToolCallIds: e.pendingToolCallIds };
    },
  };
  const abortController = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    abortController.abort();
  }, TIMEOUT_MS);
  activeCapture = run.captured;
  try {
    run.result = await agent.runAgent({ runId: run.runId, abortController, ...params }, subscriber);
  } catch (e) {
    run.problems.push(`runAgent threw: ${errText(e)}`);
  } finally {
    clearTimeout(timer);
    // Let fire-and-forget subscriber notifications drain before un-capturing.
    await new Promise((r) => setTimeout(r, 20));
    activeCapture = null;
  }
  if (timedOut) run.problems.unshift(`run timed out after ${TIMEOUT_MS} ms`);
  for (const c of run.captured) run.problems.push(c);

  // Wire-level checks.
  const http = trace.http.slice(httpBefore);
  if (http.length !== 1) {
    run.problems.push(`expected exactly 1 HTTP request for the run, saw ${http.length}`);
  }
  const rec = http[0];
  if (rec) {
    run.http = rec;
    if (rec.rawPromise) await Promise.race([rec.rawPromise, new Promise((r) => setTimeout(r, 2000))]);
    if (rec.status !== 200) run.problems.push(`HTTP status ${rec.status}`);
    const expected = trace.contentType;
    if (expected === SSE_CONTENT_TYPE ? !/^text\/event-stream\b/i.test(rec.contentType || '') : rec.contentType !== expected) {
      run.problems.push(`content-type is ${JSON.stringify(rec.contentType)}, expected ${expected}`);
    }
    if (rec.rawError) run.problems.push(`reading raw body failed: ${rec.rawError}`);
    if (rec.rawBytes) {
      const { events, problems } = rec.contentType === AGUI_MEDIA_TYPE ? parseProto(rec.rawBytes) : parseSse(rec.rawText);
      run.wire = events;
      run.problems.push(...problems);
      run.problems.push(...checkEventList(events, 'wire', run));
    } else if (!rec.rawError) {
      run.problems.push('raw body was not captured');
    }
  }
  // Subscriber-level checks (what the client actually delivered).
  run.problems.push(...checkEventList(run.events, 'client', run));
  return run;
}

function printTrace(trace) {
  const out = [];
  for (const run of trace.runs) {
    const req = run.http?.request;
    const pv = req && typeof req === 'object' ? req.protocolVersion : undefined;
    out.push(`    -- ${run.label} (request protocolVersion=${pv === undefined ? '<absent>' : JSON.stringify(pv)}, ${run.events.length} client events, ${run.wire ? run.wire.length : '?'} wire frames)`);
    const evs = run.wire ?? run.events;
    evs.forEach((ev, i) => out.push(`       ${String(i).padStart(2)} ${describeEvent(ev)}`));
    if (run.wire && run.wire.length !== run.events.length) {
      out.push('       client view:');
      run.events.forEach((ev, i) => out.push(`       ${String(i).padStart(2)} ${describeEvent(ev)}`));
    }
    for (const p of run.problems) out.push(`       ! ${trunc(p, 400)}`);
  }
  if (trace.messages) {
    out.push('    -- agent.messages after the scenario:');
    for (const m of trace.messages) {
      const tc = m.toolCalls?.length ? ` toolCalls=${JSON.stringify(m.toolCalls.map((t) => [t.id, t.function?.name, t.function?.arguments]))}` : '';
      const tcid = m.toolCallId ? ` toolCallId=${m.toolCallId}` : '';
      const enc = m.encryptedValue !== undefined ? ` encryptedValue=${JSON.stringify(trunc(m.encryptedValue, 30))}` : '';
      out.push(`       ${m.role} id=${trunc(m.id, 12)}${tcid}${tc}${enc} content=${m.content === undefined ? '<absent>' : JSON.stringify(trunc(typeof m.content === 'string' ? m.content : JSON.stringify(m.content), 60))}`);
    }
  }
  console.log(out.join('\n'));
}

// ---------------------------------------------------------------------------
// Shared assertions

function assertRunClean(run) {
  if (run.problems.length > 0) {
    const more = run.problems.length > 1 ? ` (+${run.problems.length - 1} more)` : '';
    throw new ScenarioFailure(`${run.label}: ${trunc(run.problems[0], 300)}${more}`);
  }
}

function finishedEvent(run) {
  const evs = run.wire ?? run.events;
  return evs.filter((e) => e.type === 'RUN_FINISHED').pop();
}

// Outcome negotiation: 0.0.58 sends no protocolVersion and must get no
// `outcome`; 1.0.0 may get one, and it must be a success listing exactly the
// frontend tool calls left pending (none unless given).
function assertOutcome(client, run, pendingIds = []) {
  const fin = finishedEvent(run);
  check(fin, `${run.label}: no RUN_FINISHED`);
  if (!client.modern) {
    check(!('outcome' in fin), `${run.label}: RUN_FINISHED carries an outcome (${JSON.stringify(fin.outcome)}) for a 0.0.58 client`);
    return;
  }
  if (!('outcome' in fin)) return;
  const expected = pendingIds.length > 0 ? { type: 'success', pendingToolCallIds: pendingIds } : { type: 'success' };
  const ok =
    deepEqual(fin.outcome, expected) ||
    (pendingIds.length === 0 && deepEqual(fin.outcome, { type: 'success', pendingToolCallIds: [] }));
  check(ok, `${run.label}: RUN_FINISHED.outcome ${JSON.stringify(fin.outcome)}, expected ${JSON.stringify(expected)}`);
}

// Every TOOL_CALL_START's parentMessageId must name an assistant message in
// agent.messages that carries that tool call, and if the same turn streamed
// text before the call, it must be that text message.
function assertToolCallParents(run, messages, { required }) {
  let lastTextId;
  for (const ev of run.events) {
    if (ev.type === 'TEXT_MESSAGE_START') lastTextId = ev.messageId;
    if (ev.type === 'TOOL_CALL_RESULT') lastTextId = undefined;
    if (ev.type !== 'TOOL_CALL_START') continue;
    if (ev.parentMessageId === undefined) {
      check(!required, `${run.label}: TOOL_CALL_START for ${ev.toolCallName} has no parentMessageId`);
      continue;
    }
    const parent = messages.find((m) => m.id === ev.parentMessageId);
    check(parent, `${run.label}: parentMessageId ${ev.parentMessageId} of tool call ${ev.toolCallId} is not a message in agent.messages`);
    check(parent.role === 'assistant', `${run.label}: parentMessageId ${ev.parentMessageId} names a ${parent.role} message`);
    check(
      parent.toolCalls?.some((t) => t.id === ev.toolCallId),
      `${run.label}: assistant message ${ev.parentMessageId} does not hold tool call ${ev.toolCallId}`,
    );
    if (lastTextId !== undefined) {
      check(
        lastTextId === ev.parentMessageId,
        `${run.label}: tool call ${ev.toolCallId} has parentMessageId ${ev.parentMessageId} but the turn's text message is ${lastTextId}`,
      );
    }
  }
}

function eventsOfType(run, type) {
  return run.events.filter((e) => e.type === type);
}

function userMessage(content) {
  return { id: randomUUID(), role: 'user', content };
}

// Concatenated TEXT_MESSAGE_CONTENT deltas of one message.
function streamedText(run, messageId) {
  return run.events
    .filter((e) => e.type === 'TEXT_MESSAGE_CONTENT' && e.messageId === messageId)
    .map((e) => e.delta)
    .join('');
}

// Adds a message to the agent's history the way an application would.
function addMessage(agent, message) {
  if (typeof agent.addMessage === 'function') agent.addMessage(message);
  else agent.messages.push(message);
}

// Run 1 of the approval scenarios: the demo model announces and calls the
// approval-gated publish_message tool; the gateway must not run it. Checks
// everything both client versions share and returns the call.
async function startApproval(client, ctx) {
  const user = userMessage(PUBLISH_PROMPT);
  const agent = ctx.agent([user]);
  const run1 = await doRun(agent, ctx.trace, { tools: [] }, 'run 1');
  const messages = (ctx.trace.messages = agent.messages);
  assertRunClean(run1);

  // Event-level shape: the announcement, then START/ARGS/END for the call, no result.
  const evs = run1.events;
  const textStarts = eventsOfType(run1, 'TEXT_MESSAGE_START');
  check(textStarts.length === 1, `run 1: expected 1 TEXT_MESSAGE_START, saw ${textStarts.length}`);
  const text = streamedText(run1, textStarts[0].messageId);
  check(text === PUBLISH_ANNOUNCEMENT, `run 1: streamed text ${JSON.stringify(trunc(text))}, expected ${JSON.stringify(PUBLISH_ANNOUNCEMENT)}`);
  const starts = eventsOfType(run1, 'TOOL_CALL_START');
  check(starts.length === 1, `run 1: expected 1 TOOL_CALL_START, saw ${starts.length}`);
  check(starts[0].toolCallName === PUBLISH_TOOL_NAME, `run 1: tool call name ${JSON.stringify(starts[0].toolCallName)}, expected ${PUBLISH_TOOL_NAME}`);
  const callId = starts[0].toolCallId;
  const iStart = evs.indexOf(starts[0]);
  const iEnd = evs.findIndex((e) => e.type === 'TOOL_CALL_END' && e.toolCallId === callId);
  check(iEnd > iStart, 'run 1: no TOOL_CALL_END after TOOL_CALL_START');
  check(eventsOfType(run1, 'TOOL_CALL_RESULT').length === 0, 'run 1: the approval-gated tool got a TOOL_CALL_RESULT before approval');

  // The approval request, for any client that looks at CUSTOM events.
  const customs = eventsOfType(run1, 'CUSTOM').filter((e) => e.name === 'approval_required');
  check(customs.length === 1, `run 1: expected 1 CUSTOM approval_required, saw ${customs.length}`);
  const expectedRequest = [{ toolCallId: callId, toolName: PUBLISH_TOOL_NAME, arguments: PUBLISH_ARGS }];
  check(
    deepEqual(customs[0].value, expectedRequest),
    `run 1: approval_required value ${JSON.stringify(customs[0].value)}, expected ${JSON.stringify(expectedRequest)}`,
  );
  check(evs.indexOf(customs[0]) > iEnd, 'run 1: CUSTOM approval_required precedes the TOOL_CALL_END of its call');

  // Message-level shape: the call is in the history, unanswered.
  check(messages.length === 2, `run 1: expected 2 messages (user, assistant), found ${messages.length}`);
  check(messages[0].id === user.id && messages[0].role === 'user', 'run 1: first message is not the user message');
  const last = messages[1];
  check(last.role === 'assistant', `run 1: last message is ${last.role}, expected assistant`);
  check(last.content === PUBLISH_ANNOUNCEMENT, `run 1: assistant content ${JSON.stringify(trunc(last.content))}`);
  check(Array.isArray(last.toolCalls) && last.toolCalls.length === 1, `run 1: assistant message has ${last.toolCalls?.length ?? 0} tool calls, expected 1`);
  const call = last.toolCalls[0];
  check(call.id === callId, 'run 1: TOOL_CALL_START id differs from the message tool call id');
  check(call.function.name === PUBLISH_TOOL_NAME, `run 1: tool call name ${JSON.stringify(call.function.name)}`);
  let args;
  try {
    args = JSON.parse(call.function.arguments);
  } catch {
    throw new ScenarioFailure(`run 1: tool call arguments are not JSON: ${JSON.stringify(call.function.arguments)}`);
  }
  check(deepEqual(args, PUBLISH_ARGS), `run 1: arguments ${call.function.arguments}, expected ${JSON.stringify(PUBLISH_ARGS)}`);
  check(!messages.some((m) => m.role === 'tool'), 'run 1: a tool message appeared for an unapproved call');
  assertToolCallParents(run1, messages, { required: true });
  return { agent, user, run1, callId };
}

// 1.0: run 1 must end with exactly one tool-approval interrupt for the call,
// and the client must hold it in agent.pendingInterrupts.
function assertApprovalInterrupt(agent, run, callId) {
  const fin = finishedEvent(run);
  check(fin, `${run.label}: no RUN_FINISHED`);
  const outcome = fin.outcome;
  check(outcome?.type === 'interrupt', `${run.label}: RUN_FINISHED.outcome ${JSON.stringify(outcome)}, expected an interrupt`);
  check(Array.isArray(outcome.interrupts) && outcome.interrupts.length === 1, `${run.label}: expected 1 interrupt, got ${JSON.stringify(outcome.interrupts)}`);
  const it = outcome.interrupts[0];
  const allowed = ['id', 'reason', 'message', 'toolCallId', 'responseSchema', 'expiresAt', 'metadata'];
  const extra = Object.keys(it).filter((k) => !allowed.includes(k));
  check(extra.length === 0, `${run.label}: interrupt has unexpected fields ${extra.join(', ')}`);
  check(it.id === `approval:${callId}`, `${run.label}: interrupt id ${JSON.stringify(it.id)}, expected "approval:${callId}"`);
  check(it.reason === 'tool_call', `${run.label}: interrupt reason ${JSON.stringify(it.reason)}, expected "tool_call"`);
  check(it.toolCallId === callId, `${run.label}: interrupt toolCallId ${JSON.stringify(it.toolCallId)} != ${callId}`);
  check(isNonEmptyString(it.message), `${run.label}: interrupt message is ${JSON.stringify(it.message)}`);
  check(
    it.responseSchema && typeof it.responseSchema === 'object' && !Array.isArray(it.responseSchema),
    `${run.label}: interrupt responseSchema is ${JSON.stringify(it.responseSchema)}, expected a JSON Schema object`,
  );
  check(it.responseSchema.type === 'object', `${run.label}: responseSchema.type ${JSON.stringify(it.responseSchema.type)}`);
  check(it.responseSchema.properties?.approved?.type === 'boolean', `${run.label}: responseSchema does not describe a boolean "approved"`);
  check(it.expiresAt === undefined, `${run.label}: interrupt has expiresAt ${JSON.stringify(it.expiresAt)}`);
  check(!('pendingToolCallIds' in outcome), `${run.label}: interrupt outcome carries pendingToolCallIds`);

  // What the client delivered and stored: the 1.0.0 apply step hands
  // subscribers {outcome: "interrupt", interrupts} and sets
  // agent.pendingInterrupts to outcome.interrupts (unchanged but for a null
  // subagentRunId, which the gateway never sends).
  check(run.finished?.outcome === 'interrupt', `${run.label}: onRunFinishedEvent saw outcome ${JSON.stringify(run.finished?.outcome)}, expected "interrupt"`);
  const clientFin = eventsOfType(run, 'RUN_FINISHED').pop();
  check(deepEqual(clientFin?.outcome, outcome), `${run.label}: the client delivered outcome ${JSON.stringify(clientFin?.outcome)}, wire had ${JSON.stringify(outcome)}`);
  check(
    deepEqual(agent.pendingInterrupts, outcome.interrupts),
    `${run.label}: agent.pendingInterrupts is ${JSON.stringify(agent.pendingInterrupts)}, expected ${JSON.stringify(outcome.interrupts)}`,
  );
  return it;
}

// The run after a decision: the gateway runs (or refuses) the call and streams
// its TOOL_CALL_RESULT under the original id before any text; the model then
// replies. Returns the new tool message and the reply.
function assertApprovalContinuation(run, agent, before, callId, expectContent) {
  check(eventsOfType(run, 'TOOL_CALL_START').length === 0, `${run.label}: unexpected TOOL_CALL_START (the approved call must not be re-announced)`);
  const results = eventsOfType(run, 'TOOL_CALL_RESULT');
  check(results.length === 1, `${run.label}: expected 1 TOOL_CALL_RESULT, saw ${results.length}`);
  const result = results[0];
  check(result.toolCallId === callId, `${run.label}: TOOL_CALL_RESULT.toolCallId ${JSON.stringify(result.toolCallId)} != original call ${callId}`);
  check(typeof result.content === 'string' && expectContent(result.content), `${run.label}: TOOL_CALL_RESULT content ${JSON.stringify(result.content)}`);
  const iResult = run.events.indexOf(result);
  const iText = run.events.findIndex((e) => e.type === 'TEXT_MESSAGE_START');
  check(iText !== -1, `${run.label}: no assistant text`);
  check(iResult < iText, `${run.label}: TOOL_CALL_RESULT does not come before the assistant text`);
  const textStarts = eventsOfType(run, 'TEXT_MESSAGE_START');
  check(textStarts.length === 1, `${run.label}: expected 1 TEXT_MESSAGE_START, saw ${textStarts.length}`);
  const expectedText = `${PUBLISH_REPLY_PREFIX}${result.content}`;
  const text = streamedText(run, textStarts[0].messageId);
  check(text === expectedText, `${run.label}: streamed text ${JSON.stringify(trunc(text, 120))}, expected ${JSON.stringify(trunc(expectedText, 120))}`);

  const messages = agent.messages;
  const fresh = messages.filter((m) => !before.has(m.id));
  check(!fresh.some((m) => m.toolCalls?.length), `${run.label}: a new message carries tool calls`);
  const toolMsgs = fresh.filter((m) => m.role === 'tool');
  check(toolMsgs.length === 1, `${run.label}: expected 1 new tool message, found ${toolMsgs.length}`);
  const toolMsg = toolMsgs[0];
  check(toolMsg.id === result.messageId, `${run.label}: tool message id ${toolMsg.id} != TOOL_CALL_RESULT.messageId ${result.messageId}`);
  check(toolMsg.toolCallId === callId, `${run.label}: tool message toolCallId ${JSON.stringify(toolMsg.toolCallId)} != original call ${callId}`);
  check(toolMsg.content === result.content, `${run.label}: tool message content ${JSON.stringify(toolMsg.content)} != TOOL_CALL_RESULT content`);
  const iCallMsg = messages.findIndex((m) => m.role === 'assistant' && m.toolCalls?.some((t) => t.id === callId));
  check(iCallMsg !== -1, `${run.label}: the assistant tool-call message vanished from agent.messages`);
  check(messages.indexOf(toolMsg) > iCallMsg, `${run.label}: the tool message precedes the assistant tool-call message`);
  const replies = fresh.filter((m) => m.role === 'assistant');
  check(replies.length === 1, `${run.label}: expected 1 new assistant message, found ${replies.length}`);
  const reply = replies[0];
  check(reply.id === textStarts[0].messageId, `${run.label}: reply id ${reply.id} != TEXT_MESSAGE_START ${textStarts[0].messageId}`);
  check(reply.content === expectedText, `${run.label}: assistant content ${JSON.stringify(trunc(reply.content, 120))}`);
  check(messages[messages.length - 1] === reply, `${run.label}: the reply is not the last message`);
  check(messages.indexOf(reply) > messages.indexOf(toolMsg), `${run.label}: the reply does not follow the tool message`);
  return { toolMsg, reply };
}

// 1.0: resume run 1's interrupt with `entry` and check the continuation.
async function resumeApproval(client, ctx, agent, callId, entry, expectContent) {
  const before = new Set(agent.messages.map((m) => m.id));
  const resume = [{ interruptId: `approval:${callId}`, ...entry }];
  const run2 = await doRun(agent, ctx.trace, { tools: [], resume }, 'run 2');
  ctx.trace.messages = agent.messages;
  const sent = run2.http?.request;
  check(deepEqual(sent?.resume, resume), `run 2: client sent resume ${JSON.stringify(sent?.resume)} (harness problem)`);
  assertRunClean(run2);
  assertOutcome(client, run2);
  const out = assertApprovalContinuation(run2, agent, before, callId, expectContent);
  check(
    Array.isArray(agent.pendingInterrupts) && agent.pendingInterrupts.length === 0,
    `run 2: agent.pendingInterrupts is ${JSON.stringify(agent.pendingInterrupts)}, expected []`,
  );
  return out;
}

// ---------------------------------------------------------------------------
// Scenarios (a scenario with `versions` runs only on those client versions)

const SCENARIOS = [
  {
    // Runs only on paths given as `per:<path>`: a plan_execute_and_reflect agent on a scripted
    // model that plans one calculator step and then answers "The answer is 42.".
    name: 'plan-execute-reflect',
    per: true,
    async run(client, ctx) {
      const user = userMessage('What is 6 times 7?');
      const agent = ctx.agent([user]);
      const run = await doRun(agent, ctx.trace, { tools: [] }, 'run 1');
      const messages = (ctx.trace.messages = agent.messages);
      assertRunClean(run);
      assertOutcome(client, run);
      const starts = eventsOfType(run, 'STEP_STARTED');
      const ends = eventsOfType(run, 'STEP_FINISHED');
      check(starts.length === 1 && ends.length === 1, `expected 1 step, saw ${starts.length} started and ${ends.length} finished`);
      check(isNonEmptyString(starts[0].stepName) && starts[0].stepName === ends[0].stepName, `step names ${JSON.stringify(starts[0].stepName)} / ${JSON.stringify(ends[0].stepName)}`);
      const evs = run.events;
      const iStep = evs.indexOf(starts[0]);
      const iEnd = evs.indexOf(ends[0]);
      const iCall = evs.findIndex((e) => e.type === 'TOOL_CALL_START' && e.toolCallName === 'calculator');
      const iResult = evs.findIndex((e) => e.type === 'TOOL_CALL_RESULT');
      check(iStep < iCall && iCall < iResult && iResult < iEnd, 'the calculator call and its result are not inside the step');
      check(String(evs[iResult].content).includes('42'), `TOOL_CALL_RESULT content ${JSON.stringify(evs[iResult].content)}`);
      const last = messages[messages.length - 1];
      check(last?.role === 'assistant' && last.content === 'The answer is 42.', `last message ${JSON.stringify(last)}`);
      check(messages.some((m) => m.role === 'tool' && String(m.content).includes('42')), 'no tool message with the result');
      // The plan as an activity, its one step completed by the end.
      const plan = messages.find((m) => m.role === 'activity' && m.activityType === 'plan');
      check(plan?.content?.steps?.length === 1 && plan.content.steps[0].status === 'completed', `plan activity ${JSON.stringify(plan)}`);
      if (client.modern) {
        const subs = eventsOfType(run, 'SUBAGENT_STARTED');
        check(subs.length === 1 && subs[0].name === 'executor', `SUBAGENT_STARTED ${JSON.stringify(subs)}`);
        check(evs[iCall].subagentRunId === subs[0].subagentRunId, 'the step\'s calculator call is not attributed to the executor');
      }
    },
  },
  {
    // The demo agent hands the question to its research assistant (an agent tool): a 1.0
    // client sees the inner run as an attributed subagent with its own reasoning and tool
    // call; 0.0.58 gets it folded into the tool result.
    name: 'delegate',
    demoOnly: true,
    async run(client, ctx) {
      const agent = ctx.agent([userMessage('delegate 17*23')]);
      const run = await doRun(agent, ctx.trace, { tools: [] }, 'run 1');
      const messages = (ctx.trace.messages = agent.messages);
      assertRunClean(run);
      assertOutcome(client, run);
      const results = eventsOfType(run, 'TOOL_CALL_RESULT');
      const outer = results.find((e) => e.subagentRunId === undefined);
      check(outer && String(outer.content).includes('391'), `outer TOOL_CALL_RESULT ${JSON.stringify(outer)}`);
      const last = messages[messages.length - 1];
      check(last?.role === 'assistant' && String(last.content).includes('391') && last.subagentRunId === undefined, `last message ${JSON.stringify(last)}`);
      const subs = eventsOfType(run, 'SUBAGENT_STARTED');
      if (!client.modern) {
        check(subs.length === 0, '0.0.58 got SUBAGENT_STARTED');
        check(run.events.every((e) => e.subagentRunId === undefined), '0.0.58 got attributed events');
        check(eventsOfType(run, 'TOOL_CALL_START').length === 1, 'the inner tool call reached 0.0.58');
        check(!messages.some((m) => m.role === 'activity'), 'the subagent\'s plan reached 0.0.58');
        return;
      }
      check(subs.length === 2 && subs[0].name === 'Research assistant' && subs[1].name === 'executor', `SUBAGENT_STARTED ${JSON.stringify(subs)}`);
      const sid = subs[0].subagentRunId;
      const eid = subs[1].subagentRunId;
      check(subs[1].parentSubagentRunId === sid, 'the executor is not nested in the research assistant');
      const outerCall = eventsOfType(run, 'TOOL_CALL_START').find((e) => e.toolCallName === 'ask_researcher');
      check(subs[0].parentToolCallId === outerCall?.toolCallId, 'parentToolCallId does not name the ask_researcher call');
      const inner = eventsOfType(run, 'TOOL_CALL_START').find((e) => e.toolCallName === 'calculator');
      check(inner?.subagentRunId === eid, `calculator call not attributed to the executor: ${JSON.stringify(inner)}`);
      check(eventsOfType(run, 'REASONING_MESSAGE_START').every((e) => e.subagentRunId === eid), 'reasoning not attributed to the executor');
      const finished = eventsOfType(run, 'SUBAGENT_FINISHED');
      check(finished.length === 2 && finished[1].subagentRunId === sid, `SUBAGENT_FINISHED ${JSON.stringify(finished)}`);
      check(run.events.indexOf(finished[1]) < run.events.indexOf(outer), 'SUBAGENT_FINISHED after the outer result');
      const plan = messages.find((m) => m.role === 'activity' && m.activityType === 'plan');
      check(plan?.subagentRunId === sid && plan.content.steps[0].status === 'completed', `plan activity ${JSON.stringify(plan)}`);
      const innerText = messages.find((m) => m.role === 'assistant' && m.subagentRunId === sid && String(m.content).includes('391'));
      check(innerText, 'agent.messages lacks the subagent\'s attributed answer');
    },
  },
  {
    name: 'chat',
    async run(client, ctx) {
      const user = userMessage('hello');
      const agent = ctx.agent([user]);
      const run = await doRun(agent, ctx.trace, { tools: [] }, 'run 1');
      const messages = (ctx.trace.messages = agent.messages);
      assertRunClean(run);
      assertOutcome(client, run);
      check(eventsOfType(run, 'TEXT_MESSAGE_CONTENT').length > 0, 'no TEXT_MESSAGE_CONTENT streamed');
      check(eventsOfType(run, 'TOOL_CALL_START').length === 0, 'unexpected tool call in a plain chat');
      check(messages.some((m) => m.id === user.id && m.role === 'user' && m.content === 'hello'), 'user message missing from agent.messages');
      const assistants = messages.filter((m) => m.role === 'assistant');
      check(assistants.length === 1, `expected 1 assistant message, found ${assistants.length}`);
      check(isNonEmptyString(assistants[0].content), `assistant content is ${JSON.stringify(assistants[0].content)}`);
      check(messages.length === 2, `expected 2 messages (user, assistant), found ${messages.length}`);
    },
  },
  {
    name: 'frontend-tool',
    async run(client, ctx) {
      const user = userMessage('please change the background to blue');
      const agent = ctx.agent([user]);
      const tools = [CHANGE_BACKGROUND_TOOL];

      const run1 = await doRun(agent, ctx.trace, { tools }, 'run 1');
      ctx.trace.messages = agent.messages;
      assertRunClean(run1);
      check(eventsOfType(run1, 'TOOL_CALL_RESULT').length === 0, 'run 1: frontend tool got a TOOL_CALL_RESULT from the server');
      const starts = eventsOfType(run1, 'TOOL_CALL_START');
      check(starts.length === 1, `run 1: expected 1 TOOL_CALL_START, saw ${starts.length}`);
      const last = agent.messages[agent.messages.length - 1];
      check(last?.role === 'assistant', `run 1: last message is ${last?.role}, expected assistant`);
      check(Array.isArray(last.toolCalls) && last.toolCalls.length === 1, `run 1: last message has ${last.toolCalls?.length ?? 0} tool calls, expected 1`);
      const call = last.toolCalls[0];
      check(call.type === 'function', `run 1: tool call type ${JSON.stringify(call.type)}`);
      check(call.function.name === 'change_background', `run 1: tool call name ${JSON.stringify(call.function.name)}`);
      let args;
      try {
        args = JSON.parse(call.function.arguments);
      } catch {
        throw new ScenarioFailure(`run 1: tool call arguments are not JSON: ${JSON.stringify(call.function.arguments)}`);
      }
      check(args?.background === 'blue', `run 1: arguments ${call.function.arguments}, expected background "blue"`);
      check(starts[0].toolCallId === call.id, 'run 1: TOOL_CALL_START id differs from the message tool call id');
      check(!agent.messages.some((m) => m.role === 'tool'), 'run 1: a tool message appeared for a frontend tool');
      assertToolCallParents(run1, agent.messages, { required: false });
      assertOutcome(client, run1, [call.id]);

      // Answer the frontend tool call and continue the thread.
      const toolMsg = { id: randomUUID(), role: 'tool', toolCallId: call.id, content: 'background changed to blue' };
      if (typeof agent.addMessage === 'function') agent.addMessage(toolMsg);
      else agent.messages.push(toolMsg);
      const before = new Set(agent.messages.map((m) => m.id));

      const run2 = await doRun(agent, ctx.trace, { tools }, 'run 2');
      ctx.trace.messages = agent.messages;
      assertRunClean(run2);
      const sent = run2.http?.request?.messages ?? [];
      check(sent.some((m) => m.role === 'tool' && m.toolCallId === call.id), 'run 2: client did not send the tool message (harness problem)');
      check(eventsOfType(run2, 'TOOL_CALL_START').length === 0, 'run 2: unexpected new tool call');
      check(eventsOfType(run2, 'TEXT_MESSAGE_CONTENT').length > 0, 'run 2: no TEXT_MESSAGE_CONTENT streamed');
      const fresh = agent.messages.filter((m) => !before.has(m.id));
      check(!fresh.some((m) => m.toolCalls?.length), 'run 2: a new message carries tool calls');
      const replies = fresh.filter((m) => m.role === 'assistant');
      check(replies.length === 1, `run 2: expected 1 new assistant message, found ${replies.length}`);
      check(isNonEmptyString(replies[0].content), `run 2: assistant content is ${JSON.stringify(replies[0].content)}`);
      check(agent.messages[agent.messages.length - 1] === replies[0], 'run 2: the reply is not the last message');
      assertOutcome(client, run2);
    },
  },
  {
    name: 'backend-tool',
    async run(client, ctx) {
      const user = userMessage('calculate 6*7');
      const agent = ctx.agent([user]);
      const run = await doRun(agent, ctx.trace, { tools: [] }, 'run 1');
      const messages = (ctx.trace.messages = agent.messages);
      assertRunClean(run);
      assertOutcome(client, run);

      // Event-level shape: START/ARGS/END for calculator, RESULT with 42, then text.
      const evs = run.events;
      const iStart = evs.findIndex((e) => e.type === 'TOOL_CALL_START' && e.toolCallName === 'calculator');
      check(iStart !== -1, 'no TOOL_CALL_START for calculator');
      const callId = evs[iStart].toolCallId;
      const iArgs = evs.findIndex((e) => e.type === 'TOOL_CALL_ARGS' && e.toolCallId === callId);
      const iEnd = evs.findIndex((e) => e.type === 'TOOL_CALL_END' && e.toolCallId === callId);
      const iResult = evs.findIndex((e) => e.type === 'TOOL_CALL_RESULT' && e.toolCallId === callId);
      check(iArgs > iStart, 'no TOOL_CALL_ARGS after TOOL_CALL_START');
      check(iEnd > iArgs, 'no TOOL_CALL_END after TOOL_CALL_ARGS');
      check(iResult > iEnd, 'no TOOL_CALL_RESULT after TOOL_CALL_END');
      const resultContent = evs[iResult].content;
      check(typeof resultContent === 'string' && resultContent.includes('42'), `TOOL_CALL_RESULT content ${JSON.stringify(resultContent)} lacks "42"`);
      const iText = evs.findIndex((e, i) => i > iResult && e.type === 'TEXT_MESSAGE_CONTENT');
      check(iText !== -1, 'no assistant text after the TOOL_CALL_RESULT');
      check(eventsOfType(run, 'TOOL_CALL_START').length === 1, `expected 1 tool call, saw ${eventsOfType(run, 'TOOL_CALL_START').length}`);

      // Message-level shape.
      const iCallMsg = messages.findIndex((m) => m.role === 'assistant' && m.toolCalls?.some((t) => t.id === callId));
      check(iCallMsg !== -1, 'no assistant message holds the calculator tool call');
      const tc = messages[iCallMsg].toolCalls.find((t) => t.id === callId);
      check(tc.function.name === 'calculator', `tool call name ${JSON.stringify(tc.function.name)}`);
      try {
        JSON.parse(tc.function.arguments);
      } catch {
        throw new ScenarioFailure(`calculator arguments are not JSON: ${JSON.stringify(tc.function.arguments)}`);
      }
      const iTool = messages.findIndex((m) => m.role === 'tool' && m.toolCallId === callId);
      check(iTool !== -1, 'no tool message answers the calculator call');
      check(iTool > iCallMsg, 'tool message precedes the assistant tool-call message');
      check(typeof messages[iTool].content === 'string' && messages[iTool].content.includes('42'), `tool message content ${JSON.stringify(messages[iTool].content)} lacks "42"`);
      const last = messages[messages.length - 1];
      check(last.role === 'assistant' && isNonEmptyString(last.content), `last message is ${last.role} with content ${JSON.stringify(last.content)}, expected a non-empty assistant reply`);
      check(messages.indexOf(last) > iTool, 'final assistant reply does not follow the tool message');
      check(!last.toolCalls?.length, 'final assistant reply carries tool calls');

      // The tool call must hang off the turn's assistant message.
      check(evs[iStart].parentMessageId !== undefined, 'TOOL_CALL_START has no parentMessageId');
      check(
        messages.some((m) => m.role === 'assistant' && m.id === evs[iStart].parentMessageId),
        `parentMessageId ${evs[iStart].parentMessageId} is not an assistant message in agent.messages`,
      );
      check(messages[iCallMsg].id === evs[iStart].parentMessageId, 'tool call is attached to a message other than its parentMessageId');
      assertToolCallParents(run, messages, { required: true });
    },
  },
  {
    name: 'reasoning',
    async run(client, ctx) {
      const user = userMessage('please think about it');
      const agent = ctx.agent([user]);
      const run1 = await doRun(agent, ctx.trace, { tools: [] }, 'run 1');
      ctx.trace.messages = agent.messages;
      assertRunClean(run1);
      assertOutcome(client, run1);
      check(eventsOfType(run1, 'TOOL_CALL_START').length === 0, 'run 1: unexpected tool call');

      // Event order: REASONING_START, REASONING_MESSAGE_START/CONTENT/END,
      // REASONING_ENCRYPTED_VALUE, REASONING_END, then the assistant text.
      const evs = run1.events;
      const rStarts = eventsOfType(run1, 'REASONING_MESSAGE_START');
      check(rStarts.length === 1, `run 1: expected 1 REASONING_MESSAGE_START, saw ${rStarts.length}`);
      const reasoningId = rStarts[0].messageId;
      const iRStart = evs.findIndex((e) => e.type === 'REASONING_START');
      const iMStart = evs.findIndex((e) => e.type === 'REASONING_MESSAGE_START');
      const iMContent = evs.findIndex((e) => e.type === 'REASONING_MESSAGE_CONTENT' && e.messageId === reasoningId);
      const iMEnd = evs.findIndex((e) => e.type === 'REASONING_MESSAGE_END' && e.messageId === reasoningId);
      const iEnc = evs.findIndex((e) => e.type === 'REASONING_ENCRYPTED_VALUE');
      const iREnd = evs.findIndex((e) => e.type === 'REASONING_END');
      const iTStart = evs.findIndex((e) => e.type === 'TEXT_MESSAGE_START');
      check(iRStart !== -1, 'run 1: no REASONING_START');
      check(iMStart > iRStart, 'run 1: REASONING_MESSAGE_START does not follow REASONING_START');
      check(iMContent > iMStart, 'run 1: no REASONING_MESSAGE_CONTENT after REASONING_MESSAGE_START');
      check(iMEnd > iMContent, 'run 1: no REASONING_MESSAGE_END after REASONING_MESSAGE_CONTENT');
      check(iEnc > iMEnd, 'run 1: no REASONING_ENCRYPTED_VALUE after REASONING_MESSAGE_END');
      check(iREnd > iEnc, 'run 1: no REASONING_END after REASONING_ENCRYPTED_VALUE');
      check(iTStart > iREnd, 'run 1: no TEXT_MESSAGE_START after REASONING_END (reasoning must precede the text)');
      check(eventsOfType(run1, 'REASONING_ENCRYPTED_VALUE').length === 1, 'run 1: expected 1 REASONING_ENCRYPTED_VALUE');
      const enc = evs[iEnc];
      check(enc.subtype === 'message', `run 1: REASONING_ENCRYPTED_VALUE.subtype ${JSON.stringify(enc.subtype)}, expected "message"`);
      check(enc.entityId === reasoningId, `run 1: REASONING_ENCRYPTED_VALUE.entityId ${JSON.stringify(enc.entityId)} != reasoning message ${reasoningId}`);
      check(enc.encryptedValue === DEMO_REASONING_SIGNATURE, `run 1: encryptedValue ${JSON.stringify(enc.encryptedValue)}`);
      const textId = evs[iTStart].messageId;
      check(textId !== reasoningId, 'run 1: text message reuses the reasoning message id');
      check(
        streamedText(run1, textId).startsWith('After thinking it over'),
        `run 1: streamed text ${JSON.stringify(trunc(streamedText(run1, textId)))} does not start with "After thinking it over"`,
      );

      // Message-level shape. Both clients' default apply build a role
      // "reasoning" message from REASONING_MESSAGE_* (content = joined deltas)
      // and attach REASONING_ENCRYPTED_VALUE {subtype:"message"} to the
      // message named by entityId (0.0.58 does exactly what 1.0.0 does here).
      const messages = agent.messages;
      check(messages.length === 3, `run 1: expected 3 messages (user, reasoning, assistant), found ${messages.length}`);
      check(messages[0].id === user.id && messages[0].role === 'user', 'run 1: first message is not the user message');
      const reasoning = messages[1];
      check(reasoning.role === 'reasoning', `run 1: second message is ${reasoning.role}, expected reasoning`);
      check(reasoning.id === reasoningId, `run 1: reasoning message id ${reasoning.id} != REASONING_MESSAGE_START ${reasoningId}`);
      check(isNonEmptyString(reasoning.content), `run 1: reasoning content is ${JSON.stringify(reasoning.content)}`);
      check(reasoning.encryptedValue === DEMO_REASONING_SIGNATURE, `run 1: reasoning encryptedValue is ${JSON.stringify(reasoning.encryptedValue)}`);
      const reply = messages[2];
      check(reply.role === 'assistant' && reply.id === textId, `run 1: third message is ${reply.role} ${reply.id}, expected assistant ${textId}`);
      check(
        typeof reply.content === 'string' && reply.content.startsWith('After thinking it over'),
        `run 1: assistant content ${JSON.stringify(trunc(reply.content))}`,
      );
      check(!reply.toolCalls?.length, 'run 1: assistant reply carries tool calls');

      // Second turn: the reasoning message (with its encryptedValue) goes back
      // to the gateway in the history.
      const user2 = userMessage('thanks, say hello');
      if (typeof agent.addMessage === 'function') agent.addMessage(user2);
      else agent.messages.push(user2);
      const before = new Set(agent.messages.map((m) => m.id));
      const run2 = await doRun(agent, ctx.trace, { tools: [] }, 'run 2');
      ctx.trace.messages = agent.messages;
      const sent = run2.http?.request?.messages ?? [];
      check(
        sent.some((m) => m.role === 'reasoning' && m.id === reasoningId && m.encryptedValue === DEMO_REASONING_SIGNATURE),
        'run 2: client did not send the reasoning message with its encryptedValue (harness problem)',
      );
      assertRunClean(run2);
      assertOutcome(client, run2);
      check(eventsOfType(run2, 'TOOL_CALL_START').length === 0, 'run 2: unexpected tool call');
      check(eventsOfType(run2, 'TEXT_MESSAGE_CONTENT').length > 0, 'run 2: no TEXT_MESSAGE_CONTENT streamed');
      const fresh = agent.messages.filter((m) => !before.has(m.id));
      const replies = fresh.filter((m) => m.role === 'assistant');
      check(replies.length === 1, `run 2: expected 1 new assistant message, found ${replies.length}`);
      check(isNonEmptyString(replies[0].content), `run 2: assistant content is ${JSON.stringify(replies[0].content)}`);
      check(agent.messages[agent.messages.length - 1] === replies[0], 'run 2: the reply is not the last message');
      check(agent.messages.some((m) => m.id === reasoningId && m.role === 'reasoning'), 'run 2: the reasoning message vanished from agent.messages');
    },
  },
  {
    name: 'multimodal',
    async run(client, ctx) {
      // 1.0.0 uses typed source parts; 0.0.58 is driven with the legacy
      // "binary" part (its core schema still accepts it alongside image/...).
      const content = client.modern
        ? [
            { type: 'text', text: 'what is in this image?' },
            { type: 'image', source: { type: 'data', value: TINY_PNG_BASE64, mimeType: 'image/png' } },
            { type: 'document', source: { type: 'url', value: 'https://example.com/a.pdf', mimeType: 'application/pdf' } },
          ]
        : [
            { type: 'text', text: 'what is in this image?' },
            { type: 'binary', mimeType: 'image/png', data: TINY_PNG_BASE64 },
          ];
      const user = userMessage(content);
      const agent = ctx.agent([user]);
      const run = await doRun(agent, ctx.trace, { tools: [] }, 'run 1');
      const messages = (ctx.trace.messages = agent.messages);
      const sent = run.http?.request?.messages ?? [];
      check(
        sent.some((m) => m.id === user.id && deepEqual(m.content, content)),
        'client did not send the multimodal user message unchanged (harness problem)',
      );
      assertRunClean(run);
      assertOutcome(client, run);
      check(eventsOfType(run, 'TOOL_CALL_START').length === 0, 'unexpected tool call');
      const starts = eventsOfType(run, 'TEXT_MESSAGE_START');
      check(starts.length === 1, `expected 1 TEXT_MESSAGE_START, saw ${starts.length}`);
      const text = streamedText(run, starts[0].messageId);
      check(
        text.startsWith('I received your message with attachments'),
        `streamed text ${JSON.stringify(trunc(text))} does not start with "I received your message with attachments"`,
      );
      check(messages.length === 2, `expected 2 messages (user, assistant), found ${messages.length}`);
      check(messages[0].id === user.id && deepEqual(messages[0].content, content), 'user message content changed in agent.messages');
      const reply = messages[1];
      check(reply.role === 'assistant' && reply.id === starts[0].messageId, `second message is ${reply.role} ${reply.id}, expected the assistant reply`);
      check(
        typeof reply.content === 'string' && reply.content.startsWith('I received your message with attachments'),
        `assistant content ${JSON.stringify(trunc(reply.content))}`,
      );
    },
  },
  {
    name: 'approval-approve',
    versions: ['1.0.0'],
    async run(client, ctx) {
      const { agent, run1, callId } = await startApproval(client, ctx);
      assertApprovalInterrupt(agent, run1, callId);
      const { toolMsg } = await resumeApproval(
        client,
        ctx,
        agent,
        callId,
        { status: 'resolved', payload: { approved: true, arguments: { text: 'edited' } } },
        (c) => c === 'Published: edited',
      );
      check(toolMsg.content === 'Published: edited', `run 2: tool message content ${JSON.stringify(toolMsg.content)}, expected "Published: edited"`);
    },
  },
  {
    name: 'approval-reject',
    versions: ['1.0.0'],
    async run(client, ctx) {
      const { agent, run1, callId } = await startApproval(client, ctx);
      assertApprovalInterrupt(agent, run1, callId);
      const { toolMsg } = await resumeApproval(client, ctx, agent, callId, { status: 'cancelled' }, (c) => c.includes('denied'));
      check(toolMsg.content.includes('denied'), `run 2: tool message content ${JSON.stringify(toolMsg.content)} lacks "denied"`);
      check(!toolMsg.content.includes('Published'), `run 2: the rejected call ran: ${JSON.stringify(toolMsg.content)}`);
    },
  },
  {
    name: 'approval-pending',
    versions: ['0.0.58'],
    async run(client, ctx) {
      const { agent, run1, callId } = await startApproval(client, ctx);
      // No interrupts for 0.0.x: no outcome, the call is simply left pending.
      assertOutcome(client, run1);

      // Answer with a tool message holding the decision and run again.
      const decision = { id: randomUUID(), role: 'tool', toolCallId: callId, content: JSON.stringify({ approved: true }) };
      addMessage(agent, decision);
      const before = new Set(agent.messages.map((m) => m.id));
      const run2 = await doRun(agent, ctx.trace, { tools: [] }, 'run 2');
      ctx.trace.messages = agent.messages;
      const sent = run2.http?.request?.messages ?? [];
      check(
        sent.some((m) => m.id === decision.id && m.role === 'tool' && m.toolCallId === callId && m.content === decision.content),
        'run 2: client did not send the decision tool message (harness problem)',
      );
      check(!('resume' in (run2.http?.request ?? {})), 'run 2: 0.0.58 client sent resume (harness problem)');
      assertRunClean(run2);
      assertOutcome(client, run2);
      const { toolMsg } = assertApprovalContinuation(run2, agent, before, callId, (c) => c === `Published: ${PUBLISH_ARGS.text}`);
      check(toolMsg.id !== decision.id, 'run 2: the result reuses the decision message id');
      check(agent.messages.some((m) => m.id === decision.id), 'run 2: the decision tool message vanished from agent.messages');
    },
  },
];

// ---------------------------------------------------------------------------

async function main() {
  const baseUrl = process.argv[2];
  if (!baseUrl || !/^https?:\/\//.test(baseUrl)) {
    console.log('usage: node run.mjs <baseUrl>   e.g. node run.mjs http://127.0.0.1:41234');
    process.exitCode = 1;
    return;
  }
  const paths = process.argv.length > 3 ? process.argv.slice(3) : ['/agents/demo/agui'];
  let passed = 0;
  let failed = 0;
  for (const given of paths) {
    const per = given.startsWith('per:');
    const path = per ? given.slice(4) : given;
    const url = `${baseUrl.replace(/\/+$/, '')}${path}`;
    const label = paths.length > 1 ? ` ${path}` : '';
    for (const client of CLIENTS) {
      const installed = installedVersion(client.pkg);
      for (const scenario of SCENARIOS) {
        if (scenario.versions && !scenario.versions.includes(client.version)) continue;
        if (!!scenario.per !== per) continue;
        if (scenario.demoOnly && !path.includes('/demo/')) continue;
        let sseTrace;
        for (const encoding of ['sse', 'proto']) {
          const contentType = encoding === 'proto' && client.proto ? AGUI_MEDIA_TYPE : SSE_CONTENT_TYPE;
          const trace = { url, encoding, contentType, runs: [], http: [], messages: undefined };
          const ctx = {
            trace,
            agent: (initialMessages) => makeAgent(client, randomUUID(), initialMessages, trace),
          };
          let failure;
          if (installed !== client.version) {
            failure = `installed ${client.pkg} is ${installed}, expected ${client.version} (run npm ci)`;
          } else {
            try {
              await scenario.run(client, ctx);
            } catch (e) {
              failure = e instanceof ScenarioFailure ? e.message : `harness error: ${errText(e)}`;
              if (!(e instanceof ScenarioFailure) && e?.stack) trace.harnessStack = e.stack;
            }
          }
          if (encoding === 'sse') sseTrace = failure === undefined ? trace : undefined;
          else if (failure === undefined && sseTrace === undefined) failure = 'the SSE run failed: nothing to compare with';
          else if (failure === undefined) failure = compareTraces(sseTrace, trace);
          const name = `${client.version} ${scenario.name} [${encoding}]${label}`;
          if (failure === undefined) {
            passed++;
            console.log(`PASS ${name}`);
            if (VERBOSE) printTrace(trace);
          } else {
            failed++;
            console.log(`FAIL ${name}: ${failure}`);
            printTrace(trace);
            if (trace.harnessStack) console.log(trace.harnessStack.replace(/^/gm, '    '));
          }
        }
      }
    }
  }
  console.log(`${passed} passed, ${failed} failed`);
  process.exitCode = failed === 0 ? 0 : 1;
}

main().catch((e) => {
  realError(e);
  console.log('0 passed, 1 failed');
  process.exitCode = 1;
});
