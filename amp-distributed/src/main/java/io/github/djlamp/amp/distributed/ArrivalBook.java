package io.github.djlamp.amp.distributed;

import static io.github.djlamp.amp.distributed.MpiConnection.check;

import com.sun.jna.Memory;
import com.sun.jna.Native;
import com.sun.jna.ptr.IntByReference;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * What rank 0 knows of every other rank: the last collective it arrived at, and the collective
 * count it closed its {@link World} at. One receive per peer stays posted for its notices: a
 * collective's number when it arrives, {@code -(count + 1)} when it closes (its last notice).
 */
final class ArrivalBook {

    /** The tag of the notices every other rank sends rank 0. */
    static final int ARRIVAL_TAG = 7_001;

    private static final long NOT_CLOSED = -1;

    private final MpiLibrary mpi;
    private final OpenMpiHandles handles;
    private final int size;
    private final Memory[] requests;
    private final Memory[] values;
    private final long[] lastArrival;
    private final long[] closedAt;
    private final boolean[] verdictSent;

    ArrivalBook(MpiConnection connection) {
        mpi = connection.mpi();
        handles = connection.handles();
        size = connection.size();
        requests = new Memory[size];
        values = new Memory[size];
        lastArrival = new long[size];
        closedAt = new long[size];
        verdictSent = new boolean[size];
        Arrays.fill(closedAt, NOT_CLOSED);
        for (int peer = 1; peer < size; peer++) {
            values[peer] = new Memory(Long.BYTES);
            requests[peer] = new Memory(Native.POINTER_SIZE);
            post(peer);
        }
    }

    private void post(int peer) {
        check(
                mpi.MPI_Irecv(
                        values[peer],
                        1,
                        handles.longType,
                        peer,
                        ARRIVAL_TAG,
                        handles.commWorld,
                        requests[peer]),
                "MPI_Irecv");
    }

    /** Takes in every notice that came, without waiting. */
    void poll() {
        IntByReference flag = new IntByReference();
        for (int peer = 1; peer < size; peer++) {
            while (closedAt[peer] == NOT_CLOSED) {
                check(mpi.MPI_Test(requests[peer], flag, OpenMpiHandles.STATUS_IGNORE), "MPI_Test");
                if (flag.getValue() == 0) {
                    break;
                }
                long notice = values[peer].getLong(0);
                if (notice >= 0) {
                    lastArrival[peer] = notice;
                    post(peer);
                } else {
                    closedAt[peer] = -notice - 1; // its last notice: nothing more to receive
                    break;
                }
            }
        }
    }

    /** The peers that closed their world before collective {@code sequence}: they left the job. */
    List<Integer> leftBefore(long sequence) {
        List<Integer> left = new ArrayList<>();
        for (int peer = 1; peer < size; peer++) {
            if (closedAt[peer] != NOT_CLOSED && closedAt[peer] < sequence) {
                left.add(peer);
            }
        }
        return left;
    }

    /** The peers, not among those that left, that did not arrive at collective {@code sequence}. */
    List<Integer> notArrivedAt(long sequence) {
        List<Integer> missing = new ArrayList<>();
        for (int peer = 1; peer < size; peer++) {
            boolean left = closedAt[peer] != NOT_CLOSED && closedAt[peer] < sequence;
            if (!left && lastArrival[peer] < sequence) {
                missing.add(peer);
            }
        }
        return missing;
    }

    /** The furthest collective a peer arrived at beyond {@code sequence}, or 0. */
    long furthestBeyond(long sequence) {
        long ahead = 0;
        for (int peer = 1; peer < size; peer++) {
            ahead = Math.max(ahead, lastArrival[peer] > sequence ? lastArrival[peer] : 0);
        }
        return ahead;
    }

    /** The peers whose closing notice has not come. */
    List<Integer> notClosed() {
        List<Integer> open = new ArrayList<>();
        for (int peer = 1; peer < size; peer++) {
            if (closedAt[peer] == NOT_CLOSED) {
                open.add(peer);
            }
        }
        return open;
    }

    /** The collective count a peer closed its world at; the peer must have closed. */
    long closedAt(int peer) {
        return closedAt[peer];
    }

    /**
     * Whether a peer that closed its world still waits for rank 0's verdict on it; marks the
     * verdict sent.
     */
    boolean firstVerdict(int peer) {
        if (closedAt[peer] == NOT_CLOSED || verdictSent[peer]) {
            return false;
        }
        verdictSent[peer] = true;
        return true;
    }

    /** Cancels the receives still posted, for peers that never closed. */
    void cancel() {
        for (int peer = 1; peer < size; peer++) {
            if (closedAt[peer] == NOT_CLOSED) {
                mpi.MPI_Cancel(requests[peer]);
                mpi.MPI_Wait(requests[peer], OpenMpiHandles.STATUS_IGNORE);
            }
        }
    }
}
