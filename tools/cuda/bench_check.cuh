// What the standalone CUDA benches of tools/cuda share: CHECK stops the bench at the first failed CUDA call, naming
// the call, its file and line and CUDA's message.
#pragma once
#include <cstdio>
#include <cstdlib>

#define CHECK(x)                                                                                      \
    do {                                                                                              \
        const cudaError_t e_ = (x);                                                                   \
        if (e_ != cudaSuccess) {                                                                      \
            std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));   \
            std::exit(1);                                                                             \
        }                                                                                             \
    } while (0)
