#!/usr/bin/python3
"""A python-socketio client playing an IDE extension, for tether's e2e tests.

Usage: ide_client.py URL TOKEN WORKSPACE [TRANSPORTS [CA_FILE]]
Connects with python-socketio's defaults (polling, then upgrade) unless
TRANSPORTS (comma-separated, or "default") is given, verifying an https://
broker against CA_FILE when given (a requests session's verify, which
python-engineio uses for polling and hands the WebSocket as ca_certs), answers every tool_call by returning
its response from the handler (the Socket.IO ack), and prints one JSON line
per event: connected, tool_call, disconnect. Exits when stdin closes.
"""
import json
import sys

import requests
import socketio


def say(**event):
    print(json.dumps(event), flush=True)


def main():
    url, token, workspace = sys.argv[1:4]
    transports = sys.argv[4].split(",") if len(sys.argv) > 4 and sys.argv[4] != "default" else None
    options = {}
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
