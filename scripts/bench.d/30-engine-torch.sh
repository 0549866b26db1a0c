#!/usr/bin/env bash
# PyTorch peer for generation/builtin's BenchmarkDecode: the same model
# shapes (random weights), prompt and generation lengths, batch sizes and
# metrics, decoded with a plainly written KV cache in PyTorch (f32, no_grad,
# 2 threads, OpenBLAS). Prints Go-benchmark-format lines, then
# BenchmarkEngineVsTorch lines with engine tokens/s ÷ torch tokens/s, taking
# the engine's figures from $BENCH_OUT (bench.out) or running
# BenchmarkDecode itself when they are absent.
# Env: TROUPE_BENCH_LARGE=1 adds the Qwen3-0.6B-shaped model;
# TORCH_THREADS (default 2); OMP_WAIT_POLICY (default PASSIVE: Debian's
# torch runs elementwise ops on OpenMP threads that otherwise spin after
# each op and starve OpenBLAS's own threads on 2 cores — measured 0.57 s vs
# 4–12 s per batch-32 decode step of the 0.6B model on a busy machine).
set -uo pipefail
cd "$(dirname "$0")/../.."
py=/usr/bin/python3 # Debian's torch is for the system Python, not a pyenv shim
need=()
[ -x "$py" ] && "$py" -c 'import torch' 2>/dev/null || need+=(python3-torch)
ls /usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3 >/dev/null 2>&1 || need+=(libopenblas0-pthread)
if ((${#need[@]})); then
  echo "30-engine-torch: installing ${need[*]} with apt-get" >&2
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}"; } >&2 || {
    echo "30-engine-torch: cannot install ${need[*]}; skipped" >&2; exit 0; }
fi
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
torch_out=$(mktemp)
trap 'rm -f "$torch_out"' EXIT
TORCH_THREADS=${TORCH_THREADS:-2} "$py" - <<'PY' | tee "$torch_out"
import math, os, time, torch
torch.set_num_threads(int(os.environ["TORCH_THREADS"]))
torch.manual_seed(0)

# Same shapes as benchModels in generation/builtin/bench_test.go.
MODELS = [
    dict(name="demo", vocab=1024, d=256, ff=768, layers=4, heads=4, kv=2, hd=64, theta=1e6, prompt=32, gen=64, large=False),
    dict(name="qwen3-0.6b", vocab=151936, d=1024, ff=3072, layers=28, heads=16, kv=8, hd=128, theta=1e6, prompt=32, gen=16, large=True),
]
EPS = 1e-6

def rms(x, w):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS))

def rot_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)

class Model:
    def __init__(s, c):
        s.c = c
        d, hd = c["d"], c["hd"]
        u = lambda o, i: (torch.rand(o, i) * 2 - 1) * math.sqrt(3 / i)
        s.embed = (torch.rand(c["vocab"], d) * 2 - 1) * math.sqrt(3 / d)
        s.layers = []
        for _ in range(c["layers"]):
            s.layers.append(dict(
                inn=torch.ones(d), post=torch.ones(d), qn=torch.ones(hd), kn=torch.ones(hd),
                q=u(c["heads"] * hd, d), k=u(c["kv"] * hd, d), v=u(c["kv"] * hd, d), o=u(d, c["heads"] * hd),
                g=u(c["ff"], d), up=u(c["ff"], d), dn=u(d, c["ff"])))
        s.norm = torch.ones(d)
        s.inv = 1.0 / (c["theta"] ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))

    def new_cache(s, batch, length):
        c = s.c
        return [(torch.zeros(batch, c["kv"], length, c["hd"]), torch.zeros(batch, c["kv"], length, c["hd"])) for _ in s.layers]

    def forward(s, toks, pos0, cache):
        # toks [B, T]; cache: per layer preallocated (k, v) [B, kv, max_len, hd],
        # written in place at positions pos0..pos0+T-1 (a static KV cache).
        c = s.c
        B, T = toks.shape
        H, G, hd = c["heads"], c["kv"], c["hd"]
        rep, L = H // G, pos0 + T
        pos = torch.arange(pos0, L, dtype=torch.float64)
        fr = torch.outer(pos, s.inv)
        cos = torch.cat((fr.cos(), fr.cos()), -1).float()
        sin = torch.cat((fr.sin(), fr.sin()), -1).float()
        x = s.embed[toks]
        mask = None
        if T > 1:  # causal mask for the rep*T query rows of each kv group
            mask = torch.full((T, L), float("-inf")).triu(pos0 + 1).repeat(rep, 1)
        for i, Ly in enumerate(s.layers):
            h = rms(x, Ly["inn"])
            q = (h @ Ly["q"].T).view(B, T, H, hd).transpose(1, 2)
            k = (h @ Ly["k"].T).view(B, T, G, hd).transpose(1, 2)
            v = (h @ Ly["v"].T).view(B, T, G, hd).transpose(1, 2)
            q, k = rms(q, Ly["qn"]), rms(k, Ly["kn"])
            q = q * cos + rot_half(q) * sin
            k = k * cos + rot_half(k) * sin
            kc, vc = cache[i]
            kc[:, :, pos0:L] = k
            vc[:, :, pos0:L] = v
            # grouped-query attention without copying K/V per head
            qg = q.reshape(B, G, rep * T, hd)
            a = (qg @ kc[:, :, :L].transpose(-1, -2)) / math.sqrt(hd)
            if mask is not None:
                a = a + mask
            a = (torch.softmax(a, -1) @ vc[:, :, :L]).view(B, H, T, hd)
            x = x + a.transpose(1, 2).reshape(B, T, H * hd) @ Ly["o"].T
            h = rms(x, Ly["post"])
            x = x + (torch.nn.functional.silu(h @ Ly["g"].T) * (h @ Ly["up"].T)) @ Ly["dn"].T
        return rms(x[:, -1], s.norm) @ s.embed.T

def sample(logits):
    lp = torch.log_softmax(logits, -1)
    t = torch.multinomial(lp.exp(), 1)
    return t, lp.gather(-1, t)

large = os.environ.get("TROUPE_BENCH_LARGE") == "1"
with torch.no_grad():
    for c in MODELS:
        if c["large"] and not large:
            continue
        m = Model(c)
        prompt = torch.tensor([[(i * 31 + 3) % c["vocab"] for i in range(c["prompt"])]])
        for batch in (1, 32):
            reps = 3 if not c["large"] else 2
            best_tps, ttfts = 0.0, []
            for r in range(reps + 1):  # first round warms up; best of the rest
                total = c["prompt"] + c["gen"]
                pre = m.new_cache(1, total)
                cache = m.new_cache(batch, total)
                t0 = time.perf_counter()
                logits = m.forward(prompt, 0, pre)  # one prefill, shared by the batch
                tok, _ = sample(logits.expand(batch, -1))
                t1 = time.perf_counter()
                for (k, v), (pk, pv) in zip(cache, pre):  # share the prompt's KV
                    k[:, :, : c["prompt"]] = pk[:, :, : c["prompt"]]
                    v[:, :, : c["prompt"]] = pv[:, :, : c["prompt"]]
                pos = c["prompt"]
                for _ in range(c["gen"] - 1):
                    logits = m.forward(tok, pos, cache)
                    tok, _ = sample(logits)
                    pos += 1
                t2 = time.perf_counter()
                if r > 0:
                    ttfts.append((t1 - t0) * 1e3)
                    best_tps = max(best_tps, batch * (c["gen"] - 1) / (t2 - t1))
            print(f"BenchmarkTorchDecode/{c['name']}/batch{batch} 1 {best_tps:.1f} tokens/s {min(ttfts):.2f} ttft_ms", flush=True)
PY
out=${BENCH_OUT:-bench.out}
grep -q '^BenchmarkDecode/demo/batch' "$out" 2>/dev/null || {
  go test -run '^$' -bench '^BenchmarkDecode$' -benchtime 1x ./generation/builtin/ | tee -a "$torch_out" >&2
  out=$torch_out
}
# Ratio lines: engine tokens/s ÷ torch tokens/s for every size both ran.
awk '
  /^BenchmarkDecode\// { n=$1; sub(/-[0-9]+$/, "", n); sub(/^BenchmarkDecode\//, "", n); for (i=3;i<NF;i++) if ($(i+1)=="tokens/s") eng[n]=$i }
  /^BenchmarkTorchDecode\// { n=$1; sub(/^BenchmarkTorchDecode\//, "", n); for (i=3;i<NF;i++) if ($(i+1)=="tokens/s") tor[n]=$i }
  END { for (n in tor) if (n in eng && tor[n] > 0) printf "BenchmarkEngineVsTorch/%s 1 %.3f engine/torch_tokens/s\n", n, eng[n]/tor[n] }
' "$out" "$torch_out" | sort
