package io.github.djlamp.amp.doctor;

import java.util.List;

/**
 * The cases a platform check's child JVM runs, in order. The child instantiates the suite by its
 * class name (a public or package-private class of this package with a no-argument constructor), so
 * the parent can name another suite: the tests prove the crash and wrong-result paths with one.
 */
interface PlatformSuite {

    /**
     * Returns the cases, in the order they run; each id unique.
     *
     * @return the cases
     */
    List<KernelCase> cases();
}
