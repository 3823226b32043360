package org.mstar.engine.whisper;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.mstar.device.cpu.CpuDevice;

/** The base of the Whisper engine's tests on the CPU: the device and the tiny checkpoint's fixture, per class. */
abstract class CpuWhisperTest {
    static CpuDevice cpu;
    static WhisperFixture fixture;

    @BeforeAll
    static void start() throws Exception {
        cpu = new CpuDevice(2);
        fixture = new WhisperFixture();
    }

    @AfterAll
    static void stop() {
        cpu.close();
    }
}
