#!/usr/bin/env bash
# Independent-reader check of trajectory shards: Go writes a shard
# (learner/trajectory TestWriteForExternal, build tag "integration") and
# DuckDB (npm @duckdb/node-api, installed into .cache/npm) must read back
# the same row count, texts, list lengths, sums, rewards and timestamps.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
npmdir="$root/.cache/npm"
if [ ! -d "$npmdir/node_modules/@duckdb/node-api" ]; then
  mkdir -p "$npmdir"
  npm install --prefix "$npmdir" --no-audit --no-fund --loglevel=error @duckdb/node-api >&2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
TROUPE_TRAJ_EXTERNAL_DIR="$work" go test -tags integration -count=1 -run '^TestWriteForExternal$' ./learner/trajectory >&2

# The check lives next to node_modules so that ESM resolution finds DuckDB.
check="$npmdir/trajectory-check.mjs"
cat >"$check" <<'JS'
import { DuckDBInstance } from '@duckdb/node-api';
import { readFileSync } from 'node:fs';
const dir = process.argv[2];
const exp = JSON.parse(readFileSync(`${dir}/expect.json`, 'utf8'));
const db = await DuckDBInstance.create(':memory:');
const con = await db.connect();
const fail = (msg) => { console.error(`FAIL: ${msg}`); process.exit(1); };
const q = async (sql) => (await con.runAndReadAll(sql)).getRowObjects();
const glob = `'${dir}/*.parquet'`;

const meta = await q(`SELECT count(*)::BIGINT AS n, count(DISTINCT filename)::BIGINT AS files FROM read_parquet(${glob}, filename=true)`);
if (Number(meta[0].n) !== exp.rows.length) fail(`count ${meta[0].n}, want ${exp.rows.length}`);
if (Number(meta[0].files) !== 1) fail(`glob matched ${meta[0].files} files (temporary file visible?)`);

const rows = await q(`SELECT seed, role, prompt_text, completion_text,
    len(prompt_ids)::BIGINT AS prompt_len, len(completion_ids)::BIGINT AS completion_len,
    len(logprobs)::BIGINT AS logprobs_len,
    coalesce(list_sum(prompt_ids::BIGINT[]), 0)::BIGINT AS prompt_sum,
    coalesce(list_sum(logprobs::DOUBLE[]), 0)::DOUBLE AS logprobs_sum,
    reward, chosen, epoch_us(created_at)::BIGINT AS created_at_us, info
  FROM read_parquet(${glob}) ORDER BY seed`);
let checked = 0;
for (let i = 0; i < exp.rows.length; i++) {
  const e = exp.rows[i], g = rows[i];
  const where = `row seed=${e.seed}`;
  if (Number(g.seed) !== e.seed) fail(`${where}: seed ${g.seed}`);
  for (const k of ['role', 'prompt_text', 'completion_text', 'info', 'chosen']) {
    if (g[k] !== e[k]) fail(`${where}: ${k} = ${JSON.stringify(g[k])}, want ${JSON.stringify(e[k])}`);
  }
  for (const k of ['prompt_len', 'completion_len', 'logprobs_len', 'prompt_sum', 'created_at_us']) {
    if (BigInt(g[k]) !== BigInt(e[k])) fail(`${where}: ${k} = ${g[k]}, want ${e[k]}`);
  }
  if (g.reward !== e.reward) fail(`${where}: reward ${g.reward}, want ${e.reward}`);
  if (Math.abs(g.logprobs_sum - e.logprobs_sum) > 1e-6 * (1 + Math.abs(e.logprobs_sum))) fail(`${where}: logprobs sum ${g.logprobs_sum}, want ${e.logprobs_sum}`);
  checked++;
}
const agg = await q(`SELECT sum(reward)::DOUBLE AS r, sum(len(completion_ids))::BIGINT AS toks FROM read_parquet(${glob})`);
const wantR = exp.rows.reduce((a, e) => a + e.reward, 0);
const wantT = exp.rows.reduce((a, e) => a + e.completion_len, 0);
if (Math.abs(agg[0].r - wantR) > 1e-6 * Math.abs(wantR) + 1e-9) fail(`sum(reward) ${agg[0].r}, want ${wantR}`);
if (Number(agg[0].toks) !== wantT) fail(`completion tokens ${agg[0].toks}, want ${wantT}`);
const codec = await q(`SELECT DISTINCT compression FROM parquet_metadata(${glob})`);
console.log(`ok: DuckDB read ${checked} rows of ${exp.shard}: texts, list lengths and sums, rewards, timestamps match; codecs ${codec.map(c => c.compression).join(',')}`);
JS
node "$check" "$work"
