package org.mstar.engine;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.mstar.device.cpu.CpuDevice;

/** An engine closes everything it owns even when some of it fails to close, and says what failed. */
class CoreFacadeCloseTest {
    @Test
    void closesEveryOwnedResourceAndThrowsTheFirstFailureWithTheOthersSuppressed(@TempDir Path dir) throws Exception {
        List<String> closed = new ArrayList<>();
        try (CpuDevice cpu = new CpuDevice(1)) {
            LlamaEngine engine = RandomModels.engine(RandomModels.load(RandomModels.llama(), 1, dir, cpu),
                    RandomModels.options(2, 16, 16, 4, 0));
            engine.own(failing("first", closed));
            engine.own(() -> closed.add("second"));
            engine.own(failing("third", closed));
            assertThatThrownBy(engine::close).hasMessageContaining("first")
                    .satisfies(e -> assertThat(e.getSuppressed()).singleElement()
                            .satisfies(s -> assertThat(s).hasMessageContaining("third")));
        }
        assertThat(closed).containsExactly("first", "second", "third");
    }

    private static AutoCloseable failing(String name, List<String> closed) {
        return new AutoCloseable() {
            @Override
            public void close() {
                closed.add(name);
                throw new IllegalStateException(name + " failed to close");
            }

            @Override
            public String toString() {
                return name;
            }
        };
    }
}
