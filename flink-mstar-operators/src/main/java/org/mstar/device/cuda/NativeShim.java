package org.mstar.device.cuda;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;

/**
 * The project's JNI library (kernels/src/main/c: cuBLAS, cuBLASLt and the driver's graph-edge calls). It ships
 * in the kernels jar and is extracted and loaded once per JVM; it dlopens the CUDA libraries itself.
 */
final class NativeShim {
    static final String RESOURCE = "org/mstar/kernels/linux-x86_64/libmstar_cuda.so";

    private static boolean loaded;

    private NativeShim() {}

    static synchronized void load() {
        if (loaded) {
            return;
        }
        if (!"Linux".equals(System.getProperty("os.name")) || !"amd64".equals(System.getProperty("os.arch"))) {
            throw new IllegalStateException("the CUDA JNI shim is built for linux-x86_64 only");
        }
        System.load(extract().toString());
        loaded = true;
    }

    private static Path extract() {
        try (InputStream in = NativeShim.class.getClassLoader().getResourceAsStream(RESOURCE)) {
            if (in == null) {
                throw new IllegalStateException("This build of flink-mstar has no CUDA JNI shim (" + RESOURCE
                        + " is not on the class path: the build found no gcc, or the mstar-kernels jar is missing)."
                        + " Rebuild with gcc on the PATH to run on a GPU, or serve on the cpu device.");
            }
            Path file = Files.createTempFile("mstar_cuda", ".so");
            file.toFile().deleteOnExit();
            Files.copy(in, file, StandardCopyOption.REPLACE_EXISTING);
            return file;
        } catch (IOException e) {
            throw new UncheckedIOException("extracting " + RESOURCE, e);
        }
    }
}
