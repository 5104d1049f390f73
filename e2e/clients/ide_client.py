#!/usr/bin/python3
"""A python-socketio client playing an IDE extension, for tether's e2e tests.

Usage: ide_client.py URL TOKEN WORKSPACE [TRANSPORTS [CA_FILE]]
Connects with python-socketio's defaults (polling, then upgrade) unless
TRANSPORTS (comma-separated, or "default") is given, verifying an https://
broker against CA_FILE when given (a requests session's verify, which
python-engineio uses for polling and hands the WebSocket as ca_certs), answers every tool_call by returning
its response from the handler (the Socket.IO ack), and prints one JSON line
per event: connected, tool_call, disconnect. Exits when stdin closes.

Over wss:// it serialises the TLS socket's reads and writes first
(serialize_tls_io): python-engineio's threaded Client reads the WebSocket on
one thread and writes it on another, and an ssl.SSLSocket (one OpenSSL
connection object) is not safe to use from two threads at once. Seen here at
about 1 connect in 300 (the Debian packages: python3-engineio 4.3.4,
python3-websocket 1.2.3, Python 3.11): the write thread sends the Socket.IO
CONNECT while the read thread makes its first read, that read returns b""
though the broker closed nothing, websocket-client takes b"" for a closed
connection and closes the socket, and the broker sees the connection reset
right after it connected the workspace; python-socketio then waits out
wait_timeout for the CONNECT answer it never reads. Upstream:
miguelgrinberg/python-socketio#1568, miguelgrinberg/python-engineio#461.
"""
import json
import select
import ssl
import sys
import threading
import weakref

import requests
import socketio
import websocket
import websocket._core


def serialize_tls_io():
    """Makes websocket-client's reads and writes of one TLS socket take turns.

    A read waits for the peer's bytes outside the lock and takes the lock
    only to read what has come, so a write is never held up by a read that
    waits (that would deadlock: the broker answers the CONNECT only once the
    write has gone). Plain sockets are left alone: the kernel serialises
    them.
    """
    locks = weakref.WeakKeyDictionary()
    guard = threading.Lock()
    plain_recv, plain_send = websocket._core.recv, websocket._core.send

    def lock_of(sock):
        with guard:
            return locks.setdefault(sock, threading.Lock())

    def recv(sock, bufsize):
        if not isinstance(sock, ssl.SSLSocket):
            return plain_recv(sock, bufsize)
        lock = lock_of(sock)
        with lock:
            if sock.pending():  # decrypted already: no wait for the peer
                return plain_recv(sock, bufsize)
        readable, _, _ = select.select([sock], [], [], sock.gettimeout())
        if not readable:
            raise websocket.WebSocketTimeoutException("timed out")
        with lock:
            return plain_recv(sock, bufsize)

    def send(sock, data):
        if not isinstance(sock, ssl.SSLSocket):
            return plain_send(sock, data)
        with lock_of(sock):
            return plain_send(sock, data)

    websocket._core.recv, websocket._core.send = recv, send


def say(**event):
    print(json.dumps(event), flush=True)


def main():
    url, token, workspace = sys.argv[1:4]
    transports = sys.argv[4].split(",") if len(sys.argv) > 4 and sys.argv[4] != "default" else None
    options = {}
    if url.startswith("https://") or url.startswith("wss://"):
        serialize_tls_io()
    if len(sys.argv) > 5:
        session = requests.Session()
        session.verify = sys.argv[5]
        # Else REQUESTS_CA_BUNDLE in the environment would win over it.
        session.trust_env = False
        options["http_session"] = session
    sio = socketio.Client(reconnection=False, **options)

    @sio.event
    def connect():
        say(event="connected", transport=sio.transport())

    @sio.event
    def connect_error(data):
        say(event="connect_error", data=data)

    @sio.event
    def disconnect():
        say(event="disconnect")

    @sio.on("tool_call")
    def tool_call(call):
        say(event="tool_call", correlation_id=call["correlation_id"], endpoint=call["endpoint"])
        return {"correlation_id": call["correlation_id"], "success": True,
                "result": {"via": "python-socketio", "echo": call.get("payload")}}

    try:
        sio.connect(url, auth={"token": token, "workspace_id": workspace}, transports=transports, wait_timeout=10)
    except socketio.exceptions.ConnectionError as err:
        say(event="connect_error", message=str(err))
        return
    for _ in sys.stdin:
        pass
    sio.disconnect()


if __name__ == "__main__":
    main()
