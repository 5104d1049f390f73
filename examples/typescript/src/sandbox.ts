/**
 * A sandbox client — files and commands of one workspace — over tether's
 * durable async calls (docs/async-calls.md in the tether repository).
 *
 * Every operation is one async call to the workspace's `tether bridge`:
 * submitted (POST /api/v1/workspaces/{id}/calls with "async": true, and an
 * Idempotency-Key, so that a submit whose answer was lost can be sent again
 * without running twice; with Prefer: respond-async, wait=S the submit
 * itself answers the outcome of a call that ends within S seconds), then,
 * for a longer call, waited for (GET /api/v1/calls/{id}?wait=S, repeated
 * until the call is final), and cancelled (POST /api/v1/calls/{id}/cancel)
 * when its AbortSignal fires or its time is up.
 * No request is held open longer than one wait, so it works from runtimes
 * that cut requests short, and any broker instance can serve the waits.
 *
 * It needs nothing but a runtime with fetch, AbortSignal, atob/btoa and
 * crypto.randomUUID (Node 20, Deno, browsers, edge runtimes).
 */

/** Where the sandbox is. */
export interface SandboxOptions {
  /** The broker's URL, e.g. "http://127.0.0.1:8377". */
  broker: string;
  /** A caller token covering the workspace; "" for a broker without auth. */
  token: string;
  /** The workspace, as its bridge registered it (--workspace). */
  workspace: string;
  /** The longest single long-poll (a submit's wait too), in seconds (the broker allows 60). */
  waitSeconds?: number;
  /** The default time limit of file operations, in milliseconds. */
  timeoutMs?: number;
}

/** Options of every operation. */
export interface CallOptions {
  /** Cancels the operation: the call is cancelled and the promise rejects with the signal's reason. */
  signal?: AbortSignal;
  /** The operation's time limit; past it the call is cancelled and the promise rejects with code "timeout". */
  timeoutMs?: number;
}

/** Options of exec. */
export interface ExecOptions extends CallOptions {
  /** The working directory, relative to the workspace root (default: the root). */
  cwd?: string;
  /** Variables added to the bridge's environment for this command. */
  env?: Record<string, string>;
}

/** What a command did. */
export interface ExecResult {
  exitCode: number;
  /** What the command wrote: stdout and stderr together, in about their order. */
  stdout: string;
  /** What it wrote to stderr alone, when it failed (the bridge reports it for a failed command). */
  stderr: string;
  /** The command was killed at its timeoutMs. */
  timedOut: boolean;
  /** The output was cut at the bridge's cap. */
  truncated: boolean;
  durationMs: number;
}

/** A file's or directory's metadata. */
export interface Stat {
  isDirectory: boolean;
  isSymlink: boolean;
  size: number;
  mtimeMs: number;
}

/** A failed operation: code is the bridge's or broker's error code (invalid_path, timeout, cancelled, …). */
export class SandboxError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly correlationId?: string,
  ) {
    super(`${code}: ${message}`);
    this.name = "SandboxError";
  }
}

/** The record of an async call, as the broker answers it. */
interface CallRecord {
  correlation_id: string;
  status: "queued" | "delivered" | "succeeded" | "failed" | "cancelled";
  response: ToolResponse | null;
}

interface ToolResponse {
  correlation_id: string;
  success: boolean;
  result?: unknown;
  error?: string;
  message?: string;
}

const FINAL = new Set(["succeeded", "failed", "cancelled"]);

/** How much later than its call's timeout the client gives up on it: the broker answers by then. */
const CLIENT_GRACE_MS = 2_000;

/** The longest call timeout the broker takes, in seconds. */
const MAX_TIMEOUT_S = 600;

/** exec asks the bridge to stop the command at timeoutMs and gives the call this much more, so the answer carries its output. */
const EXEC_MARGIN_S = 5;

export class Sandbox {
  private readonly base: string;
  private readonly waitSeconds: number;
  private readonly timeoutMs: number;

  constructor(private readonly opts: SandboxOptions) {
    this.base = opts.broker.replace(/\/+$/, "");
    this.waitSeconds = Math.min(opts.waitSeconds ?? 60, 60);
    this.timeoutMs = opts.timeoutMs ?? 30_000;
  }

  /** A text file's content, decoded as UTF-8; read in pages, so any size works. */
  async readFile(path: string, opts: CallOptions = {}): Promise<string> {
    let text = "";
    for (let start = 1; ; ) {
      const r = await this.call<ReadFileResult>("/api/workspace/read-file", start === 1 ? { path } : { path, start_line: start }, opts);
      if (r.encoding === "base64") {
        if (r.truncated) throw new SandboxError("payload_too_large", `${path} is not text and larger than one read`);
        return new TextDecoder().decode(fromBase64(r.content));
      }
      text += r.content;
      if (!r.truncated) return text;
      if (r.end_line < start || !r.content.endsWith("\n")) {
        throw new SandboxError("payload_too_large", `${path} has a line longer than one read`);
      }
      start = r.end_line + 1;
    }
  }

  /** A file's bytes. One read: files up to the bridge's read cap (256 KiB). */
  async readFileBuffer(path: string, opts: CallOptions = {}): Promise<Uint8Array> {
    const r = await this.call<ReadFileResult>("/api/workspace/read-file", { path, encoding: "base64" }, opts);
    if (r.truncated) throw new SandboxError("payload_too_large", `${path} is ${r.size} bytes, more than one read`);
    return fromBase64(r.content);
  }

  /** Replaces (or creates, with its parent directories) a file: a string is written as UTF-8, bytes as they are. */
  async writeFile(path: string, data: string | Uint8Array, opts: CallOptions = {}): Promise<void> {
    const payload = typeof data === "string" ? { path, content: data } : { path, content: toBase64(data), encoding: "base64" };
    await this.call("/api/workspace/write-file", payload, opts);
  }

  async stat(path: string, opts: CallOptions = {}): Promise<Stat> {
    const r = await this.call<{ is_directory: boolean; is_symlink: boolean; size: number; mtime_ms: number }>("/api/workspace/stat", { path }, opts);
    return { isDirectory: r.is_directory, isSymlink: r.is_symlink, size: r.size, mtimeMs: r.mtime_ms };
  }

  /** The names in a directory, sorted. */
  async readdir(path: string, opts: CallOptions = {}): Promise<string[]> {
    const r = await this.call<{ names: string[]; truncated: boolean }>("/api/workspace/readdir", { path }, opts);
    if (r.truncated) throw new SandboxError("payload_too_large", `${path} has more entries than one listing`);
    return r.names;
  }

  async exists(path: string, opts: CallOptions = {}): Promise<boolean> {
    return (await this.call<{ exists: boolean }>("/api/workspace/exists", { path }, opts)).exists;
  }

  async mkdir(path: string, opts: CallOptions & { recursive?: boolean } = {}): Promise<void> {
    await this.call("/api/workspace/mkdir", { path, recursive: opts.recursive ?? false }, opts);
  }

  async rm(path: string, opts: CallOptions & { recursive?: boolean; force?: boolean } = {}): Promise<void> {
    await this.call("/api/workspace/rm", { path, recursive: opts.recursive ?? false, force: opts.force ?? false }, opts);
  }

  /**
   * Runs a bash command line in the workspace. The bridge stops it at
   * timeoutMs (default two minutes; timedOut is then set); aborting the
   * signal cancels the call, and the bridge kills the command.
   */
  async exec(command: string, opts: ExecOptions = {}): Promise<ExecResult> {
    const timeoutMs = opts.timeoutMs ?? 120_000;
    const seconds = timeoutMs / 1000;
    if (!(seconds > 0) || seconds + EXEC_MARGIN_S > MAX_TIMEOUT_S) {
      throw new SandboxError("invalid_request", `timeoutMs must be above 0 and at most ${(MAX_TIMEOUT_S - EXEC_MARGIN_S) * 1000}`);
    }
    const payload: Record<string, unknown> = { command, timeout: seconds, hidden: true };
    if (opts.cwd !== undefined) payload.cwd = opts.cwd;
    if (opts.env !== undefined) payload.env = opts.env;
    const r = await this.call<{ output: string; error: string; exit_code: number; timed_out: boolean; truncated: boolean; duration_ms: number }>(
      "/api/terminal/execute",
      payload,
      { signal: opts.signal, timeoutMs: (seconds + EXEC_MARGIN_S) * 1000 },
    );
    return { exitCode: r.exit_code, stdout: r.output, stderr: r.error, timedOut: r.timed_out, truncated: r.truncated, durationMs: r.duration_ms };
  }

  /**
   * Runs one async call to its outcome and returns the route's result; a
   * failed call rejects with a SandboxError carrying its code.
   */
  async call<T = unknown>(endpoint: string, payload: unknown, opts: CallOptions = {}): Promise<T> {
    const signal = opts.signal;
    signal?.throwIfAborted();
    const timeoutMs = opts.timeoutMs ?? this.timeoutMs;
    const deadline = Date.now() + timeoutMs + CLIENT_GRACE_MS;
    // One controller ends the requests in flight, for the caller's abort
    // and for the client's deadline alike.
    const stop = new AbortController();
    const onAbort = () => stop.abort(signal?.reason);
    signal?.addEventListener("abort", onAbort, { once: true });
    const timer = setTimeout(() => stop.abort(new SandboxError("timeout", `no outcome within ${timeoutMs} ms`)), timeoutMs + CLIENT_GRACE_MS);
    // The id is chosen here, so the call can be cancelled even when the
    // submit's answer never came.
    const id = crypto.randomUUID();
    let record: CallRecord;
    try {
      // The submit itself waits for the outcome a while (Prefer: wait): a
      // call that ends by then costs one request, not two.
      record = await this.submit(id, endpoint, payload, timeoutMs / 1000, Math.min(this.waitSeconds, Math.ceil(timeoutMs / 1000)), stop.signal);
      while (!FINAL.has(record.status)) {
        const left = Math.max(0, Math.ceil((deadline - Date.now()) / 1000));
        const wait = Math.min(this.waitSeconds, left);
        record = await this.request<CallRecord>("GET", `/api/v1/calls/${encodeURIComponent(id)}?wait=${wait}`, undefined, stop.signal);
      }
    } catch (err) {
      if (stop.signal.aborted) {
        // Nobody waits for it any more: end it, so the command stops (a
        // call never recorded answers call_not_found, which is fine).
        await this.request("POST", `/api/v1/calls/${encodeURIComponent(id)}/cancel`).catch(() => undefined);
        throw stop.signal.reason;
      }
      throw err;
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
    }
    const resp = record.response;
    if (resp === null) throw new SandboxError("internal_error", "final call without a response", record.correlation_id);
    if (!resp.success) throw new SandboxError(resp.error ?? "internal_error", resp.message ?? "", record.correlation_id);
    return resp.result as T;
  }

  /**
   * Submits call id, holding the answer up to wait seconds for its outcome
   * (200 with the final record; 202 with the record then when it takes
   * longer), sending it again (the same idempotency key: the same call)
   * when the network failed.
   */
  private async submit(id: string, endpoint: string, payload: unknown, timeout: number, wait: number, signal: AbortSignal): Promise<CallRecord> {
    const body = JSON.stringify({ correlation_id: id, endpoint, payload, timeout: Math.min(timeout, MAX_TIMEOUT_S), async: true });
    const path = `/api/v1/workspaces/${encodeURIComponent(this.opts.workspace)}/calls`;
    const headers = { "Idempotency-Key": id, Prefer: `respond-async, wait=${wait}` };
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.request<CallRecord>("POST", path, body, signal, headers, [200, 202]);
      } catch (err) {
        if (!(err instanceof TypeError) || attempt >= 3 || signal.aborted) throw err; // TypeError: fetch's network failure
        await new Promise((resolve) => setTimeout(resolve, 200 * attempt));
      }
    }
  }

  private async request<T>(method: string, path: string, body?: string, signal?: AbortSignal, headers: Record<string, string> = {}, want: number[] = [200]): Promise<T> {
    const h: Record<string, string> = { ...headers };
    if (body !== undefined) h["Content-Type"] = "application/json";
    if (this.opts.token !== "") h["Authorization"] = `Bearer ${this.opts.token}`;
    const res = await fetch(this.base + path, { method, headers: h, body, signal });
    const answer = (await res.json().catch(() => ({}))) as T & { error?: string; message?: string };
    if (!want.includes(res.status)) {
      throw new SandboxError(answer.error ?? "broker_unreachable", answer.message ?? `broker answered HTTP ${res.status}`);
    }
    return answer;
  }
}

interface ReadFileResult {
  content: string;
  encoding?: string;
  size: number;
  start_line: number;
  end_line: number;
  truncated: boolean;
}

function toBase64(bytes: Uint8Array): string {
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(binary);
}

function fromBase64(text: string): Uint8Array {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}
