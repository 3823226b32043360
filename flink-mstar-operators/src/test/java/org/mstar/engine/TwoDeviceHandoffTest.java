package org.mstar.engine;

import static org.assertj.core.api.Assertions.assertThat;
import static org.mstar.engine.SameDeviceHandoffTest.colocated;
import static org.mstar.engine.SameDeviceHandoffTest.handOff;
import static org.mstar.engine.SameDeviceHandoffTest.lending;
import static org.mstar.engine.SameDeviceHandoffTest.options;
import static org.mstar.engine.SameDeviceHandoffTest.workload;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.mstar.device.cpu.CpuDevice;
import org.mstar.model.llama.LlamaModel;
import org.mstar.resources.kv.KvShelf;

/**
 * A prefill engine on one device and a decode engine on another of the same process (as cuda:0 and cuda:1 of one
 * TaskManager), handing off by handle through the process's shelf: the decode device copies the lent pages straight
 * from the prefill device's pool, no KV byte goes through the host or the hand-off's bytes, and the tokens are the
 * colocated engine's. On two CPU devices here; on two GPUs the copies are peer copies, not yet run.
 */
class TwoDeviceHandoffTest {
    @TempDir
    static Path dir;
    static CpuDevice first;
    static CpuDevice second;
    static LlamaModel onFirst;
    static LlamaModel onSecond;

    @BeforeAll
    static void load() throws Exception {
        first = new CpuDevice(1);
        second = new CpuDevice(1);
        onFirst = RandomModels.load(RandomModels.llama(), 3, dir.resolve("first"), first);
        onSecond = RandomModels.load(RandomModels.llama(), 3, dir.resolve("second"), second);
    }

    @AfterAll
    static void close() {
        onSecond.close();
        onFirst.close();
        second.close();
        first.close();
    }

    @Test
    void theDecodeDeviceCopiesTheLentPagesFromThePrefillDeviceAndGeneratesTheColocatedTokens() {
        List<GenerationRequest> requests = workload(23, 8);
        Map<String, List<Integer>> expected = colocated(onFirst, requests);
        KvShelf shelf = new KvShelf();
        try (LlamaEngine prefill = lending(onFirst, options(8, 200, EngineRole.PREFILL), shelf);
             LlamaEngine decode = lending(onSecond, options(64, 200, EngineRole.DECODE), shelf)) {
            assertThat(handOff(prefill, decode, requests, h -> h, onFirst, onSecond).sequences()).isEqualTo(expected);
            assertThat(decode.handoffBytesCopied()).as("KV bytes through the host").isZero();
            assertThat(decode.handoffLentBytesCopied()).as("KV bytes copied device to device").isPositive();
            assertThat(onFirst.resources().kv().lentHandoffs()).as("lends given back").isZero();
            assertThat(shelf.outstanding()).isZero();
        }
    }
}
