package io.github.djlamp.amp.distributed;

import static io.github.djlamp.amp.distributed.MpiConnection.check;

import com.sun.jna.Memory;
import com.sun.jna.Native;
import com.sun.jna.ptr.IntByReference;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.LockSupport;
import java.util.function.ToIntFunction;

/**
 * Keeps a job from waiting forever on a rank that died or hangs. Before each collective every rank
 * tells rank 0 it has arrived ({@link ArrivalBook}); each collective is non-blocking underneath and
 * waited for with the {@link CollectiveDeadline}, past which rank 0 names the ranks that never came
 * and aborts the whole job with {@code MPI_Abort} (the others, should rank 0 be the one lost, after
 * a grace). Leaving is checked the same way: {@link #leave()} finds a rank whose program ended
 * while the others wait for it, or a rank that hangs after the last collective.
 *
 * <p>Not thread-safe: MPI calls come from one thread at a time.
 */
final class CollectiveWatchdog {

    private static final int VERDICT_TAG = 7_002;

    private final MpiConnection connection;
    private final MpiLibrary mpi;
    private final OpenMpiHandles handles;
    private final ArrivalBook arrivals;
    private CollectiveDeadline deadline;
    private long sequence;
    // rank 0: when to abort once a peer left the job early
    private long leaverAbortAt = Long.MAX_VALUE;
    // notices and verdicts not yet known to be sent
    private final List<Memory[]> pendingNotices = new ArrayList<>();

    CollectiveWatchdog(MpiConnection connection, CollectiveDeadline deadline) {
        this.connection = connection;
        this.mpi = connection.mpi();
        this.handles = connection.handles();
        this.deadline = deadline;
        arrivals =
                connection.isRoot() && connection.size() > 1 ? new ArrivalBook(connection) : null;
    }

    void setDeadline(CollectiveDeadline deadline) {
        this.deadline = deadline;
    }

    /** The number of collectives this rank started. */
    long getSequence() {
        return sequence;
    }

    /**
     * Runs one non-blocking collective under the deadline: tells rank 0 this rank arrived, starts
     * it with a fresh request handle, and waits for it.
     *
     * @param what what the collective is for, for messages
     * @param function the MPI function, for errors
     * @param start starts the collective on the request handle and returns MPI's error code
     */
    void run(String what, String function, ToIntFunction<Memory> start) {
        Memory request = new Memory(Native.POINTER_SIZE);
        announce();
        check(start.applyAsInt(request), function);
        await(request, what);
    }

    private void announce() {
        sequence++;
        if (arrivals != null) {
            arrivals.poll();
            return;
        }
        pendingNotices.removeIf(this::completed);
        send(sequence, 0, ArrivalBook.ARRIVAL_TAG);
    }

    private void send(long value, int peer, int tag) {
        Memory buffer = new Memory(Long.BYTES);
        buffer.setLong(0, value);
        Memory request = new Memory(Native.POINTER_SIZE);
        check(
                mpi.MPI_Isend(buffer, 1, handles.longType, peer, tag, handles.commWorld, request),
                "MPI_Isend");
        pendingNotices.add(new Memory[] {request, buffer});
    }

    private boolean completed(Memory[] notice) {
        IntByReference flag = new IntByReference();
        check(mpi.MPI_Test(notice[0], flag, OpenMpiHandles.STATUS_IGNORE), "MPI_Test");
        return flag.getValue() != 0;
    }

    /** Waits for a request with the deadline; past it, names the missing ranks and aborts. */
    private void await(Memory request, String what) {
        IntByReference flag = new IntByReference();
        long start = System.nanoTime();
        long end = start + deadline.nanos();
        int polls = 0;
        while (true) {
            check(mpi.MPI_Test(request, flag, OpenMpiHandles.STATUS_IGNORE), "MPI_Test");
            if (flag.getValue() != 0) {
                return;
            }
            long now = System.nanoTime();
            if (arrivals != null) {
                arrivals.poll();
                tellLeavers(now);
                if (now > end || now > leaverAbortAt) {
                    connection.abort(lostRanksMessage(what));
                }
            } else if (now > end + deadline.graceNanos()) {
                connection.abort(
                        String.format(
                                "djl-amp: rank %d of %d waited %d s in '%s' (collective #%d) and"
                                        + " rank 0 did not end the job: rank 0 is lost or hangs."
                                        + " Aborting the job.",
                                connection.rank(),
                                connection.size(),
                                (now - start) / 1_000_000_000L,
                                what,
                                sequence));
            }
            polls = pause(polls);
        }
    }

    /**
     * Rank 0, waiting in a collective: a peer that closed its world before this collective left the
     * job (an exception ended its program): tells it so, so that its {@link World#close()} throws
     * instead of finalizing and its exception gets printed, and gives the launcher a short grace to
     * end the job before aborting it.
     */
    private void tellLeavers(long now) {
        for (int peer : arrivals.leftBefore(sequence)) {
            if (arrivals.firstVerdict(peer)) {
                send(sequence, peer, VERDICT_TAG);
                leaverAbortAt = Math.min(leaverAbortAt, now + deadline.graceNanos());
            }
        }
    }

    private String lostRanksMessage(String what) {
        List<String> left = new ArrayList<>();
        for (int peer : arrivals.leftBefore(sequence)) {
            left.add(
                    "rank "
                            + peer
                            + " left the job after collective #"
                            + arrivals.closedAt(peer)
                            + " (it closed its World: its program ended, an exception there"
                            + " is the cause)");
        }
        if (!left.isEmpty()) {
            return String.format(
                    "djl-amp: rank 0 of %d in '%s' (collective #%d): %s. Aborting the job; no"
                            + " checkpoint is written.",
                    connection.size(), what, sequence, String.join("; ", left));
        }
        List<Integer> missing = arrivals.notArrivedAt(sequence);
        String who =
                missing.isEmpty()
                        ? "every rank arrived but the collective did not complete (a network"
                                + " failure?)"
                        : ranks(missing) + " never arrived: lost or hung";
        return String.format(
                "djl-amp: rank 0 of %d waited %s in '%s' (collective #%d): %s."
                        + " Aborting the job; no checkpoint is written.",
                connection.size(), deadline.describe(), what, sequence, who);
    }

    /**
     * Checks with rank 0 that this rank leaves after the same collectives as the others; past the
     * deadline, aborts the job naming the ranks that did not close.
     *
     * @return the collective some other rank already waits in when this rank leaves early, else 0
     */
    long leave() {
        if (connection.size() == 1) {
            return 0;
        }
        return arrivals != null ? leaveOnRoot() : leaveOnPeer();
    }

    /**
     * Rank 0 leaving: waits for every peer's closing notice; answers each whether it left after the
     * same collectives.
     */
    private long leaveOnRoot() {
        long end = System.nanoTime() + deadline.nanos();
        int polls = 0;
        while (true) {
            arrivals.poll();
            long ahead = arrivals.furthestBeyond(sequence);
            if (ahead > 0) {
                return ahead;
            }
            List<Integer> open = arrivals.notClosed();
            if (open.isEmpty()) {
                break;
            }
            if (System.nanoTime() > end) {
                connection.abort(
                        String.format(
                                "djl-amp: rank 0 of %d closed its World after collective #%d and"
                                        + " waited %s for the other ranks to close theirs:"
                                        + " %s did not: lost or hung after the last collective."
                                        + " Aborting the job.",
                                connection.size(), sequence, deadline.describe(), ranks(open)));
            }
            polls = pause(polls);
        }
        for (int peer = 1; peer < connection.size(); peer++) {
            if (arrivals.firstVerdict(peer)) {
                // a broadcast completes at rank 0 without its receivers: a peer can be behind
                send(arrivals.closedAt(peer) == sequence ? 0 : sequence, peer, VERDICT_TAG);
            }
        }
        return 0;
    }

    /**
     * A rank other than 0 leaving: tells rank 0 after which collective, and waits for its answer:
     * 0, or the collective the others wait in when this rank left early. Rank 0 still busy on its
     * own (saving the last checkpoint) counts against the deadline, as it does in a collective;
     * past the deadline and the grace rank 0 has to end the job, this rank ends it.
     */
    private long leaveOnPeer() {
        send(-(sequence + 1), 0, ArrivalBook.ARRIVAL_TAG);
        Memory verdict = new Memory(Long.BYTES);
        Memory received = new Memory(Native.POINTER_SIZE);
        check(
                mpi.MPI_Irecv(
                        verdict, 1, handles.longType, 0, VERDICT_TAG, handles.commWorld, received),
                "MPI_Irecv");
        long start = System.nanoTime();
        long end = start + deadline.nanos() + deadline.graceNanos();
        IntByReference flag = new IntByReference();
        int polls = 0;
        while (true) {
            check(mpi.MPI_Test(received, flag, OpenMpiHandles.STATUS_IGNORE), "MPI_Test");
            if (flag.getValue() != 0) {
                return verdict.getLong(0);
            }
            long now = System.nanoTime();
            if (now > end) {
                connection.abort(
                        String.format(
                                "djl-amp: rank %d of %d closed its World after collective #%d and"
                                        + " waited %d s for rank 0 to close its own: rank 0 is"
                                        + " lost or hangs after the last collective. Aborting the"
                                        + " job.",
                                connection.rank(),
                                connection.size(),
                                sequence,
                                (now - start) / 1_000_000_000L));
            }
            polls = pause(polls);
        }
    }

    /** Cancels rank 0's posted receives and completes every notice sent, before MPI finalizes. */
    void release() {
        if (arrivals != null) {
            arrivals.cancel();
        }
        for (Memory[] notice : pendingNotices) {
            mpi.MPI_Wait(notice[0], OpenMpiHandles.STATUS_IGNORE);
        }
        pendingNotices.clear();
    }

    private static String ranks(List<Integer> ranks) {
        return (ranks.size() == 1 ? "rank " : "ranks ")
                + ranks.toString().replaceAll("[\\[\\]]", "");
    }

    private static int pause(int polls) {
        if (polls > 1000) {
            LockSupport.parkNanos(100_000);
        } else {
            Thread.onSpinWait();
        }
        return polls + 1;
    }
}
