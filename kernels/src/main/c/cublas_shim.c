/*
 * JNI bridge from org.mstar.device.cuda.CublasNative to cuBLAS. Built with gcc against the JDK's JNI
 * headers only: libcublas is dlopen'ed at run time (the build machines have no CUDA libraries), and the
 * few prototypes used are declared here with cuBLAS's documented ABI (handles are pointers, enums ints).
 * Device addresses come from JCuda Pointer objects: nativePointer + byteOffset.
 */
#include <dlfcn.h>
#include <jni.h>
#include <stdio.h>
#include <string.h>

typedef int (*create_fn)(void **handle);
typedef int (*destroy_fn)(void *handle);
typedef int (*set_stream_fn)(void *handle, void *stream);
typedef int (*set_workspace_fn)(void *handle, void *workspace, size_t bytes);
typedef int (*get_version_fn)(void *handle, int *version);
typedef int (*gemm_ex_fn)(void *handle, int transa, int transb, int m, int n, int k, const void *alpha,
                          const void *a, int aType, int lda, const void *b, int bType, int ldb, const void *beta,
                          void *c, int cType, int ldc, int computeType, int algo);

enum { CUBLAS_COMPUTE_32F = 68, CUBLAS_GEMM_DEFAULT = -1 };

static create_fn p_create;
static destroy_fn p_destroy;
static set_stream_fn p_set_stream;
static set_workspace_fn p_set_workspace;
static get_version_fn p_get_version;
static gemm_ex_fn p_gemm_ex;

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

    char tried[2048] = "";
    jsize n = (*env)->GetArrayLength(env, candidates);
    for (jsize i = 0; i < n; i++) {
        jstring js = (jstring)(*env)->GetObjectArrayElement(env, candidates, i);
        const char *name = (*env)->GetStringUTFChars(env, js, NULL);
        void *lib = dlopen(name, RTLD_NOW | RTLD_GLOBAL);
        if (lib == NULL) {
            const char *err = dlerror();
            size_t used = strlen(tried);
            snprintf(tried + used, sizeof tried - used, "%s%s", used ? "; " : "", err ? err : name);
            (*env)->ReleaseStringUTFChars(env, js, name);
            continue;
        }
        p_create = (create_fn)dlsym(lib, "cublasCreate_v2");
        p_destroy = (destroy_fn)dlsym(lib, "cublasDestroy_v2");
        p_set_stream = (set_stream_fn)dlsym(lib, "cublasSetStream_v2");
        p_set_workspace = (set_workspace_fn)dlsym(lib, "cublasSetWorkspace_v2");
        p_get_version = (get_version_fn)dlsym(lib, "cublasGetVersion_v2");
        p_gemm_ex = (gemm_ex_fn)dlsym(lib, "cublasGemmEx");
        if (p_create && p_destroy && p_set_stream && p_set_workspace && p_get_version && p_gemm_ex) {
            jstring loaded = (*env)->NewStringUTF(env, name);
            (*env)->ReleaseStringUTFChars(env, js, name);
            return loaded;
        }
        size_t used = strlen(tried);
        snprintf(tried + used, sizeof tried - used, "%s%s lacks a cuBLAS symbol", used ? "; " : "", name);
        (*env)->ReleaseStringUTFChars(env, js, name);
        dlclose(lib);
    }
    char msg[2300];
    snprintf(msg, sizeof msg, "no usable libcublas found (tried: %s)", tried);
    throw_new(env, "java/lang/UnsatisfiedLinkError", msg);
    return NULL;
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
