package org.mstar.flink.frame;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.file.Path;
import java.util.List;
import org.apache.flink.configuration.Configuration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.mstar.device.DType;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.engine.frame.FrameSessions;
import org.mstar.model.frame.FrameModel;
import org.mstar.model.frame.FrameModelConfig;
import org.mstar.resources.RingKVLayerConfig;

class FrameModelEngineFactoryTest {
    private static final FrameModelConfig CONFIG = new FrameModelConfig(32, 16, 2, 1, 8, 32, 128, 3, 1e-5, 10000,
            List.of(new RingKVLayerConfig(2, 2, 1)));

    @Test
    void buildsAnEngineWithTheConfiguredRingsFromTheModelFolder(@TempDir Path dir) throws Exception {
        try (FrameModel model = FrameModel.random(CONFIG, new CpuDevice(1), DType.F32, 2)) {
            model.weights().save(CONFIG, dir);
        }
        Configuration conf = new Configuration();
        conf.set(FrameOptions.MODEL_DIR, dir.toString());
        conf.set(FrameOptions.RESIDENT_SESSIONS, 2);
        try (FrameSessions engine = new FrameModelEngineFactory(conf).create("cpu", 0)) {
            assertThat(engine.config()).isEqualTo(CONFIG);
            engine.open("a");
            engine.open("b");
            assertThat(engine.hasRoom()).isFalse();
        }
    }

    @Test
    void refusesAMissingFolderABadDtypeAndNoRings() {
        assertThatThrownBy(() -> new FrameModelEngineFactory(new Configuration()))
                .hasMessageContaining("mstar.frames.model-dir");
        Configuration conf = new Configuration();
        conf.set(FrameOptions.MODEL_DIR, "/nowhere");
        conf.set(FrameOptions.DTYPE, "I32");
        assertThatThrownBy(() -> new FrameModelEngineFactory(conf)).hasMessageContaining("is F32, BF16 or F16, not 'I32'");
        conf.set(FrameOptions.DTYPE, "bf16");
        conf.set(FrameOptions.RESIDENT_SESSIONS, 0);
        assertThatThrownBy(() -> new FrameModelEngineFactory(conf)).hasMessageContaining(">= 1");
    }
}
