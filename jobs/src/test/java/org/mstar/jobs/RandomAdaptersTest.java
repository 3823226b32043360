package org.mstar.jobs;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.mstar.model.lora.PeftAdapters;

/** {@code serve --random-adapters N}: adapters for the random model, written once beside it, that the engine reads. */
class RandomAdaptersTest {
    @Test
    void writesTheAdaptersOnceBesideTheModelAsAFolderTheEngineReads(@TempDir Path dir) throws Exception {
        Path model = dir.resolve("random-model");
        RandomModel.write(model, 3);

        Path adapters = ModelSource.randomAdapters(model, 2);
        assertThat(adapters).isEqualTo(dir.resolve("random-model-adapters-2"));
        assertThat(PeftAdapters.open(adapters, RandomModel.CONFIG).names()).containsExactly("random-1", "random-2");

        long written = Files.getLastModifiedTime(adapters.resolve("random-1/adapter_model.safetensors")).toMillis();
        Files.setLastModifiedTime(adapters.resolve("random-1/adapter_model.safetensors"),
                java.nio.file.attribute.FileTime.fromMillis(written - 60_000));
        assertThat(ModelSource.randomAdapters(model, 2)).isEqualTo(adapters);
        assertThat(Files.getLastModifiedTime(adapters.resolve("random-1/adapter_model.safetensors")).toMillis())
                .as("found, not written again").isEqualTo(written - 60_000);
        try (var entries = Files.list(dir)) {
            assertThat(entries.map(p -> p.getFileName().toString())).noneMatch(n -> n.contains(".partial-"));
        }
    }

    @Test
    void refusesNoAdapters(@TempDir Path dir) {
        assertThatThrownBy(() -> ModelSource.randomAdapters(dir, 0)).hasMessage("--random-adapters 0: give 1 or more");
    }
}
