package org.mstar;

import com.tngtech.archunit.core.importer.ImportOption;
import com.tngtech.archunit.junit.AnalyzeClasses;
import com.tngtech.archunit.junit.ArchTest;
import com.tngtech.archunit.lang.ArchRule;

import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;
import static com.tngtech.archunit.library.Architectures.layeredArchitecture;

/**
 * The library's layers: flink → engine → model → resources → device, nothing upward. {@code jobs} sits above them
 * all and the GPU harness beside them, each as its own Maven module that depends on this one, so the build keeps
 * the library from reaching them; the last rule says so where a newcomer reads the layers.
 */
@AnalyzeClasses(packages = "org.mstar", importOptions = ImportOption.DoNotIncludeTests.class)
class LayeringArchitectureTest {

    @ArchTest
    static final ArchRule layers = layeredArchitecture().consideringOnlyDependenciesInLayers()
            .layer("flink").definedBy("org.mstar.flink..")
            .layer("engine").definedBy("org.mstar.engine..")
            .layer("model").definedBy("org.mstar.model..")
            .layer("resources").definedBy("org.mstar.resources..")
            .layer("device").definedBy("org.mstar.device..")
            .whereLayer("flink").mayNotBeAccessedByAnyLayer()
            .whereLayer("engine").mayOnlyBeAccessedByLayers("flink")
            .whereLayer("model").mayOnlyBeAccessedByLayers("flink", "engine")
            .whereLayer("resources").mayOnlyBeAccessedByLayers("flink", "engine", "model")
            .whereLayer("device").mayOnlyBeAccessedByLayers("flink", "engine", "model", "resources");

    @ArchTest
    static final ArchRule toolsStayOutside = noClasses().that().resideInAPackage("org.mstar..")
            .should().dependOnClassesThat().resideInAnyPackage("org.mstar.jobs..", "org.mstar.device.cuda.harness..",
                    "org.mstar.bench..")
            .because("the command line, the GPU harness and the benchmarks are tools built on the library");
}
