#!/usr/bin/env python3
"""python_peer.py is what people would run instead of tether on Python: a
python-socketio AsyncServer on aiohttp, with AsyncRedisManager when several
instances share a Redis, behind tether's caller API. make bench-peers
measures it side by side with tether; it is written for that benchmark, not
for use. It needs the Debian packages python3-socketio, python3-aiohttp and
python3-redis.

Usage:
  python3 python_peer.py --listen 127.0.0.1:PORT [--redis redis://HOST:PORT --channel NAME]
      [--tls-cert CERT.pem --tls-key KEY.pem]

With --tls-cert and --tls-key it serves HTTPS and WSS (aiohttp with an
ssl.SSLContext), else plain HTTP.

Socket.IO clients connect on /socket.io/ (WebSocket transport) with
{workspace_id} in the CONNECT auth and enter the room of that workspace;
tokens are not checked. Callers:
  POST /api/v1/workspaces/{id}/calls {"endpoint","payload","timeout"}
    -> 200 with the ToolResponse the client acked, or
       {"success":false,"error":"timeout",...}
    -> 400 {"error":"invalid_request","message":...} for a bad request
  GET /healthz -> {"status":"ok","connections":N} (this instance's sockets)
A call is sio.call("tool_call", call, to=room): with the Redis manager it
goes through Redis to whichever instance holds the socket, and so does the
ack.
"""

import argparse
import asyncio
import json
import os
import resource
import signal
import ssl
import sys
import uuid

from aiohttp import web
import socketio

MAX_BODY = 1 << 20
FIELDS = {"endpoint", "payload", "timeout"}


def dumps(obj):
    # Compact, as tether and node write JSON.
    return json.dumps(obj, separators=(",", ":"))


def answer(status, obj):
    return web.Response(status=status, text=dumps(obj), content_type="application/json")


def invalid(message):
    return answer(400, {"success": False, "error": "invalid_request", "message": message})


def make_app(args):
    manager = None
    if args.redis:
        manager = socketio.AsyncRedisManager(args.redis, channel=args.channel)
    sio = socketio.AsyncServer(async_mode="aiohttp", client_manager=manager,
                               transports=["websocket"], cors_allowed_origins="*")
    app = web.Application(client_max_size=MAX_BODY)
    sio.attach(app)
    connections = 0

    @sio.event
    async def connect(sid, environ, auth):
        nonlocal connections
        ws = auth.get("workspace_id") if isinstance(auth, dict) else None
        if not isinstance(ws, str) or not ws:
            raise socketio.exceptions.ConnectionRefusedError(
                "workspace_id: want a non-empty string in the CONNECT auth")
        entered = sio.enter_room(sid, "ws:" + ws)
        if asyncio.iscoroutine(entered):  # a coroutine in later python-socketio
            await entered
        connections += 1

    @sio.event
    async def disconnect(sid):
        nonlocal connections
        connections -= 1

    async def healthz(request):
        return answer(200, {"status": "ok", "connections": connections})

    async def call(request):
        workspace = request.match_info["id"]
        try:
            req = json.loads(await request.read())
        except ValueError as err:
            return invalid("body: %s" % err)
        if not isinstance(req, dict):
            return invalid("body: want a JSON object")
        unknown = set(req) - FIELDS
        if unknown:
            return invalid("unknown field %s" % sorted(unknown)[0])
        endpoint = req.get("endpoint")
        if not isinstance(endpoint, str) or not endpoint:
            return invalid("endpoint: want a non-empty string")
        timeout = req.get("timeout", 30)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            return invalid("timeout: want a positive number of seconds")
        correlation_id = str(uuid.uuid4())
        tool_call = {"correlation_id": correlation_id, "endpoint": endpoint,
                     "payload": req.get("payload", {}), "timeout": timeout}
        try:
            response = await sio.call("tool_call", tool_call, to="ws:" + workspace, timeout=timeout)
        except socketio.exceptions.TimeoutError:
            return answer(200, {"correlation_id": correlation_id, "success": False, "error": "timeout",
                                "message": "no answer within %gs" % timeout})
        return answer(200, response)

    app.router.add_get("/healthz", healthz)
    app.router.add_post("/api/v1/workspaces/{id}/calls", call)
    return app


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--listen", required=True, help="HOST:PORT")
    parser.add_argument("--redis", help="Redis URL shared with the other instances")
    parser.add_argument("--channel", default="socketio", help="the Redis manager's channel")
    parser.add_argument("--tls-cert", help="PEM certificate: serve HTTPS and WSS")
    parser.add_argument("--tls-key", help="PEM key of --tls-cert")
    args = parser.parse_args()
    ssl_context = None
    if bool(args.tls_cert) != bool(args.tls_key):
        parser.error("--tls-cert and --tls-key go together")
    if args.tls_cert:
        ssl_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ssl_context.minimum_version = ssl.TLSVersion.TLSv1_2
        ssl_context.set_alpn_protocols(["http/1.1"])
        ssl_context.load_cert_chain(args.tls_cert, args.tls_key)
    host, _, port = args.listen.rpartition(":")
    if not host or not port.isdigit():
        parser.error("--listen %s: want HOST:PORT" % args.listen)
    # Idle-connection runs hold thousands of sockets.
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    # SIGTERM ends the process at once, with status 0: there is nothing to
    # save, and a graceful aiohttp shutdown with thousands of sockets (or
    # their disconnects still being processed) takes longer than the
    # benchmark waits.
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    web.run_app(make_app(args), host=host, port=int(port), handle_signals=False, ssl_context=ssl_context,
                access_log=None, print=None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
