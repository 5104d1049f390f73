#!/usr/bin/env node
// ide_client.js plays an IDE extension with the real socket.io-client, so the
// Go e2e tests prove the broker against the client that users run, not against
// our own codec.
//
// Usage:
//   node ide_client.js --url http://127.0.0.1:PORT --token T --workspace W --mode MODE
//     [--path /socket.io] [--token-via auth|header|both] [--reconnect]
//     [--transports websocket|polling|polling,websocket|default] [--ca CA.pem]
//
// --url is the origin only: a path in it would be taken as a namespace.
// --ca trusts that PEM CA (alone) for an https:// broker, through
// socket.io-client's own `ca` option.
//
// Modes, for each tool_call(call, ack):
//   ack                   ack({correlation_id, success:true, result:{via:"ack", echo:payload}})
//   event                 emit("tool_response", {... result:{via:"event", ...}})
//   both                  answer by event, then by ack (the ack is a duplicate)
//   none                  never answer by itself; see the "answer" command
//   empty-ack-then-event  ack() with no arguments, then emit tool_response
//   alternate             odd calls (1st, 3rd, ...) by ack, even ones by event
//
// stdout: one JSON object per line, always with "event":
//   {"event":"connected","id":SID}
//   {"event":"connect_error","message":M,"data":D}
//   {"event":"tool_call","n":N,"correlation_id":C,"endpoint":E,"payload":P,"timeout":T,"has_ack":B}
//   {"event":"answered","correlation_id":C,"via":"ack"|"event"|"empty-ack"}
//   {"event":"tool_cancel","correlation_id":C,"reason":R}
//   {"event":"disconnect","reason":R}
//   {"event":"reconnect_attempt","attempt":N}   (only with --reconnect)
//   {"event":"error","message":M}                (a command or call it could not serve)
//   {"event":"exit"}                             (always the last line)
//
// stdin: one JSON command per line:
//   {"cmd":"disconnect"}
//   {"cmd":"close-transport"}   closes the Engine.IO connection under the
//       Socket.IO socket, as a network drop would: with --reconnect the same
//       socket reconnects, and held acks then go out on the new connection
//   {"cmd":"answer","correlation_id":C,"via":"ack"|"event","response":{...}}
//       answers a held call; "response" defaults to a success echo, and gets
//       "correlation_id" added when it has none. "via":"event" needs no held
//       call, so tests can send responses for unknown correlation ids.
//   {"cmd":"emit","event":NAME,"data":ANY}
//   {"cmd":"exit"}
// The process exits on "exit" or when stdin closes, so it never outlives the
// test that started it.
'use strict';

const readline = require('node:readline');
const { io } = require('socket.io-client');

const MODES = new Set(['ack', 'event', 'both', 'none', 'empty-ack-then-event', 'alternate']);

function usage(msg) {
  process.stderr.write(`ide_client: ${msg}\n` +
    'usage: node ide_client.js --url URL --token T --workspace W --mode ' +
    `${[...MODES].join('|')} [--path P] [--token-via auth|header|both] [--reconnect]\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const opts = { path: '/socket.io', tokenVia: 'auth', reconnect: false, transports: 'websocket' };
  const names = { '--url': 'url', '--token': 'token', '--workspace': 'workspace', '--mode': 'mode',
    '--path': 'path', '--token-via': 'tokenVia', '--transports': 'transports', '--ca': 'ca' };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--reconnect') { opts.reconnect = true; continue; }
    const eq = arg.indexOf('=');
    const flag = eq > 0 ? arg.slice(0, eq) : arg;
    if (!(flag in names)) usage(`unknown argument ${arg}`);
    let value;
    if (eq > 0) value = arg.slice(eq + 1);
    else if (i + 1 < argv.length) value = argv[++i];
    else usage(`${flag} needs a value`);
    opts[names[flag]] = value;
  }
  if (!opts.url) usage('--url is required');
  if (opts.token === undefined) usage('--token is required');
  if (opts.workspace === undefined) usage('--workspace is required');
  if (!MODES.has(opts.mode)) usage(`--mode must be one of ${[...MODES].join(', ')}`);
  if (!['auth', 'header', 'both'].includes(opts.tokenVia)) usage('--token-via must be auth, header or both');
  return opts;
}

// Lines go out with synchronous writes (stdout is a pipe under the Go tests),
// so a line is never lost when the process exits right after it.
function say(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

const opts = parseArgs(process.argv.slice(2));

const auth = { workspace_id: opts.workspace };
if (opts.tokenVia !== 'header') auth.token = opts.token;
const clientOpts = {
  path: opts.path,
  // "default" leaves socket.io-client's own choice: polling, then upgrade.
  ...(opts.transports === 'default' ? {} : { transports: opts.transports.split(',') }),
  auth,
  reconnection: opts.reconnect,
  reconnectionDelay: 100,
  reconnectionDelayMax: 1000,
};
if (opts.ca) clientOpts.ca = require('fs').readFileSync(opts.ca);
if (opts.tokenVia !== 'auth') clientOpts.extraHeaders = { Authorization: `Bearer ${opts.token}` };

const socket = io(opts.url, clientOpts);

// Calls whose ack callback has not been used yet: correlation id -> {call, ack}.
const held = new Map();
let calls = 0;

function successFor(call, via) {
  return { correlation_id: call.correlation_id, success: true, result: { via, echo: call.payload } };
}

function answerByAck(id, ack, response) {
  held.delete(id);
  ack(response);
  say({ event: 'answered', correlation_id: id, via: 'ack' });
}

function answerByEvent(id, response) {
  socket.emit('tool_response', response);
  say({ event: 'answered', correlation_id: id, via: 'event' });
}

socket.on('connect', () => say({ event: 'connected', id: socket.id, transport: socket.io.engine.transport.name }));
socket.io.on('open', () => socket.io.engine.on('upgrade', (t) => say({ event: 'upgrade', transport: t.name })));

socket.on('connect_error', (err) => {
  say({ event: 'connect_error', message: err && err.message, data: err && err.data !== undefined ? err.data : null });
});

socket.on('disconnect', (reason) => say({ event: 'disconnect', reason }));

socket.io.on('reconnect_attempt', (attempt) => say({ event: 'reconnect_attempt', attempt }));

socket.on('tool_call', (...args) => {
  const ack = typeof args[args.length - 1] === 'function' ? args.pop() : undefined;
  const call = args[0] && typeof args[0] === 'object' ? args[0] : {};
  const id = call.correlation_id;
  calls++;
  say({ event: 'tool_call', n: calls, correlation_id: id, endpoint: call.endpoint,
    payload: call.payload === undefined ? null : call.payload,
    timeout: call.timeout === undefined ? null : call.timeout, has_ack: ack !== undefined });
  if (ack) held.set(id, { call, ack });

  let mode = opts.mode;
  if (mode === 'alternate') mode = calls % 2 === 1 ? 'ack' : 'event';
  if (mode === 'none') return;
  if ((mode === 'ack' || mode === 'both' || mode === 'empty-ack-then-event') && !ack) {
    say({ event: 'error', message: `tool_call ${id} came without an ack id` });
  }
  switch (mode) {
    case 'ack':
      if (ack) answerByAck(id, ack, successFor(call, 'ack'));
      break;
    case 'event':
      answerByEvent(id, successFor(call, 'event'));
      break;
    case 'both':
      answerByEvent(id, successFor(call, 'event'));
      if (ack) answerByAck(id, ack, successFor(call, 'ack'));
      break;
    case 'empty-ack-then-event':
      if (ack) {
        held.delete(id);
        ack();
        say({ event: 'answered', correlation_id: id, via: 'empty-ack' });
      }
      answerByEvent(id, successFor(call, 'event'));
      break;
  }
});

socket.on('tool_cancel', (msg) => {
  const m = msg && typeof msg === 'object' ? msg : {};
  say({ event: 'tool_cancel', correlation_id: m.correlation_id, reason: m.reason === undefined ? null : m.reason });
});

let exiting = false;
function exit() {
  if (exiting) return;
  exiting = true;
  socket.close();
  rl.close();
  process.stdin.destroy();
  // The process ends by itself once the WebSocket has sent its close; the
  // unref'd timer ends it only if something still holds the event loop.
  setTimeout(() => process.exit(0), 1000).unref();
}

process.on('exit', () => say({ event: 'exit' }));

function command(line) {
  if (!line.trim()) return;
  let cmd;
  try {
    cmd = JSON.parse(line);
  } catch (err) {
    say({ event: 'error', message: `bad command: ${err.message}` });
    return;
  }
  switch (cmd && cmd.cmd) {
    case 'disconnect':
      socket.disconnect();
      break;
    case 'close-transport':
      socket.io.engine.close();
      break;
    case 'exit':
      exit();
      break;
    case 'emit':
      socket.emit(cmd.event, cmd.data);
      break;
    case 'answer': {
      const id = cmd.correlation_id;
      const via = cmd.via || 'ack';
      const entry = held.get(id);
      let response;
      if (cmd.response && typeof cmd.response === 'object') response = { ...cmd.response };
      else if (entry) response = successFor(entry.call, via);
      else response = { success: true, result: { via } };
      if (!('correlation_id' in response)) response.correlation_id = id;
      if (via === 'event') {
        answerByEvent(id, response);
      } else if (via === 'ack') {
        if (entry) answerByAck(id, entry.ack, response);
        else say({ event: 'error', message: `no held ack for correlation_id ${id}` });
      } else {
        say({ event: 'error', message: `answer: via must be "ack" or "event", not ${JSON.stringify(via)}` });
      }
      break;
    }
    default:
      say({ event: 'error', message: `unknown command: ${line}` });
  }
}

const rl = readline.createInterface({ input: process.stdin });
rl.on('line', command);
rl.on('close', exit);
