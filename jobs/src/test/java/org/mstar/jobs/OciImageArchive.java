package org.mstar.jobs;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermission;
import java.security.DigestInputStream;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.zip.GZIPInputStream;
import java.util.zip.ZipEntry;
import java.util.zip.ZipInputStream;
import org.apache.commons.compress.archivers.tar.TarArchiveEntry;
import org.apache.commons.compress.archivers.tar.TarArchiveInputStream;

/**
 * An image in an OCI image layout tarball, as Jib's buildTar writes it: index.json names one manifest, which names the
 * config and the gzipped layers, every one a blob under blobs/sha256 of the size and digest its descriptor says. The
 * tarball is unpacked once into a folder.
 */
final class OciImageArchive {
    private static final ObjectMapper JSON = new ObjectMapper();

    /** One layer: its digest and the POSIX mode of every path in it ("/opt/java/bin/java" → 0755). */
    record Layer(String digest, Map<String, Integer> modes) {}

    private final Path dir;
    private final JsonNode config;
    private final List<Layer> layers = new ArrayList<>();

    private OciImageArchive(Path tarball, Path dir) throws IOException {
        this.dir = dir;
        try (TarArchiveInputStream in = new TarArchiveInputStream(Files.newInputStream(tarball))) {
            for (TarArchiveEntry e = in.getNextEntry(); e != null; e = in.getNextEntry()) {
                Path target = dir.resolve(e.getName()).normalize();
                if (e.isDirectory()) {
                    Files.createDirectories(target);
                } else {
                    Files.createDirectories(target.getParent());
                    Files.copy(in, target);
                }
            }
        }
        JsonNode index = JSON.readTree(dir.resolve("index.json").toFile());
        assertThat(index.path("manifests")).as("manifests in %s", tarball).hasSize(1);
        JsonNode manifest = JSON.readTree(verifiedBlob(index.path("manifests").get(0)).toFile());
        config = JSON.readTree(verifiedBlob(manifest.path("config")).toFile());
        for (JsonNode layer : manifest.path("layers")) {
            verifiedBlob(layer);
            String digest = layer.path("digest").asText();
            Map<String, Integer> modes = new LinkedHashMap<>();
            forEachEntry(digest, (path, entry, content) -> modes.put(path, entry.getMode() & 07777));
            layers.add(new Layer(digest, modes));
        }
    }

    static OciImageArchive unpack(Path tarball, Path dir) throws IOException {
        return new OciImageArchive(tarball, dir);
    }

    /** The image's runtime settings: Entrypoint, Env, User, WorkingDir, ExposedPorts, Labels. */
    JsonNode config() {
        return config.path("config");
    }

    List<Layer> layers() {
        return layers;
    }

    /** The layer that holds a path, which the test fails without. */
    Layer layerWith(String path) {
        return layers.stream().filter(l -> l.modes().containsKey(path)).findFirst()
                .orElseThrow(() -> new AssertionError(path + " is in no layer of the image"));
    }

    int modeOf(String path) {
        return layerWith(path).modes().get(path);
    }

    /** The names inside a jar of the image. */
    Set<String> jarEntries(String path) throws IOException {
        Set<String> names = new TreeSet<>();
        forEachEntry(layerWith(path).digest(), (name, entry, content) -> {
            if (name.equals(path)) {
                ZipInputStream jar = new ZipInputStream(content);
                for (ZipEntry e = jar.getNextEntry(); e != null; e = jar.getNextEntry()) {
                    names.add(e.getName());
                }
            }
        });
        return names;
    }

    /** The file as text. */
    String read(String path) throws IOException {
        StringBuilder text = new StringBuilder();
        forEachEntry(layerWith(path).digest(), (name, entry, content) -> {
            if (name.equals(path)) {
                text.append(new String(content.readAllBytes(), StandardCharsets.UTF_8));
            }
        });
        return text.toString();
    }

    /** The image's file system as a container would see it: every layer in order, with its modes, under root. */
    void unpackRootFs(Path root) throws IOException {
        Files.setPosixFilePermissions(root, permissions(0755)); // a temporary folder is its owner's alone
        for (Layer layer : layers) {
            forEachEntry(layer.digest(), (path, entry, content) -> {
                Path target = root.resolve(path.substring(1)).normalize();
                if (entry.isDirectory()) {
                    Files.createDirectories(target);
                } else {
                    Files.createDirectories(target.getParent());
                    Files.copy(content, target, StandardCopyOption.REPLACE_EXISTING);
                }
                Files.setPosixFilePermissions(target, permissions(entry.getMode()));
            });
        }
    }

    private interface EntryVisitor {
        void visit(String path, TarArchiveEntry entry, InputStream content) throws IOException;
    }

    /** Visits a layer's entries with their paths in the image ("/opt/java", not the entry's "opt/java/"). */
    private void forEachEntry(String digest, EntryVisitor visitor) throws IOException {
        try (TarArchiveInputStream in = new TarArchiveInputStream(new GZIPInputStream(Files.newInputStream(blob(digest))))) {
            for (TarArchiveEntry e = in.getNextEntry(); e != null; e = in.getNextEntry()) {
                visitor.visit("/" + e.getName().replaceFirst("^/", "").replaceFirst("/$", ""), e, in);
            }
        }
    }

    /** The blob a descriptor names, which must have the descriptor's size and SHA-256, as a registry checks. */
    private Path verifiedBlob(JsonNode descriptor) throws IOException {
        Path blob = blob(descriptor.path("digest").asText());
        assertThat(Files.size(blob)).as("size of %s", blob).isEqualTo(descriptor.path("size").asLong());
        MessageDigest sha256;
        try {
            sha256 = MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
        try (InputStream in = new DigestInputStream(Files.newInputStream(blob), sha256)) {
            in.transferTo(OutputStream.nullOutputStream());
        }
        assertThat("sha256:" + HexFormat.of().formatHex(sha256.digest())).isEqualTo(descriptor.path("digest").asText());
        return blob;
    }

    private Path blob(String digest) {
        return dir.resolve("blobs").resolve(digest.replace(':', '/'));
    }

    private static Set<PosixFilePermission> permissions(int mode) {
        Set<PosixFilePermission> out = EnumSet.noneOf(PosixFilePermission.class);
        PosixFilePermission[] bits = PosixFilePermission.values(); // OWNER_READ ... OTHERS_EXECUTE, high bit first
        for (int i = 0; i < bits.length; i++) {
            if ((mode & (0400 >> i)) != 0) {
                out.add(bits[i]);
            }
        }
        return out;
    }
}
