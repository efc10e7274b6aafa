// Re-attaching to a run after a page reload. The gateway numbers every event of a run (the SSE
// `id:`, 1 for RUN_STARTED, then one more per event), lets a run outlive its connection and
// replays it from `GET {agent url}/runs/{runId}/events` with `Last-Event-ID`, following it to
// its end. ReconnectingAgent is an HttpAgent whose connect() reads that replay, so
// `connectAgent()` streams the rest of a run into the agent as `runAgent()` would have.
// RunKeeper stores where the page was (run id, events applied, the messages they built) so a
// reloaded page can pick up from there.

import { EventType, HttpAgent, randomUUID, runHttpRequest, transformHttpEventStream } from '@ag-ui/client';
import type { AgentSubscriber, BaseEvent, HttpAgentConfig, Message, RunAgentInput, RunAgentParameters } from '@ag-ui/client';
import { EMPTY, Observable, catchError, concat, from } from 'rxjs';

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

/** Events that open or close a span: a text message, tool call, reasoning, step or subagent. */
const SPAN = /^(TEXT_MESSAGE|TOOL_CALL|REASONING_MESSAGE|REASONING|STEP|SUBAGENT)_(START|STARTED|END|FINISHED|ERROR)$/;

/** Where a page was in a run: enough to re-attach to it after a reload. */
export interface Checkpoint {
  runId: string;
  /** How many of the run's events `messages` and `state` hold (the SSE id of the last). */
  lastEventId: number;
  /** The openers of what was still open then, by key. */
  open: [string, BaseEvent][];
  messages: Message[];
  state: Json;
}

/**
 * An HttpAgent that can re-attach to its run: `runAgent()` names the run (`runId`), every event
 * applied moves `lastEventId` on, and `connectAgent()` replays the run after `lastEventId`.
 *
 * The client's verifier wants a whole run (RUN_STARTED first, CONTENT only inside its START), so a
 * replay that starts mid-run is preceded by RUN_STARTED and the START of everything still open;
 * applied to messages that already hold them, those change nothing.
 */
export class ReconnectingAgent extends HttpAgent {
  runId = '';
  lastEventId = 0;
  /** The openers of what is open at `lastEventId` (text messages, tool calls, reasoning, steps). */
  open = new Map<string, BaseEvent>();
  /** Whether the run's RUN_FINISHED or RUN_ERROR has been applied. */
  ended = false;
  /** Set when the last connectAgent() found no replay (expired, or never logged). */
  replayGone = false;
  /** Events connect() put before the replay, not counted as the run's. */
  private preamble = 0;

  constructor(config: HttpAgentConfig) {
    super(config);
    this.subscribe({ onEvent: ({ event }) => this.track(event) });
  }

  runAgent(parameters?: Parameters<HttpAgent['runAgent']>[0], subscriber?: AgentSubscriber) {
    this.runId = parameters?.runId ?? randomUUID();
    this.lastEventId = 0;
    this.open.clear();
    this.ended = false;
    this.replayGone = false;
    return super.runAgent({ ...parameters, runId: this.runId }, subscriber);
  }

  /**
   * HttpAgent 1.0.0 always asks for SSE (its Accept comes after `headers`): here an `Accept` in
   * `headers` wins, so an app can ask for the protobuf encoding. The client reads either, by the
   * response's content type.
   */
  protected requestInit(input: RunAgentInput): RequestInit {
    const init = super.requestInit(input);
    return { ...init, headers: { ...(init.headers as Record<string, string>), ...this.headers } };
  }

  connectAgent(parameters?: RunAgentParameters, subscriber?: AgentSubscriber) {
    this.abortController = new AbortController();
    this.replayGone = false;
    return super.connectAgent({ ...parameters, runId: this.runId }, subscriber);
  }

  protected connect(input: RunAgentInput): Observable<BaseEvent> {
    const resumed = this.lastEventId > 0 ? [{ type: EventType.RUN_STARTED, threadId: input.threadId, runId: this.runId } as BaseEvent, ...this.open.values()] : [];
    this.preamble = resumed.length;
    const replay = runHttpRequest(() =>
      this.fetch(`${this.url}/runs/${encodeURIComponent(this.runId)}/events`, {
        headers: { Accept: 'text/event-stream', ...this.headers, 'Last-Event-ID': String(this.lastEventId) },
        signal: this.abortController.signal,
      }),
    );
    const rest = transformHttpEventStream(replay).pipe(
      catchError((e) => {
        if (e?.status !== 404) throw e;
        this.replayGone = true;
        return EMPTY;
      }),
    );
    return concat(from(resumed), rest);
  }

  /** Stops the run: here, and on the gateway, where it outlives its connection. */
  async stopRun(): Promise<void> {
    this.abortRun();
    if (!this.runId || this.ended) return;
    const url = `${this.url}/runs/${encodeURIComponent(this.runId)}`;
    await this.fetch(url, { method: 'DELETE', headers: this.headers }).catch(() => undefined);
  }

  checkpoint(): Checkpoint {
    return { runId: this.runId, lastEventId: this.lastEventId, open: [...this.open], messages: this.messages, state: this.state };
  }

  restore(c: Checkpoint) {
    this.runId = c.runId;
    this.lastEventId = c.lastEventId;
    this.open = new Map(c.open);
    this.ended = false;
    this.setMessages(c.messages);
    this.setState(c.state);
  }

  private track(event: BaseEvent) {
    if (this.preamble > 0) {
      this.preamble--;
      return;
    }
    // The client's own RUN_ERROR when abortRun() cuts the request: not one of the run's events.
    if (event.type === EventType.RUN_ERROR && (event as Json).code === 'abort') return;
    this.lastEventId++;
    if (event.type === EventType.RUN_FINISHED || event.type === EventType.RUN_ERROR) this.ended = true;
    const e = event as Json;
    const span = SPAN.exec(e.type);
    if (!span) return;
    const key = `${span[1]}:${e.subagentRunId ?? ''}:${e.messageId ?? e.toolCallId ?? e.stepName ?? ''}`;
    if (span[2].startsWith('START')) this.open.set(key, event);
    else this.open.delete(key);
  }
}

/**
 * Keeps the agent's checkpoint in localStorage while a run goes on: at its start, twice a second
 * and when the page is hidden or left. A checkpoint is taken between tasks, when every event
 * received has been applied, so its messages hold exactly `lastEventId` events.
 */
export class RunKeeper {
  private timer = 0;
  private active = false;
  /** Set while the page is being left: a run it stops receiving then is not over. */
  private leaving = false;

  constructor(
    private agent: () => ReconnectingAgent,
    private key: () => string,
  ) {
    addEventListener('pagehide', () => {
      this.save();
      this.leaving = true;
    });
    addEventListener('pageshow', () => {
      this.leaving = false;
    });
    document.addEventListener('visibilitychange', () => {
      if (document.visibilityState === 'hidden') this.save();
    });
  }

  /** The checkpoint of a run the page was receiving when it was left, if any. */
  load(): Checkpoint | undefined {
    try {
      const c = JSON.parse(localStorage.getItem(this.key()) ?? 'null');
      if (c && typeof c.runId === 'string' && Number.isInteger(c.lastEventId) && Array.isArray(c.messages)) return c;
    } catch {
      // A corrupt checkpoint is no checkpoint.
    }
    return undefined;
  }

  /** A run starts (or is re-attached to): keep its checkpoint from now on. */
  start() {
    this.active = true;
    this.save();
    clearInterval(this.timer);
    this.timer = window.setInterval(() => this.save(), 500);
  }

  /** The page stopped receiving the run: unless it is being left, the checkpoint goes. */
  end() {
    this.active = false;
    clearInterval(this.timer);
    if (!this.leaving) this.forget();
  }

  forget() {
    localStorage.removeItem(this.key());
  }

  private save() {
    const agent = this.agent();
    if (!this.active || agent.ended) return;
    try {
      localStorage.setItem(this.key(), JSON.stringify(agent.checkpoint()));
    } catch {
      // Storage full (large images): this run cannot be re-attached to after a reload.
    }
  }
}
