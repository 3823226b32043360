// Random inputs of the emulation checks: one seeded generator, and raw buffers of a run-time dtype (DT_F32 or DT_BF16)
// that the kernels read through load_f. Include after common.cuh; each check seeds rng at the start of main.
#pragma once
#include <random>
#include <vector>

inline std::mt19937 rng;

inline float rnd(float scale) { return scale * std::normal_distribution<float>(0.f, 1.f)(rng); }

// n elements of dtype dt as raw bytes, filled with random values of the given scale.
struct Buffer {
    int dt;
    std::vector<unsigned char> bytes;
    Buffer(int dt, size_t n, float scale) : dt(dt), bytes(n * (dt == mstar::DT_BF16 ? 2 : 4)) {
        for (size_t i = 0; i < n; i++) mstar::store_f(bytes.data(), dt, (long long)i, rnd(scale));
    }
    void* data() { return bytes.data(); }
    float at(size_t i) const { return mstar::load_f(bytes.data(), dt, (long long)i); }
};
