// The sandbox client's whole interface against a real tether broker and
// bridge: node --test test/ after tsc -p . (the e2e test
// TestAsyncTypeScriptExampleAgainstARealBridge starts both and runs it).
//
// Environment: TETHER_BROKER, TETHER_TOKEN, TETHER_WORKSPACE name the
// workspace; TETHER_SANDBOX_MODULE is the compiled client (default
// ../dist/sandbox.js).
//
// The test is JavaScript, the client TypeScript: no Node type definitions
// are pinned for tsc to check node:test against.

import assert from "node:assert/strict";
import { test } from "node:test";

const { Sandbox, SandboxError } = await import(process.env.TETHER_SANDBOX_MODULE ?? new URL("../dist/sandbox.js", import.meta.url).href);

for (const name of ["TETHER_BROKER", "TETHER_WORKSPACE"]) {
  if (!process.env[name]) throw new Error(`${name} is not set: this test runs against a real broker and bridge`);
}
const sandbox = new Sandbox({ broker: process.env.TETHER_BROKER, token: process.env.TETHER_TOKEN ?? "", workspace: process.env.TETHER_WORKSPACE });

test("writeFile then readFile round-trips text, in pages past one read", async () => {
  await sandbox.writeFile("notes/hello.txt", "héllo, tether\n");
  assert.equal(await sandbox.readFile("notes/hello.txt"), "héllo, tether\n");
  const big = Array.from({ length: 12000 }, (_, i) => `line ${i} ${"x".repeat(20)}\n`).join(""); // ~370 KB, over the 256 KiB read cap
  await sandbox.writeFile("big.txt", big);
  assert.equal(await sandbox.readFile("big.txt"), big);
});

test("writeFile then readFileBuffer round-trips every byte value", async () => {
  const bytes = new Uint8Array(4096);
  for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 7) % 256;
  await sandbox.writeFile("bin/data.bin", bytes);
  assert.deepEqual(await sandbox.readFileBuffer("bin/data.bin"), bytes);
  assert.equal((await sandbox.stat("bin/data.bin")).size, bytes.length);
});

test("stat, exists, readdir, mkdir and rm", async () => {
  await sandbox.mkdir("tree/a/b", { recursive: true });
  await sandbox.writeFile("tree/a/b/f.txt", "f");
  await sandbox.writeFile("tree/z.txt", "zz");
  const dir = await sandbox.stat("tree/a");
  assert.equal(dir.isDirectory, true);
  assert.equal(dir.isSymlink, false);
  const file = await sandbox.stat("tree/z.txt");
  assert.equal(file.isDirectory, false);
  assert.equal(file.size, 2);
  assert.ok(Math.abs(file.mtimeMs - Date.now()) < 60_000, `mtimeMs ${file.mtimeMs}`);
  await sandbox.exec("ln -s z.txt tree/link");
  assert.equal((await sandbox.stat("tree/link")).isSymlink, true);
  assert.deepEqual(await sandbox.readdir("tree"), ["a", "link", "z.txt"]);
  assert.equal(await sandbox.exists("tree/z.txt"), true);
  assert.equal(await sandbox.exists("tree/nothing"), false);

  await assert.rejects(sandbox.mkdir("tree/x/y"), (err) => err instanceof SandboxError && err.code === "invalid_path");
  await assert.rejects(sandbox.rm("tree/a"), (err) => err instanceof SandboxError && err.code === "invalid_path");
  await assert.rejects(sandbox.rm("tree/nothing"), (err) => err instanceof SandboxError && err.code === "invalid_path");
  await sandbox.rm("tree/nothing", { force: true });
  await sandbox.rm("tree/a", { recursive: true });
  assert.equal(await sandbox.exists("tree/a"), false);
  await assert.rejects(sandbox.readFile("../outside"), (err) => err instanceof SandboxError && err.code === "invalid_path");
});

test("exec runs with cwd and env and reports exit codes", async () => {
  await sandbox.mkdir("work", { recursive: true });
  const r = await sandbox.exec('printf "%s:%s" "$GREETING" "$(basename "$PWD")"', { cwd: "work", env: { GREETING: "hi" } });
  assert.equal(r.exitCode, 0);
  assert.equal(r.stdout, "hi:work");
  assert.equal(r.timedOut, false);
  const failed = await sandbox.exec("echo oops >&2; exit 3");
  assert.equal(failed.exitCode, 3);
  assert.match(failed.stderr, /oops/);
  assert.equal(failed.timedOut, false);
});

test("exec past its timeoutMs is stopped and says so", async () => {
  const start = Date.now();
  const r = await sandbox.exec("sleep 30", { timeoutMs: 1000 });
  assert.equal(r.timedOut, true);
  assert.ok(Date.now() - start < 10_000, `took ${Date.now() - start} ms`);
});

test("an abort cancels a running sleep 30: the call ends at once and the command is gone", async () => {
  const alive = async () => (await sandbox.exec('[ -s sleep.pid ] && kill -0 "$(cat sleep.pid)" 2>/dev/null && echo alive || true')).stdout.trim() === "alive";
  const ctl = new AbortController();
  const running = sandbox.exec("echo $$ > sleep.pid; exec sleep 30", { signal: ctl.signal });
  for (let i = 0; !(await alive()); i++) {
    if (i > 100) assert.fail("sleep 30 never started");
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const start = Date.now();
  ctl.abort();
  await assert.rejects(running, (err) => err.name === "AbortError");
  assert.ok(Date.now() - start < 2000, `the abort took ${Date.now() - start} ms`);
  for (let i = 0; await alive(); i++) {
    if (i > 60) assert.fail("sleep 30 still runs after the abort");
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
});

test("an already aborted signal submits nothing", async () => {
  const ctl = new AbortController();
  ctl.abort();
  await assert.rejects(sandbox.exec("touch should-not-exist", { signal: ctl.signal }), (err) => err.name === "AbortError");
  assert.equal(await sandbox.exists("should-not-exist"), false);
});
