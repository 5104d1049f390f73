#!/usr/bin/env node
// chaos_client.js is one workspace served by the real socket.io-client for
// the chaos run (e2e/chaos): it answers every tool_call after the delay the
// call's payload asks for, and misbehaves when the payload or a command on
// stdin says so, so that the run can check that tether keeps its promises
// against clients that do not.
//
// Usage:
//   node chaos_client.js --url http://127.0.0.1:PORT --token T --workspace W
//     [--transports websocket|default]
//
// It reconnects by itself (socket.io-client's reconnection, 100 ms to 1 s),
// and also, after 200 to 500 ms, when the broker disconnects it (another
// connection took the workspace: an IDE extension takes it back). With
// --transports default it starts on HTTP long-polling and upgrades.
//
// A call's payload is {"nonce": N, "delay_ms": D, "act": A, ...}; the answer
// comes D ms after the call arrived, through the ack, as
//   {correlation_id, success: true, result: {workspace: W, echo: payload}}
// and A picks how:
//   "ack" (or absent)  once, through the ack
//   "event"            once, as a tool_response event
//   "twice"            as an event, then through the ack (the second is a
//                      duplicate the broker must drop)
//   "late"             through the ack, 700 ms after the call's own timeout
//                      (the broker has answered timeout by then)
//   "silent"           never (the broker's deadline answers)
//
// stdin: one JSON command per line:
//   {"cmd":"stall","ms":M}   stop reading the socket for M ms (a slow
//                            consumer), then read again
//   {"cmd":"drop"}           destroy the TCP connection, no close frame
//   {"cmd":"forge","correlation_id":C}
//                            answer C, a call this client was not given, with
//                            {workspace: W, forged: true} (the broker must drop it)
//   {"cmd":"exit"}           leave; closing stdin does the same
//
// stdout: one JSON object per line, with "e":
//   {"e":"connected"} {"e":"disconnect","reason":R}
//   {"e":"call","id":C}       a tool_call arrived (every one: the run checks
//                             that no call is delivered twice)
//   {"e":"cancel","id":C}     a tool_cancel arrived
//   {"e":"stalled"} {"e":"resumed"} {"e":"dropped"}
//   {"e":"error","message":M} a command it could not carry out
'use strict';

const readline = require('node:readline');
const { io } = require('socket.io-client');

function usage(msg) {
  process.stderr.write(`chaos_client: ${msg}\n` +
    'usage: node chaos_client.js --url URL --token T --workspace W\n');
  process.exit(2);
}

const opts = {};
{
  const argv = process.argv.slice(2);
  opts.transports = 'websocket';
  const names = { '--url': 'url', '--token': 'token', '--workspace': 'workspace', '--transports': 'transports' };
  for (let i = 0; i < argv.length; i += 2) {
    if (!(argv[i] in names) || i + 1 >= argv.length) usage(`bad argument ${argv[i]}`);
    opts[names[argv[i]]] = argv[i + 1];
  }
  for (const k of Object.values(names)) if (opts[k] === undefined) usage(`--${k} is required`);
}

function say(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

const socket = io(opts.url, {
  ...(opts.transports === 'default' ? {} : { transports: opts.transports.split(',') }),
  auth: { workspace_id: opts.workspace, token: opts.token },
  reconnection: true,
  reconnectionDelay: 100,
  reconnectionDelayMax: 1000,
  timeout: 5000,
});

socket.on('connect', () => say({ e: 'connected' }));
socket.on('disconnect', (reason) => {
  say({ e: 'disconnect', reason });
  // socket.io-client does not reconnect after a disconnect the server
  // decided; an IDE extension whose workspace was taken takes it back.
  if (reason === 'io server disconnect' && !exiting) later(200 + Math.floor(Math.random() * 300), () => socket.connect());
});
socket.on('connect_error', (err) => say({ e: 'connect_error', message: String(err && err.message) }));

// Timers of answers still to send, so that exit does not wait for them.
const timers = new Set();
function later(ms, fn) {
  const t = setTimeout(() => { timers.delete(t); fn(); }, ms);
  timers.add(t);
}

socket.on('tool_cancel', (m) => say({ e: 'cancel', id: m && m.correlation_id }));

socket.on('tool_call', (call, ack) => {
  const c = call && typeof call === 'object' ? call : {};
  const id = c.correlation_id;
  say({ e: 'call', id });
  const p = c.payload && typeof c.payload === 'object' ? c.payload : {};
  const answer = { correlation_id: id, success: true, result: { workspace: opts.workspace, echo: c.payload } };
  const byAck = () => { if (typeof ack === 'function') ack(answer); };
  const byEvent = () => socket.emit('tool_response', answer);
  const delay = Number.isFinite(p.delay_ms) ? p.delay_ms : 0;
  switch (p.act) {
    case 'silent':
      return;
    case 'late':
      later((Number(c.timeout) || 0) * 1000 + 700, byAck);
      return;
    case 'event':
      later(delay, byEvent);
      return;
    case 'twice':
      later(delay, () => { byEvent(); byAck(); });
      return;
    default:
      later(delay, byAck);
  }
});

function transport() {
  const engine = socket.io.engine;
  return engine && engine.transport && engine.transport.ws;
}

let exiting = false;
function exit() {
  if (exiting) return;
  exiting = true;
  for (const t of timers) clearTimeout(t);
  socket.close();
  rl.close();
  process.stdin.destroy();
  setTimeout(() => process.exit(0), 1000).unref();
}

function command(line) {
  if (!line.trim()) return;
  let cmd;
  try {
    cmd = JSON.parse(line);
  } catch (err) {
    say({ e: 'error', message: `bad command: ${err.message}` });
    return;
  }
  const ws = transport();
  switch (cmd && cmd.cmd) {
    case 'stall':
      if (!ws) { say({ e: 'error', message: 'stall: not connected' }); return; }
      ws.pause();
      say({ e: 'stalled' });
      later(cmd.ms, () => { ws.resume(); say({ e: 'resumed' }); });
      return;
    case 'drop':
      if (!ws || !ws._socket) { say({ e: 'error', message: 'drop: not connected' }); return; }
      // ws keeps its net.Socket private; destroying it is what a dead
      // network or a killed peer looks like to the broker.
      ws._socket.destroy();
      say({ e: 'dropped' });
      return;
    case 'forge':
      socket.emit('tool_response', { correlation_id: cmd.correlation_id, success: true,
        result: { workspace: opts.workspace, forged: true } });
      return;
    case 'exit':
      exit();
      return;
    default:
      say({ e: 'error', message: `unknown command: ${line}` });
  }
}

const rl = readline.createInterface({ input: process.stdin });
rl.on('line', command);
rl.on('close', exit);
process.on('SIGTERM', exit);
