/*
 * JNI bridge from org.mstar.device.cuda.GraphNative to the CUDA driver's graph-edge calls, which JCuda 12.6
 * does not wrap (they take edge data, added in CUDA 12.3). Like the cuBLAS shim it is built against the JDK's
 * JNI headers only: libcuda is dlopen'ed at run time and the few types used are declared here with the
 * driver's documented ABI. Graphs and modules come as JCuda objects; their handle is nativePointer.
 */
#include <dlfcn.h>
#include <jni.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct {
    unsigned char from_port;
    unsigned char to_port;
    unsigned char type;
    unsigned char reserved[5];
} edge_data;

/* CUDA_KERNEL_NODE_PARAMS (v2): only func is read. */
typedef struct {
    void *func;
    unsigned int grid[3];
    unsigned int block[3];
    unsigned int shared_bytes;
    void **params;
    void **extra;
    void *kern;
    void *ctx;
} kernel_node_params;

enum { NODE_TYPE_KERNEL = 0, DEPENDENCY_PROGRAMMATIC = 1, PORT_PROGRAMMATIC = 1 };

typedef int (*get_edges_fn)(void *graph, void **from, void **to, edge_data *data, size_t *count);
typedef int (*edit_edges_fn)(void *graph, void *const *from, void *const *to, const edge_data *data, size_t count);
typedef int (*node_type_fn)(void *node, int *type);
typedef int (*kernel_params_fn)(void *node, kernel_node_params *params);
typedef int (*func_module_fn)(void **module, void *func);

static get_edges_fn p_get_edges;
static edit_edges_fn p_add_edges;
static edit_edges_fn p_remove_edges;
static node_type_fn p_node_type;
static kernel_params_fn p_kernel_params;
static func_module_fn p_func_module;
static jfieldID f_native_pointer;

static int check(JNIEnv *env, int status, const char *call) {
    if (status == 0) return 0;
    char msg[160];
    snprintf(msg, sizeof msg, "%s failed: CUresult %d", call, status);
    jclass c = (*env)->FindClass(env, "java/lang/IllegalStateException");
    if (c != NULL) (*env)->ThrowNew(env, c, msg);
    return -1;
}

static void *handle(JNIEnv *env, jobject object) {
    return (void *)(*env)->GetLongField(env, object, f_native_pointer);
}

/* dlopens `library` and binds the calls; returns false (throwing UnsatisfiedLinkError) when one is missing. */
JNIEXPORT jboolean JNICALL Java_org_mstar_device_cuda_GraphNative_open(JNIEnv *env, jclass cls, jstring library) {
    (void)cls;
    jclass npo = (*env)->FindClass(env, "jcuda/NativePointerObject");
    if (npo == NULL) return JNI_FALSE;
    f_native_pointer = (*env)->GetFieldID(env, npo, "nativePointer", "J");
    if (f_native_pointer == NULL) return JNI_FALSE;
    const char *name = (*env)->GetStringUTFChars(env, library, NULL);
    void *lib = dlopen(name, RTLD_NOW | RTLD_GLOBAL);
    char msg[512];
    if (lib == NULL) {
        const char *err = dlerror();
        snprintf(msg, sizeof msg, "%s", err ? err : name);
    } else {
        p_get_edges = (get_edges_fn)dlsym(lib, "cuGraphGetEdges_v2");
        p_add_edges = (edit_edges_fn)dlsym(lib, "cuGraphAddDependencies_v2");
        p_remove_edges = (edit_edges_fn)dlsym(lib, "cuGraphRemoveDependencies_v2");
        p_node_type = (node_type_fn)dlsym(lib, "cuGraphNodeGetType");
        p_kernel_params = (kernel_params_fn)dlsym(lib, "cuGraphKernelNodeGetParams_v2");
        p_func_module = (func_module_fn)dlsym(lib, "cuFuncGetModule");
        snprintf(msg, sizeof msg, "%s lacks the graph edge-data calls of CUDA 12.3", name);
    }
    (*env)->ReleaseStringUTFChars(env, library, name);
    if (p_get_edges && p_add_edges && p_remove_edges && p_node_type && p_kernel_params && p_func_module) {
        return JNI_TRUE;
    }
    jclass c = (*env)->FindClass(env, "java/lang/UnsatisfiedLinkError");
    if (c != NULL) (*env)->ThrowNew(env, c, msg);
    return JNI_FALSE;
}

/* 1 when node is a kernel node, and (module != NULL) its kernel belongs to module; 0 when not; -1 on error. */
static int kernel_of(JNIEnv *env, void *node, void *module) {
    int type = -1;
    if (check(env, p_node_type(node, &type), "cuGraphNodeGetType")) return -1;
    if (type != NODE_TYPE_KERNEL) return 0;
    if (module == NULL) return 1;
    kernel_node_params params;
    if (check(env, p_kernel_params(node, &params), "cuGraphKernelNodeGetParams_v2")) return -1;
    if (params.func == NULL) return 0; /* a library kernel (CUkernel) of cuBLAS: not ours */
    void *owner = NULL;
    if (check(env, p_func_module(&owner, params.func), "cuFuncGetModule")) return -1;
    return owner == module;
}

/*
 * Makes every plain edge from a kernel node to a kernel of `module` programmatic (fired when the upstream
 * kernel's blocks have all triggered or exited); returns how many. The module's kernels wait on that edge
 * with griddepcontrol.wait before touching memory, which restores full ordering for them.
 */
JNIEXPORT jint JNICALL Java_org_mstar_device_cuda_GraphNative_programmaticEdges(JNIEnv *env, jclass cls, jobject graph,
                                                                                jobject module) {
    (void)cls;
    void *g = handle(env, graph);
    void *mod = handle(env, module);
    size_t n = 0;
    if (check(env, p_get_edges(g, NULL, NULL, NULL, &n), "cuGraphGetEdges_v2")) return -1;
    if (n == 0) return 0;
    void **from = malloc(n * sizeof *from);
    void **to = malloc(n * sizeof *to);
    edge_data *data = calloc(n, sizeof *data);
    jint converted = -1;
    if (from == NULL || to == NULL || data == NULL) {
        check(env, 2 /* CUDA_ERROR_OUT_OF_MEMORY */, "malloc");
        goto done;
    }
    if (check(env, p_get_edges(g, from, to, data, &n), "cuGraphGetEdges_v2")) goto done;
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        const edge_data *d = &data[i];
        if (d->type != 0 || d->from_port != 0 || d->to_port != 0) continue;
        int ours = kernel_of(env, to[i], mod);
        if (ours < 0) goto done;
        int upstream = ours ? kernel_of(env, from[i], NULL) : 0;
        if (upstream < 0) goto done;
        if (ours && upstream) {
            from[kept] = from[i];
            to[kept] = to[i];
            kept++;
        }
    }
    if (kept > 0) {
        edge_data *plain = calloc(kept, sizeof *plain);
        edge_data *programmatic = calloc(kept, sizeof *programmatic);
        int failed = plain == NULL || programmatic == NULL;
        if (failed) {
            check(env, 2, "calloc");
        } else {
            for (size_t i = 0; i < kept; i++) {
                programmatic[i].from_port = PORT_PROGRAMMATIC;
                programmatic[i].type = DEPENDENCY_PROGRAMMATIC;
            }
            failed = check(env, p_remove_edges(g, from, to, plain, kept), "cuGraphRemoveDependencies_v2")
                     || check(env, p_add_edges(g, from, to, programmatic, kept), "cuGraphAddDependencies_v2");
        }
        free(plain);
        free(programmatic);
        if (failed) goto done;
    }
    converted = (jint)kept;
done:
    free(from);
    free(to);
    free(data);
    return converted;
}
