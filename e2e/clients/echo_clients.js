#!/usr/bin/env node
// echo_clients.js holds many workspace connections in one process with the
// real socket.io-client, for the benchmarks: every system under test (tether,
// node socket.io, python-socketio) is driven by this same client.
//
// Usage:
//   node echo_clients.js --config FILE
//
// FILE is JSON: {"conns": [{"url": URL, "workspace": W, "token": T}, ...],
// "parallel": P, "ca": CA_FILE}. With "ca", https:// servers are verified
// against that PEM CA (socket.io-client's ca option). Each entry is one connection, with its own Manager (no
// multiplexing), WebSocket transport only, sending {workspace_id: W, token: T}
// in the CONNECT auth (servers that do not check tokens ignore it). At most
// P (default 200) handshakes are in flight at once.
//
// Every tool_call is answered at once through its ack with
// {correlation_id, success: true, result: payload}.
//
// stdout: one JSON object per line:
//   {"event":"ready","connected":N,"ms":M}   every connection is up
//   {"event":"failed","workspace":W,"message":M}  a handshake failed; exits 1
//   {"event":"disconnect","workspace":W,"reason":R}  an unexpected disconnect
//   {"event":"stats","answered":N,"connected":C}  on the "stats" command
// stdin: one command per line: "stats". The process exits (0) when stdin
// closes or on SIGTERM, so it never outlives the benchmark that started it.
'use strict';

const fs = require('node:fs');
const readline = require('node:readline');
const { io } = require('socket.io-client');

function usage(msg) {
  process.stderr.write(`echo_clients: ${msg}\nusage: node echo_clients.js --config FILE\n`);
  process.exit(2);
}

const argv = process.argv.slice(2);
if (argv.length !== 2 || argv[0] !== '--config') usage('want --config FILE');
let config;
try {
  config = JSON.parse(fs.readFileSync(argv[1], 'utf8'));
} catch (err) {
  usage(`reading ${argv[1]}: ${err.message}`);
}
if (!Array.isArray(config.conns) || config.conns.length === 0) usage('config: "conns" must be a non-empty list');
const parallel = config.parallel === undefined ? 200 : config.parallel;
if (!Number.isInteger(parallel) || parallel < 1) usage('config: "parallel" must be a positive integer');
const ca = config.ca ? fs.readFileSync(config.ca) : undefined;

function say(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

const sockets = [];
let answered = 0;
let connected = 0;
let closing = false;

function exit(code) {
  closing = true;
  for (const s of sockets) s.disconnect();
  process.exit(code);
}

function connect(entry) {
  return new Promise((resolve) => {
    const socket = io(entry.url, {
      transports: ['websocket'],
      forceNew: true,
      reconnection: false,
      timeout: 60000,
      auth: { workspace_id: entry.workspace, token: entry.token || '' },
      ...(ca ? { ca } : {}),
    });
    sockets.push(socket);
    socket.on('tool_call', (call, ack) => {
      answered++;
      if (typeof ack === 'function') {
        ack({ correlation_id: call && call.correlation_id, success: true, result: call ? call.payload : null });
      }
    });
    socket.once('connect', () => {
      connected++;
      socket.on('disconnect', (reason) => {
        connected--;
        if (!closing) say({ event: 'disconnect', workspace: entry.workspace, reason });
      });
      resolve();
    });
    socket.once('connect_error', (err) => {
      say({ event: 'failed', workspace: entry.workspace, message: String(err && err.message) });
      exit(1);
    });
  });
}

async function main() {
  const start = Date.now();
  let next = 0;
  async function worker() {
    while (next < config.conns.length) {
      await connect(config.conns[next++]);
    }
  }
  await Promise.all(Array.from({ length: Math.min(parallel, config.conns.length) }, worker));
  say({ event: 'ready', connected, ms: Date.now() - start });
}

process.on('SIGTERM', () => exit(0));
readline.createInterface({ input: process.stdin })
  .on('line', (line) => {
    if (line.trim() === 'stats') say({ event: 'stats', answered, connected });
  })
  .on('close', () => exit(0));

main();
