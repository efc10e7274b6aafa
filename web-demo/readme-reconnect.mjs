#!/usr/bin/env node
// Checks the README's "Reconnect" example as an app would use it, in Node with the real
// @ag-ui/client: runs of the demo agent's slow answer are left at several points (before the
// answer, inside it, after its end), picked up again from a checkpoint by a fresh agent with
// connectAgent(), and must read the whole answer exactly once.
//
// Usage: node readme-reconnect.mjs <baseUrl>
// The last line of output is "<n> passed, <m> failed"; the exit code is 0 only when all passed.

import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const base = (process.argv[2] || '').replace(/\/+$/, '');
if (!/^https?:\/\//.test(base)) {
  console.log('usage: node readme-reconnect.mjs <baseUrl>');
  process.exit(2);
}

// The example, from the README's Reconnect section, importing the packages installed here.
const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
const section = readme.slice(readme.indexOf('#### Reconnect'));
const code = section.slice(section.indexOf('```ts') + 5, section.indexOf('```', section.indexOf('```ts') + 5));
const module = join(tmpdir(), `agui-readme-reconnect-${process.pid}.mjs`);
writeFileSync(module, code.replace(/from "([^"]+)"/g, (_, pkg) => `from "${import.meta.resolve(pkg)}"`));
const { ReconnectingAgent } = await import(pathToFileURL(module).href);
rmSync(module);

const LONG_ANSWER =
  'This answer streams slowly on purpose: reload the page while it is being written and it goes on where it was. ' +
  Array.from({ length: 60 }, (_, i) => `Sentence ${i + 1} of the long answer.`).join(' ');
const url = `${base}/agents/demo/agui`;

/** Leaves a run after `events` events (in a task of its own, as a page is left), then resumes it. */
async function leaveAndResume(events) {
  const first = new ReconnectingAgent({ url });
  first.addMessage({ id: crypto.randomUUID(), role: 'user', content: 'please give me a long answer' });
  let seen = 0;
  let ended = false;
  await first.runAgent({}, {
    onEvent: () => {
      if (++seen === events) setTimeout(() => first.abortRun());
    },
    onRunFinishedEvent: () => void (ended = true),
  });
  // What a page keeps (through JSON, as in localStorage).
  const saved = JSON.parse(JSON.stringify({ runId: first.runId, lastEventId: first.lastEventId, open: [...first.open], messages: first.messages }));
  const again = new ReconnectingAgent({ url, threadId: first.threadId });
  Object.assign(again, { runId: saved.runId, lastEventId: saved.lastEventId, open: new Map(saved.open) });
  again.setMessages(saved.messages);
  let finished = false;
  await again.connectAgent({}, { onRunFinishedEvent: () => void (finished = true) });
  const answers = again.messages.filter((m) => m.role === 'assistant').map((m) => m.content);
  if (answers.length !== 1 || answers[0] !== LONG_ANSWER) return `left after ${saved.lastEventId} events, read: ${JSON.stringify(answers).slice(0, 300)}`;
  if (finished === ended) return `left after ${saved.lastEventId} events, the replay ${finished ? 'finished the run again' : 'did not end with RUN_FINISHED'}`;
  return undefined;
}

// 1: RUN_STARTED only; 3: inside the text message; 400: after the run's end.
const cases = [1, 3, 40, 400];
const failures = (await Promise.all(cases.map(leaveAndResume))).filter(Boolean);
for (const f of failures) console.log(`FAIL ${f}`);
console.log(`${cases.length - failures.length} passed, ${failures.length} failed`);
process.exitCode = failures.length ? 1 : 0;
