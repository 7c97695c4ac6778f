// docs/clients.md's table of options cannot drift: every option express-rate-limit 8 and
// @fastify/rate-limit declare (read from their own type declarations, as installed) has
// its row, and every Python name in it is the Node name in snake_case (one set of names
// for both packages).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { PKG, REPO } from "./helpers.mjs";

/** The rows of the table headed by express-rate-limit and @fastify/rate-limit. */
function table() {
  const text = readFileSync(join(REPO, "docs", "clients.md"), "utf8");
  const start = text.indexOf("| express-rate-limit 8 | @fastify/rate-limit |");
  assert.ok(start >= 0, "docs/clients.md has no table of options");
  const rows = [];
  for (const line of text.slice(start).split("\n").slice(2)) {
    if (!line.startsWith("|")) break;
    rows.push(line.split("|").slice(1, -1).map((cell) => cell.trim()));
  }
  return rows;
}

/** The names in backquotes of a cell. */
const names = (cell) => [...cell.matchAll(/`([A-Za-z_][A-Za-z0-9_]*)`/g)].map((m) => m[1]);

/** The property names of an interface or type literal in a declaration file. */
function properties(file, header) {
  const text = readFileSync(join(PKG, "node_modules", file), "utf8");
  const start = text.indexOf(header);
  assert.ok(start >= 0, `${header} in ${file}`);
  let depth = 0;
  let body = "";
  for (const ch of text.slice(text.indexOf("{", start))) {
    if (ch === "{") depth++;
    if (ch === "}") depth--;
    body += ch;
    if (depth === 0) break;
  }
  // Properties at the first level: `name?:` or `name:` at the start of a line.
  return [...body.matchAll(/^\t?\s{0,4}(\w+)\??:/gm)].map((m) => m[1]);
}

test("every option of express-rate-limit 8 has its row", () => {
  const declared = properties("express-rate-limit/dist/index.d.ts", "export type Options = {");
  assert.ok(declared.length >= 20, declared.join(","));
  const listed = new Set(table().flatMap((row) => names(row[0])));
  assert.deepEqual(declared.filter((o) => !listed.has(o)), []);
});

test("every option of @fastify/rate-limit has its row", () => {
  const file = "@fastify/rate-limit/types/index.d.ts";
  const declared = [
    ...properties(file, "interface CreateRateLimitOptions"),
    ...properties(file, "interface RateLimitOptions"),
    ...properties(file, "interface RateLimitPluginOptions"),
  ];
  assert.ok(declared.length >= 20, declared.join(","));
  const listed = new Set(table().flatMap((row) => names(row[1])));
  assert.deepEqual([...new Set(declared.filter((o) => !listed.has(o)))], []);
});

test("the Python names are the Node names in snake_case", () => {
  const snake = (name) => name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
  let pairs = 0;
  for (const row of table()) {
    for (const m of row[2].matchAll(/`(\w+)` \(`(\w+)`\)/g)) {
      assert.equal(m[2], snake(m[1]), row[2]);
      pairs++;
    }
  }
  assert.ok(pairs >= 15, `${pairs} pairs`);
});
