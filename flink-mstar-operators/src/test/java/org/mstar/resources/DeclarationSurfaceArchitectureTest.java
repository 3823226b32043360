package org.mstar.resources;

import com.tngtech.archunit.core.importer.ImportOption;
import com.tngtech.archunit.junit.AnalyzeClasses;
import com.tngtech.archunit.junit.ArchTest;
import com.tngtech.archunit.lang.ArchRule;

import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;

/**
 * The declaration surface stays declarations: a model can declare every resource without loading a
 * manager, a device, CUDA or Flink (DESIGN.md §3). Below it, the runner knows resources only by their
 * capabilities, so the link from a spec type to its manager's builder is in one place, {@code StandardBuilders}.
 */
@AnalyzeClasses(packages = "org.mstar", importOptions = ImportOption.DoNotIncludeTests.class)
class DeclarationSurfaceArchitectureTest {
    /** The managers, and the one place that links spec types to their builders. */
    private static final String[] MANAGERS = {"org.mstar.resources.builders..", "org.mstar.resources.kv..",
            "org.mstar.resources.attn..", "org.mstar.resources.position..", "org.mstar.resources.sampler..",
            "org.mstar.resources.lora..", "org.mstar.resources.recurrent.."};

    @ArchTest
    static final ArchRule declarationsImportNoImplementation = noClasses()
            .that().resideInAPackage("org.mstar.resources")
            .should().dependOnClassesThat().resideInAnyPackage(MANAGERS)
            .orShould().dependOnClassesThat().resideInAnyPackage(
                    "org.mstar.resources.runner..",
                    "org.mstar.device..",
                    "org.mstar.model..",
                    "org.mstar.engine..",
                    "org.mstar.flink..",
                    "org.apache.flink..",
                    "jcuda..")
            .because("models declare resources without pulling in managers, devices, kernels or Flink");

    @ArchTest
    static final ArchRule theRunnerDrivesCapabilitiesNotManagers = noClasses()
            .that().resideInAPackage("org.mstar.resources.runner..")
            .should().dependOnClassesThat().resideInAnyPackage(MANAGERS)
            .because("the step runner asks each resource for a capability and builds each spec by the builder its"
                    + " type is given; which manager that is stays out of it");
}
