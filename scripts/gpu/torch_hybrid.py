"""The PyTorch peer of the harness's hybrid tables (GpuHarness --hybrid-perf), on the same GPU in the same run, at
Bamba-9B's geometry cut to the engine rows' layer count (attention at layers 9, 18 and 27 of 32: 32/8 heads of 128,
half of each head rotated; the other layers Mamba2 mixers of 128 heads of 64, one group, state 128, conv 4; gated MLP
of 14336; vocabulary 128256), random bf16 weights.
Decode: a hand-written bf16 step (cuBLAS GEMMs, the conv window and the SSM state updated in place in fp32 as the
engine keeps them, SDPA over a static KV cache of the attention layers, greedy token) at batch 1 and 64 over the engine
rows' mean context, captured once in a CUDA graph and replayed, each replay followed by copying the tokens to the host.
Prefill: transformers' BambaForCausalLM (random weights) forward over one prompt of 2048 tokens, on its fast path
(mamba_ssm and causal_conv1d kernels) when this machine has it, else on its torch path; the table says which.
With the harness's perf.md as argument it prints the engine rows beside the peer, both against the engine rows' bounds."""
import re
import statistics
import sys
import time

import torch
import torch.nn.functional as F

HIDDEN, INTER, VOCAB = 4096, 14336, 128256
HEADS, KV_HEADS, HEAD_DIM, ROTARY = 32, 8, 128, 64
M_HEADS, M_HEAD_DIM, M_STATE, CONV = 128, 64, 128, 4
INNER = M_HEADS * M_HEAD_DIM
CONV_DIM = INNER + 2 * M_STATE
PROJ = INNER + CONV_DIM + M_HEADS
ATTENTION = (9, 18, 27)
CONTEXT, MEAN_EXTRA = 512, 16  # HybridBench.CONTEXT; about the tokens drawn before and during the timed steps
PREFILL = 2048
STEPS = 24


def w(*shape, std=0.02):
    return torch.randn(*shape, device="cuda", dtype=torch.bfloat16) * std


class Bamba:
    def __init__(self, layers):
        self.emb, self.head = w(VOCAB, HIDDEN), w(VOCAB, HIDDEN)
        self.norm = torch.ones(HIDDEN, device="cuda", dtype=torch.bfloat16)
        self.layers = []
        for l in range(layers):
            p = dict(n1=torch.ones(HIDDEN, device="cuda", dtype=torch.bfloat16),
                     n2=torch.ones(HIDDEN, device="cuda", dtype=torch.bfloat16),
                     gate_up=w(2 * INTER, HIDDEN), down=w(HIDDEN, INTER), attention=l in ATTENTION)
            if p["attention"]:
                p.update(qkv=w((HEADS + 2 * KV_HEADS) * HEAD_DIM, HIDDEN), o=w(HIDDEN, HEADS * HEAD_DIM))
            else:
                p.update(in_proj=w(PROJ, HIDDEN), out_proj=w(HIDDEN, INNER),
                         conv_w=torch.randn(CONV_DIM, CONV, device="cuda") * 0.3,
                         conv_b=torch.randn(CONV_DIM, device="cuda") * 0.3,
                         a=-torch.exp(torch.randn(M_HEADS, device="cuda") * 0.5 + 1.386),
                         dt_bias=torch.randn(M_HEADS, device="cuda") * 0.5 - 3.5,
                         d=torch.randn(M_HEADS, device="cuda") * 0.1 + 1,
                         gnorm=torch.ones(INNER, device="cuda", dtype=torch.bfloat16))
            self.layers.append(p)
        self.inv_freq = 1.0 / (10000.0 ** (torch.arange(0, ROTARY, 2, device="cuda", dtype=torch.float32) / ROTARY))

    def caches(self, batch, keys):
        out = []
        for p in self.layers:
            if p["attention"]:
                out.append((torch.randn(batch, KV_HEADS, keys, HEAD_DIM, device="cuda", dtype=torch.bfloat16),
                            torch.randn(batch, KV_HEADS, keys, HEAD_DIM, device="cuda", dtype=torch.bfloat16)))
            else:
                out.append((torch.randn(batch, CONV_DIM, CONV, device="cuda"),
                            torch.randn(batch, M_HEADS, M_HEAD_DIM, M_STATE, device="cuda") * 0.1))
        return out

    @staticmethod
    def rope(x, cos, sin):  # x [B, H, D]: the first ROTARY channels rotated, rotate-half layout
        r, rest = x[..., :ROTARY], x[..., ROTARY:]
        half = ROTARY // 2
        x1, x2 = r[..., :half], r[..., half:]
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin, rest), -1)

    @torch.no_grad()
    def step(self, tokens, caches, pos, cos, sin):
        b = tokens.shape[0]
        x = self.emb[tokens]
        for p, (c1, c2) in zip(self.layers, caches):
            y = F.rms_norm(x, (HIDDEN,), p["n1"], 1e-5)
            if p["attention"]:
                q, k, v = (y @ p["qkv"].t()).split([HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM], -1)
                q = self.rope(q.view(b, HEADS, HEAD_DIM), cos, sin)
                k = self.rope(k.view(b, KV_HEADS, HEAD_DIM), cos, sin)
                c1.index_copy_(2, pos, k.unsqueeze(2))
                c2.index_copy_(2, pos, v.view(b, KV_HEADS, 1, HEAD_DIM))
                o = F.scaled_dot_product_attention(q.view(b, KV_HEADS, HEADS // KV_HEADS, HEAD_DIM), c1, c2)
                y = o.reshape(b, HEADS * HEAD_DIM) @ p["o"].t()
            else:
                zxbcdt = y @ p["in_proj"].t()
                z, xbc, dt = zxbcdt.split([INNER, CONV_DIM, M_HEADS], -1)
                c1.copy_(torch.cat((c1[..., 1:], xbc.float().unsqueeze(-1)), -1))
                xbc = F.silu((c1 * p["conv_w"]).sum(-1) + p["conv_b"])
                xs, bs, cs = xbc.split([INNER, M_STATE, M_STATE], -1)
                dt = F.softplus(dt.float() + p["dt_bias"])
                xs = xs.view(b, M_HEADS, M_HEAD_DIM)
                c2.copy_(c2 * torch.exp(dt * p["a"])[..., None, None]
                         + (dt[..., None] * xs)[..., None] * bs[:, None, None, :])
                ys = (c2 @ cs[:, None, :, None]).squeeze(-1) + p["d"][:, None] * xs
                ys = ys.reshape(b, INNER) * F.silu(z.float())
                ys = F.rms_norm(ys, (INNER,), p["gnorm"].float(), 1e-5).to(torch.bfloat16)
                y = ys @ p["out_proj"].t()
            x = x + y
            y = F.rms_norm(x, (HIDDEN,), p["n2"], 1e-5)
            g, u = (y @ p["gate_up"].t()).chunk(2, -1)
            x = x + (F.silu(g) * u) @ p["down"].t()
        x = F.rms_norm(x, (HIDDEN,), self.norm, 1e-5)
        return torch.argmax(x @ self.head.t(), -1)


def decode_ms(model, batch):
    keys = CONTEXT + MEAN_EXTRA
    caches = model.caches(batch, keys + 1)
    tokens = torch.randint(0, VOCAB, (batch,), device="cuda")
    pos = torch.tensor([keys], device="cuda")
    freqs = keys * model.inv_freq
    cos, sin = freqs.cos().to(torch.bfloat16), freqs.sin().to(torch.bfloat16)
    for _ in range(2):
        model.step(tokens, caches, pos, cos, sin)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = model.step(tokens, caches, pos, cos, sin)
    for _ in range(3):
        graph.replay()
        out.cpu()
    times = []
    for _ in range(STEPS):
        start = time.perf_counter()
        graph.replay()
        out.cpu()
        times.append((time.perf_counter() - start) * 1e3)
    del caches, graph
    torch.cuda.empty_cache()
    return statistics.median(times)


def prefill(layers):
    """ms of transformers' BambaForCausalLM over one prompt, and which path it ran; None when it cannot."""
    try:
        from transformers import BambaConfig, BambaForCausalLM
        from transformers.models.bamba import modeling_bamba
    except ImportError as e:
        return None, f"transformers without Bamba ({e})"
    fast = bool(getattr(modeling_bamba, "is_fast_path_available", False))
    config = BambaConfig(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=INTER, num_hidden_layers=layers,
                         num_attention_heads=HEADS, num_key_value_heads=KV_HEADS,
                         attn_layer_indices=[l for l in ATTENTION if l < layers], mamba_n_heads=M_HEADS,
                         mamba_d_head=M_HEAD_DIM, mamba_n_groups=1, mamba_d_state=M_STATE, mamba_d_conv=CONV,
                         mamba_expand=2, mamba_chunk_size=256, max_position_embeddings=8192, tie_word_embeddings=False,
                         rms_norm_eps=1e-5)
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        model = BambaForCausalLM(config).eval()
    torch.set_default_dtype(torch.float32)
    ids = torch.randint(0, VOCAB, (1, PREFILL), device="cuda")
    times = []
    with torch.no_grad():
        for i in range(4):
            torch.cuda.synchronize()
            start = time.perf_counter()
            try:
                model(input_ids=ids, use_cache=False, logits_to_keep=1)
            except TypeError:  # transformers before logits_to_keep
                model(input_ids=ids, use_cache=False)
            torch.cuda.synchronize()
            if i > 0:
                times.append((time.perf_counter() - start) * 1e3)
    del model
    torch.cuda.empty_cache()
    path = "fast path (mamba_ssm, causal_conv1d)" if fast else "torch path (no mamba_ssm / causal_conv1d here)"
    return statistics.median(times), f"transformers BambaForCausalLM, {path}"


def harness(path):
    text = open(path).read()
    bw = re.search(r"## Copy bandwidth[^\n]*\n\n([\d.]+) TB/s", text)
    gemm = re.search(r"## GEMM rate[^\n]*\n\n[\d.]+ µs, ([\d.]+) TFLOP/s", text)
    decode, prefill_rows = {}, []
    section = text.split("## Hybrid engine decode", 1)
    decode_text = section[1].split("\n## ", 1)[0] if len(section) == 2 else ""
    for m in re.finditer(r"^\| (\d+) \| (\d+) \| \d+ \| ([\d.]+) \|(?: [^|]* \|){4} ([\d.]+) \|", decode_text, re.M):
        decode[int(m.group(2))] = (int(m.group(1)), float(m.group(3)), float(m.group(4)))
    section = text.split("## Hybrid engine prefill", 1)
    if len(section) == 2:
        for m in re.finditer(r"^\| (\d+) \| (\d+) \| ([\d.]+) \| \d+ \| ([\d.]+) \|", section[1], re.M):
            prefill_rows.append((int(m.group(1)), int(m.group(2)), float(m.group(3)), float(m.group(4))))
    return (float(bw.group(1)) if bw else None), (float(gemm.group(1)) if gemm else None), decode, prefill_rows


def main():
    bw, gemm, decode, prefill_rows = harness(sys.argv[1]) if len(sys.argv) > 1 else (None, None, {}, [])
    layers = next(iter(decode.values()))[0] if decode else prefill_rows[0][0] if prefill_rows else 32
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, Bamba-9B geometry, {layers} layers")
    print("\n## Hybrid decode: the engine against a hand-written PyTorch step (bf16, CUDA graph)\n")
    print("| batch | bound ms | engine ms/step | engine of bound | torch ms/step | torch of bound | torch / engine time |")
    print("|---|---|---|---|---|---|---|")
    model = Bamba(layers)
    for batch in (1, 64):
        ms = decode_ms(model, batch)
        row = decode.get(batch)
        if row:
            _, engine_ms, bound = row
            print(f"| {batch} | {bound:.2f} | {engine_ms:.2f} | {100 * bound / engine_ms:.0f}% | {ms:.2f} "
                  f"| {100 * bound / ms:.0f}% | {ms / engine_ms:.2f} |")
        else:
            print(f"| {batch} | - | - | - | {ms:.2f} | - | - |")
    del model
    torch.cuda.empty_cache()
    try:
        ms, how = prefill(layers)
    except Exception as e:  # report the decode rows whatever became of the prefill
        ms, how = None, f"transformers BambaForCausalLM, which failed: {type(e).__name__}: {e}"
    print(f"\n## Hybrid prefill ({PREFILL} tokens): the engine against {how}\n")
    print(f"| engine ms | engine TFLOP/s | torch ms | torch TFLOP/s | GEMM rate TFLOP/s | engine of it | torch of it |")
    print("|---|---|---|---|---|---|---|")
    if prefill_rows:
        _, _, engine_ms, teraflop = prefill_rows[0]
        rate = lambda t: teraflop / (t / 1e3)
        frac = lambda t: f"{100 * rate(t) / gemm:.0f}%" if gemm and t else "-"
        torch_cells = f"{ms:.1f} | {rate(ms):.0f}" if ms else "- | -"
        print(f"| {engine_ms:.1f} | {rate(engine_ms):.0f} | {torch_cells} | {gemm if gemm else '-'} "
              f"| {frac(engine_ms)} | {frac(ms)} |")
    else:
        print(f"| - | - | {f'{ms:.1f}' if ms else '-'} | - | {gemm if gemm else '-'} | - | - |")


if __name__ == "__main__":
    main()
