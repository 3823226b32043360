/*
 * JNI bridge from org.mstar.device.cuda.CublasNative to cuBLAS. Built with gcc against the JDK's JNI
 * headers only: libcublas is dlopen'ed at run time (the build machines have no CUDA libraries), and the
 * few prototypes used are declared here with cuBLAS's documented ABI (handles are pointers, enums ints).
 * Device addresses come from JCuda Pointer objects: nativePointer + byteOffset.
 */
#include <dlfcn.h>
#include <jni.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*create_fn)(void **handle);
typedef int (*destroy_fn)(void *handle);
typedef int (*set_stream_fn)(void *handle, void *stream);
typedef int (*set_workspace_fn)(void *handle, void *workspace, size_t bytes);
typedef int (*get_version_fn)(void *handle, int *version);
typedef int (*gemm_ex_fn)(void *handle, int transa, int transb, int m, int n, int k, const void *alpha,
                          const void *a, int aType, int lda, const void *b, int bType, int ldb, const void *beta,
                          void *c, int cType, int ldc, int computeType, int algo);

typedef int (*gemm_strided_batched_ex_fn)(void *handle, int transa, int transb, int m, int n, int k, const void *alpha,
                                         const void *a, int aType, int lda, long long strideA, const void *b,
                                         int bType, int ldb, long long strideB, const void *beta, void *c, int cType,
                                         int ldc, long long strideC, int batchCount, int computeType, int algo);
enum { CUBLAS_COMPUTE_32F = 68, CUBLAS_GEMM_DEFAULT = -1, CUBLAS_OP_N_CODE = 0, CUBLAS_OP_T_CODE = 1 };

static create_fn p_create;
static destroy_fn p_destroy;
static set_stream_fn p_set_stream;
static set_workspace_fn p_set_workspace;
static get_version_fn p_get_version;
static gemm_ex_fn p_gemm_ex;
static gemm_strided_batched_ex_fn p_gemm_strided_batched_ex;

static jfieldID f_native_pointer;
static jfieldID f_byte_offset;
static jclass c_pointer; /* global ref: streams are NativePointerObjects without a byte offset */

static void throw_new(JNIEnv *env, const char *cls, const char *msg) {
    jclass c = (*env)->FindClass(env, cls);
    if (c != NULL) (*env)->ThrowNew(env, c, msg);
}

static const char *status_name(int s) {
    switch (s) {
        case 0: return "CUBLAS_STATUS_SUCCESS";
        case 1: return "CUBLAS_STATUS_NOT_INITIALIZED";
        case 3: return "CUBLAS_STATUS_ALLOC_FAILED";
        case 7: return "CUBLAS_STATUS_INVALID_VALUE";
        case 8: return "CUBLAS_STATUS_ARCH_MISMATCH";
        case 11: return "CUBLAS_STATUS_MAPPING_ERROR";
        case 13: return "CUBLAS_STATUS_EXECUTION_FAILED";
        case 14: return "CUBLAS_STATUS_INTERNAL_ERROR";
        case 15: return "CUBLAS_STATUS_NOT_SUPPORTED";
        case 16: return "CUBLAS_STATUS_LICENSE_ERROR";
        default: return "CUBLAS_STATUS_UNKNOWN";
    }
}

/* Returns 0 on success, else throws IllegalStateException naming the call and the status. */
static int check(JNIEnv *env, int status, const char *call) {
    if (status == 0) return 0;
    char msg[256];
    snprintf(msg, sizeof msg, "%s failed: %s (%d)", call, status_name(status), status);
    throw_new(env, "java/lang/IllegalStateException", msg);
    return -1;
}

static void *address(JNIEnv *env, jobject pointer) {
    if (pointer == NULL) return NULL;
    jlong base = (*env)->GetLongField(env, pointer, f_native_pointer);
    jlong offset = (*env)->IsInstanceOf(env, pointer, c_pointer) ? (*env)->GetLongField(env, pointer, f_byte_offset) : 0;
    return (void *)(base + offset);
}

/* Binds the cuBLAS entry points from `lib`; says whether every one was found. */
static int cublas_bind(void *lib) {
    p_create = (create_fn)dlsym(lib, "cublasCreate_v2");
    p_destroy = (destroy_fn)dlsym(lib, "cublasDestroy_v2");
    p_set_stream = (set_stream_fn)dlsym(lib, "cublasSetStream_v2");
    p_set_workspace = (set_workspace_fn)dlsym(lib, "cublasSetWorkspace_v2");
    p_get_version = (get_version_fn)dlsym(lib, "cublasGetVersion_v2");
    p_gemm_ex = (gemm_ex_fn)dlsym(lib, "cublasGemmEx");
    p_gemm_strided_batched_ex = (gemm_strided_batched_ex_fn)dlsym(lib, "cublasGemmStridedBatchedEx");
    return p_create && p_destroy && p_set_stream && p_set_workspace && p_get_version && p_gemm_ex
           && p_gemm_strided_batched_ex;
}

/*
 * dlopens the first of `candidates` that loads and that `bind` finds complete; returns its name, or throws
 * UnsatisfiedLinkError listing what each candidate lacked.
 */
static jstring open_first(JNIEnv *env, jobjectArray candidates, int (*bind)(void *), const char *what) {
    char tried[2048] = "";
    jsize n = (*env)->GetArrayLength(env, candidates);
    for (jsize i = 0; i < n; i++) {
        jstring js = (jstring)(*env)->GetObjectArrayElement(env, candidates, i);
        const char *name = (*env)->GetStringUTFChars(env, js, NULL);
        void *lib = dlopen(name, RTLD_NOW | RTLD_GLOBAL);
        size_t used = strlen(tried);
        if (lib != NULL && bind(lib)) {
            jstring loaded = (*env)->NewStringUTF(env, name);
            (*env)->ReleaseStringUTFChars(env, js, name);
            return loaded;
        }
        if (lib == NULL) {
            const char *err = dlerror();
            snprintf(tried + used, sizeof tried - used, "%s%s", used ? "; " : "", err ? err : name);
        } else {
            snprintf(tried + used, sizeof tried - used, "%s%s lacks a symbol", used ? "; " : "", name);
            dlclose(lib);
        }
        (*env)->ReleaseStringUTFChars(env, js, name);
    }
    char msg[2300];
    snprintf(msg, sizeof msg, "no usable %s found (tried: %s)", what, tried);
    throw_new(env, "java/lang/UnsatisfiedLinkError", msg);
    return NULL;
}

/* Loads the first library of `candidates` that dlopens and exports every symbol; returns its name. */
JNIEXPORT jstring JNICALL Java_org_mstar_device_cuda_CublasNative_open(JNIEnv *env, jclass cls, jobjectArray candidates) {
    (void)cls;
    jclass npo = (*env)->FindClass(env, "jcuda/NativePointerObject");
    jclass ptr = (*env)->FindClass(env, "jcuda/Pointer");
    if (npo == NULL || ptr == NULL) return NULL;
    f_native_pointer = (*env)->GetFieldID(env, npo, "nativePointer", "J");
    f_byte_offset = (*env)->GetFieldID(env, ptr, "byteOffset", "J");
    if (f_native_pointer == NULL || f_byte_offset == NULL) return NULL;
    c_pointer = (jclass)(*env)->NewGlobalRef(env, ptr);

    return open_first(env, candidates, cublas_bind, "libcublas");
}

JNIEXPORT jlong JNICALL Java_org_mstar_device_cuda_CublasNative_create(JNIEnv *env, jclass cls) {
    (void)cls;
    void *handle = NULL;
    if (check(env, p_create(&handle), "cublasCreate_v2")) return 0;
    return (jlong)handle;
}

JNIEXPORT void JNICALL Java_org_mstar_device_cuda_CublasNative_destroy(JNIEnv *env, jclass cls, jlong handle) {
    (void)cls;
    check(env, p_destroy((void *)handle), "cublasDestroy_v2");
}

JNIEXPORT void JNICALL Java_org_mstar_device_cuda_CublasNative_setStream(JNIEnv *env, jclass cls, jlong handle, jobject stream) {
    (void)cls;
    check(env, p_set_stream((void *)handle, address(env, stream)), "cublasSetStream_v2");
}

JNIEXPORT void JNICALL Java_org_mstar_device_cuda_CublasNative_setWorkspace(JNIEnv *env, jclass cls, jlong handle,
                                                                            jobject workspace, jlong bytes) {
    (void)cls;
    check(env, p_set_workspace((void *)handle, address(env, workspace), (size_t)bytes), "cublasSetWorkspace_v2");
}

JNIEXPORT jint JNICALL Java_org_mstar_device_cuda_CublasNative_version(JNIEnv *env, jclass cls, jlong handle) {
    (void)cls;
    int v = 0;
    check(env, p_get_version((void *)handle, &v), "cublasGetVersion_v2");
    return v;
}

JNIEXPORT void JNICALL Java_org_mstar_device_cuda_CublasNative_gemmEx(JNIEnv *env, jclass cls, jlong handle, jint transa,
                                                                      jint transb, jint m, jint n, jint k, jfloat alpha,
                                                                      jobject a, jint aType, jint lda, jobject b,
                                                                      jint bType, jint ldb, jfloat beta, jobject c,
                                                                      jint cType, jint ldc) {
    (void)cls;
    float al = alpha, be = beta;
    check(env,
          p_gemm_ex((void *)handle, transa, transb, m, n, k, &al, address(env, a), aType, lda, address(env, b), bType,
                    ldb, &be, address(env, c), cType, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
          "cublasGemmEx");
}

JNIEXPORT void JNICALL Java_org_mstar_device_cuda_CublasNative_gemmStridedBatchedEx(
    JNIEnv *env, jclass cls, jlong handle, jint transa, jint transb, jint m, jint n, jint k, jfloat alpha, jobject a,
    jint aType, jint lda, jlong strideA, jobject b, jint bType, jint ldb, jlong strideB, jfloat beta, jobject c,
    jint cType, jint ldc, jlong strideC, jint batchCount) {
    (void)cls;
    float al = alpha, be = beta;
    check(env,
          p_gemm_strided_batched_ex((void *)handle, transa, transb, m, n, k, &al, address(env, a), aType, lda, strideA,
                                    address(env, b), bType, ldb, strideB, &be, address(env, c), cType, ldc, strideC,
                                    batchCount, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
          "cublasGemmStridedBatchedEx");
}

/*
 * cuBLASLt, for matmuls whose result rows must not depend on how many rows share the call. cuBLAS picks its
 * algorithm from the row count and, for few rows, often splits the K walk across blocks and sums the parts
 * afterwards: a row's bits then change with the batch it is in. A plan here fixes one algorithm per shape
 * from Lt's heuristic, keeping only algorithms that walk K whole (split-K 1, no reduction scheme).
 */
typedef struct {
    unsigned long long data[8];
} lt_algo;

typedef struct {
    lt_algo algo;
    size_t workspace_size;
    int state;
    float waves_count;
    int reserved[4];
} lt_heuristic;

typedef int (*lt_create_fn)(void **handle);
typedef int (*lt_destroy_fn)(void *handle);
typedef int (*lt_desc_create_fn)(void **desc, int computeType, int scaleType);
typedef int (*lt_destroy_obj_fn)(void *obj);
typedef int (*lt_set_attr_fn)(void *obj, int attr, const void *buf, size_t bytes);
typedef int (*lt_layout_create_fn)(void **layout, int type, unsigned long long rows, unsigned long long cols, long long ld);
typedef int (*lt_pref_create_fn)(void **pref);
typedef int (*lt_heuristic_fn)(void *handle, void *desc, void *a, void *b, void *c, void *d, void *pref, int requested,
                               lt_heuristic *results, int *returned);
typedef int (*lt_algo_get_attr_fn)(const lt_algo *algo, int attr, void *buf, size_t bytes, size_t *written);
typedef int (*lt_algo_check_fn)(void *handle, void *desc, void *a, void *b, void *c, void *d, const lt_algo *algo,
                                lt_heuristic *result);
typedef int (*lt_matmul_fn)(void *handle, void *desc, const void *alpha, const void *a, void *aDesc, const void *b,
                            void *bDesc, const void *beta, const void *c, void *cDesc, void *d, void *dDesc,
                            const lt_algo *algo, void *workspace, size_t workspaceBytes, void *stream);

enum {
    LT_DESC_TRANSA = 3,
    LT_DESC_TRANSB = 4,
    LT_PREF_MAX_WORKSPACE_BYTES = 1,
    LT_PREF_REDUCTION_SCHEME_MASK = 3,
    LT_ALGO_CONFIG_SPLITK_NUM = 2,
    LT_ALGO_CONFIG_REDUCTION_SCHEME = 3,
    LT_REDUCTION_SCHEME_NONE = 0,
    CUDA_R_32F_CODE = 0,
    LT_CANDIDATES = 16,
    LT_REQUESTED = 32
};

static lt_create_fn lt_create;
static lt_destroy_fn lt_destroy;
static lt_desc_create_fn lt_desc_create;
static lt_destroy_obj_fn lt_desc_destroy;
static lt_set_attr_fn lt_desc_set;
static lt_layout_create_fn lt_layout_create;
static lt_destroy_obj_fn lt_layout_destroy;
static lt_pref_create_fn lt_pref_create;
static lt_destroy_obj_fn lt_pref_destroy;
static lt_set_attr_fn lt_pref_set;
static lt_heuristic_fn lt_heuristic_query;
static lt_algo_get_attr_fn lt_algo_get;
static lt_algo_check_fn lt_algo_check;
static lt_matmul_fn lt_matmul;

/* One shape's descriptors, its split-free candidate algorithms in Lt's order, and the one in use. */
typedef struct {
    void *desc;
    void *a;
    void *b;
    void *c;
    int candidates;
    lt_heuristic candidate[LT_CANDIDATES];
    lt_algo algo;
    size_t workspace_size;
} lt_plan;

static int lt_bind(void *lib) {
    lt_create = (lt_create_fn)dlsym(lib, "cublasLtCreate");
    lt_destroy = (lt_destroy_fn)dlsym(lib, "cublasLtDestroy");
    lt_desc_create = (lt_desc_create_fn)dlsym(lib, "cublasLtMatmulDescCreate");
    lt_desc_destroy = (lt_destroy_obj_fn)dlsym(lib, "cublasLtMatmulDescDestroy");
    lt_desc_set = (lt_set_attr_fn)dlsym(lib, "cublasLtMatmulDescSetAttribute");
    lt_layout_create = (lt_layout_create_fn)dlsym(lib, "cublasLtMatrixLayoutCreate");
    lt_layout_destroy = (lt_destroy_obj_fn)dlsym(lib, "cublasLtMatrixLayoutDestroy");
    lt_pref_create = (lt_pref_create_fn)dlsym(lib, "cublasLtMatmulPreferenceCreate");
    lt_pref_destroy = (lt_destroy_obj_fn)dlsym(lib, "cublasLtMatmulPreferenceDestroy");
    lt_pref_set = (lt_set_attr_fn)dlsym(lib, "cublasLtMatmulPreferenceSetAttribute");
    lt_heuristic_query = (lt_heuristic_fn)dlsym(lib, "cublasLtMatmulAlgoGetHeuristic");
    lt_algo_get = (lt_algo_get_attr_fn)dlsym(lib, "cublasLtMatmulAlgoConfigGetAttribute");
    lt_algo_check = (lt_algo_check_fn)dlsym(lib, "cublasLtMatmulAlgoCheck");
    lt_matmul = (lt_matmul_fn)dlsym(lib, "cublasLtMatmul");
    return lt_create && lt_destroy && lt_desc_create && lt_desc_destroy && lt_desc_set && lt_layout_create
           && lt_layout_destroy && lt_pref_create && lt_pref_destroy && lt_pref_set && lt_heuristic_query && lt_algo_get
           && lt_algo_check && lt_matmul;
}

JNIEXPORT jstring JNICALL Java_org_mstar_device_cuda_CublasNative_ltOpen(JNIEnv *env, jclass cls, jobjectArray candidates) {
    (void)cls;
    return open_first(env, candidates, lt_bind, "libcublasLt");
}

JNIEXPORT jlong JNICALL Java_org_mstar_device_cuda_CublasNative_ltCreate(JNIEnv *env, jclass cls) {
    (void)cls;
    void *handle = NULL;
    if (check(env, lt_create(&handle), "cublasLtCreate")) return 0;
    return (jlong)handle;
}

JNIEXPORT void JNICALL Java_org_mstar_device_cuda_CublasNative_ltDestroy(JNIEnv *env, jclass cls, jlong handle) {
    (void)cls;
    check(env, lt_destroy((void *)handle), "cublasLtDestroy");
}

static void lt_plan_free(lt_plan *p) {
    if (p->a) lt_layout_destroy(p->a);
    if (p->b) lt_layout_destroy(p->b);
    if (p->c) lt_layout_destroy(p->c);
    if (p->desc) lt_desc_destroy(p->desc);
    free(p);
}

static unsigned int lt_algo_attr(const lt_algo *algo, int attr) {
    unsigned int v = 0;
    size_t written = 0;
    if (lt_algo_get(algo, attr, &v, sizeof v, &written) != 0) return 0xffffffffu;
    return v;
}

/*
 * Column-major c[m, n] = a[k, m]^T b[k, n] with fp32 compute, a transposed (the weight, stored [m rows of k]).
 * Returns the plan, or 0 after throwing when no split-free algorithm exists for the shape.
 */
JNIEXPORT jlong JNICALL Java_org_mstar_device_cuda_CublasNative_ltPlan(JNIEnv *env, jclass cls, jlong handle, jint abType,
                                                                       jint cType, jint m, jint n, jint k,
                                                                       jlong workspaceBytes) {
    (void)cls;
    lt_plan *p = calloc(1, sizeof *p);
    if (p == NULL) {
        throw_new(env, "java/lang/OutOfMemoryError", "cuBLASLt plan");
        return 0;
    }
    int opT = CUBLAS_OP_T_CODE, opN = CUBLAS_OP_N_CODE;
    unsigned long long ws = (unsigned long long)workspaceBytes;
    unsigned int schemes = LT_REDUCTION_SCHEME_NONE;
    void *pref = NULL;
    if (check(env, lt_desc_create(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F_CODE), "cublasLtMatmulDescCreate")
        || check(env, lt_desc_set(p->desc, LT_DESC_TRANSA, &opT, sizeof opT), "cublasLtMatmulDescSetAttribute")
        || check(env, lt_desc_set(p->desc, LT_DESC_TRANSB, &opN, sizeof opN), "cublasLtMatmulDescSetAttribute")
        || check(env, lt_layout_create(&p->a, abType, k, m, k), "cublasLtMatrixLayoutCreate")
        || check(env, lt_layout_create(&p->b, abType, k, n, k), "cublasLtMatrixLayoutCreate")
        || check(env, lt_layout_create(&p->c, cType, m, n, m), "cublasLtMatrixLayoutCreate")
        || check(env, lt_pref_create(&pref), "cublasLtMatmulPreferenceCreate")
        || check(env, lt_pref_set(pref, LT_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws), "cublasLtMatmulPreferenceSetAttribute")
        || check(env, lt_pref_set(pref, LT_PREF_REDUCTION_SCHEME_MASK, &schemes, sizeof schemes),
                 "cublasLtMatmulPreferenceSetAttribute")) {
        if (pref) lt_pref_destroy(pref);
        lt_plan_free(p);
        return 0;
    }
    lt_heuristic results[LT_REQUESTED];
    int returned = 0;
    int status = lt_heuristic_query((void *)handle, p->desc, p->a, p->b, p->c, p->c, pref, LT_REQUESTED, results,
                                    &returned);
    lt_pref_destroy(pref);
    if (check(env, status, "cublasLtMatmulAlgoGetHeuristic")) {
        lt_plan_free(p);
        return 0;
    }
    for (int i = 0; i < returned && p->candidates < LT_CANDIDATES; i++) {
        if (results[i].state != 0) continue;
        if (lt_algo_attr(&results[i].algo, LT_ALGO_CONFIG_SPLITK_NUM) != 1) continue;
        if (lt_algo_attr(&results[i].algo, LT_ALGO_CONFIG_REDUCTION_SCHEME) != LT_REDUCTION_SCHEME_NONE) continue;
        p->candidate[p->candidates++] = results[i];
    }
    if (p->candidates > 0) {
        p->algo = p->candidate[0].algo;
        p->workspace_size = p->candidate[0].workspace_size;
        return (jlong)p;
    }
    char msg[200];
    snprintf(msg, sizeof msg, "cuBLASLt offers no algorithm without split-K for m=%d n=%d k=%d (%d candidates)", m, n, k,
             returned);
    throw_new(env, "java/lang/IllegalStateException", msg);
    lt_plan_free(p);
    return 0;
}

JNIEXPORT jint JNICALL Java_org_mstar_device_cuda_CublasNative_ltCandidates(JNIEnv *env, jclass cls, jlong plan) {
    (void)env;
    (void)cls;
    return ((const lt_plan *)plan)->candidates;
}

/* Makes candidate `index` the plan's algorithm. */
JNIEXPORT void JNICALL Java_org_mstar_device_cuda_CublasNative_ltChoose(JNIEnv *env, jclass cls, jlong plan, jint index) {
    (void)cls;
    lt_plan *p = (lt_plan *)plan;
    if (index < 0 || index >= p->candidates) {
        throw_new(env, "java/lang/IllegalArgumentException", "no such cuBLASLt candidate");
        return;
    }
    p->algo = p->candidate[index].algo;
    p->workspace_size = p->candidate[index].workspace_size;
}

/*
 * Gives `plan` the algorithm `from` uses (a plan of the same types and weight with another row count) when
 * cuBLASLt accepts it for this shape within the workspace; returns whether it did.
 */
JNIEXPORT jboolean JNICALL Java_org_mstar_device_cuda_CublasNative_ltAdopt(JNIEnv *env, jclass cls, jlong handle,
                                                                           jlong plan, jlong from, jlong workspaceBytes) {
    (void)env;
    (void)cls;
    lt_plan *p = (lt_plan *)plan;
    const lt_plan *f = (const lt_plan *)from;
    lt_heuristic result;
    memset(&result, 0, sizeof result);
    if (lt_algo_check((void *)handle, p->desc, p->a, p->b, p->c, p->c, &f->algo, &result) != 0
        || result.workspace_size > (size_t)workspaceBytes) {
        return JNI_FALSE;
    }
    p->algo = f->algo;
    p->workspace_size = result.workspace_size;
    return JNI_TRUE;
}

JNIEXPORT void JNICALL Java_org_mstar_device_cuda_CublasNative_ltPlanFree(JNIEnv *env, jclass cls, jlong plan) {
    (void)env;
    (void)cls;
    lt_plan_free((lt_plan *)plan);
}

JNIEXPORT void JNICALL Java_org_mstar_device_cuda_CublasNative_ltMatmul(JNIEnv *env, jclass cls, jlong handle, jlong plan,
                                                                        jobject a, jobject b, jobject c,
                                                                        jobject workspace, jlong workspaceBytes,
                                                                        jobject stream) {
    (void)cls;
    const lt_plan *p = (const lt_plan *)plan;
    if ((size_t)workspaceBytes < p->workspace_size) {
        throw_new(env, "java/lang/IllegalStateException", "cuBLASLt plan needs a larger workspace");
        return;
    }
    float alpha = 1.f, beta = 0.f;
    void *out = address(env, c);
    check(env,
          lt_matmul((void *)handle, p->desc, &alpha, address(env, a), p->a, address(env, b), p->b, &beta, out, p->c, out,
                    p->c, &p->algo, address(env, workspace), (size_t)workspaceBytes, address(env, stream)),
          "cublasLtMatmul");
}

/*
 * FP8 × FP8 (W8A8) products through cuBLASLt, unscaled into fp32: the caller's epilogue applies the weight rows' and
 * the tokens' scales (exact there, and faster on an H100 than cuBLASLt's outer-vector-scaled algorithm).
 *
 * The caller's product is row-major out[M tokens, N] = x[M, K] · w[N, K]ᵀ, x and w E4M3 codes. cuBLAS is
 * column-major, so it sees each row-major buffer transposed: w's buffer is a column-major [K, N] matrix (ld K), x's
 * a [K, M] (ld K) and out's an [N, M] (ld N). cuBLAS then computes D[N, M] = op(A) · op(B) with A = w's buffer,
 * op(A) = Aᵀ ([N, K]), and B = x's buffer, op(B) = B ([K, M]): D[n, m] = Σ_k w[n, k] · x[m, k], which is out's row-major
 * [M, N]. That is the "TN" layout (A transposed, B not), the only one Hopper's FP8 tensor cores take. cuBLAS's m is
 * therefore N and its n is M: D[n, m] = Σ_k decode(A) · decode(B), accumulated and stored in fp32.
 */
enum { CUDA_R_8F_E4M3_CODE = 28 };

/* An FP8 plan: its descriptors and the algorithm cuBLASLt's heuristic ranks first for the shape. */
typedef struct {
    void *desc;
    void *a;
    void *b;
    void *d;
    lt_algo algo;
    size_t workspace_size;
} lt_fp8_plan;

static void lt_fp8_plan_free(lt_fp8_plan *p) {
    if (p->a) lt_layout_destroy(p->a);
    if (p->b) lt_layout_destroy(p->b);
    if (p->d) lt_layout_destroy(p->d);
    if (p->desc) lt_desc_destroy(p->desc);
    free(p);
}

/*
 * A plan for column-major d[m, n] = a[k, m]ᵀ · b[k, n], a and b E4M3, d fp32, in the mapping above (m the weight's
 * rows, n the tokens). Returns 0 after throwing when cuBLASLt has no algorithm.
 */
JNIEXPORT jlong JNICALL Java_org_mstar_device_cuda_CublasNative_ltFp8Plan(JNIEnv *env, jclass cls, jlong handle,
                                                                          jint m, jint n, jint k, jlong workspaceBytes) {
    (void)cls;
    lt_fp8_plan *p = calloc(1, sizeof *p);
    if (p == NULL) {
        throw_new(env, "java/lang/OutOfMemoryError", "cuBLASLt FP8 plan");
        return 0;
    }
    int opT = CUBLAS_OP_T_CODE, opN = CUBLAS_OP_N_CODE;
    unsigned long long ws = (unsigned long long)workspaceBytes;
    void *pref = NULL;
    if (check(env, lt_desc_create(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F_CODE), "cublasLtMatmulDescCreate")
        || check(env, lt_desc_set(p->desc, LT_DESC_TRANSA, &opT, sizeof opT), "cublasLtMatmulDescSetAttribute")
        || check(env, lt_desc_set(p->desc, LT_DESC_TRANSB, &opN, sizeof opN), "cublasLtMatmulDescSetAttribute")
        || check(env, lt_layout_create(&p->a, CUDA_R_8F_E4M3_CODE, k, m, k), "cublasLtMatrixLayoutCreate")
        || check(env, lt_layout_create(&p->b, CUDA_R_8F_E4M3_CODE, k, n, k), "cublasLtMatrixLayoutCreate")
        || check(env, lt_layout_create(&p->d, CUDA_R_32F_CODE, m, n, m), "cublasLtMatrixLayoutCreate")
        || check(env, lt_pref_create(&pref), "cublasLtMatmulPreferenceCreate")
        || check(env, lt_pref_set(pref, LT_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws),
                 "cublasLtMatmulPreferenceSetAttribute")) {
        if (pref) lt_pref_destroy(pref);
        lt_fp8_plan_free(p);
        return 0;
    }
    lt_heuristic result;
    int returned = 0;
    int status = lt_heuristic_query((void *)handle, p->desc, p->a, p->b, p->d, p->d, pref, 1, &result, &returned);
    lt_pref_destroy(pref);
    if (check(env, status, "cublasLtMatmulAlgoGetHeuristic (FP8)")) {
        lt_fp8_plan_free(p);
        return 0;
    }
    if (returned < 1 || result.state != 0) {
        char msg[200];
        snprintf(msg, sizeof msg, "cuBLASLt offers no FP8 algorithm for m=%d n=%d k=%d", m, n, k);
        throw_new(env, "java/lang/IllegalStateException", msg);
        lt_fp8_plan_free(p);
        return 0;
    }
    p->algo = result.algo;
    p->workspace_size = result.workspace_size;
    return (jlong)p;
}

JNIEXPORT void JNICALL Java_org_mstar_device_cuda_CublasNative_ltFp8PlanFree(JNIEnv *env, jclass cls, jlong plan) {
    (void)env;
    (void)cls;
    lt_fp8_plan_free((lt_fp8_plan *)plan);
}

/* Runs an FP8 plan: a (the weight's codes) times b (the tokens' codes) into d. */
JNIEXPORT void JNICALL Java_org_mstar_device_cuda_CublasNative_ltFp8Matmul(JNIEnv *env, jclass cls, jlong handle,
                                                                           jlong plan, jobject a, jobject b, jobject d,
                                                                           jobject workspace, jlong workspaceBytes,
                                                                           jobject stream) {
    (void)cls;
    const lt_fp8_plan *p = (const lt_fp8_plan *)plan;
    if ((size_t)workspaceBytes < p->workspace_size) {
        throw_new(env, "java/lang/IllegalStateException", "cuBLASLt FP8 plan needs a larger workspace");
        return;
    }
    float alpha = 1.f, beta = 0.f;
    void *out = address(env, d);
    check(env,
          lt_matmul((void *)handle, p->desc, &alpha, address(env, a), p->a, address(env, b), p->b, &beta, out, p->d, out,
                    p->d, &p->algo, address(env, workspace), (size_t)workspaceBytes, address(env, stream)),
          "cublasLtMatmul (FP8)");
}
