package org.mstar.resources;

import com.tngtech.archunit.core.importer.ImportOption;
import com.tngtech.archunit.junit.AnalyzeClasses;
import com.tngtech.archunit.junit.ArchTest;
import com.tngtech.archunit.lang.ArchRule;

import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;

/**
 * The declaration surface stays declarations: a model can declare every resource without loading a
 * manager, a device, CUDA or Flink (DESIGN.md §3).
 */
@AnalyzeClasses(packages = "org.mstar", importOptions = ImportOption.DoNotIncludeTests.class)
class DeclarationSurfaceArchitectureTest {

    @ArchTest
    static final ArchRule declarationsImportNoImplementation = noClasses()
            .that().resideInAPackage("org.mstar.resources")
            .should().dependOnClassesThat().resideInAnyPackage(
                    "org.mstar.resources.runner..",
                    "org.mstar.resources.kv..",
                    "org.mstar.resources.attn..",
                    "org.mstar.resources.position..",
                    "org.mstar.resources.sampler..",
                    "org.mstar.device..",
                    "org.mstar.model..",
                    "org.mstar.engine..",
                    "org.mstar.flink..",
                    "org.apache.flink..",
                    "jcuda..")
            .because("models declare resources without pulling in managers, devices, kernels or Flink");
}
