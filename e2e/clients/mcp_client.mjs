#!/usr/bin/env node
// mcp_client.mjs plays an agent with the official MCP TypeScript SDK, so the
// Go e2e tests prove tether's MCP server against the client agents run, over
// stdio (tether mcp) or streamable HTTP (the broker's endpoint).
//
// Usage:
//   node mcp_client.mjs --stdio '["/path/tether","mcp","--broker",URL,...]'
//   node mcp_client.mjs --url http://127.0.0.1:PORT/api/v1/workspaces/W/mcp --token T
//
// stdout: one JSON object per line, always with "event":
//   {"event":"connected","server":{name,version},"instructions":S}
//   {"event":"connect_error","message":M}
//   {"event":"tools","tools":[...],"schema_errors":[{"tool":N,"schema":"input"|"output","message":M}]}
//   {"event":"result","id":ID,"result":{content,structuredContent,isError},"elapsed_ms":MS}
//   {"event":"error","id":ID,"message":M,"code":C,"elapsed_ms":MS}   (the request failed: protocol error, abort, timeout)
//   {"event":"progress","id":ID,"progress":P,"total":T,"message":M}
//   {"event":"exit"}                                                 (always the last line)
//
// stdin: one JSON command per line:
//   {"cmd":"list"}
//   {"cmd":"call","id":ID,"name":N,"arguments":{...},"progress":true,"timeout_ms":MS,"meta":{...}}
//       progress asks for progress notifications (the SDK sends a progress
//       token); timeout_ms is the SDK's request timeout (default 60000);
//       meta is sent as the request's params._meta (a traceparent, say).
//   {"cmd":"cancel","id":ID}      aborts call ID: the SDK sends notifications/cancelled
//   {"cmd":"exit"}
// The process exits on "exit" or when stdin closes, so it never outlives the
// test that started it.

import readline from 'node:readline';
import AjvModule from 'ajv';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const Ajv = AjvModule.default ?? AjvModule;

function emit(ev) {
  process.stdout.write(JSON.stringify(ev) + '\n');
}

function parseArgs(argv) {
  const opts = {};
  for (let i = 0; i < argv.length; i += 2) {
    const name = { '--stdio': 'stdio', '--url': 'url', '--token': 'token' }[argv[i]];
    if (!name || i + 1 >= argv.length) {
      process.stderr.write(`mcp_client: bad argument ${argv[i]}\n`);
      process.exit(2);
    }
    opts[name] = argv[i + 1];
  }
  if (!opts.stdio === !opts.url) {
    process.stderr.write('mcp_client: give --stdio or --url\n');
    process.exit(2);
  }
  return opts;
}

function transport(opts) {
  if (opts.stdio) {
    const [command, ...args] = JSON.parse(opts.stdio);
    return new StdioClientTransport({ command, args, stderr: 'inherit' });
  }
  const headers = opts.token ? { Authorization: `Bearer ${opts.token}` } : {};
  return new StreamableHTTPClientTransport(new URL(opts.url), { requestInit: { headers } });
}

// schemaErrors compiles every tool's schemas with a strict Ajv: each must
// be valid JSON Schema.
function schemaErrors(tools) {
  const errors = [];
  const ajv = new Ajv({ strict: true, strictTypes: false, allErrors: true });
  for (const tool of tools) {
    for (const [which, schema] of [['input', tool.inputSchema], ['output', tool.outputSchema]]) {
      if (schema === undefined && which === 'output') continue;
      try {
        if (!ajv.validateSchema(schema)) {
          errors.push({ tool: tool.name, schema: which, message: ajv.errorsText(ajv.errors) });
          continue;
        }
        ajv.compile(schema);
      } catch (e) {
        errors.push({ tool: tool.name, schema: which, message: String(e.message ?? e) });
      }
    }
  }
  return errors;
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const client = new Client({ name: 'tether-e2e', version: '0.0.0' });
  try {
    await client.connect(transport(opts));
  } catch (e) {
    emit({ event: 'connect_error', message: String(e.message ?? e) });
    emit({ event: 'exit' });
    process.exit(0);
  }
  emit({ event: 'connected', server: client.getServerVersion(), instructions: client.getInstructions() });

  const calls = new Map(); // id -> AbortController
  const pending = new Set();
  const rl = readline.createInterface({ input: process.stdin });
  const finish = async () => {
    await Promise.allSettled([...pending]);
    await client.close().catch(() => {});
    emit({ event: 'exit' });
    process.exit(0);
  };
  rl.on('close', finish);
  rl.on('line', (line) => {
    let cmd;
    try {
      cmd = JSON.parse(line);
    } catch {
      emit({ event: 'error', message: `not JSON: ${line}` });
      return;
    }
    switch (cmd.cmd) {
      case 'list': {
        const p = client.listTools().then(
          (res) => emit({ event: 'tools', tools: res.tools, schema_errors: schemaErrors(res.tools) }),
          (e) => emit({ event: 'error', message: String(e.message ?? e), code: e.code }));
        pending.add(p);
        p.finally(() => pending.delete(p));
        break;
      }
      case 'call': {
        const ac = new AbortController();
        calls.set(cmd.id, ac);
        const options = { signal: ac.signal, timeout: cmd.timeout_ms ?? 60000 };
        if (cmd.progress) {
          options.onprogress = (p) => emit({ event: 'progress', id: cmd.id, progress: p.progress, total: p.total, message: p.message });
        }
        const start = Date.now();
        const p = client.callTool({ name: cmd.name, arguments: cmd.arguments ?? {}, ...(cmd.meta ? { _meta: cmd.meta } : {}) }, undefined, options).then(
          (result) => emit({ event: 'result', id: cmd.id, result, elapsed_ms: Date.now() - start }),
          (e) => emit({ event: 'error', id: cmd.id, message: String(e.message ?? e), code: e.code, elapsed_ms: Date.now() - start }));
        pending.add(p);
        p.finally(() => { pending.delete(p); calls.delete(cmd.id); });
        break;
      }
      case 'cancel':
        calls.get(cmd.id)?.abort('cancelled by the test');
        break;
      case 'exit':
        rl.close();
        break;
      default:
        emit({ event: 'error', message: `unknown command ${cmd.cmd}` });
    }
  });
}

main().catch((e) => {
  process.stderr.write(`mcp_client: ${e.stack ?? e}\n`);
  emit({ event: 'exit' });
  process.exit(1);
});
