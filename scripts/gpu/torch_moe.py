"""The PyTorch peer of the harness's mixture-of-experts rows (GpuHarness --moe-perf writes perf-table.tsv), run on the
same GPU in the same call, joined with the engine rows into one table against a bound measured in the same call (the
row's bytes at the harness's copy bandwidth or its FLOPs at the bf16 GEMM rate of an 8192^3 torch.matmul, whichever
takes longer), as perf_table.py does for the dense models.

The peer is hand-written bf16 with random weights of the row's geometry and layer count:
- Qwen3-30B-A3B: GQA attention (32 q / 4 kv heads, head dim 128, q/k RMSNorm, RoPE), 128 experts top-8 normalised.
- DeepSeek-V2-Lite: latent attention (kv_lora_rank 512 + RoPE 64, 16 heads, q without lora); decode attends the
  latent cache with the up-projections absorbed into q and the output, prefill expands K and V per head; the first
  layer dense (10944), the others 64 routed experts top-6 plus 2 shared ones.
The experts run as a good PyTorch implementation runs them: tokens sorted by expert, then torch._grouped_mm over the
experts' runs of rows (offsets on the device, so a decode step captures into a CUDA graph), or, where this torch has no
grouped mm, one matmul per expert over its rows (counts read to the host; decode then runs without a graph). Decode
steps are captured in a CUDA graph and replayed, each replay followed by copying the tokens to the host; prefill is one
forward of the prompt.

Usage: python3 torch_moe.py OUT_DIR   (reads OUT_DIR/perf-table.tsv and OUT_DIR/perf.md; prints the table)"""
import re
import statistics
import sys
import time

import torch
import torch.nn.functional as F

from perf_table import read_rows
from torch_decode import MEAN_EXTRA, STEPS
from torch_prefill import gemm_tflops
from torch_timing import median_ms

GEOMETRIES = {
    "Qwen3-30B-A3B": dict(hidden=2048, heads=32, kv=4, d=128, experts=128, top_k=8, norm_topk=True, expert_inter=768,
                          shared_inter=0, dense_layers=0, dense_inter=0, vocab=151936, theta=1e6),
    "DeepSeek-V2-Lite": dict(hidden=2048, heads=16, kv_lora=512, rope=64, nope=128, v=128, experts=64, top_k=6,
                             norm_topk=False, expert_inter=1408, shared_inter=2 * 1408, dense_layers=1,
                             dense_inter=10944, vocab=102400, theta=1e4),
}


def grouped_mm_works():
    """Whether this torch has torch._grouped_mm and it runs bf16 on this GPU (two groups, one of them empty)."""
    if not hasattr(torch, "_grouped_mm"):
        return False
    try:
        a = torch.randn(16, 64, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(3, 32, 64, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
        offs = torch.tensor([8, 8, 16], device="cuda", dtype=torch.int32)
        want = torch.cat((a[:8] @ b[0], a[8:] @ b[2]))
        return torch.allclose(torch._grouped_mm(a, b, offs=offs).float(), want.float(), rtol=5e-2, atol=0.5)
    except RuntimeError:
        return False


GROUPED_MM = grouped_mm_works()


def w(*shape):
    return torch.randn(*shape, device="cuda", dtype=torch.bfloat16) * 0.02


def ones(n):
    return torch.ones(n, device="cuda", dtype=torch.bfloat16)


def rope(x, cos, sin):
    """Rotate-half RoPE over the last dim of x; cos, sin broadcast against x[..., :half]."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), -1)


def experts(x, logits, p, g):
    """The routed experts of x [T, H]: softmax top-k (normalised or not), tokens sorted by expert, each expert's
    gate/up and down products over its run of rows, the weighted outputs summed back per token."""
    t, k, e = x.shape[0], g["top_k"], g["experts"]
    weights, ids = torch.softmax(logits.float(), -1).topk(k, -1)
    if g["norm_topk"]:
        weights = weights / weights.sum(-1, keepdim=True)
    flat = ids.reshape(-1)
    order = flat.argsort(stable=True)
    token = order // k
    xs = x[token]
    if GROUPED_MM:
        counts = torch.zeros(e, device="cuda", dtype=torch.int32).scatter_add_(
            0, flat, torch.ones_like(flat, dtype=torch.int32))
        offs = counts.cumsum(0, dtype=torch.int32)
        gate, up = torch._grouped_mm(xs, p["gate_up_t"], offs=offs).chunk(2, -1)
        ys = torch._grouped_mm(F.silu(gate) * up, p["down_t"], offs=offs)
    else:
        counts = torch.bincount(flat, minlength=e).tolist()
        ys = torch.empty(t * k, x.shape[1], device="cuda", dtype=torch.bfloat16)
        start = 0
        for i, n in enumerate(counts):
            if n:
                gate, up = (xs[start:start + n] @ p["gate_up"][i].t()).chunk(2, -1)
                ys[start:start + n] = (F.silu(gate) * up) @ p["down"][i].t()
                start += n
    ys = ys.float() * weights.reshape(-1)[order, None]
    return torch.zeros(t, x.shape[1], device="cuda", dtype=torch.float32).index_add_(0, token, ys).to(torch.bfloat16)


def mlp(x, gate_up, down):
    gate, up = (x @ gate_up.t()).chunk(2, -1)
    return (F.silu(gate) * up) @ down.t()


class Moe:
    def __init__(self, name, layers):
        g = dict(GEOMETRIES[name], layers=layers, name=name)
        self.g = g
        h = g["hidden"]
        self.emb = w(g["vocab"], h)
        self.head = w(g["vocab"], h)
        self.norm = ones(h)
        self.layers = []
        for i in range(layers):
            p = dict(n1=ones(h), n2=ones(h))
            if name == "Qwen3-30B-A3B":
                p.update(qkv=w((g["heads"] + 2 * g["kv"]) * g["d"], h), o=w(h, g["heads"] * g["d"]), qn=ones(g["d"]),
                         kn=ones(g["d"]))
            else:
                heads, nope, r, v, c = g["heads"], g["nope"], g["rope"], g["v"], g["kv_lora"]
                p.update(q=w(heads * (nope + r), h), kv_a=w(c + r, h), kv_norm=ones(c),
                         # kv_b's rows: per head its nope K rows, then its V rows, as the checkpoint stores them
                         kv_b=w(heads * (nope + v), c), o=w(h, heads * v))
                kv_b = p["kv_b"].view(heads, nope + v, c)
                p["w_uk"] = kv_b[:, :nope].contiguous()  # [heads, nope, c]
                p["w_uv"] = kv_b[:, nope:].transpose(1, 2).contiguous()  # [heads, c, v]
            if i < g["dense_layers"]:
                p.update(gate_up=w(2 * g["dense_inter"], h), down=w(h, g["dense_inter"]))
            else:
                e, n = g["experts"], g["expert_inter"]
                p.update(router=w(e, h), gate_up=w(e, 2 * n, h), down=w(e, h, n))
                # grouped mm takes [E, K, N] operands: the transposed views of the [E, N, K] stacks
                p["gate_up_t"], p["down_t"] = p["gate_up"].transpose(1, 2), p["down"].transpose(1, 2)
                if g["shared_inter"]:
                    p.update(shared_gate_up=w(2 * g["shared_inter"], h), shared_down=w(h, g["shared_inter"]))
            self.layers.append(p)
        d = g.get("d", g.get("rope"))
        self.inv_freq = 1.0 / (g["theta"] ** (torch.arange(0, d, 2, device="cuda", dtype=torch.float32) / d))

    def angles(self, positions):
        ang = positions.float()[:, None] * self.inv_freq[None, :]
        return ang.cos().to(torch.bfloat16), ang.sin().to(torch.bfloat16)

    def mlp(self, i, p, y):
        if i < self.g["dense_layers"]:
            return mlp(y, p["gate_up"], p["down"])
        out = experts(y, y @ p["router"].t(), p, self.g)
        if self.g["shared_inter"]:
            out = out + mlp(y, p["shared_gate_up"], p["shared_down"])
        return out

    def gqa(self, p, y, cos, sin, cache=None, pos=None):
        """Qwen3 attention of y [T, H]: prefill (cache None) over the tokens causally, decode (T = batch) over the
        static cache with the new K/V written at pos."""
        g = self.g
        t, heads, kv, d = y.shape[0], g["heads"], g["kv"], g["d"]
        q, k, v = (y @ p["qkv"].t()).split([heads * d, kv * d, kv * d], -1)
        q = rope(F.rms_norm(q.view(t, heads, d), (d,), p["qn"], 1e-6), cos[:, None], sin[:, None])
        k = rope(F.rms_norm(k.view(t, kv, d), (d,), p["kn"], 1e-6), cos[:, None], sin[:, None])
        v = v.view(t, kv, d)
        if cache is None:
            rep = heads // kv
            a = F.scaled_dot_product_attention(q.transpose(0, 1)[None],
                                               k.transpose(0, 1).repeat_interleave(rep, 0)[None],
                                               v.transpose(0, 1).repeat_interleave(rep, 0)[None], is_causal=True)
            return a[0].transpose(0, 1).reshape(t, heads * d) @ p["o"].t()
        kc, vc = cache
        kc[:, :, pos] = k
        vc[:, :, pos] = v
        # a KV head's grouped queries as its queries: each K/V row read once per step
        a = F.scaled_dot_product_attention(q.view(t, kv, heads // kv, d), kc, vc)
        return a.reshape(t, heads * d) @ p["o"].t()

    def mla(self, p, y, cos, sin, cache=None, pos=None):
        """DeepSeek-V2 latent attention of y [T, H]: prefill expands K and V per head; decode attends the latent cache
        [batch, keys, c + rope] with kv_b's K part absorbed into q and its V part applied to the output."""
        g = self.g
        t, heads, nope, r, v, c = y.shape[0], g["heads"], g["nope"], g["rope"], g["v"], g["kv_lora"]
        q = (y @ p["q"].t()).view(t, heads, nope + r)
        q_nope, q_pe = q[..., :nope], rope(q[..., nope:], cos[:, None], sin[:, None])
        kv_a = y @ p["kv_a"].t()
        latent = F.rms_norm(kv_a[:, :c], (c,), p["kv_norm"], 1e-6)
        k_pe = rope(kv_a[:, c:], cos, sin)
        scale = (nope + r) ** -0.5
        if cache is None:
            kv = (latent @ p["kv_b"].t()).view(t, heads, nope + v)
            k = torch.cat((kv[..., :nope], k_pe[:, None].expand(t, heads, r)), -1)
            qf = torch.cat((q_nope, q_pe), -1)
            a = F.scaled_dot_product_attention(qf.transpose(0, 1)[None], k.transpose(0, 1)[None],
                                               kv[..., nope:].transpose(0, 1)[None], is_causal=True, scale=scale)
            return a[0].transpose(0, 1).reshape(t, heads * v) @ p["o"].t()
        cache[:, pos] = torch.cat((latent, k_pe), -1)
        q_lat = torch.einsum("bhn,hnc->bhc", q_nope, p["w_uk"])
        qc = torch.cat((q_lat, q_pe), -1)  # [b, heads, c + r]
        # the heads as one group of queries against the one latent "head": each cached row read once per step
        o_lat = F.scaled_dot_product_attention(qc[:, None], cache[:, None], cache[:, None, :, :c], scale=scale)
        o = torch.einsum("bhc,hcv->bhv", o_lat[:, 0], p["w_uv"])
        return o.reshape(t, heads * v) @ p["o"].t()

    @torch.no_grad()
    def forward(self, tokens, positions, caches=None, pos=None):
        """Prefill (caches None): tokens [T] of one prompt, logits of the last. Decode: tokens [B], one per cached
        sequence, the greedy next tokens."""
        h = self.g["hidden"]
        cos, sin = self.angles(positions)
        attend = self.gqa if "kv" in self.g else self.mla
        x = self.emb[tokens]
        for i, p in enumerate(self.layers):
            y = F.rms_norm(x, (h,), p["n1"], 1e-6)
            x = x + attend(p, y, cos, sin, None if caches is None else caches[i], pos)
            x = x + self.mlp(i, p, F.rms_norm(x, (h,), p["n2"], 1e-6))
        last = x if caches is not None else x[-1:]
        return (F.rms_norm(last, (h,), self.norm, 1e-6) @ self.head.t()).argmax(-1)

    def caches(self, batch, keys):
        g = self.g
        if "kv" in g:
            return [(torch.randn(batch, g["kv"], keys, g["d"], device="cuda", dtype=torch.bfloat16),
                     torch.randn(batch, g["kv"], keys, g["d"], device="cuda", dtype=torch.bfloat16))
                    for _ in range(g["layers"])]
        return [torch.randn(batch, keys, g["kv_lora"] + g["rope"], device="cuda", dtype=torch.bfloat16)
                for _ in range(g["layers"])]


def decode_ms(model, batch, context):
    """One decode step over a static cache of the engine row's mean keys, in a CUDA graph when the experts allow."""
    keys = context + MEAN_EXTRA
    caches = model.caches(batch, keys)
    tokens = torch.randint(0, model.g["vocab"], (batch,), device="cuda")
    pos = keys - 1
    positions = torch.full((batch,), pos, device="cuda")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):
            model.forward(tokens, positions, caches, pos)
    torch.cuda.current_stream().wait_stream(stream)
    if GROUPED_MM:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = model.forward(tokens, positions, caches, pos)
        step = graph.replay
    else:
        graph, out = None, None

        def step():
            nonlocal out
            out = model.forward(tokens, positions, caches, pos)
    for _ in range(3):
        step()
        out.cpu()
    times = []
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(STEPS):
            step()
            out.cpu()
        times.append((time.perf_counter() - start) * 1e3 / STEPS)
    del graph, caches
    torch.cuda.empty_cache()
    return statistics.median(times)


def prefill_ms(model, prompt):
    tokens = torch.randint(0, model.g["vocab"], (prompt,), device="cuda")
    positions = torch.arange(prompt, device="cuda")
    return median_ms(lambda: model.forward(tokens, positions), 1, 3)


def main():
    out = sys.argv[1]
    rows = read_rows(f"{out}/perf-table.tsv")
    bandwidth = float(re.search(r"([\d.]+) TB/s", open(f"{out}/perf.md").read()).group(1))
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.get_device_name(0)}; experts on "
          f"{'torch._grouped_mm, decode in a CUDA graph' if GROUPED_MM else 'one matmul per expert, decode eager'}",
          flush=True)
    rate = gemm_tflops()
    print(f"copy bandwidth {bandwidth:.2f} TB/s (harness), bf16 GEMM rate {rate:.0f} TFLOP/s (8192^3 torch.matmul)",
          flush=True)
    peers = {}
    for name in dict.fromkeys(r["model"] for r in rows):
        model_name, layers = re.fullmatch(r"(\S+) \((\d+) layers\)", name).groups()
        model = Moe(model_name, int(layers))
        for r in (r for r in rows if r["model"] == name):
            batch, context, prompt = (int(r[k]) for k in ("batch", "context", "prompt"))
            ms = decode_ms(model, batch, context) if r["kind"] == "decode" else prefill_ms(model, prompt)
            peers[id(r)] = ms
            print(f"peer {name} {r['kind']} batch {batch} context {context} prompt {prompt}: {ms:.2f} ms", flush=True)
        del model
        torch.cuda.empty_cache()

    print("\n## MoE engine against the bound and the PyTorch peer, same call\n")
    print(f"Bound: the row's bytes (the weights its rows read, each sparse layer its expected distinct experts, and "
          f"its K/V) at {bandwidth:.2f} TB/s or its FLOPs at {rate:.0f} TFLOP/s, whichever is longer. ms: per step "
          "(decode) or for the prompt (prefill).\n")
    print("| model | row | engine ms | engine tok/s | bound ms | bound by | engine of bound | PyTorch ms "
          "| PyTorch of bound | engine / PyTorch speed |\n|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        engine, peer, tokens = float(r["engine_ms"]), peers[id(r)], float(r["tokens"])
        by_bytes = float(r["bytes"]) / (bandwidth * 1e12) * 1e3
        by_flops = float(r["flops"]) / (rate * 1e12) * 1e3
        bound = max(by_bytes, by_flops)
        label = (f"decode, batch {r['batch']}, context {r['context']}" if r["kind"] == "decode"
                 else f"prefill, {r['batch']} x {r['prompt']} tokens")
        print(f"| {r['model']} | {label} | {engine:.2f} | {tokens / engine * 1e3:.0f} | {bound:.2f} "
              f"| {'bandwidth' if by_bytes >= by_flops else 'GEMM rate'} | {bound / engine:.0%} | {peer:.2f} "
              f"| {bound / peer:.0%} | {peer / engine:.2f} |", flush=True)


if __name__ == "__main__":
    main()
