"""How the PyTorch peers time a call as GpuHarness times its own: the median of event-timed calls, and calls captured
in a CUDA graph, timed by the replay."""
import statistics

import torch

CALLS_PER_GRAPH = 10


def median_ms(fn, warmups=2, reps=7):
    for _ in range(warmups):
        fn()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def graphed_us(call, warm=1):
    """Microseconds a call of call(i), i = 0 .. CALLS_PER_GRAPH - 1 captured in one graph, over 15 replays.
    call(0) .. call(warm - 1) run first, outside the capture: first uses (library loading, workspaces, cuBLAS
    heuristics) stay out of it."""
    for i in range(warm):
        call(i)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(CALLS_PER_GRAPH):
            call(i)
    return median_ms(graph.replay, 2, 15) * 1e3 / CALLS_PER_GRAPH
