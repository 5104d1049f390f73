#!/usr/bin/env python3
"""Call a tether workspace directly over Redis, without the HTTP API.

A backend worker that already talks to the brokers' Redis publishes each call
to the workspace's channel and reads the single answer from an inbox channel
of its own. docs/redis-protocol.md describes the protocol; this file is a
complete client: the standard library plus redis-py (Debian: python3-redis).

    python3 tether_call.py --redis redis://127.0.0.1:6379 --workspace ws-1 \\
        /api/ping '{"hello":"python"}'

prints the ToolResponse as one JSON line and exits 0 when it is a success.
In your own code, make one Caller per process and share it between threads:

    caller = Caller(redis.Redis.from_url(url), prefix="tether:")
    response = caller.call("ws-1", "/api/terminal/execute", {"command": "ls"}, timeout=35)
    caller.close()

This client is for a single Redis server (`tether broker --redis`). Brokers on
a Redis Cluster (`--redis-cluster`) use sharded pub/sub: SPUBLISH and
SSUBSCRIBE instead of PUBLISH and SUBSCRIBE, as redis-py 5 provides.
"""

import argparse
import collections
import json
import sys
import threading
import time
import uuid

import redis

# How long past a call's deadline to wait for the broker's answer before
# answering timeout ourselves (the broker holding the workspace died, or
# Redis lost the reply). The brokers use the same.
GRACE = 0.5


def failure(correlation_id, code, message):
    return {"correlation_id": correlation_id, "success": False, "error": code, "message": message}


class Caller:
    """One inbox subscription serves every call of the process.

    call() may be used from many threads at once. Every call returns exactly
    one ToolResponse dict, never raises for a failed call: an offline
    workspace, a timeout or a broken Redis come back as {"success": False,
    "error": code}.
    """

    def __init__(self, client, prefix="tether:"):
        self.redis = client
        self.prefix = prefix
        self.inbox = "inbox:" + uuid.uuid4().hex  # without the prefix
        self.lock = threading.Lock()
        self.waiters = {}  # correlation_id -> [threading.Event, response]
        # Calls waiting for their workspace to come online, and how many
        # online announcements of each such workspace were seen.
        self.online = threading.Condition(self.lock)
        self.watched = collections.Counter()
        self.announced = collections.Counter()

        self.pubsub = client.pubsub()
        self.pubsub.subscribe(**{prefix + self.inbox: self._on_reply, prefix + "online": self._on_online})
        # Publish nothing before Redis confirmed both subscriptions, or an
        # early answer could be missed.
        confirmed = 0
        while confirmed < 2:
            message = self.pubsub.get_message(timeout=5.0)
            if message is None:
                raise TimeoutError("redis did not confirm the inbox subscription")
            if message["type"] == "subscribe":
                confirmed += 1
        self.reader = self.pubsub.run_in_thread(sleep_time=0.2, daemon=True)

    def _on_reply(self, message):
        response = json.loads(message["data"])
        with self.lock:
            waiter = self.waiters.pop(response.get("correlation_id"), None)
        if waiter is not None:  # None: the call already gave up; drop it
            waiter[1] = response
            waiter[0].set()

    def _on_online(self, message):
        workspace = message["data"].decode()
        with self.online:
            if workspace in self.watched:
                self.announced[workspace] += 1
                self.online.notify_all()

    def call(self, workspace, endpoint, payload=None, timeout=30.0, wait_for_workspace=0.0):
        """Send endpoint(payload) to workspace and return its ToolResponse.

        timeout is in seconds (0.1 to 600). wait_for_workspace is how many
        seconds a call for a workspace nobody serves may wait for it to
        connect: 0 fails with workspace_offline at once; at the end of the
        wait it fails workspace_offline; a wait longer than the timeout is
        cut by the deadline, which answers timeout.
        """
        correlation_id = str(uuid.uuid4())
        start = time.time()
        deadline = start + timeout
        wait_end, wait_code = start + wait_for_workspace, "workspace_offline"
        if wait_for_workspace > timeout:
            wait_end, wait_code = deadline, "timeout"
        message = json.dumps({
            "correlation_id": correlation_id,
            "endpoint": endpoint,
            "payload": {} if payload is None else payload,
            "timeout": timeout,
            "reply_to": self.inbox,
            "deadline_ms": int(deadline * 1000),
        })
        waiter = [threading.Event(), None]
        with self.online:
            # Registered before publishing: the answer may come at once.
            self.waiters[correlation_id] = waiter
            if wait_for_workspace:
                self.watched[workspace] += 1
            seen = self.announced[workspace]
        try:
            while True:
                try:
                    receivers = self.redis.publish(self.prefix + "ws:" + workspace, message)
                except redis.RedisError as err:
                    return failure(correlation_id, "bus_unavailable", "publishing call: %s" % err)
                if receivers > 0:
                    break
                # Nobody holds the workspace: nobody received the call.
                if not wait_for_workspace:
                    return failure(correlation_id, "workspace_offline", "no client serves workspace %r" % workspace)
                print("tether_call: waiting for workspace %s" % workspace, file=sys.stderr, flush=True)
                with self.online:
                    if not self.online.wait_for(lambda: self.announced[workspace] != seen, wait_end - time.time()):
                        return failure(correlation_id, wait_code, "no client served workspace %r in time; the call was never delivered" % workspace)
                    seen = self.announced[workspace]
            # The broker answers by the deadline, timeout included; the grace
            # covers a broker that died with the call.
            if waiter[0].wait(max(0.0, deadline - time.time()) + GRACE):
                return waiter[1]
            return failure(correlation_id, "timeout", "no answer within %gs" % timeout)
        finally:
            with self.online:
                self.waiters.pop(correlation_id, None)
                if wait_for_workspace:
                    self.watched[workspace] -= 1
                    if self.watched[workspace] <= 0:
                        del self.watched[workspace]
                        self.announced.pop(workspace, None)

    def close(self):
        self.reader.stop()
        self.reader.join(timeout=5)
        self.pubsub.close()


def main():
    parser = argparse.ArgumentParser(description="Call a tether workspace over Redis and print the response.")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379", help="the brokers' Redis URL")
    parser.add_argument("--prefix", default="tether:", help="the brokers' --redis-prefix")
    parser.add_argument("--workspace", required=True)
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds")
    parser.add_argument("--wait", action="store_true", help="wait for the workspace to come online, up to the timeout")
    parser.add_argument("--wait-for", type=float, default=0.0, metavar="SECONDS",
                        help="wait up to SECONDS for the workspace to come online")
    parser.add_argument("endpoint")
    parser.add_argument("payload", nargs="?", default="{}", help="JSON")
    args = parser.parse_args()

    caller = Caller(redis.Redis.from_url(args.redis), prefix=args.prefix)
    try:
        wait = args.timeout if args.wait else args.wait_for
        response = caller.call(args.workspace, args.endpoint, json.loads(args.payload), args.timeout, wait)
    finally:
        caller.close()
    print(json.dumps(response))
    return 0 if response.get("success") else 1


if __name__ == "__main__":
    sys.exit(main())
