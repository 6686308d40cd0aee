/**
 * Everything one reply has said so far, built from its event stream. The same log is built
 * while streaming and when a saved message is re-opened, so both render identically.
 */
import type { CloudRequestEvent, Event, FinishedEvent, NoticeEvent, StartedEvent, TokenEvent } from "../ipc/types";

export class ReplyLog {
  started: StartedEvent | null = null;
  readonly tokens: TokenEvent[] = [];
  /** For each token, the cloud request that produced it (index into `requests`), or -1. */
  readonly tokenRequest: number[] = [];
  readonly requests: CloudRequestEvent[] = [];
  /** Cloud tokens each request produced, to divide its cost among them. */
  readonly requestTokens: number[] = [];
  readonly notices: NoticeEvent[] = [];
  finished: FinishedEvent | null = null;
  text = "";

  static of(events: readonly Event[]): ReplyLog {
    const log = new ReplyLog();
    for (const e of events) log.push(e);
    return log;
  }

  push(event: Event): void {
    if (this.finished) return; // the stream is over; anything later is not part of this reply
    switch (event.type) {
      case "started":
        this.started = event;
        break;
      case "token": {
        // A cloud request is reported before the tokens it produced.
        const request = event.source === "cloud" ? this.lastOkRequest() : -1;
        if (request !== -1) this.requestTokens[request]! += 1;
        this.tokens.push(event);
        this.tokenRequest.push(request);
        this.text += event.text;
        break;
      }
      case "cloud_request":
        this.requests.push(event);
        this.requestTokens.push(0);
        break;
      case "notice":
        this.notices.push(event);
        break;
      case "finished":
        this.finished = event;
        break;
    }
  }

  private lastOkRequest(): number {
    const last = this.requests.length - 1;
    return last >= 0 && this.requests[last]!.ok ? last : -1;
  }

  /** This token's share of its request's cost, or null when unknown (no request recorded). */
  costOf(tokenIndex: number): number | null {
    const request = this.tokenRequest[tokenIndex] ?? -1;
    if (request === -1) return null;
    const count = this.requestTokens[request]!;
    return count > 0 ? this.requests[request]!.cost_usd / count : null;
  }
}
