#!/usr/bin/env node
// A real MCP client against Memento: one official TypeScript SDK version, one transport.
//
// Connects with the SDK's own Client, checks the protocol version it negotiated, stores a
// memory with `remember`, finds it again with `recall` (by text and by keyword) and, with
// --tasks, does the same through the SDK's experimental tasks client. Prints one JSON object
// on stdout and exits 0 only when every check passed.
//
//   node --experimental-eventsource tests/node/sdk_client.mjs \
//     --sdk .tools/sdk-1.11.0 --transport streamable-http --url http://127.0.0.1:PORT/mcp \
//     --expect 2025-03-26
//   node tests/node/sdk_client.mjs --sdk .tools/sdk-1.0.4 --transport stdio \
//     --command "$PYTHON" --arg -m --arg memento --arg serve --arg --transport --arg stdio
//
// --sdk is an npm prefix folder (holding node_modules/@modelcontextprotocol/sdk): SDK versions
// conflict, so each lives in its own prefix and is loaded from there by file URL.
// --expect defaults to the SDK's own LATEST_PROTOCOL_VERSION (the version it offers).
// Transports: stdio, sse (the legacy 2024-11-05 HTTP+SSE transport), streamable-http.

import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { randomBytes } from "node:crypto";
import { pathToFileURL } from "node:url";

const TIMEOUT_MS = Number(process.env.SDK_CLIENT_TIMEOUT_MS ?? 30000);

function parseArgs(argv) {
  const opts = { args: [], tasks: false };
  for (let i = 0; i < argv.length; i++) {
    const key = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) throw new Error(`${key} needs a value`);
      return argv[++i];
    };
    switch (key) {
      case "--sdk": opts.sdk = next(); break;
      case "--transport": opts.transport = next(); break;
      case "--url": opts.url = next(); break;
      case "--command": opts.command = next(); break;
      case "--arg": opts.args.push(next()); break;
      case "--expect": opts.expect = next(); break;
      case "--tasks": opts.tasks = true; break;
      case "--label": opts.label = next(); break;
      default: throw new Error(`unknown argument ${key}`);
    }
  }
  if (!opts.sdk) throw new Error("--sdk is required");
  if (!["stdio", "sse", "streamable-http"].includes(opts.transport)) {
    throw new Error("--transport must be stdio, sse or streamable-http");
  }
  if (opts.transport === "stdio" ? !opts.command : !opts.url) {
    throw new Error(opts.transport === "stdio" ? "--command is required for stdio" : "--url is required");
  }
  return opts;
}

/** Import one module of the SDK installed under `prefix`, whatever its dist layout. */
function sdkLoader(prefix) {
  const root = resolve(prefix, "node_modules", "@modelcontextprotocol", "sdk");
  const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
  // 1.0.x ships ESM directly under dist/; later versions under dist/esm/.
  const dist = existsSync(join(root, "dist", "esm")) ? join(root, "dist", "esm") : join(root, "dist");
  const load = async (rel) => {
    const file = join(dist, rel);
    if (!existsSync(file)) return null;
    return import(pathToFileURL(file).href);
  };
  return { version: pkg.version, load };
}

function withTimeout(promise, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} timed out after ${TIMEOUT_MS} ms`)), TIMEOUT_MS);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/**
 * Watch the JSON-RPC traffic of a transport: the `initialize` request the SDK sends and the
 * result the server answers with. Client.connect() assigns transport.onmessage, so a setter
 * wraps whatever handler it installs.
 */
function sniff(transport) {
  const seen = { requested: undefined, negotiated: undefined, initId: undefined };
  const send = transport.send.bind(transport);
  transport.send = (message, ...rest) => {
    if (message && message.method === "initialize") {
      seen.initId = message.id;
      seen.requested = message.params?.protocolVersion;
    }
    return send(message, ...rest);
  };
  let handler;
  Object.defineProperty(transport, "onmessage", {
    configurable: true,
    get: () => handler,
    set: (fn) => {
      handler = fn && ((message, ...rest) => {
        if (message && seen.initId !== undefined && message.id === seen.initId && message.result) {
          seen.negotiated = message.result.protocolVersion;
        }
        return fn(message, ...rest);
      });
    },
  });
  return seen;
}

/** The JSON payload of a tool result: structuredContent where given, else the first text block. */
function payloadOf(result) {
  if (result && result.structuredContent && typeof result.structuredContent === "object") {
    return result.structuredContent;
  }
  const text = (result?.content ?? []).find((c) => c.type === "text")?.text;
  if (text === undefined) throw new Error("tool result has no text content");
  try {
    return JSON.parse(text);
  } catch {
    throw new Error(`tool result is not JSON: ${text.slice(0, 200)}`);
  }
}

function errorText(error) {
  if (error instanceof Error) return error.message;
  return typeof error === "string" ? error : JSON.stringify(error);
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const sdk = sdkLoader(opts.sdk);
  const types = await sdk.load("types.js");
  const { Client } = await sdk.load("client/index.js");
  const offered = types.LATEST_PROTOCOL_VERSION;
  const expected = opts.expect ?? offered;
  const report = {
    label: opts.label ?? `sdk-${sdk.version}/${opts.transport}`,
    sdk: sdk.version,
    transport: opts.transport,
    offered,
    expected,
    requested: null,
    negotiated: null,
    server: null,
    checks: [],
    ok: false,
  };
  const check = (name, ok, detail) => {
    report.checks.push({ name, ok: Boolean(ok), ...(detail === undefined ? {} : { detail }) });
    return Boolean(ok);
  };
  const step = async (name, fn) => {
    try {
      return await fn();
    } catch (error) {
      check(name, false, errorText(error));
      return undefined;
    }
  };

  let transport;
  if (opts.transport === "stdio") {
    const { StdioClientTransport } = await sdk.load("client/stdio.js");
    // 1.0.x passes only a few "safe" variables by default: hand the whole environment over.
    transport = new StdioClientTransport({
      command: opts.command,
      args: opts.args,
      env: { ...process.env },
      stderr: "inherit",
    });
  } else if (opts.transport === "sse") {
    if (typeof globalThis.EventSource === "undefined") {
      const mod = await import("eventsource").catch(() => null);
      if (mod) globalThis.EventSource = mod.EventSource ?? mod.default;
    }
    if (typeof globalThis.EventSource === "undefined") {
      throw new Error("no EventSource: run node 22 with --experimental-eventsource");
    }
    const { SSEClientTransport } = await sdk.load("client/sse.js");
    transport = new SSEClientTransport(new URL(opts.url));
  } else {
    const mod = await sdk.load("client/streamableHttp.js");
    if (!mod) throw new Error(`SDK ${sdk.version} has no Streamable HTTP client transport`);
    transport = new mod.StreamableHTTPClientTransport(new URL(opts.url));
  }
  const seen = sniff(transport);
  const client = new Client({ name: "memento-conformance-client", version: "1.0.0" }, { capabilities: {} });

  const connected = await step("connect", async () => {
    await withTimeout(client.connect(transport), "connect");
    return true;
  });
  if (connected) {
    check("connect", true);
    report.requested = seen.requested ?? null;
    report.negotiated = seen.negotiated ?? null;
    report.server = client.getServerVersion() ?? null;
    check("offers expected version", seen.requested === expected, `client offered ${seen.requested}`);
    check("negotiated version", seen.negotiated === expected, `server answered ${seen.negotiated}, expected ${expected}`);

    const token = `zq${randomBytes(5).toString("hex")}`;
    const content = `Conformance probe ${token}: the ${report.label} client stored this memory.`;
    const tools = await step("tools/list", () => withTimeout(client.listTools(), "tools/list"));
    if (tools) {
      const names = tools.tools.map((t) => t.name);
      check("tools/list", names.includes("remember") && names.includes("recall"), names.join(","));
    }
    const remembered = await step("remember", async () => {
      const result = await withTimeout(
        client.callTool({ name: "remember", arguments: { content, topic: "conformance", type: "fact" } }),
        "remember",
      );
      if (result.isError) throw new Error(`isError: ${JSON.stringify(result.content)}`);
      return payloadOf(result);
    });
    if (remembered) check("remember", typeof remembered.id === "string", `id ${remembered.id}`);

    const recallWith = async (name, args) => {
      const found = await step(name, async () => {
        const result = await withTimeout(client.callTool({ name: "recall", arguments: args }), name);
        if (result.isError) throw new Error(`isError: ${JSON.stringify(result.content)}`);
        return payloadOf(result);
      });
      if (found) {
        const fragments = found.fragments ?? [];
        const hit = fragments.find((f) => typeof f.content === "string" && f.content.includes(token));
        check(name, hit !== undefined, `${fragments.length} fragment(s)${hit ? `, found ${hit.id}` : ", probe missing"}`);
      }
    };
    await recallWith("recall {text}", { text: `conformance probe ${token}` });
    await recallWith("recall {keywords}", { keywords: [token] });

    if (opts.tasks) await tasksChecks(client, check, step, report);
  }
  await client.close().catch(() => {});
  report.ok = report.checks.length > 0 && report.checks.every((c) => c.ok);
  process.stdout.write(JSON.stringify(report) + "\n");
  return report.ok ? 0 : 1;
}

/** The experimental tasks client (SDK >= 1.23): a task-augmented `remember`, then its task. */
async function tasksChecks(client, check, step, report) {
  const tasksApi = client.experimental?.tasks;
  if (!check("tasks: client API present", tasksApi !== undefined, "client.experimental.tasks")) return;
  const caps = client.getServerCapabilities() ?? {};
  const advertised = Boolean(caps.tasks?.requests?.tools?.call);
  check("tasks: server advertises tasks.requests.tools.call", advertised, JSON.stringify(caps.tasks ?? null));
  const tools = await step("tasks: tools/list", () => withTimeout(client.listTools(), "tools/list"));
  const support = tools?.tools.find((t) => t.name === "remember")?.execution?.taskSupport ?? "forbidden";
  check("tasks: remember taskSupport optional|required", support === "optional" || support === "required", `taskSupport ${support}`);
  if (!advertised || !(support === "optional" || support === "required")) return;

  const token = `zq${randomBytes(5).toString("hex")}`;
  const messages = [];
  await step("tasks: callToolStream", async () => {
    const stream = tasksApi.callToolStream(
      { name: "remember", arguments: { content: `Task probe ${token}: stored through a task.`, topic: "conformance", type: "fact" } },
      undefined,
      { task: { ttl: 60000 } },
    );
    const drain = (async () => {
      for await (const message of stream) messages.push(message);
    })();
    await withTimeout(drain, "callToolStream");
  });
  const kinds = messages.map((m) => m.type);
  const created = messages.find((m) => m.type === "taskCreated");
  const final = messages.at(-1);
  check("tasks: taskCreated", created !== undefined, kinds.join(","));
  check(
    "tasks: completed with result",
    final?.type === "result" && !final.result?.isError,
    final?.type === "error" ? errorText(final.error) : kinds.join(","),
  );
  if (created) {
    const taskId = created.task.taskId;
    const task = await step("tasks: tasks/get", () => withTimeout(tasksApi.getTask(taskId), "tasks/get"));
    if (task) check("tasks: tasks/get", task.taskId === taskId && task.status === "completed", `status ${task.status}`);
    if (caps.tasks?.list) {
      const listed = await step("tasks: tasks/list", () => withTimeout(tasksApi.listTasks(), "tasks/list"));
      if (listed) check("tasks: tasks/list", listed.tasks.some((t) => t.taskId === taskId), `${listed.tasks.length} task(s)`);
    }
  }
  const found = await step("tasks: recall stored memory", async () => {
    const result = await withTimeout(client.callTool({ name: "recall", arguments: { keywords: [token] } }), "recall");
    return payloadOf(result);
  });
  if (found) {
    const hit = (found.fragments ?? []).some((f) => String(f.content).includes(token));
    check("tasks: recall stored memory", hit, hit ? "found" : "probe missing");
  }
  report.tasks = { messages: kinds };
}

main().then(
  (code) => process.exit(code),
  (error) => {
    process.stdout.write(JSON.stringify({ ok: false, fatal: errorText(error), stack: error?.stack }) + "\n");
    process.exit(2);
  },
);
