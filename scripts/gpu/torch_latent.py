"""The PyTorch peer of the harness's MLA decode attention table (GpuHarness --latent-perf), on the same GPU in the
same run: the absorbed attention of DeepSeek-V2's latent (16 heads; scores of the 576-value query against each
576-value latent row, softmax in fp32, the weights times the rows' first 512 values) for the table's batches and key
counts, bf16, each sequence's latent rows contiguous (the peer has no page table), captured once in a CUDA graph and
replayed. Two forms, the faster reported: two batched matmuls around the softmax, and SDPA with the 16 heads as one
KV head's queries. Bytes are counted as the harness counts them (every latent row once, plus q and out) against the
copy bandwidth of the harness's table. With the harness's perf.md as argument it prints the kernel beside the peer."""
import re
import statistics
import sys

import torch
import torch.nn.functional as F

HEADS, RANK, WIDTH = 16, 512, 576
SCALE = (128 + 64) ** -0.5
CASES = [(4096, 1), (4096, 16), (4096, 64), (8192, 1), (8192, 16), (8192, 64), (16384, 1), (16384, 16), (16384, 64)]
REPLAYS = 20


def matmuls(q, kv, out):
    s = torch.matmul(q, kv.transpose(1, 2)) * SCALE
    p = torch.softmax(s.float(), -1).to(torch.bfloat16)
    out.copy_(torch.matmul(p, kv[..., :RANK]))


def sdpa(q, kv, out):
    o = F.scaled_dot_product_attention(q.unsqueeze(1), kv.unsqueeze(1), kv[..., :RANK].unsqueeze(1), scale=SCALE)
    out.copy_(o.squeeze(1))


def graphed_micros(fn, *args):
    fn(*args)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn(*args)
    for _ in range(3):
        graph.replay()
    times = []
    for _ in range(REPLAYS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times)


def harness_rows(path):
    """The copy bandwidth and {(keys, batch): µs} of the harness's MLA decode table."""
    text = open(path).read()
    bw = re.search(r"## Copy bandwidth[^\n]*\n\n([\d.]+) TB/s", text)
    rows = {}
    section = text.split("## MLA decode attention", 1)
    if len(section) == 2:
        for m in re.finditer(r"^\| (\d+) \| (\d+) \| [\d.]+ \| ([\d.]+) \|", section[1].split("\n## ", 1)[0], re.M):
            rows[(int(m.group(1)), int(m.group(2)))] = float(m.group(3))
    return (float(bw.group(1)) if bw else None), rows


def main():
    bw, engine = harness_rows(sys.argv[1]) if len(sys.argv) > 1 else (None, {})
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    bw_text = f"{bw:.2f} TB/s" if bw else "copy bandwidth"
    print(f"\n## MLA decode attention: the kernel against PyTorch (bf16, 16 heads, CUDA graphs)\n")
    print(f"| keys | batch | kernel µs | kernel of {bw_text} | torch µs | torch form | torch of {bw_text} "
          f"| torch / kernel time |")
    print("|---|---|---|---|---|---|---|---|")
    for keys, batch in CASES:
        q = torch.randn(batch, HEADS, WIDTH, device="cuda", dtype=torch.bfloat16)
        kv = torch.randn(batch, keys, WIDTH, device="cuda", dtype=torch.bfloat16)
        out = torch.empty(batch, HEADS, RANK, device="cuda", dtype=torch.bfloat16)
        best = None
        for name, fn in (("matmuls", matmuls), ("SDPA", sdpa)):
            try:
                us = graphed_micros(fn, q, kv, out)
            except Exception as e:  # a form this torch cannot run at this shape
                print(f"  ({name} at {keys} keys, batch {batch}: {type(e).__name__}: {e})", file=sys.stderr)
                continue
            if best is None or us < best[0]:
                best = (us, name)
        del q, kv, out
        torch.cuda.empty_cache()
        moved = 2.0 * batch * keys * WIDTH + 2.0 * batch * HEADS * (WIDTH + RANK)

        def frac(us):
            return f"{100 * moved / (us * 1e-6) / 1e12 / bw:.0f}%" if bw and us else "-"

        k = engine.get((keys, batch))
        torch_us = f"{best[0]:.1f}" if best else "-"
        form = best[1] if best else "failed"
        ratio = f"{best[0] / k:.2f}" if best and k else "-"
        print(f"| {keys} | {batch} | {k if k else '-'} | {frac(k)} | {torch_us} | {form} | "
              f"{frac(best[0] if best else None)} | {ratio} |")

if __name__ == "__main__":
    main()
