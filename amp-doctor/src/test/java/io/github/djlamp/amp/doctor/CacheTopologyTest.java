package io.github.djlamp.amp.doctor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.djlamp.amp.verify.CacheTopology;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A report of CPU defects names a hidden cache topology as their likely cause, and says nothing of
 * it where the kernel lists the caches (the directory is made here, as each kind of machine shows
 * it) or where the OS is not Linux.
 */
class CacheTopologyTest {

    @TempDir Path root;

    /** Only Linux lists caches under /sys: a Mac or Windows machine hides nothing. */
    @Test
    void outsideLinuxNothingIsHidden() throws IOException {
        Path empty = Files.createDirectory(root.resolve("none"));
        assertTrue(CacheTopology.isHidden("Linux", empty));
        assertFalse(CacheTopology.isHidden("Mac OS X", empty));
        assertFalse(CacheTopology.isHidden("Windows 11", root.resolve("absent")));
    }

    @Test
    void aHiddenTopologyIsNamedAndAVisibleOneIsNot() throws IOException {
        Path absent = root.resolve("absent");
        Path empty = Files.createDirectory(root.resolve("empty"));
        Path listed = Files.createDirectory(root.resolve("listed"));
        Files.createDirectory(listed.resolve("index0"));

        assertTrue(CacheTopology.likelyCause(absent).contains("hides its CPU cache topology"));
        assertTrue(CacheTopology.likelyCause(empty).contains(empty.toString()));
        assertEquals("", CacheTopology.likelyCause(listed));
        System.out.println(
                "this machine's cache topology is "
                        + (CacheTopology.isVisible(CacheTopology.CPU0_CACHE)
                                ? "visible"
                                : "hidden"));
    }
}
