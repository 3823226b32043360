package org.mstar.engine;

import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** The runner boundary rules catch what they are for, on fixtures among the test classes that break them. */
class RunnerBoundaryRulesTest {
    private static final JavaClasses WITH_FIXTURES = new ClassFileImporter().importPackages("org.mstar.engine",
            "org.mstar.resources");

    @Test
    void aRunnerInTheCorePackageIsRefused() {
        assertThatThrownBy(() -> RunnerBoundaryArchitectureTest.runnersLiveOutsideTheCore.check(WITH_FIXTURES))
                .isInstanceOf(AssertionError.class).hasMessageContaining(RunnerInTheCorePackage.class.getName());
    }

    @Test
    void aRequestOfARunnerInTheCorePackageIsRefused() {
        assertThatThrownBy(() -> RunnerBoundaryArchitectureTest.runnersLiveOutsideTheCore.check(WITH_FIXTURES))
                .isInstanceOf(AssertionError.class).hasMessageContaining(RequestInTheCorePackage.class.getName());
    }

    @Test
    void aWhisperRunnerClassThatReachesTheCoreIsRefused() {
        assertThatThrownBy(() -> RunnerBoundaryArchitectureTest.runnersReachOnlyTheRunnerSurface
                .check(WITH_FIXTURES))
                .isInstanceOf(AssertionError.class)
                .hasMessageContaining("org.mstar.engine.whisper.ReachesTheCore");
    }

    @Test
    void aFrameEngineClassThatReachesTheCoreIsRefused() {
        assertThatThrownBy(() -> RunnerBoundaryArchitectureTest.frameEngineStaysBesideTheCore.check(WITH_FIXTURES))
                .isInstanceOf(AssertionError.class)
                .hasMessageContaining("org.mstar.engine.frame.ReachesTheCore");
    }

    @Test
    void aResourceThatReachesTheEngineIsRefused() {
        assertThatThrownBy(() -> RunnerBoundaryArchitectureTest.resourcesNeverReachTheEngine.check(WITH_FIXTURES))
                .isInstanceOf(AssertionError.class)
                .hasMessageContaining("org.mstar.resources.ReachesTheEngine");
    }

    @Test
    void aRunnerPackageClassThatReachesAnEngineIsRefused() {
        assertThatThrownBy(() -> RunnerBoundaryArchitectureTest.runnersReachOnlyTheRunnerSurface
                .check(WITH_FIXTURES))
                .isInstanceOf(AssertionError.class)
                .hasMessageContaining("org.mstar.engine.llama.ReachesAnEngine");
    }

    /** Fixture: a runner declared in the core's package. */
    abstract static class RunnerInTheCorePackage implements ModelRunner {
    }

    /** Fixture: a runner's request declared in the core's package. */
    abstract static class RequestInTheCorePackage implements ModelRequest {
    }
}
