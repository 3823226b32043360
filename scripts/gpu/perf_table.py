"""The one-call performance table: joins the engine rows the harness measured (GpuHarness --perf-table writes
perf-table.tsv) with a PyTorch peer run here on the same GPU in the same call, and puts both against a bound
measured in the same call: every byte a row must read at the copy bandwidth (the harness's perf.md) or every
FLOP it must do at the bf16 GEMM rate (an 8192^3 torch.matmul), whichever takes longer.

Peers, bf16, random weights of the same geometry (torch_decode.Llama):
- decode: torch_decode.decode_ms, one decode step captured in a CUDA graph (cuBLAS GEMMs, SDPA over a static cache).
- prefill: one plain forward over the batch of prompts (flash SDPA, grouped KV heads), logits of the last tokens.
- mixed: what PyTorch without a varlen batcher runs for the same work, the decode step plus a forward of the
  chunk against its cached prefix (flash SDPA with a lower-right causal mask over prefix + chunk), at the mean
  prefix of the engine's chunks.

Usage: python3 perf_table.py OUT_DIR   (reads OUT_DIR/perf-table.tsv and OUT_DIR/perf.md; prints the table)"""
import re
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.bias import causal_lower_right

import torch_decode
from torch_prefill import gemm_tflops
from torch_timing import median_ms


def attend(q, k, v, prefix):
    """q [B, H, T, D] against k, v [B, H, prefix + T, D] (heads already repeated), causal from the bottom right."""
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]):
        if prefix == 0:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=causal_lower_right(q.shape[2], k.shape[2]))


@torch.no_grad()
def forward(model, tokens, prefix_caches=None):
    """Prompts [B, T] (after a cached prefix of the caches' length, if any); logits of each prompt's last token."""
    g = model.g
    b, t = tokens.shape
    heads, kv, d, h = g["heads"], g["kv"], g["d"], g["hidden"]
    rep = heads // kv
    prefix = 0 if prefix_caches is None else prefix_caches[0][0].shape[2]
    pos = torch.arange(prefix, prefix + t, device="cuda", dtype=torch.float32)
    ang = pos[:, None] * model.inv_freq[None, :]
    cos, sin = ang.cos().to(torch.bfloat16), ang.sin().to(torch.bfloat16)
    x = model.emb[tokens]
    for i, p in enumerate(model.layers):
        y = F.rms_norm(x, (h,), p["n1"], 1e-5)
        q, k, v = (y @ p["qkv"].t()).split([heads * d, kv * d, kv * d], -1)
        q = model.rope(q.view(b, t, heads, d).transpose(1, 2), cos, sin)
        k = model.rope(k.view(b, t, kv, d).transpose(1, 2), cos, sin).repeat_interleave(rep, 1)
        v = v.view(b, t, kv, d).transpose(1, 2).repeat_interleave(rep, 1)
        if prefix:
            # the cached prefix is kept with its heads repeated, so only the chunk's own K/V are repeated per call
            k = torch.cat((prefix_caches[i][0], k), 2)
            v = torch.cat((prefix_caches[i][1], v), 2)
        a = attend(q, k, v, prefix)
        x = x + a.transpose(1, 2).reshape(b, t, heads * d) @ p["o"].t()
        y = F.rms_norm(x, (h,), p["n2"], 1e-5)
        gate, up = (y @ p["gate_up"].t()).chunk(2, -1)
        x = x + (F.silu(gate) * up) @ p["down"].t()
    return F.rms_norm(x[:, -1], (h,), model.norm, 1e-5) @ model.head.t()


def prefill_ms(model, batch, prompt):
    ids = torch.randint(0, model.g["vocab"], (batch, prompt), device="cuda")
    return median_ms(lambda: forward(model, ids), 1, 3)


def chunk_ms(model, chunk, prefix):
    g = model.g
    caches = [(torch.randn(1, g["heads"], prefix, g["d"], device="cuda", dtype=torch.bfloat16),
               torch.randn(1, g["heads"], prefix, g["d"], device="cuda", dtype=torch.bfloat16))
              for _ in range(g["layers"])]
    ids = torch.randint(0, g["vocab"], (1, chunk), device="cuda")
    ms = median_ms(lambda: forward(model, ids, caches), 1, 3)
    del caches
    torch.cuda.empty_cache()
    return ms


def read_rows(path):
    with open(path) as f:
        header = f.readline().strip().split("\t")
        return [dict(zip(header, line.strip().split("\t"))) for line in f if line.strip()]


def main():
    out = sys.argv[1]
    rows = read_rows(f"{out}/perf-table.tsv")
    bandwidth = float(re.search(r"([\d.]+) TB/s", open(f"{out}/perf.md").read()).group(1))
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.get_device_name(0)}", flush=True)
    rate = gemm_tflops()
    print(f"copy bandwidth {bandwidth:.2f} TB/s (harness), bf16 GEMM rate {rate:.0f} TFLOP/s (8192^3 torch.matmul)",
          flush=True)
    peers = {}
    for name in dict.fromkeys(r["model"] for r in rows):
        model = torch_decode.Llama(torch_decode.GEOMETRIES[name])
        for r in (r for r in rows if r["model"] == name):
            batch, context, prompt, chunk = (int(r[k]) for k in ("batch", "context", "prompt", "chunk"))
            if r["kind"] == "decode":
                ms = torch_decode.decode_ms(model, batch, context)
            elif r["kind"] == "prefill":
                ms = prefill_ms(model, batch, prompt)
            else:
                chunks = -(-prompt // chunk)
                mean_prefix = (prompt - prompt / chunks) / 2
                ms = torch_decode.decode_ms(model, batch, context) + chunk_ms(model, prompt // chunks,
                                                                              int(mean_prefix))
            peers[id(r)] = ms
            print(f"peer {name} {r['kind']} batch {batch} context {context} prompt {prompt}: {ms:.2f} ms", flush=True)
        del model
        torch.cuda.empty_cache()

    print("\n## Engine against the bound and the PyTorch peer, same call\n")
    print(f"Bound: the row's bytes at {bandwidth:.2f} TB/s or its FLOPs at {rate:.0f} TFLOP/s, whichever is longer. "
          "ms: per step (decode, mixed) or for the whole batch of prompts (prefill).\n")
    print("| model | row | engine ms | engine tok/s | bound ms | bound by | engine of bound | PyTorch ms "
          "| PyTorch of bound | engine / PyTorch speed |\n|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        engine, peer, tokens = float(r["engine_ms"]), peers[id(r)], float(r["tokens"])
        by_bytes = float(r["bytes"]) / (bandwidth * 1e12) * 1e3
        by_flops = float(r["flops"]) / (rate * 1e12) * 1e3
        bound = max(by_bytes, by_flops)
        if r["kind"] == "decode":
            label = f"decode, batch {r['batch']}, context {r['context']}"
        elif r["kind"] == "prefill":
            label = f"prefill, {r['batch']} x {r['prompt']} tokens"
        else:
            label = (f"mixed, {r['batch']} decodes at {r['context']} + {r['prompt']}-token prompt "
                     f"in {r['chunk']}-token chunks")
        print(f"| {r['model']} | {label} | {engine:.2f} | {tokens / engine * 1e3:.0f} | {bound:.2f} "
              f"| {'bandwidth' if by_bytes >= by_flops else 'GEMM rate'} | {bound / engine:.0%} | {peer:.2f} "
              f"| {bound / peer:.0%} | {peer / engine:.2f} |", flush=True)


if __name__ == "__main__":
    main()
