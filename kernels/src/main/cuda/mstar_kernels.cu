// The one translation unit nvcc turns into mstar_kernels.fatbin: each op family lives in its own file.
#include "elementwise.cu"
#include "norm.cu"
#include "rope.cu"
#include "pages.cu"
#include "attention_decode.cu"
#include "attention_prefill.cu"
#include "attention_prefill_mma.cu"
#include "sampling.cu"
