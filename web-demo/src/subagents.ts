// Subagents: when an agent hands work to another agent, the inner run streams inside the outer
// one: SUBAGENT_STARTED (name, description, the tool call or subagent that spawned it), then its
// events carrying `subagentRunId` (so the messages @ag-ui/client builds from them carry it too),
// then SUBAGENT_FINISHED or SUBAGENT_ERROR.
//
// `SubagentTree` keeps what the SUBAGENT_* events said, per thread in localStorage, so a reload
// draws the same tree. `Layout` places a thread's messages: the top level, each subagent's own
// messages in a collapsible block under the tool call that spawned it (or inside the subagent
// that spawned it), recursively. A subagent nothing is known about (a thread stored elsewhere:
// messages keep their `subagentRunId`, the parent link is not stored) is drawn as a flat
// "Subagent" block in the tool call it ran during, or where its first message is.

import type { SubagentErrorEvent, SubagentStartedEvent } from '@ag-ui/client';
import { type Json, el, keptDetails } from './dom';

export type SubagentStatus = 'running' | 'finished' | 'error' | 'stopped';

export interface Subagent {
  id: string;
  name: string;
  description?: string;
  parentSubagentRunId?: string;
  parentToolCallId?: string;
  status: SubagentStatus;
  error?: string;
}

export class SubagentTree {
  private byId = new Map<string, Subagent>();

  constructor(private key: string) {
    try {
      const saved = JSON.parse(localStorage.getItem(key) ?? '[]');
      if (Array.isArray(saved)) for (const s of saved) if (s && typeof s.id === 'string') this.byId.set(s.id, s);
    } catch {
      // A corrupt record is no record: the blocks are drawn flat.
    }
  }

  get(id: string): Subagent | undefined {
    return this.byId.get(id);
  }

  ids(): string[] {
    return [...this.byId.keys()];
  }

  started(e: SubagentStartedEvent) {
    // A re-attached run repeats the SUBAGENT_STARTED of what was still open then: running again.
    this.byId.set(e.subagentRunId, {
      id: e.subagentRunId,
      name: e.name,
      description: e.description,
      parentSubagentRunId: e.parentSubagentRunId,
      parentToolCallId: e.parentToolCallId,
      status: 'running',
    });
    this.save();
  }

  finished(id: string) {
    this.end(id, 'finished');
  }

  failed(e: SubagentErrorEvent) {
    this.end(e.subagentRunId, 'error', e.message);
  }

  /** The page stopped receiving the run: what was still running will not be heard of again. */
  interrupted() {
    for (const s of this.byId.values()) if (s.status === 'running') s.status = 'stopped';
    this.save();
  }

  private end(id: string, status: SubagentStatus, error?: string) {
    const s = this.byId.get(id) ?? { id, name: 'Subagent', status };
    this.byId.set(id, { ...s, status, ...(error ? { error } : {}) });
    this.save();
  }

  private save() {
    try {
      localStorage.setItem(this.key, JSON.stringify([...this.byId.values()]));
    } catch {
      // Storage full: the tree is drawn flat after a reload.
    }
  }
}

/** One thing drawn in a scope (the top level or a subagent's block), in conversation order. */
export type Entry = { kind: 'message'; message: Json } | { kind: 'subagent'; id: string };

const TOP = '';

/** Where each message of a thread is drawn. Built once per render. */
export class Layout {
  /** Subagents drawn in a tool call's card, by tool call id. */
  private underCall = new Map<string, string[]>();
  /** What each scope draws (TOP for the top level), in order. */
  private entries = new Map<string, Entry[]>();
  /** Activities drawn in a tool call's card, by tool call id. */
  private activities = new Map<string, Json[]>();

  constructor(
    messages: Json[],
    private tree: SubagentTree,
    /** The tool call an activity message belongs to, if it should be drawn in the call's card. */
    activityCall: (m: Json) => string | undefined,
  ) {
    const calls = new Set<string>();
    for (const m of messages) for (const c of m.toolCalls ?? []) if (typeof c?.id === 'string') calls.add(c.id);
    const ids = new Set<string>(tree.ids());
    for (const m of messages) if (typeof m.subagentRunId === 'string') ids.add(m.subagentRunId);

    // Each subagent's parent scope: a tool call, a subagent, or the top level.
    const parentScope = new Map<string, string>();
    for (const id of ids) {
      const s = tree.get(id);
      const call = s ? s.parentToolCallId : openCallAround(messages, id);
      if (call && calls.has(call)) {
        this.push(this.underCall, call, id);
        continue;
      }
      parentScope.set(id, s?.parentSubagentRunId && ids.has(s.parentSubagentRunId) ? s.parentSubagentRunId : TOP);
    }
    // A parent chain that loops (bad data) would draw nothing: its members go to the top level.
    for (const id of parentScope.keys()) {
      const seen = new Set<string>();
      for (let p: string | undefined = id; p && p !== TOP; p = parentScope.get(p) ?? this.callOwner(p, messages)) {
        if (seen.has(p)) {
          parentScope.set(id, TOP);
          break;
        }
        seen.add(p);
      }
    }

    // Where each scope first appears (its first message, its subagents' included), for the order.
    const first = new Map<string, number>();
    messages.forEach((m, i) => {
      for (let s: string | undefined = m.subagentRunId, hops = 0; s && hops < 64; hops++) {
        if (!first.has(s)) first.set(s, i);
        s = parentScope.get(s);
      }
    });

    const placed: [number, number, Entry][] = [];
    messages.forEach((m, i) => {
      if (m.role === 'tool' || m.role === 'system' || m.role === 'developer') return;
      if (m.role === 'activity') {
        const call = activityCall(m);
        if (call && calls.has(call)) {
          this.push(this.activities, call, m);
          return;
        }
      }
      placed.push([i, 0, { kind: 'message', message: m }]);
    });
    for (const id of parentScope.keys()) placed.push([first.get(id) ?? Infinity, 1, { kind: 'subagent', id }]);
    // Messages before the block that starts at the same place (its own first message is in it).
    placed.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    for (const [, , entry] of placed) {
      const scope = entry.kind === 'message' ? (typeof entry.message.subagentRunId === 'string' ? entry.message.subagentRunId : TOP) : (parentScope.get(entry.id) ?? TOP);
      this.push(this.entries, scope, entry);
    }
  }

  /** What the top level draws. */
  top(): Entry[] {
    return this.entries.get(TOP) ?? [];
  }

  /** What a subagent's block draws. */
  inside(id: string): Entry[] {
    return this.entries.get(id) ?? [];
  }

  /** The subagents a tool call spawned. */
  spawnedBy(toolCallId: string): string[] {
    return this.underCall.get(toolCallId) ?? [];
  }

  /** The activities that belong to a tool call. */
  activitiesOf(toolCallId: string): Json[] {
    return this.activities.get(toolCallId) ?? [];
  }

  info(id: string): Subagent {
    return this.tree.get(id) ?? { id, name: 'Subagent', status: 'finished' };
  }

  /** The subagent whose message holds a tool call that spawned `id` (for the loop check). */
  private callOwner(id: string, messages: Json[]): string | undefined {
    const call = this.tree.get(id)?.parentToolCallId;
    if (!call) return undefined;
    const holder = messages.find((m) => (m.toolCalls ?? []).some((c: Json) => c?.id === call));
    return holder?.subagentRunId;
  }

  private push<T>(map: Map<string, T[]>, key: string, value: T) {
    const list = map.get(key);
    if (list) list.push(value);
    else map.set(key, [value]);
  }
}

/**
 * For a subagent nothing is known about: the tool call it most likely ran in, the last call made
 * before its first message whose result is stored after it (a stored thread keeps that order).
 */
function openCallAround(messages: Json[], id: string): string | undefined {
  const first = messages.findIndex((m) => m.subagentRunId === id);
  for (let i = first - 1; i >= 0; i--) {
    const m = messages[i];
    if (m.subagentRunId === id) continue;
    for (const c of [...(m.toolCalls ?? [])].reverse()) {
      const result = messages.findIndex((r) => r.role === 'tool' && r.toolCallId === c?.id);
      if (result > first) return c.id;
    }
  }
  return undefined;
}

const STATUS_LABEL: Record<SubagentStatus, string> = { running: 'running', finished: 'done', error: 'failed', stopped: 'stopped' };
const STATUS_CLASS: Record<SubagentStatus, string> = { running: 'running', finished: 'done', error: 'failed', stopped: 'waiting' };

/**
 * A subagent's collapsible block: its name, what it is for and its status, then what it drew
 * (`body`, drawn by the caller with the same renderer as the top level).
 */
export function subagentBlock(s: Subagent, body: HTMLElement[], openByKey: Map<string, boolean>): HTMLElement {
  const d = keptDetails(openByKey, `subagent:${s.id}`, true, { class: `subagent ${s.status}`, 'data-testid': 'subagent', 'data-name': s.name, 'data-status': s.status });
  const title = el('span', { class: 'subagent-title' }, el('span', { class: 'subagent-icon', 'aria-hidden': 'true' }, '◈'), el('span', { class: 'subagent-name' }, s.name));
  if (s.description && s.description !== s.name) title.append(el('span', { class: 'subagent-desc' }, s.description));
  d.append(el('summary', {}, title, el('span', { class: `badge ${STATUS_CLASS[s.status]}`, 'data-testid': 'subagent-status' }, STATUS_LABEL[s.status])));
  const inner = el('div', { class: 'subagent-body' }, ...body);
  if (s.error) inner.append(el('div', { class: 'error' }, s.error));
  if (!body.length && !s.error) inner.append(el('div', { class: 'hint' }, s.status === 'running' ? 'Working…' : 'Nothing to show.'));
  d.append(inner);
  return d;
}
