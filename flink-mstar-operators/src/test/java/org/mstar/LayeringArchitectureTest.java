package org.mstar;

import com.tngtech.archunit.core.importer.ImportOption;
import com.tngtech.archunit.junit.AnalyzeClasses;
import com.tngtech.archunit.junit.ArchTest;
import com.tngtech.archunit.lang.ArchRule;

import static com.tngtech.archunit.base.DescribedPredicate.alwaysTrue;
import static com.tngtech.archunit.core.domain.JavaClass.Predicates.resideInAPackage;
import static com.tngtech.archunit.library.Architectures.layeredArchitecture;

/**
 * The library's layers: flink → engine → model → resources → device, nothing upward ({@code jobs} sits above
 * them all as its own Maven module, so the build already keeps the library from reaching it). The GPU harness
 * ({@code org.mstar.device.cuda.harness}) drives whole engines and is a tool, not a layer: it is left out until
 * it moves to a module of its own.
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
            .whereLayer("device").mayOnlyBeAccessedByLayers("flink", "engine", "model", "resources")
            .ignoreDependency(resideInAPackage("org.mstar.device.cuda.harness.."), alwaysTrue());
}
