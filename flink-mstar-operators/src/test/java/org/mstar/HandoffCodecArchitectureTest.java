package org.mstar;

import static com.tngtech.archunit.base.DescribedPredicate.not;
import static com.tngtech.archunit.core.domain.JavaClass.Predicates.assignableTo;
import static com.tngtech.archunit.core.domain.JavaClass.Predicates.equivalentTo;
import static com.tngtech.archunit.core.domain.JavaClass.Predicates.resideInAPackage;
import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;

import com.tngtech.archunit.base.DescribedPredicate;
import com.tngtech.archunit.core.domain.JavaClass;
import com.tngtech.archunit.core.importer.ImportOption;
import com.tngtech.archunit.junit.AnalyzeClasses;
import com.tngtech.archunit.junit.ArchTest;
import com.tngtech.archunit.lang.ArchRule;
import org.mstar.resources.PublishedInfo;
import org.mstar.resources.kv.CarriedPages;
import org.mstar.resources.kv.KVSequenceInfo;
import org.mstar.resources.kv.KvPagePayload;

/**
 * A hand-off is each resource's published state as the bytes of that resource's codec: the engine and the Flink
 * operators move the bytes and never look inside, and the resources never reach up into the engine that moves them.
 */
@AnalyzeClasses(packages = "org.mstar", importOptions = ImportOption.DoNotIncludeTests.class)
public class HandoffCodecArchitectureTest {

    static final DescribedPredicate<JavaClass> PUBLISHED_STATE_INTERNALS =
            resideInAPackage("org.mstar.resources..").and(assignableTo(PublishedInfo.class))
                    .and(not(equivalentTo(PublishedInfo.class)))
                    .or(assignableTo(KVSequenceInfo.class)).or(assignableTo(CarriedPages.class))
                    .or(assignableTo(KvPagePayload.class))
                    .as("a concrete published info or the page data inside one");

    @ArchTest
    static final ArchRule resourcesNeverReachTheEngine = noClasses().that().resideInAPackage("org.mstar.resources..")
            .should().dependOnClassesThat().resideInAPackage("org.mstar.engine..")
            .because("the engine drives the resources; a resource that knew the engine would tie every model to it");

    @ArchTest
    public static final ArchRule engineAndOperatorsMoveOpaqueBytes = noClasses()
            .that().resideInAnyPackage("org.mstar.engine..", "org.mstar.flink..")
            .should().dependOnClassesThat(PUBLISHED_STATE_INTERNALS)
            .because("a hand-off's state is read only by the resource that published it, through its codec");
}
