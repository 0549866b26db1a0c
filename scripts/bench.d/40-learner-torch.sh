#!/usr/bin/env bash
# PyTorch baseline for learner/model's BenchmarkLoRAStep: the same Qwen3-shaped
# decoder (q/k norm, RoPE rotate_half, GQA, SwiGLU, tied embeddings), LoRA r=16
# on q,k,v,o,gate,up,down written by hand (no peft), one forward+backward of the
# token-mean PPO loss, float32 on the CPU with 2 threads. Prints lines in Go's
# benchmark format so `make bench` puts both in one table.
# Set TROUPE_BENCH_LARGE=1 for the 0.6B Qwen3-shaped case too.
set -euo pipefail
PY=/usr/bin/python3 # Debian's torch is for the system python, not the pyenv shim on PATH
if ! "$PY" -c 'import torch' 2>/dev/null || ! ldconfig -p | grep -q 'libopenblas.so.0'; then
  echo "installing python3-torch and libopenblas0-pthread with apt-get" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-torch libopenblas0-pthread >&2
fi
exec "$PY" - <<'PYEOF'
import math, os, time
import torch
import torch.nn.functional as F

torch.set_num_threads(2)
torch.manual_seed(0)

def rms(x, w, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w

class LoRALinear(torch.nn.Module):
    def __init__(self, inp, out, r=16, alpha=32):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(out, inp) * 0.02, requires_grad=False)
        self.a = torch.nn.Parameter((torch.rand(r, inp) * 2 - 1) / math.sqrt(inp))
        self.b = torch.nn.Parameter(torch.zeros(out, r))
        self.s = alpha / r
    def forward(self, x):
        return x @ self.w.t() + (x @ self.a.t()) @ self.b.t() * self.s

class Model(torch.nn.Module):
    def __init__(self, L, d, H, KV, D, ff, V):
        super().__init__()
        self.H, self.KV, self.D = H, KV, D
        self.emb = torch.nn.Parameter(torch.randn(V, d) * 0.02, requires_grad=False)
        self.layers = torch.nn.ModuleList()
        for _ in range(L):
            m = torch.nn.Module()
            m.q, m.k, m.v, m.o = LoRALinear(d, H * D), LoRALinear(d, KV * D), LoRALinear(d, KV * D), LoRALinear(H * D, d)
            m.gate, m.up, m.down = LoRALinear(d, ff), LoRALinear(d, ff), LoRALinear(ff, d)
            for n, sz in [("n1", d), ("n2", d), ("qn", D), ("kn", D)]:
                setattr(m, n, torch.nn.Parameter(torch.ones(sz), requires_grad=False))
            self.layers.append(m)
        self.norm = torch.nn.Parameter(torch.ones(d), requires_grad=False)
    def forward(self, ids):
        B, S = ids.shape
        H, KV, D = self.H, self.KV, self.D
        inv = 1.0 / (1e6 ** (torch.arange(0, D, 2, dtype=torch.float32) / D))
        ang = torch.arange(S, dtype=torch.float32)[:, None] * inv[None]
        cos, sin = torch.cat([ang.cos()] * 2, -1), torch.cat([ang.sin()] * 2, -1)
        def rope(x):
            x1, x2 = x[..., : D // 2], x[..., D // 2 :]
            return x * cos + torch.cat([-x2, x1], -1) * sin
        mask = torch.full((S, S), float("-inf")).triu(1)
        h = self.emb[ids]
        for m in self.layers:
            a = rms(h, m.n1)
            q = rope(rms(m.q(a).view(B, S, H, D), m.qn).transpose(1, 2))
            k = rope(rms(m.k(a).view(B, S, KV, D), m.kn).transpose(1, 2))
            v = m.v(a).view(B, S, KV, D).transpose(1, 2)
            k = k.repeat_interleave(H // KV, 1)
            v = v.repeat_interleave(H // KV, 1)
            att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(D) + mask, -1) @ v
            h = h + m.o(att.transpose(1, 2).reshape(B, S, H * D))
            x = rms(h, m.n2)
            h = h + m.down(F.silu(m.gate(x)) * m.up(x))
        return rms(h, self.norm) @ self.emb.t()

shapes = [("demo", dict(L=4, d=256, H=4, KV=2, D=64, ff=768, V=1024), 8, 256, False),
          ("qwen3-0.6b", dict(L=28, d=1024, H=16, KV=8, D=128, ff=3072, V=151936), 1, 256, True)]
for name, cfg, B, S, large in shapes:
    if large and os.environ.get("TROUPE_BENCH_LARGE") != "1":
        continue
    model = Model(**cfg)
    ids = torch.randint(0, cfg["V"], (B, S))
    adv = torch.randn(B, 1)
    beh = torch.full((B, S - 1), -7.0)
    mask = torch.zeros(B, S - 1); mask[:, 31:] = 1
    def step():
        logits = model(ids)[:, :-1]
        logp = torch.log_softmax(logits, -1).gather(-1, ids[:, 1:, None])[..., 0]
        ratio = torch.exp(logp - logp.detach())
        w = torch.clamp(torch.exp(logp.detach() - beh), max=2.0)
        l = w * torch.maximum(-adv * ratio, -adv * torch.clamp(ratio, 0.8, 1.2))
        loss = (l * mask).sum() / mask.sum()
        model.zero_grad(set_to_none=True)
        loss.backward()
    step()  # warm-up
    n, t0 = 0, time.perf_counter()
    while n < 3 or time.perf_counter() - t0 < 1.0:
        step(); n += 1
    dt = (time.perf_counter() - t0) / n
    print(f"BenchmarkTorchLoRAStep/{name} {n} {dt*1e9:.0f} ns/op {B*S/dt:.1f} tokens/s", flush=True)
PYEOF
