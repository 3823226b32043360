package org.mstar.flink;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ModelFingerprintTest {
    @TempDir
    Path tmp;

    @Test
    void sameFilesGiveTheSameFingerprintAndAnyChangedByteInAnEndSampleChangesIt() throws Exception {
        byte[] weights = new byte[3 * ModelFingerprint.SAMPLE_BYTES];
        new Random(1).nextBytes(weights);
        Path a = model("a", weights);
        Path b = model("b", weights);
        String fp = ModelFingerprint.of("F", a);

        assertThat(fp).hasSize(16).isEqualTo(ModelFingerprint.of("F", b));
        assertThat(ModelFingerprint.of("G", a)).as("another engine factory").isNotEqualTo(fp);
        weights[weights.length - 1] ^= 1;
        assertThat(ModelFingerprint.of("F", model("c", weights))).as("last byte changed").isNotEqualTo(fp);
        weights[weights.length - 1] ^= 1;
        weights[10] ^= 1;
        assertThat(ModelFingerprint.of("F", model("d", weights))).as("first MiB changed").isNotEqualTo(fp);
    }

    @Test
    void hiddenFilesDoNotCountAndAMissingFolderIsAnError() throws Exception {
        Path a = model("a", new byte[] {1, 2, 3});
        String fp = ModelFingerprint.of("F", a);
        Files.createFile(a.resolve(".complete"));

        assertThat(ModelFingerprint.of("F", a)).isEqualTo(fp);
        assertThat(ModelFingerprint.of("F", null)).isNotEqualTo(fp).isEqualTo(ModelFingerprint.of("F", null));
        assertThatThrownBy(() -> ModelFingerprint.of("F", tmp.resolve("missing")))
                .isInstanceOf(UncheckedIOException.class).hasMessageContaining("missing");
    }

    private Path model(String name, byte[] weights) throws Exception {
        Path dir = Files.createDirectories(tmp.resolve(name));
        Files.writeString(dir.resolve("config.json"), "{\"hidden_size\": 8}");
        Files.write(dir.resolve("model.safetensors"), weights);
        return dir;
    }
}
