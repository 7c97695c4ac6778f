// Real servers for the package's tests, started on free 127.0.0.1 ports in temporary
// directories and killed when the test file ends: a server with the module
// ($RATELIMIT_MODULE, required), one without it, and a Cluster of three primaries with
// the module. $REDIS_SERVER runs them on another binary (Valkey: scripts/valkey.sh).
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync, openSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { setTimeout as sleep } from "node:timers/promises";
import { randomBytes } from "node:crypto";
import { after, before } from "node:test";
import { Redis, Cluster as IoCluster } from "ioredis";
import { createClient, createCluster } from "redis";

export const PKG = join(dirname(fileURLToPath(import.meta.url)), "..");
export const REPO = join(PKG, "..", "..");
const START_WITHIN_MS = 15_000;

export function serverBinary() {
  return process.env.REDIS_SERVER || "redis-server";
}

export function modulePath() {
  const path = process.env.RATELIMIT_MODULE;
  if (!path || !existsSync(path)) {
    throw new Error(`set RATELIMIT_MODULE to the module's .so (make node-client does it), not ${path}`);
  }
  return path;
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** The process id of the server answering on a port (INFO server's process_id), or
 * undefined when none answers. */
export async function processId(port) {
  const c = new Redis({ port, host: "127.0.0.1", lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 1000 });
  c.on("error", () => {});
  try {
    await c.connect();
    const m = /^process_id:(\d+)/m.exec(await c.info("server"));
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  } finally {
    c.disconnect();
  }
}

export class Server {
  /** `port`: that port only (a restart); `tryPorts`: ports to try before free ones. */
  constructor({ module = true, cluster = false, extra = [], port, tryPorts = [] } = {}) {
    this.tryPorts = [...tryPorts];
    this.module = module;
    this.cluster = cluster;
    this.extra = extra;
    this.fixedPort = port;
    this.dir = mkdtempSync(join(tmpdir(), "rl-node-"));
  }

  static async start(opts) {
    const s = new Server(opts);
    try {
      await s.launch();
    } catch (err) {
      await s.remove();
      throw err;
    }
    return s;
  }

  async launch() {
    const failures = [];
    for (let attempt = 0; attempt < 5; attempt++) {
      this.port = this.fixedPort ?? this.tryPorts.shift() ?? (await freePort());
      const lines = [`port ${this.port}`, "bind 127.0.0.1", 'save ""', "appendonly no", `dir ${this.dir}`, ...this.extra];
      if (this.module) lines.push(`loadmodule ${modulePath()}`);
      if (this.cluster) {
        lines.push("cluster-enabled yes", "cluster-config-file nodes.conf", "cluster-node-timeout 5000", `cluster-port ${await freePort()}`);
      }
      writeFileSync(join(this.dir, "redis.conf"), lines.join("\n") + "\n");
      const log = openSync(join(this.dir, "server.log"), "a");
      this.proc = spawn(serverBinary(), [join(this.dir, "redis.conf")], { cwd: this.dir, stdio: ["ignore", log, log] });
      let exited = null;
      this.proc.once("exit", (code) => (exited = code));
      const deadline = Date.now() + START_WITHIN_MS;
      // The server is ours only when the one answering is the process we spawned: a port
      // another test's server took first (ours then fails to bind) is not.
      let stranger;
      while (Date.now() < deadline && exited === null && stranger === undefined) {
        const pid = await processId(this.port);
        if (pid === this.proc.pid) return this;
        if (pid !== undefined) stranger = pid;
        else await sleep(50);
      }
      const why = stranger !== undefined ? `another server (process ${stranger}) answers there` : exited !== null ? `exited with ${exited}` : "no answer";
      failures.push(`port ${this.port}: ${why}\n${this.log()}`);
      await this.stop();
      if (this.fixedPort) break;
    }
    throw new Error("server failed to start:\n" + failures.join("\n"));
  }

  /** Start again on the same port (after stop()). */
  async restart() {
    this.fixedPort = this.port;
    return this.launch();
  }

  log() {
    try {
      return readFileSync(join(this.dir, "server.log"), "utf8");
    } catch {
      return "";
    }
  }

  url() {
    return `redis://127.0.0.1:${this.port}`;
  }

  async stop() {
    const p = this.proc;
    this.proc = undefined;
    if (p && p.exitCode === null && p.signalCode === null) {
      const gone = new Promise((r) => p.once("exit", r));
      p.kill("SIGKILL");
      await gone;
    }
  }

  async remove() {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

export class Cluster {
  static async start(n = 3, { module = true } = {}) {
    const c = new Cluster();
    c.nodes = [];
    for (let i = 0; i < n; i++) c.nodes.push(await Server.start({ cluster: true, module }));
    const cli = process.env.REDIS_CLI || "redis-cli";
    const out = spawnSync(
      cli,
      ["--cluster", "create", ...c.nodes.map((s) => `127.0.0.1:${s.port}`), "--cluster-replicas", "0", "--cluster-yes"],
      { encoding: "utf8", timeout: 60_000 },
    );
    if (out.status !== 0) {
      await c.remove();
      throw new Error(`${cli} --cluster create failed:\n${out.stdout}\n${out.stderr}`);
    }
    const deadline = Date.now() + 30_000;
    for (const node of c.nodes) {
      const r = new Redis({ port: node.port, host: "127.0.0.1" });
      for (;;) {
        const info = await r.cluster("INFO");
        if (/cluster_state:ok/.test(info)) break;
        if (Date.now() > deadline) throw new Error(`cluster never ok on port ${node.port}`);
        await sleep(100);
      }
      r.disconnect();
    }
    return c;
  }
  get port() {
    return this.nodes[0].port;
  }
  async remove() {
    for (const n of this.nodes) await n.remove();
  }
}

/** A server with the module and a three-node Cluster with the module, started before a
 * test file's tests and removed after them: `servers.server`, `servers.cluster`. */
export function serversOfFile() {
  const servers = { server: undefined, cluster: undefined };
  before(async () => {
    servers.server = await Server.start();
    servers.cluster = await Cluster.start();
  });
  after(async () => {
    await servers.server?.remove();
    await servers.cluster?.remove();
  });
  return servers;
}

/** The clients a call runs on, by name: ioredis and node-redis (RESP2 and RESP3) on
 * `servers.server`, and both Cluster clients on `servers.cluster`. Each makes `client`,
 * `raw` (an ioredis connection that reads the keys), `primaries()` (ioredis connections
 * to every primary), `close()`, and `cluster` for the Cluster clients. */
export function clientVariants(servers) {
  const plain = () => new Redis({ port: servers.server.port, host: "127.0.0.1" });
  const ioCluster = async () => {
    const c = new IoCluster([{ host: "127.0.0.1", port: servers.cluster.port }]);
    await c.ping();
    return c;
  };
  const nodeRedis = (RESP) => async () => {
    const c = await createClient({ url: servers.server.url(), RESP }).connect();
    const raw = plain();
    return { client: c, raw, primaries: async () => [raw], close: async () => (await c.close(), raw.disconnect()) };
  };
  return {
    ioredis: async () => {
      const c = plain();
      return { client: c, raw: c, primaries: async () => [c], close: async () => c.disconnect() };
    },
    "ioredis Cluster": async () => {
      const c = await ioCluster();
      return { client: c, raw: c, primaries: async () => c.nodes("master"), close: async () => c.disconnect(), cluster: true };
    },
    "node-redis RESP2": nodeRedis(2),
    "node-redis RESP3": nodeRedis(3),
    "node-redis Cluster": async () => {
      const c = await createCluster({ rootNodes: [{ url: `redis://127.0.0.1:${servers.cluster.port}` }] }).connect();
      const raw = await ioCluster();
      return { client: c, raw, primaries: async () => raw.nodes("master"), close: async () => (await c.close(), raw.disconnect()), cluster: true };
    },
  };
}

/** A server of a test's own that the test can stall: after `stall()` every write waits
 * (CLIENT PAUSE ... WRITE) until `resume()`, which returns once the client's queued calls
 * have run. `client` is an ioredis connection to it, `admin` another. */
export async function stallableServer() {
  const server = await Server.start();
  const client = new Redis({ port: server.port, host: "127.0.0.1" });
  const admin = new Redis({ port: server.port, host: "127.0.0.1" });
  return {
    server,
    client,
    admin,
    stall: () => admin.call("CLIENT", "PAUSE", "600000", "WRITE"),
    resume: async () => {
      await admin.call("CLIENT", "UNPAUSE");
      await client.ping(); // answered after the calls queued on the same connection
    },
    remove: async () => {
      await admin.call("CLIENT", "UNPAUSE").catch(() => {});
      client.disconnect();
      admin.disconnect();
      await server.remove();
    },
  };
}

/** A hash tag of this test's own: its keys share a slot and no other test's. */
export function tag() {
  return `{t${randomBytes(6).toString("hex")}}`;
}

/** The skip reason of a test of a command, option or RL.ALL rule the server does not
 * have yet ("unknown command", "unknown option", "unknown rule"), or undefined: any
 * other error fails the test. */
export function notYet(err, what) {
  const text = err instanceof Error ? err.message : String(err);
  if (/unknown (command|option|rule)/i.test(text)) {
    return `${what}: the server answered "${text.split("\n")[0].slice(0, 120)}"`;
  }
  return undefined;
}

/** A logger that keeps what it was told. */
export function memoryLogger() {
  const lines = { warn: [], error: [] };
  return { warn: (m) => lines.warn.push(m), error: (m) => lines.error.push(m), lines };
}

/** Listen on a free loopback port; the base URL. */
export function listen(server) {
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(`http://127.0.0.1:${server.address().port}`)));
}

/** The code blocks (```js, and ```ts) of the section of docs/clients.md headed "Node",
 * and of the subsections headed "Node" in other sections (as "Local budgets" has one
 * per package), with their first lines and languages. */
export function nodeBlocks() {
  const lines = readFileSync(join(REPO, "docs", "clients.md"), "utf8").split("\n");
  const blocks = [];
  let inSection = false;
  let inSubsection = false;
  let open = null;
  lines.forEach((line, i) => {
    if (open === null && /^## /.test(line)) {
      inSection = /^## .*\bNode\b/.test(line) && !/Go\b/.test(line);
      inSubsection = false;
    } else if (open === null && /^### /.test(line)) inSubsection = /^### Node\b/.test(line);
    const inNode = inSection || inSubsection;
    if (!inNode && open === null) return;
    const fence = open === null && /^```(js|javascript|mjs|ts|typescript)\s*$/.exec(line.trim());
    if (fence) open = { line: i + 1, lang: /^t/.test(fence[1]) ? "ts" : "js", text: [] };
    else if (open !== null && line.trim() === "```") {
      blocks.push({ line: open.line, lang: open.lang, code: open.text.join("\n") });
      open = null;
    } else if (open !== null) open.text.push(line);
  });
  return blocks;
}
