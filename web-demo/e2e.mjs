#!/usr/bin/env node
// End-to-end test of the web demo in headless Chromium (Debian's /usr/bin/chromium, driven by
// playwright-core): for each AG-UI feature, act as a user and check what the page shows.
//
// Usage: node e2e.mjs <baseUrl> [screenshotDir]
//
// A scenario fails on a failed check or on any console error or warning in the page (the
// @ag-ui/client verifier reports protocol violations there). The last line of output is
// "<n> passed, <m> failed"; the exit code is 0 only when all passed.

import { mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const base = (process.argv[2] || '').replace(/\/+$/, '');
const shots = process.argv[3] || join(tmpdir(), 'agui-web-demo-screenshots');
if (!/^https?:\/\//.test(base)) {
  console.log('usage: node e2e.mjs <baseUrl> [screenshotDir]');
  process.exit(2);
}
mkdirSync(shots, { recursive: true });
const TIMEOUT = Number(process.env.AGUI_E2E_TIMEOUT_MS || 20000);

// A valid 1x1 PNG.
const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==',
  'base64',
);

class Failure extends Error {}
function check(cond, msg) {
  if (!cond) throw new Failure(msg);
}

async function say(page, text) {
  await page.getByTestId('input').fill(text);
  await page.getByTestId('send').click();
}

/** Waits until the run has ended (the Send button is back). */
async function idle(page) {
  await page.getByTestId('send').waitFor({ state: 'visible', timeout: TIMEOUT });
}

async function lastAssistantText(page) {
  const texts = await page.getByTestId('msg-assistant').locator('.bubble').allInnerTexts();
  return texts[texts.length - 1] || '';
}

async function waitForText(page, locator, needle) {
  await page.waitForFunction(
    ([sel, n]) => [...document.querySelectorAll(sel)].some((e) => e.textContent.includes(n)),
    [locator, needle],
    { timeout: TIMEOUT },
  );
}

// The demo fixture's slow answer (a reload lands in the middle of it).
const LONG_ANSWER =
  'This answer streams slowly on purpose: reload the page while it is being written and it goes on where it was. ' +
  Array.from({ length: 60 }, (_, i) => `Sentence ${i + 1} of the long answer.`).join(' ');

/** The assistant's last bubble without the streaming cursor. */
async function answerSoFar(page) {
  return (await lastAssistantText(page)).replace('▍', '').trim();
}

async function waitForAnswerLength(page, n) {
  await page.waitForFunction((n) => (document.querySelector('[data-testid=msg-assistant] .bubble')?.textContent.length ?? 0) > n, n, { timeout: TIMEOUT });
}

/** Checks the page shows exactly one question and the whole long answer, once. */
async function checkLongAnswer(page, ctx) {
  await waitForText(page, '[data-testid=msg-assistant] .bubble', 'Sentence 60 of the long answer.');
  await idle(page);
  const answers = await page.getByTestId('msg-assistant').locator('.bubble').allInnerTexts();
  check(answers.length === 1, `${answers.length} assistant messages`);
  const text = answers[0].trim();
  check(text === LONG_ANSWER, `the answer is not the whole answer once:\n${text}`);
  const users = await page.getByTestId('msg-user').allInnerTexts();
  check(users.length === 1 && users[0].includes('long answer'), `questions: ${JSON.stringify(users)}`);
  check(ctx.requests.length === 1, `${ctx.requests.length} runs were started (the page should re-attach, not ask again)`);
}

const DELEGATE_ANSWER = 'My research assistant worked it out: The result is 391';
const RESEARCHER = '[data-tool=ask_researcher] [data-testid=subagent][data-name="Research assistant"]';
const EXECUTOR = `${RESEARCHER} > .subagent-body > [data-testid=subagent][data-name=executor]`;

/** What the page shows of a delegate run: the blocks, cards and plan, in document order. */
async function delegateShape(page) {
  return page.evaluate(() => {
    const depth = (e) => {
      let d = 0;
      for (let p = e.parentElement; p; p = p.parentElement) if (p.dataset?.testid === 'subagent') d++;
      return d;
    };
    const items = [];
    for (const e of document.querySelectorAll('#messages [data-testid]')) {
      const t = e.dataset.testid;
      if (t === 'subagent') items.push(`${depth(e)} subagent ${e.dataset.name} ${e.dataset.status}`);
      else if (t === 'tool-card') items.push(`${depth(e)} tool ${e.dataset.tool} ${e.querySelector('[data-testid=tool-result]')?.textContent ?? ''}`);
      else if (t === 'plan-step') items.push(`${depth(e)} step ${e.textContent} ${e.dataset.status}`);
      else if (t === 'reasoning') items.push(`${depth(e)} reasoning ${e.querySelector('div')?.textContent}`);
      else if (t === 'msg-assistant' || t === 'msg-user') items.push(`${depth(e)} ${t} ${e.querySelector('.bubble')?.textContent ?? ''}`);
    }
    return items;
  });
}

/** Checks the end of a delegate run: the researcher inside the ask_researcher call, its plan done, the executor inside it with the calculator call, the answer. */
async function checkDelegate(page) {
  await waitForText(page, '[data-testid=msg-assistant] .bubble', DELEGATE_ANSWER);
  await idle(page);
  const researcher = page.locator(RESEARCHER);
  check((await researcher.count()) === 1, `${await researcher.count()} Research assistant blocks in the ask_researcher card`);
  check((await researcher.getAttribute('data-status')) === 'finished', `the researcher is ${await researcher.getAttribute('data-status')}`);
  check((await researcher.locator('summary').first().innerText()).includes('Plans the work'), 'the researcher block does not say what it is for');
  const steps = await researcher.getByTestId('plan-step').evaluateAll((es) => es.map((e) => [e.querySelector('.step-text').textContent, e.dataset.status]));
  check(JSON.stringify(steps) === JSON.stringify([['calculate 17*23', 'completed']]), `plan steps: ${JSON.stringify(steps)}`);
  check((await researcher.getByTestId('plan-count').innerText()) === '1 of 1 done', 'the plan does not say it is done');
  const executor = page.locator(EXECUTOR);
  check((await executor.count()) === 1, 'no executor block inside the researcher');
  check((await executor.getAttribute('data-status')) === 'finished', `the executor is ${await executor.getAttribute('data-status')}`);
  check((await executor.locator('[data-tool=calculator] [data-testid=tool-result]').innerText()) === '391', 'the calculator call is not inside the executor');
  check((await executor.getByTestId('reasoning').count()) === 1, 'the executor has no reasoning panel');
  check((await researcher.locator(':scope > .subagent-body > [data-testid=msg-assistant]').innerText()).includes('The result is 391'), "the researcher's answer is not in its block");
  // The nested work stays in its blocks: the top level has the question, the hand-over and the answer.
  const top = await page.locator('#messages > [data-testid^=msg-]').evaluateAll((es) => es.map((e) => e.dataset.testid));
  check(JSON.stringify(top) === JSON.stringify(['msg-user', 'msg-assistant', 'msg-assistant']), `top level: ${JSON.stringify(top)}`);
  check((await lastAssistantText(page)) === DELEGATE_ANSWER, `last answer: ${await lastAssistantText(page)}`);
  check((await page.locator('[data-tool=ask_researcher] > [data-testid=tool-result]').innerText()) === 'The result is 391', "the ask_researcher call's result is missing");
}

/** The content type the gateway answers an explicit protobuf Accept with. */
async function gatewayProtoType() {
  const res = await fetch(`${base}/agents/demo/agui`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/vnd.ag-ui.event+proto' },
    // A 1.0 client: older ones get SSE whatever they ask for (their schema lacks events).
    body: JSON.stringify({ threadId: `probe-${Date.now()}`, runId: 'probe', protocolVersion: '1.0', messages: [{ id: 'u', role: 'user', content: 'hi' }] }),
  });
  const type = res.headers.get('content-type') || '';
  await res.arrayBuffer();
  return type;
}

const SCENARIOS = [
  {
    name: 'agentic chat: streamed markdown',
    async run(page) {
      await say(page, 'hello');
      await page.getByTestId('stop').waitFor({ state: 'visible', timeout: TIMEOUT });
      await idle(page);
      const bubble = page.getByTestId('msg-assistant').last().locator('.bubble');
      check((await bubble.innerText()).includes('offline demo assistant'), `reply: ${await bubble.innerText()}`);
      check((await bubble.locator('strong').count()) > 0, 'markdown bold was not rendered');
      check((await bubble.locator('li').count()) >= 5, 'markdown list was not rendered');
      check((await bubble.locator('code').count()) > 0, 'markdown code was not rendered');
    },
  },
  {
    name: 'agentic chat: stop aborts the run',
    async run(page) {
      await say(page, 'hello');
      await page.waitForFunction(() => document.querySelector('[data-testid=msg-assistant] .bubble')?.textContent.length > 0, null, { timeout: TIMEOUT });
      // The gateway keeps runs going without their connection (for a reload): Stop cancels it there.
      const cancelled = page.waitForResponse((r) => r.request().method() === 'DELETE' && r.url().includes('/agui/runs/'), { timeout: TIMEOUT });
      await page.getByTestId('stop').click();
      check((await cancelled).status() === 204, 'the run was not stopped on the gateway');
      await idle(page);
      await page.getByTestId('notice').waitFor({ timeout: TIMEOUT });
      const text = await lastAssistantText(page);
      check(!text.includes('haiku please'), 'the reply streamed to its end although the run was stopped');
      // The page keeps working after a stop.
      await say(page, 'please think about it');
      await idle(page);
      check((await lastAssistantText(page)).includes('After thinking it over'), 'no reply after a stop');
    },
  },
  {
    name: 'frontend tool: change_background recolours the page',
    async run(page) {
      await say(page, 'please change the background to teal');
      await page.getByTestId('background-card').waitFor({ timeout: TIMEOUT });
      await page.waitForFunction(() => getComputedStyle(document.body).backgroundColor === 'rgb(0, 128, 128)', null, { timeout: TIMEOUT });
      // The page answered the call and the agent went on.
      await waitForText(page, '[data-testid=msg-assistant] .bubble', 'Done (change_background: The background is now teal.)');
      await idle(page);
    },
  },
  {
    name: 'backend tool rendering: search results with citations',
    async run(page) {
      await say(page, 'what was the population of Seattle in 2023?');
      const card = page.locator('[data-testid=tool-card][data-tool=search]');
      await card.waitFor({ timeout: TIMEOUT });
      await card.getByTestId('citations').waitFor({ timeout: TIMEOUT });
      const items = await card.getByTestId('citations').locator('li').allInnerTexts();
      check(items.length >= 1 && items.some((t) => t.includes('3,519,000')), `citations: ${JSON.stringify(items)}`);
      check((await card.getByTestId('tool-args').innerText()).includes('Seattle'), 'the query was not shown');
      await idle(page);
      check((await lastAssistantText(page)).startsWith('I found it in the knowledge base'), 'no answer after the tool');
      await say(page, 'calculate (2+3)*7');
      await waitForText(page, '[data-testid=tool-card][data-tool=calculator] [data-testid=tool-result]', '35');
      await idle(page);
      check((await lastAssistantText(page)).includes('The result is 35.'), 'calculator answer missing');
    },
  },
  {
    name: 'human in the loop: the user edits and confirms the steps',
    async run(page) {
      await say(page, 'plan a trip in steps');
      await page.getByTestId('confirm-steps').waitFor({ timeout: TIMEOUT });
      const boxes = page.getByTestId('steps-card').locator('input[type=checkbox]');
      check((await boxes.count()) === 4, `expected 4 steps, saw ${await boxes.count()}`);
      await page.getByTestId('step-1').uncheck();
      await page.getByTestId('confirm-steps').click();
      await waitForText(page, '[data-testid=msg-assistant] .bubble', 'Thanks! I will go ahead');
      await idle(page);
      const text = await lastAssistantText(page);
      check(
        text.includes('Pick a destination; Reserve a hotel; Plan the first day') && !text.includes('Book the flights'),
        `the agent did not get the user's choice: ${text}`,
      );
      check((await page.getByTestId('confirm-steps').count()) === 0, 'the checklist is still open after confirming');
    },
  },
  {
    name: 'human in the loop: a backend tool waits for approval',
    async run(page) {
      await say(page, 'please publish hello team');
      await page.getByTestId('approve').waitFor({ timeout: TIMEOUT });
      check((await page.locator('[data-tool=publish_message] [data-testid=tool-args]').innerText()).includes('hello team'), 'the call to approve is not shown');
      await page.getByTestId('approve').click();
      await waitForText(page, '[data-testid=msg-assistant] .bubble', 'Publishing result: Published: hello team');
      await idle(page);
      check((await page.getByTestId('approve').count()) === 0, 'the approval is still asked for');
    },
  },
  {
    name: 'agentic generative UI: task progress from state snapshot and deltas',
    async run(page) {
      await page.evaluate(() => {
        window.__progress = [];
        new MutationObserver(() => {
          const t = document.querySelector('[data-testid=progress-count]')?.textContent;
          if (t && window.__progress[window.__progress.length - 1] !== t) window.__progress.push(t);
        }).observe(document.getElementById('progress'), { childList: true, subtree: true, characterData: true });
      });
      await say(page, 'research coffee beans');
      await waitForText(page, '[data-testid=progress-count]', '3 of 3 done');
      await idle(page);
      const seen = await page.evaluate(() => window.__progress);
      check(seen[0] === '0 of 3 done' && seen.includes('1 of 3 done') && seen.includes('2 of 3 done'), `progress went ${JSON.stringify(seen)}`);
      const tasks = await page.getByTestId('task').allInnerTexts();
      check(tasks.length === 3 && tasks.every((t) => t.startsWith('✔')), `tasks: ${JSON.stringify(tasks)}`);
      check((await lastAssistantText(page)).startsWith('All three steps are done'), 'no final answer');
    },
  },
  {
    name: 'tool-based generative UI: a haiku card',
    async run(page) {
      await say(page, 'write me a haiku please');
      const card = page.getByTestId('haiku-card');
      await card.waitFor({ timeout: TIMEOUT });
      // The card is drawn from the arguments as they stream, then stays.
      await waitForText(page, '[data-testid=msg-assistant] .bubble', 'I hope the haiku');
      await idle(page);
      check((await card.locator('.haiku-line').count()) === 3, 'the haiku has not three lines');
      const text = await card.innerText();
      check(text.includes('古池や') && text.includes('水の音') && text.includes('Splash! Silence again.'), `haiku: ${text}`);
    },
  },
  {
    name: 'shared state: the user and the agent both edit the recipe',
    async run(page, ctx) {
      await page.getByTestId('recipe-title').fill("Grandma's pasta");
      await page.getByTestId('recipe-title').press('Tab');
      await page.getByTestId('remove-ingredient-2').click();
      await say(page, 'please improve the recipe');
      await idle(page);
      const sent = ctx.requests.map((r) => r.state).filter(Boolean).pop();
      check(sent?.recipe?.title === "Grandma's pasta", `the request's state: ${JSON.stringify(sent?.recipe)}`);
      const names = await page.getByTestId('ingredients').locator('input.name').evaluateAll((es) => es.map((e) => e.value));
      check(names.includes('Fresh basil'), `the agent's ingredient is missing: ${JSON.stringify(names)}`);
      check(!names.includes('Garlic') && names.includes('Spaghetti'), `the user's edit was lost: ${JSON.stringify(names)}`);
      check((await page.getByTestId('recipe-title').inputValue()) === "Grandma's pasta", 'the title edit was lost');
    },
  },
  {
    name: 'predictive state updates: the document fills in as the arguments stream',
    async run(page) {
      await page.evaluate(() => {
        window.__doc = [];
        new MutationObserver(() => {
          const d = document.querySelector('[data-testid=document]');
          const badge = document.querySelector('[data-testid=document-badge]')?.textContent;
          if (d) window.__doc.push({ len: d.textContent.length, badge });
        }).observe(document.getElementById('document'), { childList: true, subtree: true, characterData: true });
      });
      await say(page, 'write a story');
      await waitForText(page, '[data-testid=msg-assistant] .bubble', 'The document is in the panel');
      await idle(page);
      const seen = await page.evaluate(() => window.__doc);
      const live = seen.filter((s) => s.badge === 'writing…');
      check(live.length >= 3, `the document did not fill in live (${live.length} updates while writing)`);
      check(live[0].len < live[live.length - 1].len, 'the live document did not grow');
      const doc = await page.getByTestId('document').innerText();
      check(doc.includes('The lighthouse keeper') && doc.includes('not the only one awake'), `document: ${doc.slice(0, 80)}`);
      check((await page.getByTestId('document-badge').innerText()) === '', 'still marked as writing');
    },
  },
  {
    name: 'reasoning: a collapsible panel',
    async run(page) {
      await say(page, 'please think about it');
      await idle(page);
      const panel = page.getByTestId('reasoning').last();
      await panel.waitFor({ timeout: TIMEOUT });
      check(!(await panel.evaluate((d) => d.open)), 'the reasoning panel should start collapsed');
      await panel.locator('summary').click();
      check((await panel.innerText()).includes('step by step'), `reasoning: ${await panel.innerText()}`);
    },
  },
  {
    name: 'image upload: sent as an image part',
    async run(page, ctx) {
      const file = join(tmpdir(), `agui-e2e-${process.pid}.png`);
      writeFileSync(file, PNG);
      await page.getByTestId('file').setInputFiles(file);
      await page.getByTestId('attachment').waitFor({ timeout: TIMEOUT });
      await say(page, 'what is this?');
      await page.getByTestId('sent-image').waitFor({ timeout: TIMEOUT });
      await idle(page);
      check((await lastAssistantText(page)).includes('I received your message with attachments'), 'no answer to the image');
      const user = ctx.requests.pop()?.messages?.find((m) => Array.isArray(m.content));
      const part = user?.content?.find((p) => p.type === 'image');
      check(part?.source?.type === 'data' && part.source.mimeType === 'image/png' && part.source.value === PNG.toString('base64'), `image part: ${JSON.stringify(part)?.slice(0, 120)}`);
    },
  },
  {
    name: 'a reload restores the conversation',
    async run(page) {
      await say(page, 'hello');
      await idle(page);
      await say(page, 'calculate 6*7');
      await idle(page);
      await page.reload();
      await waitForText(page, '[data-testid=msg-assistant] .bubble', 'The result is 42.');
      await idle(page);
      const users = await page.getByTestId('msg-user').allInnerTexts();
      check(users.length === 2 && users[0].includes('hello') && users[1].includes('calculate 6*7'), `restored: ${JSON.stringify(users)}`);
    },
  },
  {
    name: 'reconnect: a reload mid-answer re-attaches and the answer goes on',
    async run(page, ctx) {
      const replays = [];
      page.on('request', (r) => {
        if (r.method() === 'GET' && r.url().includes('/agui/runs/')) replays.push(r.headers()['last-event-id']);
      });
      await say(page, 'please give me a long answer');
      await waitForAnswerLength(page, 200);
      const before = await answerSoFar(page);
      check(before.length < LONG_ANSWER.length, 'the answer was complete before the reload');
      await page.reload();
      // The page shows what it had at once, then the rest streams in.
      await waitForAnswerLength(page, 0);
      const restored = await answerSoFar(page);
      check(restored.startsWith(before) && restored.length < LONG_ANSWER.length, `after the reload: ${restored.slice(0, 80)}… (${restored.length} chars)`);
      await page.getByTestId('stop').waitFor({ state: 'visible', timeout: TIMEOUT });
      await page.screenshot({ path: join(shots, 'reconnect-mid-answer-after-reload.png'), fullPage: true });
      await checkLongAnswer(page, ctx);
      check(replays.length === 1 && Number(replays[0]) > 0, `replays asked for (Last-Event-ID): ${JSON.stringify(replays)}`);
      // The run is over: the next reload restores the thread as usual.
      await page.reload();
      await waitForText(page, '[data-testid=msg-assistant] .bubble', 'Sentence 60 of the long answer.');
      await idle(page);
      check((await page.getByTestId('msg-assistant').count()) === 1, 'the restored thread shows the answer twice');
    },
  },
  {
    name: 'reconnect: a run that finished while the page was away replays to its end',
    async run(page, ctx) {
      await say(page, 'please give me a long answer');
      await waitForAnswerLength(page, 100);
      const runId = await page.evaluate(() => {
        const key = Object.keys(localStorage).find((k) => k.startsWith('agui-demo-run:'));
        return key && JSON.parse(localStorage.getItem(key)).runId;
      });
      check(runId, 'the page keeps no run checkpoint');
      await page.goto('about:blank');
      // Follow the run to its end from here: the replay endpoint ends with the run.
      const log = await (await fetch(`${base}/agents/demo/agui/runs/${runId}/events`)).text();
      check(log.includes('"RUN_FINISHED"'), `the run did not finish: ${log.slice(-200)}`);
      await page.goto(`${base}/`);
      await checkLongAnswer(page, ctx);
    },
  },
  {
    name: 'reconnect: a run no longer replayable falls back to the stored thread',
    // The replay's 404 is the browser's to report.
    allowConsole: /status of 404/,
    async run(page, ctx) {
      await say(page, 'hello');
      await idle(page);
      const thread = await page.evaluate(() => Object.entries(localStorage).find(([k]) => k.startsWith('agui-demo-thread:'))[1]);
      // A checkpoint of a run the gateway does not know (expired, or from another gateway's store).
      await page.evaluate((thread) => {
        const messages = [{ id: 'gone-user', role: 'user', content: 'a question from long ago' }];
        localStorage.setItem(`agui-demo-run:${thread}`, JSON.stringify({ runId: 'gone', lastEventId: 3, open: [], messages, state: {} }));
      }, thread);
      await page.reload();
      await waitForText(page, '[data-testid=msg-assistant] .bubble', 'offline demo assistant');
      await idle(page);
      const users = await page.getByTestId('msg-user').allInnerTexts();
      check(users.length === 1 && users[0].includes('hello'), `shown: ${JSON.stringify(users)}`);
      check((await page.getByTestId('error').count()) === 0, 'an error is shown');
      check(await page.evaluate((thread) => localStorage.getItem(`agui-demo-run:${thread}`) === null, thread), 'the dead checkpoint is kept');
      check(ctx.requests.length === 2 && ctx.requests[1].messages.length === 0, 'the stored thread was not asked for');
    },
  },
  {
    name: 'subagents: delegate draws the researcher and its executor nested, with a live plan',
    async run(page) {
      await page.evaluate(() => {
        window.__seen = new Set();
        new MutationObserver(() => {
          for (const e of document.querySelectorAll('[data-testid=plan-step], [data-testid=subagent]')) window.__seen.add(`${e.dataset.testid}:${e.dataset.status}`);
        }).observe(document.getElementById('messages'), { childList: true, subtree: true });
      });
      await say(page, 'delegate 17*23');
      await checkDelegate(page);
      const seen = await page.evaluate(() => [...window.__seen]);
      check(seen.includes('plan-step:in_progress') && seen.includes('subagent:running'), `not drawn live: ${JSON.stringify(seen)}`);
      await page.locator('#messages').evaluate((e) => (e.scrollTop = 0));
      await page.screenshot({ path: join(shots, 'delegate-nested-subagents.png') });
      await page.locator(RESEARCHER).screenshot({ path: join(shots, 'delegate-researcher-block.png') });
      // Collapsing a block keeps it collapsed while the page redraws; a reload draws the same tree.
      await page.locator(`${EXECUTOR} > summary`).click();
      check(!(await page.locator(EXECUTOR).evaluate((d) => d.open)), 'the executor block did not collapse');
      const shape = await delegateShape(page);
      await page.reload();
      await checkDelegate(page);
      const restored = await delegateShape(page);
      check(JSON.stringify(restored) === JSON.stringify(shape), `after a reload:\n${restored.join('\n')}\nbefore:\n${shape.join('\n')}`);
      // A thread stored elsewhere (no record of the subagents): flat blocks in the call they ran
      // during, nothing lost.
      await page.evaluate(() => {
        for (const k of Object.keys(localStorage)) if (k.startsWith('agui-demo-subagents:')) localStorage.removeItem(k);
      });
      await page.reload();
      await waitForText(page, '[data-testid=msg-assistant] .bubble', DELEGATE_ANSWER);
      await idle(page);
      const flat = page.locator('[data-tool=ask_researcher] > [data-testid=subagent]');
      check((await flat.count()) === 2 && (await page.getByTestId('subagent').count()) === 2, `${await flat.count()} subagent blocks in the call without the record`);
      check((await flat.locator('[data-tool=calculator] [data-testid=tool-result]').innerText()) === '391', 'the calculator call is lost without the record');
      check((await flat.locator('[data-testid=plan-step][data-status=completed]').count()) === 1, 'the plan is lost without the record');
      await page.locator('#messages').evaluate((e) => (e.scrollTop = 0));
      await page.screenshot({ path: join(shots, 'delegate-without-the-record.png') });
    },
  },
  {
    name: 'subagents: a reload during a delegate run re-attaches and ends right',
    async run(page, ctx) {
      await say(page, 'delegate 17*23');
      await page.locator(RESEARCHER).waitFor({ timeout: TIMEOUT });
      await page.reload();
      await checkDelegate(page);
      check(ctx.requests.length === 1, `${ctx.requests.length} runs were started (the page should re-attach, not ask again)`);
      const answers = await page.getByTestId('msg-assistant').locator('.bubble').allInnerTexts();
      check(answers.filter((t) => t === DELEGATE_ANSWER).length === 1, `answers: ${JSON.stringify(answers)}`);
    },
  },
  {
    name: 'protobuf switch: the delegate run arrives as protobuf and shows the same',
    async run(page, ctx) {
      const accepts = [];
      page.on('request', (r) => {
        if (r.url().includes('/agui')) accepts.push(`${r.method()} ${r.headers().accept}`);
      });
      await say(page, 'delegate 17*23');
      await checkDelegate(page);
      check((await page.getByTestId('encoding').getAttribute('data-encoding')) === 'sse', 'SSE is not shown as the encoding');
      const overSse = await delegateShape(page);
      await page.getByTestId('new-chat').click();
      await page.getByTestId('proto-toggle').check();
      await say(page, 'delegate 17*23');
      await checkDelegate(page);
      const overProto = await delegateShape(page);
      check(JSON.stringify(overProto) === JSON.stringify(overSse), `over protobuf:\n${overProto.join('\n')}\nover SSE:\n${overSse.join('\n')}`);
      const asked = accepts.filter((a) => a.startsWith('POST'));
      check(asked.length === 2 && !asked[0].includes('proto') && asked[1].includes('application/vnd.ag-ui.event+proto'), `Accept headers: ${JSON.stringify(asked)}`);
      // The gateway streams protobuf to a 1.0 client that asks, and the page says so.
      const served = await gatewayProtoType();
      check(served.startsWith('application/vnd.ag-ui.event+proto'), `the gateway answers a protobuf Accept with ${served}`);
      const want = 'protobuf';
      check((await page.getByTestId('encoding').getAttribute('data-encoding')) === want, `the page shows ${await page.getByTestId('encoding').innerText()}, the gateway streams ${want}`);
      await page.screenshot({ path: join(shots, 'protobuf-switch.png') });
      // The choice is kept; a reload restores the thread in that encoding.
      await page.reload();
      await waitForText(page, '[data-testid=msg-assistant] .bubble', DELEGATE_ANSWER);
      await idle(page);
      check(await page.getByTestId('proto-toggle').isChecked(), 'the switch was not kept');
      check((await page.getByTestId('encoding').getAttribute('data-encoding')) === want, 'the restored thread came in another encoding');
      check(ctx.requests.length === 3, `${ctx.requests.length} runs`);
    },
  },
  {
    name: 'phone-sized screen',
    viewport: { width: 390, height: 844 },
    async run(page) {
      await say(page, 'hello');
      await idle(page);
      const picker = page.getByTestId('agent-picker');
      check((await picker.locator('option').count()) >= 1, 'the agent picker lists no agents');
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      check(overflow <= 0, `the page is ${overflow}px wider than the screen`);
      const box = await page.getByTestId('input').boundingBox();
      check(box && box.width > 200, 'the message box is too small on a phone');
    },
  },
];

async function main() {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  let passed = 0;
  let failed = 0;
  // AGUI_E2E_ONLY=<regex> runs the scenarios whose names match (while working on one).
  const only = process.env.AGUI_E2E_ONLY ? new RegExp(process.env.AGUI_E2E_ONLY, 'i') : undefined;
  for (const [i, s] of SCENARIOS.entries()) {
    if (only && !only.test(s.name)) continue;
    const context = await browser.newContext({ viewport: s.viewport || { width: 1280, height: 860 } });
    const page = await context.newPage();
    const problems = [];
    const ctx = { requests: [] };
    page.on('console', (m) => {
      if (s.allowConsole?.test(m.text())) return;
      if (m.type() === 'error' || m.type() === 'warning') problems.push(`console.${m.type()}: ${m.text()}`);
    });
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
    page.on('request', (r) => {
      if (r.method() === 'POST' && r.url().includes('/agui')) {
        try {
          ctx.requests.push(JSON.parse(r.postData() || '{}'));
        } catch {
          // not JSON: nothing to inspect
        }
      }
    });
    let failure;
    try {
      await page.goto(`${base}/`);
      await s.run(page, ctx);
    } catch (e) {
      failure = e instanceof Failure ? e.message : `${e.name}: ${e.message}`.split('\n')[0];
    }
    const shot = join(shots, `${String(i + 1).padStart(2, '0')}-${s.name.replace(/[^a-z0-9]+/gi, '-').toLowerCase()}.png`);
    await page.screenshot({ path: shot, fullPage: true }).catch(() => {});
    if (!failure && problems.length) failure = problems.join(' | ');
    if (failure) {
      failed++;
      console.log(`FAIL ${s.name}: ${failure}`);
    } else {
      passed++;
      console.log(`PASS ${s.name}`);
    }
    await context.close();
  }
  await browser.close();
  console.log(`screenshots in ${shots}`);
  console.log(`${passed} passed, ${failed} failed`);
  process.exitCode = failed === 0 ? 0 : 1;
}

main().catch((e) => {
  console.log(`harness error: ${e.stack || e}`);
  console.log('0 passed, 1 failed');
  process.exitCode = 1;
});
