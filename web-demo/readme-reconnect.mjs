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

/** The long answer, whole and once. */
function longAnswer(messages) {
  const answers = messages.filter((m) => m.role === 'assistant').map((m) => m.content);
  return answers.length === 1 && answers[0] === LONG_ANSWER ? undefined : JSON.stringify(answers).slice(0, 300);
}

/** The delegate run's own answer last (its subagents' messages beside it, attributed). */
function delegated(messages) {
  const own = messages.filter((m) => m.role === 'assistant' && !m.subagentRunId).map((m) => m.content);
  const done = own.length === 2 && own[1] === 'My research assistant worked it out: The result is 391';
  return done ? undefined : JSON.stringify(own).slice(0, 300);
}

/** Leaves a run of `prompt` after `events` events (in a task of its own, as a page is left),
 * then resumes it; `check` says what is wrong with the messages read, if anything. */
async function leaveAndResume([prompt, events, check]) {
  const first = new ReconnectingAgent({ url });
  first.addMessage({ id: crypto.randomUUID(), role: 'user', content: prompt });
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
  const wrong = check(again.messages);
  if (wrong) return `${prompt}: left after ${saved.lastEventId} events, read: ${wrong}`;
  if (finished === ended) return `left after ${saved.lastEventId} events, the replay ${finished ? 'finished the run again' : 'did not end with RUN_FINISHED'}`;
  return undefined;
}

// 1: RUN_STARTED only; 3: inside the text message; 400: after the run's end. The delegate run
// is left inside its subagents (the researcher's step open, its executor reasoning), whose
// STARTs the example must re-send for the client's verifier.
const LONG = 'please give me a long answer';
const cases = [[LONG, 1, longAnswer], [LONG, 3, longAnswer], [LONG, 40, longAnswer], [LONG, 400, longAnswer],
  ['delegate 17*23', 26, delegated]];
const failures = (await Promise.all(cases.map(leaveAndResume))).filter(Boolean);
for (const f of failures) console.log(`FAIL ${f}`);
console.log(`${cases.length - failures.length} passed, ${failures.length} failed`);
process.exitCode = failures.length ? 1 : 0;
