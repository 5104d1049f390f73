#!/usr/bin/env node
// node_peer.js is what people would run instead of tether on Node: a
// socket.io 4 server, with @socket.io/redis-adapter when several instances
// share a Redis, behind tether's caller API. make bench-peers measures it
// side by side with tether; it is written for that benchmark, not for use.
//
// Usage:
//   node node_peer.js --listen 127.0.0.1:PORT [--redis redis://HOST:PORT --key PREFIX]
//     [--tls-cert CERT.pem --tls-key KEY.pem]
//
// With --tls-cert and --tls-key it serves HTTPS and WSS (https.createServer,
// HTTP/1.1 as tether), else plain HTTP.
//
// Socket.IO clients connect on /socket.io/ (WebSocket transport) with
// {workspace_id} in the CONNECT auth and join the room of that workspace;
// tokens are not checked. Callers:
//   POST /api/v1/workspaces/{id}/calls {"endpoint","payload","timeout"}
//     -> 200 with the ToolResponse the client acked, or
//        {"success":false,"error":"workspace_offline"|"timeout",...}
//     -> 400 {"error":"invalid_request","message":...} for a bad request
//   GET /healthz -> {"status":"ok","connections":N} (this instance's sockets)
// A call is io.to(room).timeout(ms).emitWithAck("tool_call", call): the
// adapter finds the socket on whichever instance holds it.
'use strict';

const fs = require('node:fs');
const http = require('node:http');
const https = require('node:https');
const { randomUUID } = require('node:crypto');
const { Server } = require('socket.io');

function usage(msg) {
  process.stderr.write(`node_peer: ${msg}\nusage: node node_peer.js --listen HOST:PORT [--redis URL --key PREFIX] [--tls-cert FILE --tls-key FILE]\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const opts = { key: 'socket.io' };
  for (let i = 0; i < argv.length; i += 2) {
    const name = { '--listen': 'listen', '--redis': 'redis', '--key': 'key', '--tls-cert': 'tlsCert', '--tls-key': 'tlsKey' }[argv[i]];
    if (!name || i + 1 >= argv.length) usage(`bad argument ${argv[i]}`);
    opts[name] = argv[i + 1];
  }
  if (!opts.listen) usage('--listen is required');
  if (!opts.tlsCert !== !opts.tlsKey) usage('--tls-cert and --tls-key go together');
  const colon = opts.listen.lastIndexOf(':');
  opts.host = opts.listen.slice(0, colon);
  opts.port = Number(opts.listen.slice(colon + 1));
  if (colon < 0 || !Number.isInteger(opts.port)) usage(`--listen ${opts.listen}: want HOST:PORT`);
  return opts;
}

const MAX_BODY = 1 << 20;
const CALLS = /^\/api\/v1\/workspaces\/([^/]+)\/calls$/;

function send(res, status, obj) {
  const body = JSON.stringify(obj);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}

function invalid(res, message) {
  send(res, 400, { success: false, error: 'invalid_request', message });
}

// call relays one caller request to the workspace's socket and answers with
// exactly one ToolResponse.
async function call(io, res, workspace, body) {
  let req;
  try {
    req = JSON.parse(body);
  } catch (err) {
    return invalid(res, `body: ${err.message}`);
  }
  if (req === null || typeof req !== 'object' || Array.isArray(req)) return invalid(res, 'body: want a JSON object');
  for (const k of Object.keys(req)) {
    if (!['endpoint', 'payload', 'timeout'].includes(k)) return invalid(res, `unknown field ${k}`);
  }
  if (typeof req.endpoint !== 'string' || req.endpoint === '') return invalid(res, 'endpoint: want a non-empty string');
  const timeout = req.timeout === undefined ? 30 : req.timeout;
  if (typeof timeout !== 'number' || !(timeout > 0)) return invalid(res, 'timeout: want a positive number of seconds');
  const correlationID = randomUUID();
  const toolCall = { correlation_id: correlationID, endpoint: req.endpoint, payload: req.payload === undefined ? {} : req.payload, timeout };
  try {
    const responses = await io.to(`ws:${workspace}`).timeout(timeout * 1000).emitWithAck('tool_call', toolCall);
    if (responses.length === 0) {
      return send(res, 200, { correlation_id: correlationID, success: false, error: 'workspace_offline', message: `no client serves workspace ${workspace}` });
    }
    return send(res, 200, responses[0]);
  } catch (err) {
    return send(res, 200, { correlation_id: correlationID, success: false, error: 'timeout', message: String(err && err.message) });
  }
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  let io;
  const handler = (req, res) => {
    if (req.method === 'GET' && req.url === '/healthz') {
      return send(res, 200, { status: 'ok', connections: io.of('/').sockets.size });
    }
    const m = req.method === 'POST' && CALLS.exec(req.url);
    if (!m) return send(res, 404, { success: false, error: 'not_found', message: `${req.method} ${req.url}` });
    const chunks = [];
    let size = 0;
    req.on('data', (chunk) => {
      size += chunk.length;
      if (size <= MAX_BODY) chunks.push(chunk);
    });
    req.on('end', () => {
      if (size > MAX_BODY) return send(res, 413, { success: false, error: 'payload_too_large', message: `body over ${MAX_BODY} bytes` });
      call(io, res, decodeURIComponent(m[1]), Buffer.concat(chunks).toString('utf8'));
    });
  };
  const server = opts.tlsCert
    ? https.createServer({ cert: fs.readFileSync(opts.tlsCert), key: fs.readFileSync(opts.tlsKey), minVersion: 'TLSv1.2', ALPNProtocols: ['http/1.1'] }, handler)
    : http.createServer(handler);
  io = new Server(server, { transports: ['websocket'], serveClient: false });

  const redisClients = [];
  if (opts.redis) {
    const { createClient } = require('redis');
    const { createAdapter } = require('@socket.io/redis-adapter');
    const pub = createClient({ url: opts.redis });
    const sub = pub.duplicate();
    for (const c of [pub, sub]) c.on('error', (err) => process.stderr.write(`node_peer: redis: ${err.message}\n`));
    await Promise.all([pub.connect(), sub.connect()]);
    redisClients.push(pub, sub);
    io.adapter(createAdapter(pub, sub, { key: opts.key }));
  }

  io.use((socket, next) => {
    const ws = socket.handshake.auth && socket.handshake.auth.workspace_id;
    if (typeof ws !== 'string' || ws === '') return next(new Error('workspace_id: want a non-empty string in the CONNECT auth'));
    next();
  });
  io.on('connection', (socket) => socket.join(`ws:${socket.handshake.auth.workspace_id}`));

  let stopping = false;
  process.on('SIGTERM', () => {
    if (stopping) return;
    stopping = true;
    // Exit even if a close hangs: the benchmark waits for this process.
    setTimeout(() => process.exit(0), 3000).unref();
    io.close(() => {
      Promise.allSettled(redisClients.map((c) => c.quit())).then(() => process.exit(0));
    });
  });

  server.listen(opts.port, opts.host);
  await new Promise((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
}

main().catch((err) => {
  process.stderr.write(`node_peer: ${err && err.stack ? err.stack : err}\n`);
  process.exit(1);
});
