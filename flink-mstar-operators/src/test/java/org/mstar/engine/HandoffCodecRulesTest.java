package org.mstar.engine;

import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import org.junit.jupiter.api.Test;
import org.mstar.HandoffCodecArchitectureTest;
import org.mstar.resources.kv.PublishedKVInfo;

/** The hand-off rule catches an engine class that reads inside a published KV info, on a fixture that does. */
class HandoffCodecRulesTest {
    @Test
    void anEngineClassThatReadsAPublishedKvInfoIsRefused() {
        JavaClasses withFixture = new ClassFileImporter().importPackages("org.mstar.engine");
        assertThatThrownBy(() -> HandoffCodecArchitectureTest.engineAndOperatorsMoveOpaqueBytes.check(withFixture))
                .isInstanceOf(AssertionError.class).hasMessageContaining(ReadsInsideAHandoff.class.getName());
    }

    /** Fixture: engine code counting a hand-off's KV streams itself. */
    static final class ReadsInsideAHandoff {
        int streams(PublishedKVInfo info) {
            return info.forRank(0).size();
        }
    }
}
