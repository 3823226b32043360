"""The PyTorch peer of the harness's prefill tables (GpuHarness --prefill-perf), on the same GPU in the same
run: the bf16 GEMM rate (8192^3 torch.matmul), flash SDPA alone on the prefill attention geometry
(32 query / 8 KV heads of 128, causal), and a plain forward of Llama-3-8B's geometry (32 layers, random
bf16 weights, cuBLAS GEMMs, flash SDPA, logits of each prompt's last token) over the same batches of
prompts. With the harness's perf.md as argument it also prints the engine against the peer and both
against the GEMM rate: FLOPs per prompt token (the weight GEMMs plus the causal attention products) times
tokens/s over the measured GEMM rate."""
import re
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from torch_timing import median_ms

HIDDEN, INTER, LAYERS, HEADS, KV_HEADS, HEAD_DIM, VOCAB = 4096, 14336, 32, 32, 8, 128, 128256
CASES = [(512, 16), (2048, 4), (16384, 1)]  # (prompt tokens, prompts): GpuHarness.PREFILL_CASES


def gemm_tflops():
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    return 2 * 8192 ** 3 / median_ms(lambda: a @ b, 3, 15) / 1e9


def attention_flops(tokens, prompts):
    return prompts * 4.0 * HEADS * HEAD_DIM * tokens * (tokens + 1) / 2


def sdpa_ms(tokens, prompts):
    q = torch.randn(prompts, HEADS, tokens, HEAD_DIM, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(prompts, KV_HEADS, tokens, HEAD_DIM, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    k, v = k.repeat_interleave(HEADS // KV_HEADS, 1), v.repeat_interleave(HEADS // KV_HEADS, 1)
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        return median_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))


def gqa_flash(q, k, v):
    """Flash SDPA with grouped KV heads; repeats K/V for a torch whose flash kernel refuses enable_gqa."""
    global GQA_NATIVE
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        if GQA_NATIVE:
            try:
                return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            except RuntimeError as e:
                GQA_NATIVE = False
                print(f"flash SDPA refused enable_gqa ({str(e).splitlines()[0]}); repeating K/V", flush=True)
        rep = q.shape[1] // k.shape[1]
        return F.scaled_dot_product_attention(q, k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1),
                                              is_causal=True)


GQA_NATIVE = True


class Llama:
    def __init__(self):
        def w(*shape):
            return torch.randn(*shape, device="cuda", dtype=torch.bfloat16) * 0.02

        self.emb = w(VOCAB, HIDDEN)
        self.head = w(VOCAB, HIDDEN)
        self.norm = torch.ones(HIDDEN, device="cuda", dtype=torch.bfloat16)
        self.layers = [dict(qkv=w((HEADS + 2 * KV_HEADS) * HEAD_DIM, HIDDEN), o=w(HIDDEN, HIDDEN),
                            gate_up=w(2 * INTER, HIDDEN), down=w(HIDDEN, INTER),
                            n1=torch.ones(HIDDEN, device="cuda", dtype=torch.bfloat16),
                            n2=torch.ones(HIDDEN, device="cuda", dtype=torch.bfloat16)) for _ in range(LAYERS)]
        inv = 1.0 / (500000.0 ** (torch.arange(0, HEAD_DIM, 2, device="cuda", dtype=torch.float32) / HEAD_DIM))
        self.inv_freq = inv

    def rope(self, x, cos, sin):  # x [B, H, T, D], rotate-half layout
        x1, x2 = x[..., : HEAD_DIM // 2], x[..., HEAD_DIM // 2:]
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), -1)

    @torch.no_grad()
    def forward(self, tokens):
        b, t = tokens.shape
        ang = torch.arange(t, device="cuda", dtype=torch.float32)[:, None] * self.inv_freq[None, :]
        cos, sin = ang.cos().to(torch.bfloat16), ang.sin().to(torch.bfloat16)
        x = self.emb[tokens]
        for p in self.layers:
            h = F.rms_norm(x, (HIDDEN,), p["n1"], 1e-5)
            qkv = h @ p["qkv"].t()
            q, k, v = qkv.split([HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM], -1)
            q = self.rope(q.view(b, t, HEADS, HEAD_DIM).transpose(1, 2), cos, sin)
            k = self.rope(k.view(b, t, KV_HEADS, HEAD_DIM).transpose(1, 2), cos, sin)
            v = v.view(b, t, KV_HEADS, HEAD_DIM).transpose(1, 2)
            a = gqa_flash(q, k, v)
            x = x + a.transpose(1, 2).reshape(b, t, HIDDEN) @ p["o"].t()
            h = F.rms_norm(x, (HIDDEN,), p["n2"], 1e-5)
            g, u = (h @ p["gate_up"].t()).chunk(2, -1)
            x = x + (F.silu(g) * u) @ p["down"].t()
        return F.rms_norm(x[:, -1], (HIDDEN,), self.norm, 1e-5) @ self.head.t()


def flops_per_token(tokens):
    linear = 2.0 * LAYERS * HIDDEN * ((HEADS + 2 * KV_HEADS) * HEAD_DIM + HIDDEN + 3 * INTER)
    return linear + LAYERS * attention_flops(tokens, 1) / tokens


def engine_rows(path):
    """{(prompt, prompts, kernel): tok/s} from the harness's engine prefill table."""
    rows = {}
    for line in open(path):
        m = re.match(r"\|\s*32\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*(tensor cores|CUDA cores)\s*\|\s*\d+\s*\|\s*[\d.]+\s*\|\s*(\d+)", line)
        if m:
            rows[(int(m.group(1)), int(m.group(2)), m.group(3))] = float(m.group(4))
    return rows


def main():
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.get_device_name(0)}", flush=True)
    rate = gemm_tflops()
    print(f"\nbf16 GEMM rate (8192^3 torch.matmul): {rate:.0f} TFLOP/s\n", flush=True)
    print("## flash SDPA, causal, 32 heads (K/V repeated from 8), d128\n")
    print("| tokens per prompt | prompts | ms | TFLOP/s |\n|---|---|---|---|")
    for tokens, prompts in CASES:
        ms = sdpa_ms(tokens, prompts)
        print(f"| {tokens} | {prompts} | {ms:.3f} | {attention_flops(tokens, prompts) / ms / 1e9:.1f} |", flush=True)
    torch.cuda.empty_cache()

    model = Llama()
    peer = {}
    print("\n## PyTorch forward, Llama-3-8B geometry, 32 layers, bf16, flash SDPA\n")
    print("| tokens per prompt | prompts | ms | tok/s | of GEMM rate |\n|---|---|---|---|---|")
    for tokens, prompts in CASES:
        ids = torch.randint(0, VOCAB, (prompts, tokens), device="cuda")
        ms = median_ms(lambda: model.forward(ids), 1, 3)
        tps = tokens * prompts / ms * 1e3
        peer[(tokens, prompts)] = tps
        print(f"| {tokens} | {prompts} | {ms:.1f} | {tps:.0f} | {tps * flops_per_token(tokens) / (rate * 1e12):.0%} |",
              flush=True)

    if len(sys.argv) > 1:
        engine = engine_rows(sys.argv[1])
        print("\n## Engine vs PyTorch peer, prefill, same call\n")
        print("| tokens per prompt | prompts | engine tok/s (tensor cores) | engine tok/s (CUDA cores) | PyTorch tok/s "
              "| engine / PyTorch | engine of GEMM rate | PyTorch of GEMM rate |\n|---|---|---|---|---|---|---|---|")
        for tokens, prompts in CASES:
            tc = engine.get((tokens, prompts, "tensor cores"), float("nan"))
            cc = engine.get((tokens, prompts, "CUDA cores"), float("nan"))
            p = peer[(tokens, prompts)]
            f = flops_per_token(tokens) / (rate * 1e12)
            print(f"| {tokens} | {prompts} | {tc:.0f} | {cc:.0f} | {p:.0f} | {tc / p:.2f} | {tc * f:.0%} | {p * f:.0%} |")


if __name__ == "__main__":
    main()
