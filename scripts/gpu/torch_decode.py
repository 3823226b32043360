"""The PyTorch peer of the harness's decode table (GpuHarness --decode-perf), on the same GPU in the same run:
a hand-written bf16 decode step of Llama-3-8B's and Llama-3.2-1B's geometry (random weights, cuBLAS GEMMs,
SDPA over a static KV cache, greedy token) captured once in a CUDA graph and replayed, each replay followed by
copying the tokens to the host, as the engine's step() returns them. Every case attends over the engine row's
mean context of its timed steps (context + 16 keys). The grouped query heads of a KV head go to SDPA as that
head's queries ([batch, KV heads, group, head dim] against [batch, KV heads, keys, head dim]), so each K/V
row is read once per step, as in the engine. With the harness's perf.md as argument it prints the engine
against the peer, both against the engine row's weights+KV bound."""
import statistics
import sys
import time

import torch
import torch.nn.functional as F

GEOMETRIES = {
    "8B": dict(hidden=4096, inter=14336, layers=32, heads=32, kv=8, d=128, vocab=128256, tied=False),
    "1B": dict(hidden=2048, inter=8192, layers=16, heads=32, kv=8, d=64, vocab=128256, tied=True),
}
# (batch, context) per geometry: GpuHarness.DECODE_8B and DECODE_1B
CASES = {
    "8B": [(1, 512), (16, 512), (64, 512), (256, 512), (1, 4096), (16, 4096), (64, 4096), (1, 16384), (16, 16384)],
    "1B": [(1, 512), (64, 512), (256, 512)],
}
MEAN_EXTRA = 16  # DecodeBench: about the tokens drawn during prefill, warm-up (3) and half the timed steps (11.5)
STEPS = 24


class Llama:
    def __init__(self, g):
        self.g = g

        def w(*shape):
            return torch.randn(*shape, device="cuda", dtype=torch.bfloat16) * 0.02

        h, d = g["hidden"], g["d"]
        self.emb = w(g["vocab"], h)
        self.head = self.emb if g["tied"] else w(g["vocab"], h)
        self.norm = torch.ones(h, device="cuda", dtype=torch.bfloat16)
        self.layers = [dict(qkv=w((g["heads"] + 2 * g["kv"]) * d, h), o=w(h, g["heads"] * d),
                            gate_up=w(2 * g["inter"], h), down=w(h, g["inter"]),
                            n1=torch.ones(h, device="cuda", dtype=torch.bfloat16),
                            n2=torch.ones(h, device="cuda", dtype=torch.bfloat16)) for _ in range(g["layers"])]
        self.inv_freq = 1.0 / (500000.0 ** (torch.arange(0, d, 2, device="cuda", dtype=torch.float32) / d))

    def rope(self, x, cos, sin):  # x [B, H, D], rotate-half layout
        half = self.g["d"] // 2
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), -1)

    @torch.no_grad()
    def step(self, tokens, caches, pos, cos, sin):
        g = self.g
        b = tokens.shape[0]
        heads, kv, d, h = g["heads"], g["kv"], g["d"], g["hidden"]
        x = self.emb[tokens]
        for p, (kc, vc) in zip(self.layers, caches):
            y = F.rms_norm(x, (h,), p["n1"], 1e-5)
            q, k, v = (y @ p["qkv"].t()).split([heads * d, kv * d, kv * d], -1)
            q = self.rope(q.view(b, heads, d), cos, sin)
            kc[:, :, pos] = self.rope(k.view(b, kv, d), cos, sin)
            vc[:, :, pos] = v.view(b, kv, d)
            a = F.scaled_dot_product_attention(q.view(b, kv, heads // kv, d), kc, vc)
            x = x + a.reshape(b, heads * d) @ p["o"].t()
            y = F.rms_norm(x, (h,), p["n2"], 1e-5)
            gate, up = (y @ p["gate_up"].t()).chunk(2, -1)
            x = x + (F.silu(gate) * up) @ p["down"].t()
        return (F.rms_norm(x, (h,), self.norm, 1e-5) @ self.head.t()).argmax(-1)


def decode_ms(model, batch, context):
    g = model.g
    keys = context + MEAN_EXTRA
    caches = [(torch.randn(batch, g["kv"], keys, g["d"], device="cuda", dtype=torch.bfloat16),
               torch.randn(batch, g["kv"], keys, g["d"], device="cuda", dtype=torch.bfloat16))
              for _ in range(g["layers"])]
    tokens = torch.randint(0, g["vocab"], (batch,), device="cuda")
    pos = keys - 1
    ang = pos * model.inv_freq
    cos, sin = ang.cos().to(torch.bfloat16), ang.sin().to(torch.bfloat16)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):
            model.step(tokens, caches, pos, cos, sin)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = model.step(tokens, caches, pos, cos, sin)
    for _ in range(3):
        graph.replay()
        out.cpu()
    times = []
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(STEPS):
            graph.replay()
            out.cpu()
        times.append((time.perf_counter() - start) * 1e3 / STEPS)
    del graph, caches
    torch.cuda.empty_cache()
    return statistics.median(times)


def engine_rows(path):
    """{(model, batch, context, graphs): (ms/step, bound ms)} from the harness's engine decode table."""
    rows = {}
    for line in open(path):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 12 and cells[0] in GEOMETRIES and cells[1].isdigit():
            rows[(cells[0], int(cells[1]), int(cells[2]), cells[3])] = (float(cells[4]), float(cells[8]))
    return rows


def main():
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.get_device_name(0)}", flush=True)
    engine = engine_rows(sys.argv[1]) if len(sys.argv) > 1 else None
    # with the engine's table, only the geometries it measured (GpuHarness --decode-models)
    names = [n for n in GEOMETRIES if engine is None or any(key[0] == n for key in engine)]
    peer = {}
    print(f"\n## PyTorch decode step in one CUDA graph, bf16, random weights ({STEPS} replays, median of 3)\n")
    print("| model | batch | context | ms/step | tok/s |\n|---|---|---|---|---|")
    for name in names:
        model = Llama(GEOMETRIES[name])
        for batch, context in CASES[name]:
            ms = decode_ms(model, batch, context)
            peer[(name, batch, context)] = ms
            print(f"| {name} | {batch} | {context} | {ms:.2f} | {batch / ms * 1e3:.0f} |", flush=True)
        del model
        torch.cuda.empty_cache()

    if engine is not None:
        print("\n## Engine vs PyTorch peer, decode, same call\n")
        print("| model | batch | context | engine ms/step (graphs) | engine ms/step (eager) | PyTorch ms/step "
              "| engine / PyTorch speed | bound ms | engine of bound | PyTorch of bound |\n"
              "|---|---|---|---|---|---|---|---|---|---|")
        for (name, batch, context), p in peer.items():
            e, bound = engine.get((name, batch, context, "on"), (float("nan"), float("nan")))
            eager = engine.get((name, batch, context, "off"), (float("nan"), 0))[0]
            eager_cell = "" if eager != eager else f"{eager:.2f}"
            print(f"| {name} | {batch} | {context} | {e:.2f} | {eager_cell} | {p:.2f} | {p / e:.2f} | {bound:.2f} "
                  f"| {bound / e:.0%} | {bound / p:.0%} |")


if __name__ == "__main__":
    main()
