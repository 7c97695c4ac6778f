/**
 * One way to send a command to any of the clients the package takes: ioredis (`Redis`,
 * `Cluster`) and node-redis (`createClient`, `createCluster`), routed by the call's own
 * keys, with bulk replies as Buffers (so binary keys come back as they were sent).
 */
import { type Arg, type Key, keyBytes } from "./args.js";

// biome-ignore lint: the clients' own signatures vary by version
type AnyArgs = any[];

/** A client the package can drive: ioredis (`Redis`, `Cluster`) or node-redis
 * (`createClient`, `createCluster`), each recognised by the calls it has. */
export interface Client {
  sendCommand(...args: AnyArgs): unknown;
}

export interface Transport {
  /** Send one command; `keys` are the keys it names (as in `argv`, prefixed), for
   * routing in a Cluster. */
  send(argv: Arg[], keys: Key[]): Promise<unknown>;
  /** The primaries: each as a transport of its own (one, outside a Cluster). */
  primaries(): Promise<Transport[]>;
  /** The client's key prefix (ioredis `keyPrefix`), applied to every key. */
  readonly prefix: Buffer | undefined;
  readonly cluster: boolean;
  readonly kind: "ioredis" | "node-redis" | "function";
}

/** `(argv) => Promise<reply>`: any client's raw call, for clients the package does not know. */
export type SendCommand = (argv: Arg[]) => Promise<unknown>;

export function withPrefix(prefix: Buffer | undefined, key: Key): Key {
  if (!prefix || prefix.length === 0) return key;
  return typeof key === "string" ? prefix.toString("utf8") + key : Buffer.concat([prefix, keyBytes(key)]);
}

// biome-ignore lint: the clients are duck-typed
type Any = any;

class IoredisTransport implements Transport {
  readonly kind = "ioredis" as const;
  readonly prefix: Buffer | undefined;
  readonly cluster: boolean;
  private readonly sender: Any;
  constructor(private readonly client: Any) {
    this.cluster = client.isCluster === true;
    const p = client.options?.keyPrefix ?? client.options?.redisOptions?.keyPrefix;
    this.prefix = p ? Buffer.from(String(p), "utf8") : undefined;
    // callBuffer builds ioredis's own Command object; this view of the client gives it
    // no keyPrefix (keys are prefixed here, for every command alike) and sets the
    // command's keys, which ioredis cannot know for module commands, before it is
    // routed.
    this.sender = Object.create(client);
    this.sender.options = { ...(client.options ?? {}), keyPrefix: undefined };
  }
  send(argv: Arg[], keys: Key[]): Promise<unknown> {
    const client = this.client;
    const sender = Object.create(this.sender);
    sender.sendCommand = (command: Any, stream?: Any, node?: Any) => {
      command.keys = [...keys];
      if (keys.length === 0) command.slot = null;
      return client.sendCommand(command, stream, node);
    };
    return sender.callBuffer(String(argv[0]), ...argv.slice(1));
  }
  async primaries(): Promise<Transport[]> {
    if (!this.cluster) return [this];
    return this.client.nodes("master").map((node: Any) => new IoredisTransport(node));
  }
}

const BLOB_STRING = 36; // RESP's '$': bulk strings as Buffers
const NODE_REDIS_OPTIONS = { typeMapping: { [BLOB_STRING]: Buffer } };

function stringArgs(argv: Arg[]): (string | Buffer)[] {
  return argv.map((a) => (typeof a === "number" ? String(a) : a));
}

class NodeRedisTransport implements Transport {
  readonly kind = "node-redis" as const;
  readonly prefix = undefined;
  readonly cluster = false;
  constructor(private readonly client: Any) {}
  send(argv: Arg[]): Promise<unknown> {
    return this.client.sendCommand(stringArgs(argv), NODE_REDIS_OPTIONS);
  }
  async primaries(): Promise<Transport[]> {
    return [this];
  }
}

class NodeRedisClusterTransport implements Transport {
  readonly kind = "node-redis" as const;
  readonly prefix = undefined;
  readonly cluster = true;
  constructor(private readonly client: Any) {}
  send(argv: Arg[], keys: Key[]): Promise<unknown> {
    return this.client.sendCommand(keys.length ? keys[0] : undefined, false, stringArgs(argv), NODE_REDIS_OPTIONS);
  }
  async primaries(): Promise<Transport[]> {
    const out: Transport[] = [];
    for (const master of this.client.masters) {
      out.push(new NodeRedisTransport(await this.client.nodeClient(master)));
    }
    return out;
  }
}

class FunctionTransport implements Transport {
  readonly kind = "function" as const;
  readonly prefix = undefined;
  readonly cluster = false;
  constructor(private readonly fn: SendCommand) {}
  send(argv: Arg[]): Promise<unknown> {
    return this.fn(argv);
  }
  async primaries(): Promise<Transport[]> {
    return [this];
  }
}

/** The transport of a client: ioredis, node-redis (client or cluster), or a function. */
export function transportOf(client: Client | SendCommand | Transport): Transport {
  const c = client as Any;
  if (typeof c === "function") return new FunctionTransport(c as SendCommand);
  if (c && typeof c.send === "function" && typeof c.primaries === "function" && "kind" in c) return c as Transport;
  if (c && typeof c.callBuffer === "function" && typeof c.sendCommand === "function") return new IoredisTransport(c);
  if (c && typeof c.nodeClient === "function" && typeof c.sendCommand === "function") return new NodeRedisClusterTransport(c);
  if (c && typeof c.sendCommand === "function") return new NodeRedisTransport(c);
  throw new TypeError(
    "redis-native-ratelimit takes an ioredis client (Redis or Cluster), a node-redis client (createClient or createCluster), or a function (argv) => Promise<reply>",
  );
}

/** A reply error from the server (ioredis's ReplyError, node-redis's ErrorReply), as
 * opposed to a connection error or a timeout. */
export function isReplyError(err: unknown): err is Error {
  if (!(err instanceof Error)) return false;
  const name = err.constructor?.name ?? err.name;
  return ["ReplyError", "ErrorReply", "SimpleError", "BlobError"].includes(name) || err.name === "ReplyError";
}

/** The clients' errors for a command they never wrote: ioredis's with its offline queue
 * turned off, node-redis's closed or offline client. */
const NEVER_SENT = [/enableOfflineQueue options is false/, /^The client is (closed|offline)$/];

/** Whether a failed command certainly did not run: the server answered it with an error,
 * or it was never sent (the connection could not be opened, or the client was closed). A
 * timeout, or a connection lost once the command was sent, leaves its fate unknown. */
export function certainlyNotRun(err: unknown): boolean {
  if (isReplyError(err)) return true;
  if (!(err instanceof Error)) return false;
  if ((err as NodeJS.ErrnoException).code === "ECONNREFUSED") return true;
  return NEVER_SENT.some((p) => p.test(err.message));
}

export function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Where the package says what it did about the server (the module missing, the twins
 * in use): `console` by default. */
export interface Logger {
  warn(message: string): void;
  error(message: string): void;
}

/** The server has no such command: the module is not loaded (or is older). */
export class ModuleMissingError extends Error {
  override name = "ModuleMissingError";
  constructor(
    readonly command: string,
    readonly reply: string,
  ) {
    super(
      `the Redis server has no ${command} (${reply}): the redis-ratelimit module is not loaded ` +
        "(MODULE LOAD /path/to/libredis_ratelimit.so, or loadmodule in redis.conf), or is older than this command; " +
        'pass twins: "fallback" (or true) to run the Lua twins instead',
    );
  }
}

/** "unknown command" replies: the module (or one of its commands) is missing. */
export function isUnknownCommand(err: unknown): boolean {
  return isReplyError(err) && /unknown command/i.test(errorText(err));
}
