package org.mstar.engine;

import com.tngtech.archunit.base.DescribedPredicate;
import com.tngtech.archunit.core.domain.JavaClass;
import com.tngtech.archunit.core.domain.JavaModifier;
import com.tngtech.archunit.core.importer.ImportOption;
import com.tngtech.archunit.junit.AnalyzeClasses;
import com.tngtech.archunit.junit.ArchTest;
import com.tngtech.archunit.lang.ArchRule;

import static com.tngtech.archunit.base.DescribedPredicate.not;
import static com.tngtech.archunit.core.domain.JavaClass.Predicates.assignableTo;
import static com.tngtech.archunit.core.domain.JavaClass.Predicates.resideInAPackage;
import static com.tngtech.archunit.core.domain.properties.HasModifiers.Predicates.modifier;
import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.classes;
import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;

/**
 * A model runner sees the engine core only through {@link ModelRunner} (and its requests through
 * {@link ModelRequest}): it lives outside the core's package, so Java keeps it from the core's package-private
 * machinery, and it depends on none of that machinery nor on the engines built over it. What one model learns in
 * the core then serves every model, and no runner grows its own. The frame engine, which is not a runner
 * (docs/architecture/design.md says why), uses nothing of the core. The resources below never see the engine.
 */
@AnalyzeClasses(packages = "org.mstar", importOptions = ImportOption.DoNotIncludeTests.class)
class RunnerBoundaryArchitectureTest {
    /** The packages of the model runners. */
    static final String[] RUNNER_PACKAGES = {"org.mstar.engine.llama..", "org.mstar.engine.whisper..",
            "org.mstar.engine.mamba.."};

    static final DescribedPredicate<JavaClass> CORE_INTERNALS = resideInAPackage("org.mstar.engine")
            .and(not(modifier(JavaModifier.PUBLIC)))
            .or(assignableTo(GenerationEngine.class))
            .as("the engine core's internals (package-private classes of org.mstar.engine) or an engine");

    @ArchTest
    static final ArchRule runnersLiveOutsideTheCore = classes().that().implement(ModelRunner.class)
            .or().implement(ModelRequest.class)
            .should().resideOutsideOfPackage("org.mstar.engine")
            .because("in the core's package a runner could reach its package-private internals");

    @ArchTest
    static final ArchRule runnersReachOnlyTheRunnerSurface = noClasses()
            .that().implement(ModelRunner.class).or().resideInAnyPackage(RUNNER_PACKAGES)
            .should().dependOnClassesThat(CORE_INTERNALS)
            .because("a runner contributes its model through ModelRunner; the loop is the core's alone");

    @ArchTest
    static final ArchRule frameEngineStaysBesideTheCore = noClasses()
            .that().resideInAnyPackage("org.mstar.engine.frame..", "org.mstar.flink.frame..")
            .should().dependOnClassesThat(CORE_INTERNALS)
            .because("frame sessions share the core's public pieces (the ranking of who holds a ring) and step"
                    + " their model over the ring themselves; the loop's internals would make half a runner, where a"
                    + " frame feature that needs the loop is a reason to revisit the runner");

    @ArchTest
    static final ArchRule resourcesNeverReachTheEngine = noClasses().that().resideInAPackage("org.mstar.resources..")
            .should().dependOnClassesThat().resideInAPackage("org.mstar.engine..")
            .because("a resource serves any engine through its own interfaces; what a request is, is the engine's");
}
