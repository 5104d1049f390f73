#!/usr/bin/env python3
"""Make durable async calls through a tether broker's HTTP API.

For callers that cannot hold a request open for a whole call (serverless
functions, jobs that may restart): submit the call, get its id at once, and
read, wait for or cancel it later, from any broker instance, within the
retention. docs/async-calls.md describes the API; this file is a complete
client with the standard library only.

    python3 tether_async.py --broker http://127.0.0.1:8377 --token T \\
        submit --workspace ws-1 /api/terminal/execute '{"command":"make test"}'
    python3 tether_async.py --broker … --token T wait CORRELATION_ID
    python3 tether_async.py --broker … --token T status CORRELATION_ID
    python3 tether_async.py --broker … --token T cancel CORRELATION_ID

submit prints the call's id; status, wait and cancel print its record as one
JSON line. In your own code:

    client = AsyncCaller("http://127.0.0.1:8377", token)
    record = client.submit("ws-1", "/api/terminal/execute", {"command": "ls"}, timeout=60,
                           idempotency_key="job-42/list")
    record = client.wait(record["correlation_id"], 120)
    if record["status"] == "succeeded":
        print(record["response"]["result"])
"""

import argparse
import json
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

# A status is final once it is one of these.
FINAL = ("succeeded", "failed", "cancelled")

# The broker holds one long-poll for 60 seconds at most.
MAX_WAIT_PER_REQUEST = 60.0


class AsyncCallError(Exception):
    """A request the broker refused: code is its error code (call_not_found,
    forbidden, conflict, invalid_request, bus_unavailable, …)."""

    def __init__(self, status, code, message):
        super().__init__("%s: %s" % (code, message))
        self.status, self.code, self.message = status, code, message


class AsyncCaller:
    """The async API of one broker. Safe to share between threads: every
    method is one or more independent HTTP requests."""

    def __init__(self, broker, token=""):
        self.base = broker.rstrip("/")
        self.token = token

    def _request(self, method, path, body=None, timeout=15.0, want=200, headers=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", "Bearer " + self.token)
        for name, value in (headers or {}).items():
            req.add_header(name, value)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as res:
                status, raw = res.status, res.read()
        except urllib.error.HTTPError as err:
            status, raw = err.code, err.read()
        try:
            answer = json.loads(raw)
        except ValueError:
            raise AsyncCallError(status, "broker_unreachable", "broker answered HTTP %d: %.200r" % (status, raw))
        if status != want:
            raise AsyncCallError(status, answer.get("error", "broker_unreachable"), answer.get("message", ""))
        return answer

    def submit(self, workspace, endpoint, payload=None, timeout=30.0, wait_for_workspace_ms=0,
               idempotency_key=None, correlation_id=None):
        """Record a call and start it; returns its record (queued or
        delivered, or already failed workspace_offline when nobody serves
        the workspace and the call may not wait for it). A retried submit
        with the same idempotency_key returns the call already made."""
        body = {"endpoint": endpoint, "payload": {} if payload is None else payload, "timeout": timeout, "async": True}
        if wait_for_workspace_ms:
            body["wait_for_workspace_ms"] = int(wait_for_workspace_ms)
        if idempotency_key:
            body["idempotency_key"] = idempotency_key
        if correlation_id:
            body["correlation_id"] = correlation_id
        path = "/api/v1/workspaces/%s/calls" % urllib.parse.quote(workspace, safe="")
        return self._request("POST", path, body, want=202)

    def status(self, correlation_id):
        """The call's record now."""
        return self._request("GET", "/api/v1/calls/" + urllib.parse.quote(correlation_id, safe=""))

    def wait(self, correlation_id, max_seconds):
        """The call's record once final, or after max_seconds with its
        status then; long-polls of up to 60 seconds each."""
        end = time.monotonic() + max_seconds
        while True:
            left = max(0.0, min(end - time.monotonic(), MAX_WAIT_PER_REQUEST))
            path = "/api/v1/calls/%s?wait=%.3f" % (urllib.parse.quote(correlation_id, safe=""), left)
            record = self._request("GET", path, timeout=left + 15.0)
            if record["status"] in FINAL or time.monotonic() >= end:
                return record

    def cancel(self, correlation_id):
        """Cancel the call unless it has an outcome; returns its record:
        cancelled, or the outcome it already had."""
        return self._request("POST", "/api/v1/calls/%s/cancel" % urllib.parse.quote(correlation_id, safe=""))


def main():
    parser = argparse.ArgumentParser(description="Durable async calls through a tether broker.")
    parser.add_argument("--broker", default="http://127.0.0.1:8377", help="the broker's URL")
    parser.add_argument("--token", default="", help="a caller token")
    sub = parser.add_subparsers(dest="verb", required=True)
    submit = sub.add_parser("submit", help="submit a call and print its id")
    submit.add_argument("--workspace", required=True)
    submit.add_argument("--timeout", type=float, default=30.0, help="seconds")
    submit.add_argument("--wait-for-workspace-ms", type=int, default=0)
    submit.add_argument("--idempotency-key")
    submit.add_argument("endpoint")
    submit.add_argument("payload", nargs="?", default="{}", help="JSON")
    for verb in ("status", "cancel"):
        sub.add_parser(verb).add_argument("id")
    wait = sub.add_parser("wait", help="wait for the outcome")
    wait.add_argument("--max", type=float, default=660.0, help="seconds")
    wait.add_argument("id")
    args = parser.parse_args()

    client = AsyncCaller(args.broker, args.token)
    try:
        if args.verb == "submit":
            record = client.submit(args.workspace, args.endpoint, json.loads(args.payload), args.timeout,
                                   args.wait_for_workspace_ms, args.idempotency_key)
            print(record["correlation_id"])
            return 1 if record["status"] == "failed" else 0
        if args.verb == "status":
            record = client.status(args.id)
        elif args.verb == "wait":
            record = client.wait(args.id, args.max)
        else:
            record = client.cancel(args.id)
    except AsyncCallError as err:
        print(json.dumps({"error": err.code, "message": err.message}))
        return 1
    print(json.dumps(record))
    if record["status"] == "succeeded":
        return 0
    if record["status"] in FINAL:
        return 1
    return 3 if args.verb == "wait" else 0


if __name__ == "__main__":
    sys.exit(main())
