package org.mstar.jobs;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The documentation's links: every relative markdown link in docs/ and in the repository's README files names a file
 * that exists inside the repository, and docs/README.md, the index, links every page under docs/ directly.
 */
class DocsLinksTest {
    /** {@code [text](target)} and {@code ![alt](target)}, with an optional {@code "title"} after the target. */
    private static final Pattern LINK = Pattern.compile("\\[[^\\]]*]\\(\\s*<?([^)\\s>]+)>?(?:\\s+\"[^\"]*\")?\\s*\\)");
    private static final Pattern FENCE = Pattern.compile("(?ms)^\\s*```.*?^\\s*```[^\\n]*$");
    private static final Pattern CODE_SPAN = Pattern.compile("`[^`\\n]*`");
    /** A .gitignore line naming one folder at the top: {@code /name/}. */
    private static final Pattern TOP_LEVEL_IGNORE = Pattern.compile("/([^/*?\\[\\]]+)/?");

    private final Path root = repoRoot();
    private final Path docs = root.resolve("docs");

    @Test
    void everyRelativeLinkNamesAFileInTheRepository() throws IOException {
        List<Path> pages = new ArrayList<>(markdownUnder(docs));
        pages.addAll(readmes());
        assertThat(pages).as("markdown pages found under %s", root).contains(docs.resolve("README.md"));

        List<String> broken = new ArrayList<>();
        for (Path page : pages) {
            for (String target : relativeLinks(page)) {
                Path resolved = resolve(page, target);
                if (!resolved.startsWith(root)) {
                    broken.add(root.relativize(page) + ": " + target + " leaves the repository");
                } else if (!Files.exists(resolved)) {
                    broken.add(root.relativize(page) + ": " + target + " (no " + root.relativize(resolved) + ")");
                }
            }
        }
        assertThat(broken).as("relative links that name no file").isEmpty();
    }

    @Test
    void theIndexLinksEveryPageUnderDocs() throws IOException {
        Path index = docs.resolve("README.md");
        Set<Path> linked = new TreeSet<>();
        for (String target : relativeLinks(index)) {
            linked.add(resolve(index, target));
        }
        List<String> missing = new ArrayList<>();
        for (Path page : markdownUnder(docs)) {
            if (!page.equals(index) && !linked.contains(page)) {
                missing.add(root.relativize(page).toString());
            }
        }
        assertThat(missing).as("pages under docs/ that docs/README.md does not link").isEmpty();
    }

    /** The targets of a page's links that are neither URLs nor anchors in the page itself, without their fragment. */
    private static List<String> relativeLinks(Path page) throws IOException {
        String text = Files.readString(page, StandardCharsets.UTF_8);
        text = FENCE.matcher(text).replaceAll("");
        text = CODE_SPAN.matcher(text).replaceAll("");
        List<String> targets = new ArrayList<>();
        Matcher m = LINK.matcher(text);
        while (m.find()) {
            String target = m.group(1);
            if (target.startsWith("#") || target.matches("^[a-zA-Z][a-zA-Z0-9+.-]*:.*")) {
                continue; // an anchor in the same page, or a URL (http, https, mailto, ...)
            }
            int hash = target.indexOf('#');
            targets.add(hash < 0 ? target : target.substring(0, hash));
        }
        return targets;
    }

    private static Path resolve(Path page, String target) {
        return page.getParent().resolve(target).normalize();
    }

    private static List<Path> markdownUnder(Path dir) throws IOException {
        try (Stream<Path> files = Files.walk(dir)) {
            return files.filter(Files::isRegularFile).filter(p -> p.toString().endsWith(".md"))
                    .map(p -> p.toAbsolutePath().normalize()).sorted().toList();
        }
    }

    /**
     * README.md files of the repository outside docs/: the top level's and each module's (two levels down at most),
     * leaving out build output, hidden folders and the folders .gitignore names at the top (bundles, local state).
     */
    private List<Path> readmes() throws IOException {
        Set<Path> ignored = new TreeSet<>();
        Path gitignore = root.resolve(".gitignore");
        if (Files.exists(gitignore)) {
            for (String line : Files.readAllLines(gitignore, StandardCharsets.UTF_8)) {
                Matcher m = TOP_LEVEL_IGNORE.matcher(line.trim());
                if (m.matches()) {
                    ignored.add(root.resolve(m.group(1)));
                }
            }
        }
        List<Path> found = new ArrayList<>();
        Files.walkFileTree(root, Set.of(), 3, new SimpleFileVisitor<>() {
            @Override
            public FileVisitResult preVisitDirectory(Path dir, BasicFileAttributes attrs) {
                String name = dir.getFileName() == null ? "" : dir.getFileName().toString();
                boolean skip = !dir.equals(root) && (name.startsWith(".") || name.equals("target")
                        || dir.equals(docs) || ignored.contains(dir));
                return skip ? FileVisitResult.SKIP_SUBTREE : FileVisitResult.CONTINUE;
            }

            @Override
            public FileVisitResult visitFile(Path file, BasicFileAttributes attrs) {
                if (file.getFileName().toString().equals("README.md") && attrs.isRegularFile()) {
                    found.add(file.toAbsolutePath().normalize());
                }
                return FileVisitResult.CONTINUE;
            }
        });
        found.sort(null);
        return found;
    }

    private static Path repoRoot() {
        return Path.of(System.getProperty("basedir", System.getProperty("user.dir"))).toAbsolutePath().normalize()
                .getParent();
    }
}
