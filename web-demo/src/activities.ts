// Activity messages (`role: "activity"`): what an agent or a tool shows while it works, built by
// @ag-ui/client from ACTIVITY_SNAPSHOT and patched by ACTIVITY_DELTA, stored with the thread.
// - "plan": a plan-execute-reflect agent's plan, a checklist whose steps go pending → in
//   progress → done;
// - "progress": a tool's progress (MCP notifications/progress), a bar;
// - "citations": what a knowledge-base search found, a list of sources;
// any other type is shown as a small JSON card. An activity that names a `toolCallId` is drawn
// in that call's card (see `toolCallOf`); the others where they come in the conversation.

import { type Json, el } from './dom';

/** The tool call an activity belongs to, when it names one. */
export function toolCallOf(m: Json): string | undefined {
  const id = m?.content?.toolCallId;
  return typeof id === 'string' && id ? id : undefined;
}

export function activityNode(m: Json): HTMLElement | null {
  const content = m.content && typeof m.content === 'object' ? m.content : {};
  switch (m.activityType) {
    case 'plan':
      return Array.isArray(content.steps) ? planCard(content.steps) : null;
    case 'progress':
      return typeof content.progress === 'number' ? progressCard(content) : null;
    case 'citations':
      return Array.isArray(content.results) ? citationsCard(content) : null;
  }
  return jsonCard(String(m.activityType ?? 'activity'), m.content);
}

const STEP_LOOK: Record<string, { icon: string; label: string }> = {
  pending: { icon: '○', label: 'pending' },
  in_progress: { icon: '◐', label: 'in progress' },
  completed: { icon: '✔', label: 'done' },
  failed: { icon: '✖', label: 'failed' },
  skipped: { icon: '–', label: 'skipped' },
};

function planCard(steps: Json[]): HTMLElement {
  const valid = steps.filter((s) => s && typeof s.description === 'string');
  const done = valid.filter((s) => s.status === 'completed').length;
  const card = el('div', { class: 'activity plan', 'data-testid': 'plan' });
  card.append(
    el('div', { class: 'activity-head' }, el('span', { class: 'tool-name' }, '☰ Plan'), el('span', { class: `badge ${done === valid.length ? 'done' : 'running'}`, 'data-testid': 'plan-count' }, `${done} of ${valid.length} done`)),
  );
  const list = el('ol', { class: 'plan-steps' });
  for (const s of valid) {
    const status = String(s.status ?? 'pending');
    const look = STEP_LOOK[status] ?? { icon: '•', label: status.replace(/_/g, ' ') };
    list.append(
      el('li', { class: `plan-step ${status.replace(/[^a-z_-]/gi, '')}`, 'data-testid': 'plan-step', 'data-status': status }, el('span', { class: 'step-icon', 'aria-hidden': 'true' }, look.icon), el('span', { class: 'step-text' }, s.description), el('span', { class: 'step-status' }, look.label)),
    );
  }
  card.append(list);
  return card;
}

function progressCard(c: Json): HTMLElement {
  const total = typeof c.total === 'number' && c.total > 0 ? c.total : undefined;
  const share = total ? Math.max(0, Math.min(1, c.progress / total)) : undefined;
  const card = el('div', { class: 'activity progress', 'data-testid': 'activity-progress' });
  const label = total ? `${c.progress} of ${total}` : String(c.progress);
  card.append(el('div', { class: 'activity-head' }, el('span', { class: 'tool-name' }, `↻ ${c.tool ?? 'progress'}`), el('span', { class: 'hint' }, label)));
  const bar = el('div', { class: `bar${share === undefined ? ' indeterminate' : ''}` }, el('div', { class: 'fill', style: `width:${share === undefined ? 100 : Math.round(share * 100)}%` }));
  card.append(bar);
  if (typeof c.message === 'string' && c.message) card.append(el('div', { class: 'hint' }, c.message));
  return card;
}

function citationsCard(c: Json): HTMLElement {
  const card = el('div', { class: 'activity sources' });
  card.append(el('div', { class: 'activity-head' }, el('span', { class: 'tool-name' }, '❝ Sources'), el('span', { class: 'hint' }, `${c.results.length} found`)));
  const list = el('ol', { class: 'citations', 'data-testid': 'citations' });
  for (const r of c.results) {
    if (!r || typeof r !== 'object') continue;
    const title = String(r.title || r.id || 'untitled');
    const head = typeof r.url === 'string' && /^https?:\/\//.test(r.url) ? el('a', { href: r.url, target: '_blank', rel: 'noopener noreferrer' }, title) : el('strong', {}, title);
    const item = el('li', {}, head);
    if (typeof r.snippet === 'string') item.append(el('span', {}, ` ${r.snippet} `));
    if (typeof r.score === 'number') item.append(el('cite', {}, `score ${r.score.toFixed(2)}`));
    list.append(item);
  }
  card.append(list);
  return card;
}

function jsonCard(type: string, content: Json): HTMLElement {
  const d = el('details', { class: 'activity json', 'data-testid': 'activity' });
  let text: string;
  try {
    text = JSON.stringify(content, null, 2) ?? '';
  } catch {
    text = String(content);
  }
  d.append(el('summary', {}, `Activity: ${type}`), el('pre', {}, text.length > 2000 ? `${text.slice(0, 2000)}…` : text));
  return d;
}
