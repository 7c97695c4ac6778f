// The test harness: a server it starts is the one it spawned (INFO server's process_id
// is the child's pid). A port another test's server answers on is not taken for ours:
// that attempt fails, and the next free port is tried.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Server, processId } from "./helpers.mjs";

test("a port another server answers on is not taken for ours: the next free port is tried", async () => {
  const other = await Server.start({ module: false });
  let ours;
  try {
    ours = await Server.start({ tryPorts: [other.port] });
    assert.notEqual(ours.port, other.port);
    assert.equal(await processId(ours.port), ours.proc.pid);
    assert.equal(await processId(other.port), other.proc.pid); // the other one is untouched
    // On that port only (a restart), the start fails and names the stranger.
    await assert.rejects(Server.start({ port: other.port, module: false }), new RegExp(`another server \\(process ${other.proc.pid}\\) answers there`));
  } finally {
    await ours?.remove();
    await other.remove();
  }
});
