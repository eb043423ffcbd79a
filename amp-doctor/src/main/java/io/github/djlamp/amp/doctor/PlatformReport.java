package io.github.djlamp.amp.doctor;

import io.github.djlamp.amp.verify.CacheTopology;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;

/**
 * What the {@link PlatformCheck} found: each case's result, the verdict, and, where a defect was
 * found, whether {@link PlatformCheck#CURE} cured it in a re-run and what to do.
 *
 * <p>{@link #toString()} is one line on a sound platform; otherwise it lists the defects, the cure
 * and the advice. {@link #toDetailedString()} lists every case.
 */
public final class PlatformReport {

    /** The check's conclusion. */
    public enum Verdict {
        /** Every case computed right and no JVM died. */
        SOUND,
        /** At least one case computed wrong, failed, crashed its JVM or hung. */
        DEFECTS_FOUND,
        /** The check could not run its cases: {@link #getProblem()} says why. */
        NOT_CHECKED
    }

    /** What became of the cure. */
    public enum Cure {
        /** No defect: nothing to cure. */
        NOT_NEEDED,
        /** Re-run with the cure in the child's environment, every case computed right. */
        VERIFIED,
        /** Re-run with the cure in the child's environment, some case still failed. */
        DID_NOT_CURE,
        /** The cure was already in this JVM's environment, so the defects are not cured by it. */
        ALREADY_SET,
        /** The cases ran on a GPU: the cure is for oneDNN, the CPU's kernels. */
        NOT_APPLICABLE,
        /** Re-running with the cure was turned off ({@link PlatformCheck.Builder#optCure}). */
        NOT_TRIED
    }

    private final Verdict verdict;
    private final String device;
    private final boolean cpu;
    private final String engine;
    private final List<PlatformCase> cases;
    private final List<Long> childPids;
    private final String problem;
    private final Cure cure;
    private final List<PlatformCase> cureCases;
    private final String cureProblem;
    private final double seconds;

    PlatformReport(
            String device,
            boolean cpu,
            String engine,
            List<PlatformCase> cases,
            List<Long> childPids,
            String problem,
            Cure cure,
            List<PlatformCase> cureCases,
            String cureProblem,
            double seconds) {
        this.device = device;
        this.cpu = cpu;
        this.engine = engine;
        this.cases = Collections.unmodifiableList(new ArrayList<>(cases));
        this.childPids = Collections.unmodifiableList(new ArrayList<>(childPids));
        this.problem = problem;
        this.cure = cure;
        this.cureCases = Collections.unmodifiableList(new ArrayList<>(cureCases));
        this.cureProblem = cureProblem;
        this.seconds = seconds;
        if (cases.stream().anyMatch(PlatformCase::isDefect)) {
            this.verdict = Verdict.DEFECTS_FOUND;
        } else if (problem != null || cases.isEmpty()) {
            this.verdict = Verdict.NOT_CHECKED;
        } else {
            this.verdict = Verdict.SOUND;
        }
    }

    /**
     * Returns the check's conclusion.
     *
     * @return sound, defects found, or not checked
     */
    public Verdict getVerdict() {
        return verdict;
    }

    /**
     * Returns whether every case computed right.
     *
     * @return true when the verdict is {@link Verdict#SOUND}
     */
    public boolean isSound() {
        return verdict == Verdict.SOUND;
    }

    /**
     * Returns the exit status of {@link PlatformCheck#main}: 0 when sound, 1 when a defect was
     * found, 2 when the check could not run.
     *
     * @return the status
     */
    public int exitCode() {
        return switch (verdict) {
            case SOUND -> 0;
            case DEFECTS_FOUND -> 1;
            case NOT_CHECKED -> 2;
        };
    }

    /** Why the re-run with the cure could not run its cases, or null. */
    String getCureProblem() {
        return cureProblem;
    }

    /**
     * Returns the device the cases ran on, as DJL names it (for example {@code cpu()}).
     *
     * @return the device, or {@code "?"} when no child reported it
     */
    public String getDevice() {
        return device;
    }

    /**
     * Returns the engine and its version, for example {@code PyTorch 2.7.1}.
     *
     * @return the engine, or {@code "?"} when no child reported it
     */
    public String getEngine() {
        return engine;
    }

    /**
     * Returns every case's result, in the order they ran; a case a crash kept from running in one
     * child ran in the next.
     *
     * @return the cases
     */
    public List<PlatformCase> getCases() {
        return cases;
    }

    /**
     * Returns the cases that found a defect.
     *
     * @return the wrong, failed, crashed and timed-out cases
     */
    public List<PlatformCase> getDefects() {
        return defects(cases);
    }

    /**
     * Returns the process ids of the child JVMs that ran the cases (one, plus one more after each
     * crash), not counting the re-run with the cure.
     *
     * @return the pids; empty when no child could be started
     */
    public List<Long> getChildPids() {
        return childPids;
    }

    /**
     * Returns why the check could not run all of its cases.
     *
     * @return the problem, or null
     */
    public String getProblem() {
        return problem;
    }

    /**
     * Returns what became of the cure.
     *
     * @return the cure's outcome
     */
    public Cure getCure() {
        return cure;
    }

    /**
     * Returns every case's result in the re-run with {@link PlatformCheck#CURE} in the child's
     * environment.
     *
     * @return the cases, empty when there was no re-run
     */
    public List<PlatformCase> getCureCases() {
        return cureCases;
    }

    /**
     * Returns the seconds the check took, child JVMs and re-run included.
     *
     * @return the wall-clock time
     */
    public double getSeconds() {
        return seconds;
    }

    /**
     * Returns the verdict in one line: on a sound platform, all this report says.
     *
     * @return the summary
     */
    public String summary() {
        return switch (verdict) {
            case SOUND -> soundSummary();
            case DEFECTS_FOUND ->
                    String.format(
                                    Locale.ROOT,
                                    "Platform check: DEFECTS FOUND on %s with %s: %s (of %d cases, in %d child"
                                            + " JVM%s, %.1f s). %s",
                                    device,
                                    engine,
                                    countDefects(),
                                    cases.size(),
                                    childPids.size(),
                                    childPids.size() == 1 ? "" : "s",
                                    seconds,
                                    cureSentence())
                            + (device.startsWith("cpu") && CacheTopology.isHidden()
                                    ? CacheTopology.likelyCause(CacheTopology.CPU0_CACHE)
                                    : "");
            case NOT_CHECKED ->
                    String.format(
                            Locale.ROOT,
                            "Platform check: not checked (%.1f s): %s",
                            seconds,
                            problem == null ? "no case ran" : problem);
        };
    }

    /**
     * The one line of a sound verdict: a verdict always comes from a check in a child JVM, so a
     * report with no child's pid is one kept on disk by an earlier JVM.
     */
    private String soundSummary() {
        if (childPids.isEmpty()) {
            return String.format(
                    Locale.ROOT,
                    "Platform check: sound, as an earlier check on this machine and these"
                            + " libraries found and kept: all %d cases (%s; convolutions and"
                            + " a GEMM, forward and backward) computed right on %s with %s"
                            + " (that check took %.1f s; -Ddjlamp.verdicts=recheck checks"
                            + " again).",
                    cases.size(),
                    String.join(", ", precisions()),
                    device,
                    engine,
                    seconds);
        }
        return String.format(
                Locale.ROOT,
                "Platform check: sound. All %d cases (%s; convolutions and a GEMM, forward"
                        + " and backward) computed right on %s with %s, in a child JVM"
                        + " (pid %s, %.1f s).",
                cases.size(),
                String.join(", ", precisions()),
                device,
                engine,
                childPids.get(0),
                seconds);
    }

    /**
     * Returns what to do, one line each: the cure to put in the environment and whether it was
     * verified here, the command that checks again, and the known upstream issues. Empty on a sound
     * platform.
     *
     * @return the advice
     */
    public List<String> advice() {
        List<String> lines = new ArrayList<>();
        if (verdict == Verdict.SOUND) {
            return lines;
        }
        String recheck = PlatformCheck.RECHECK_COMMAND;
        if (verdict == Verdict.NOT_CHECKED) {
            lines.add("Check again: " + recheck);
            return lines;
        }
        switch (cure) {
            case VERIFIED -> {
                lines.add(
                        "Fix: start the JVM that trains with "
                                + PlatformCheck.CURE
                                + " in its environment (for example `export "
                                + PlatformCheck.CURE
                                + "` before java or mvn). oneDNN reads it once, when it first runs:"
                                + " it cannot be set from inside a running JVM.");
                lines.add(
                        "With it, oneDNN emulates bf16 on AVX2 and bf16 trains slower than fp32"
                                + " here: train with the policy \"float32\", or measure with"
                                + " AmpDoctor.");
                lines.add("Check again: " + PlatformCheck.CURE + " " + recheck);
            }
            case NOT_TRIED ->
                    lines.add(
                            "Try: start the JVM that trains with "
                                    + PlatformCheck.CURE
                                    + " in its environment, and check again: "
                                    + PlatformCheck.CURE
                                    + " "
                                    + recheck);
            case NOT_APPLICABLE ->
                    lines.add(
                            "The defects are on "
                                    + device
                                    + ": update the GPU driver and CUDA libraries, and check again: "
                                    + recheck);
            case DID_NOT_CURE, ALREADY_SET, NOT_NEEDED -> {
                lines.add(
                        "No known cure worked here. Where only 16-bit cases fail, train with the"
                                + " policy \"float32\"; where fp32 cases fail or crash, this"
                                + " libtorch build cannot train such layers on this machine: use"
                                + " another machine or PyTorch build, and report it upstream with"
                                + " the JVM error file named above.");
                lines.add("Check again: " + recheck);
            }
            default -> throw new IllegalStateException("Unknown cure " + cure);
        }
        lines.add(
                "Known upstream: PyTorch issue 163347 (https://github.com/pytorch/pytorch/issues/163347),"
                        + " OpenVINO issue 38256"
                        + " (https://github.com/openvinotoolkit/openvino/issues/38256).");
        return lines;
    }

    /**
     * Returns the summary; unless the platform is sound, also each defect, the re-run with the cure
     * and the advice.
     *
     * @return one line when sound, several otherwise
     */
    @Override
    public String toString() {
        return format(false);
    }

    /**
     * Returns the summary, every case (and every case of the re-run with the cure) and the advice.
     *
     * @return several lines
     */
    public String toDetailedString() {
        return format(true);
    }

    private String format(boolean everyCase) {
        if (verdict == Verdict.SOUND && !everyCase) {
            return summary();
        }
        StringBuilder sb = new StringBuilder(summary());
        List<PlatformCase> shown = everyCase ? cases : notOk(cases);
        for (PlatformCase c : shown) {
            sb.append("\n  ").append(c);
        }
        if (!everyCase && shown.size() < cases.size()) {
            sb.append("\n  (the other ").append(cases.size() - shown.size()).append(" cases OK)");
        }
        if (problem != null && verdict != Verdict.NOT_CHECKED) {
            sb.append("\nThe check did not finish: ").append(problem);
        }
        if (!cureCases.isEmpty() || cureProblem != null) {
            sb.append("\nRe-run with ").append(PlatformCheck.CURE).append(" in the environment: ");
            List<PlatformCase> failing = notOk(cureCases);
            if (cure == Cure.VERIFIED) {
                sb.append("every case computed right: the cure is verified here.");
            } else {
                sb.append(failing.size())
                        .append(" case")
                        .append(failing.size() == 1 ? "" : "s")
                        .append(" still not right: it did not cure this platform.");
                if (cureProblem != null) {
                    sb.append(" ").append(cureProblem);
                }
            }
            for (PlatformCase c : everyCase ? cureCases : failing) {
                sb.append("\n  ").append(c);
            }
        }
        for (String line : advice()) {
            sb.append('\n').append(line);
        }
        return sb.toString();
    }

    private String cureSentence() {
        return switch (cure) {
            case VERIFIED -> PlatformCheck.CURE + " in the environment cures it (verified here).";
            case DID_NOT_CURE -> PlatformCheck.CURE + " in the environment did not cure it.";
            case ALREADY_SET ->
                    PlatformCheck.CURE + " is already in the environment: it does not cure it.";
            case NOT_APPLICABLE ->
                    "The CPU cure " + PlatformCheck.CURE + " does not apply to " + device + ".";
            case NOT_TRIED, NOT_NEEDED -> PlatformCheck.CURE + " was not tried.";
        };
    }

    private String countDefects() {
        List<String> parts = new ArrayList<>();
        for (PlatformCase.Status status : PlatformCase.Status.values()) {
            long count = cases.stream().filter(c -> c.getStatus() == status).count();
            if (count == 0 || status == PlatformCase.Status.OK) {
                continue;
            }
            String what =
                    switch (status) {
                        case WRONG -> "computed wrong";
                        case FAILED -> "failed";
                        case CRASHED -> "crashed the JVM";
                        case TIMED_OUT -> "timed out";
                        case NOT_RUN -> "did not run";
                        case OK -> throw new IllegalStateException("OK is not a defect");
                    };
            parts.add(count + (count == 1 ? " case " : " cases ") + what);
        }
        return String.join(", ", parts);
    }

    private Set<String> precisions() {
        Set<String> names = new LinkedHashSet<>();
        for (PlatformCase c : cases) {
            names.add(c.getId().split("[-/]", 2)[0]);
        }
        return names;
    }

    private static List<PlatformCase> defects(List<PlatformCase> cases) {
        List<PlatformCase> defects = new ArrayList<>();
        for (PlatformCase c : cases) {
            if (c.isDefect()) {
                defects.add(c);
            }
        }
        return defects;
    }

    private static List<PlatformCase> notOk(List<PlatformCase> cases) {
        List<PlatformCase> shown = new ArrayList<>();
        for (PlatformCase c : cases) {
            if (c.getStatus() != PlatformCase.Status.OK) {
                shown.add(c);
            }
        }
        return shown;
    }

    boolean isCpu() {
        return cpu;
    }
}
