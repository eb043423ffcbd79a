package io.github.djlamp.amp.distributed;

import com.sun.jna.Memory;
import com.sun.jna.Native;
import com.sun.jna.NativeLibrary;
import com.sun.jna.Pointer;
import com.sun.jna.ptr.IntByReference;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.locks.LockSupport;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The processes of one data-parallel job, as the MPI launcher ({@code mpirun}, {@code srun})
 * started them: this process's rank, their number, and the collectives training needs.
 *
 * <p>Every collective is non-blocking underneath and waited for with a deadline ({@value
 * #TIMEOUT_PROPERTY}, default {@value #DEFAULT_TIMEOUT_SECONDS} s): when a rank dies or hangs, the
 * others do not wait forever. Before each collective every rank tells rank 0 it has arrived, so
 * that rank 0, when the deadline passes, names the ranks that never came, and aborts the whole job
 * with {@code MPI_Abort}. (A rank that dies outright is usually noticed sooner by the launcher,
 * which then ends the job and names it.) Leaving is checked the same way: {@link #close()} finds a
 * rank whose program ended while the others wait for it, or a rank that hangs after the last
 * collective.
 *
 * <p>Started without a launcher, the world is one process and every collective is the identity. MPI
 * calls must come from one thread at a time.
 */
public final class World implements AutoCloseable {

    /** The system property (or, upper-cased with dots as underscores, the environment variable). */
    public static final String TIMEOUT_PROPERTY = "djlamp.mpi.timeout";

    /** The default collective deadline in seconds. */
    public static final int DEFAULT_TIMEOUT_SECONDS = 300;

    /** The exit code of a job aborted by the watchdog. */
    public static final int ABORT_CODE = 75;

    private static final Logger logger = LoggerFactory.getLogger(World.class);
    private static final int MPI_THREAD_SERIALIZED = 2;
    private static final int ARRIVAL_TAG = 7_001;
    private static final int VERDICT_TAG = 7_002;
    private static final long NOT_CLOSED = -1;
    private static final String[] LAUNCHER_VARIABLES = {
        "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK", "SLURM_PROCID"
    };
    private static World current;

    private final MpiLibrary mpi;
    private final OpenMpiHandles handles;
    private final int rank;
    private final int size;
    private final Duration timeout;
    private long sequence;
    // rank 0: one posted receive per peer for its arrival and closing notices, the last
    // collective each peer arrived at, the collective count each peer closed its world at, and
    // when to abort once a peer left the job early
    private Memory[] arrivalRequests;
    private Memory[] arrivalValues;
    private long[] lastArrival;
    private long[] closedAt;
    private boolean[] toldEarly;
    private long leaverAbortAt = Long.MAX_VALUE;
    // other ranks: arrival notices not yet known to be sent
    private final List<Memory[]> pendingNotices = new ArrayList<>();
    private boolean closed;

    private World(MpiLibrary mpi, OpenMpiHandles handles, int rank, int size, Duration timeout) {
        this.mpi = mpi;
        this.handles = handles;
        this.rank = rank;
        this.size = size;
        this.timeout = timeout;
    }

    /**
     * Joins the job the MPI launcher started: initializes MPI once per process and returns the
     * world (the same one on later calls until it is closed). Without a launcher's environment,
     * returns a world of one process and loads no MPI library.
     *
     * @return the world
     * @throws IllegalStateException when a launcher started this process but no usable Open MPI
     *     library is found, or when this process already closed its world
     */
    public static synchronized World init() {
        if (current != null && !current.closed) {
            return current;
        }
        if (!launchedByMpi(System.getenv())) {
            current = local();
            return current;
        }
        NativeLibrary library;
        MpiLibrary mpi;
        try {
            library = NativeLibrary.getInstance("mpi");
            mpi = Native.load("mpi", MpiLibrary.class);
        } catch (UnsatisfiedLinkError e) {
            throw new IllegalStateException(
                    "This process was started by an MPI launcher but libmpi.so was not found:"
                            + " install Open MPI (apt-get install openmpi-bin libopenmpi-dev, or"
                            + " module load openmpi) or set -Djna.library.path to its lib"
                            + " directory",
                    e);
        }
        OpenMpiHandles handles = new OpenMpiHandles(library);
        IntByReference flag = new IntByReference();
        mpi.MPI_Finalized(flag);
        if (flag.getValue() != 0) {
            // initializing again would make Open MPI end the process
            throw new IllegalStateException(
                    "MPI was finalized when the World was closed and cannot start again in this"
                            + " process: keep one World open for the whole program");
        }
        mpi.MPI_Initialized(flag);
        if (flag.getValue() == 0) {
            IntByReference provided = new IntByReference();
            check(
                    mpi.MPI_Init_thread(
                            Pointer.NULL, Pointer.NULL, MPI_THREAD_SERIALIZED, provided),
                    "MPI_Init_thread");
        }
        IntByReference value = new IntByReference();
        check(mpi.MPI_Comm_rank(handles.commWorld, value), "MPI_Comm_rank");
        int rank = value.getValue();
        check(mpi.MPI_Comm_size(handles.commWorld, value), "MPI_Comm_size");
        World world = new World(mpi, handles, rank, value.getValue(), configuredTimeout());
        world.postArrivalReceives();
        if (world.isRoot()) {
            logger.info(
                    "djl-amp distributed: {} ranks, collective deadline {} s, {}",
                    world.size,
                    world.timeout.toSeconds(),
                    libraryVersion(mpi));
        }
        current = world;
        return world;
    }

    /**
     * Returns a world of one process, without MPI: every collective is the identity.
     *
     * @return a single-process world
     */
    public static World local() {
        return new World(null, null, 0, 1, configuredTimeout());
    }

    static boolean launchedByMpi(Map<String, String> environment) {
        for (String variable : LAUNCHER_VARIABLES) {
            if (environment.containsKey(variable)) {
                return true;
            }
        }
        return false;
    }

    private static Duration configuredTimeout() {
        String text = System.getProperty(TIMEOUT_PROPERTY);
        if (text == null) {
            text = System.getenv(TIMEOUT_PROPERTY.toUpperCase().replace('.', '_'));
        }
        if (text == null) {
            return Duration.ofSeconds(DEFAULT_TIMEOUT_SECONDS);
        }
        try {
            double seconds = Double.parseDouble(text.trim());
            if (seconds > 0) {
                return Duration.ofMillis((long) (seconds * 1000));
            }
        } catch (NumberFormatException e) {
            // reported below
        }
        throw new IllegalArgumentException(
                TIMEOUT_PROPERTY + " must be a positive number of seconds, got '" + text + "'");
    }

    /**
     * Returns this process's rank.
     *
     * @return 0 to size - 1
     */
    public int getRank() {
        return rank;
    }

    /**
     * Returns the number of processes.
     *
     * @return the world size
     */
    public int getSize() {
        return size;
    }

    /**
     * Returns whether this is rank 0, the one that logs, reports and saves.
     *
     * @return true on rank 0
     */
    public boolean isRoot() {
        return rank == 0;
    }

    /**
     * Returns how long a collective may wait for the other ranks.
     *
     * @return the deadline of one collective
     */
    public Duration getTimeout() {
        return timeout;
    }

    /**
     * Sums {@code count} floats in place across every rank: afterwards every rank holds the same
     * sums.
     *
     * @param floats a direct buffer in native order (for example an NDArray's own memory)
     * @param count the number of floats
     * @param what what is being summed, for error messages
     */
    public void allReduceSum(ByteBuffer floats, int count, String what) {
        if (size == 1) {
            return;
        }
        requireDirect(floats, (long) count * Float.BYTES);
        Pointer data = Native.getDirectBufferPointer(floats);
        Memory request = new Memory(Native.POINTER_SIZE);
        announce();
        check(
                mpi.MPI_Iallreduce(
                        OpenMpiHandles.IN_PLACE,
                        data,
                        count,
                        handles.floatType,
                        handles.sum,
                        handles.commWorld,
                        request),
                "MPI_Iallreduce");
        await(request, what);
    }

    /**
     * Returns the maximum of each value across ranks.
     *
     * @param values this rank's values
     * @param what what is being compared, for error messages
     * @return the element-wise maxima, the same on every rank
     */
    public long[] allReduceMax(long[] values, String what) {
        if (size == 1) {
            return values.clone();
        }
        Memory buffer = new Memory((long) values.length * Long.BYTES);
        buffer.write(0, values, 0, values.length);
        Memory request = new Memory(Native.POINTER_SIZE);
        announce();
        check(
                mpi.MPI_Iallreduce(
                        OpenMpiHandles.IN_PLACE,
                        buffer,
                        values.length,
                        handles.longType,
                        handles.max,
                        handles.commWorld,
                        request),
                "MPI_Iallreduce");
        await(request, what);
        return buffer.getLongArray(0, values.length);
    }

    /**
     * Overwrites a buffer on every rank with rank 0's.
     *
     * @param bytes a direct buffer (for example an NDArray's own memory)
     * @param length the number of bytes
     * @param what what is being broadcast, for error messages
     */
    public void broadcast(ByteBuffer bytes, long length, String what) {
        if (size == 1) {
            return;
        }
        requireDirect(bytes, length);
        Pointer data = Native.getDirectBufferPointer(bytes);
        long offset = 0;
        while (offset < length) {
            int chunk = (int) Math.min(Integer.MAX_VALUE, length - offset);
            Memory request = new Memory(Native.POINTER_SIZE);
            announce();
            check(
                    mpi.MPI_Ibcast(
                            data.share(offset),
                            chunk,
                            handles.byteType,
                            0,
                            handles.commWorld,
                            request),
                    "MPI_Ibcast");
            await(request, what);
            offset += chunk;
        }
    }

    /**
     * Returns rank 0's text on every rank.
     *
     * @param text this rank's text (only rank 0's matters)
     * @param what what is being broadcast, for error messages
     * @return rank 0's text
     */
    public String broadcast(String text, String what) {
        return new String(
                broadcast(text.getBytes(StandardCharsets.UTF_8), what), StandardCharsets.UTF_8);
    }

    /**
     * Returns rank 0's bytes on every rank, whatever their length.
     *
     * @param bytes this rank's bytes (only rank 0's matter)
     * @param what what is being broadcast, for error messages
     * @return rank 0's bytes
     */
    public byte[] broadcast(byte[] bytes, String what) {
        if (size == 1) {
            return bytes;
        }
        ByteBuffer length = ByteBuffer.allocateDirect(Integer.BYTES);
        length.putInt(0, bytes.length);
        broadcast(length, Integer.BYTES, what + " (length)");
        ByteBuffer content = ByteBuffer.allocateDirect(Math.max(1, length.getInt(0)));
        if (isRoot()) {
            content.put(bytes).flip();
        }
        broadcast(content, length.getInt(0), what);
        byte[] received = new byte[length.getInt(0)];
        content.get(0, received);
        return received;
    }

    /**
     * Ends the whole job: prints the message and aborts every rank through the launcher.
     *
     * @param message why
     */
    public void abort(String message) {
        // straight to stderr: the launcher collects it, and the process ends right after
        System.err.println(message);
        System.err.flush();
        if (mpi != null) {
            mpi.MPI_Abort(handles.commWorld, ABORT_CODE);
        }
        Runtime.getRuntime().halt(ABORT_CODE);
    }

    /** Tells rank 0 this rank reached the next collective. */
    private void announce() {
        sequence++;
        if (isRoot()) {
            pollArrivals();
            return;
        }
        pendingNotices.removeIf(this::completed);
        Memory value = new Memory(Long.BYTES);
        value.setLong(0, sequence);
        Memory request = new Memory(Native.POINTER_SIZE);
        check(
                mpi.MPI_Isend(
                        value, 1, handles.longType, 0, ARRIVAL_TAG, handles.commWorld, request),
                "MPI_Isend");
        pendingNotices.add(new Memory[] {request, value});
    }

    private boolean completed(Memory[] notice) {
        IntByReference flag = new IntByReference();
        check(mpi.MPI_Test(notice[0], flag, OpenMpiHandles.STATUS_IGNORE), "MPI_Test");
        return flag.getValue() != 0;
    }

    private void postArrivalReceives() {
        if (!isRoot() || size == 1) {
            return;
        }
        arrivalRequests = new Memory[size];
        arrivalValues = new Memory[size];
        lastArrival = new long[size];
        closedAt = new long[size];
        toldEarly = new boolean[size];
        Arrays.fill(closedAt, NOT_CLOSED);
        for (int peer = 1; peer < size; peer++) {
            arrivalValues[peer] = new Memory(Long.BYTES);
            arrivalRequests[peer] = new Memory(Native.POINTER_SIZE);
            postArrivalReceive(peer);
        }
    }

    private void postArrivalReceive(int peer) {
        check(
                mpi.MPI_Irecv(
                        arrivalValues[peer],
                        1,
                        handles.longType,
                        peer,
                        ARRIVAL_TAG,
                        handles.commWorld,
                        arrivalRequests[peer]),
                "MPI_Irecv");
    }

    private void pollArrivals() {
        IntByReference flag = new IntByReference();
        for (int peer = 1; peer < size; peer++) {
            while (closedAt[peer] == NOT_CLOSED) {
                check(
                        mpi.MPI_Test(arrivalRequests[peer], flag, OpenMpiHandles.STATUS_IGNORE),
                        "MPI_Test");
                if (flag.getValue() == 0) {
                    break;
                }
                long notice = arrivalValues[peer].getLong(0);
                if (notice >= 0) {
                    lastArrival[peer] = notice;
                    postArrivalReceive(peer);
                } else {
                    closedAt[peer] = -notice - 1; // its last notice: nothing more to receive
                    break;
                }
            }
        }
    }

    /** Waits for a request with the deadline; past it, names the missing ranks and aborts. */
    private void await(Memory request, String what) {
        IntByReference flag = new IntByReference();
        long start = System.nanoTime();
        long deadline = start + timeout.toNanos();
        // rank 0 aborts first; the others give it this long to do so before they abort themselves
        long grace = Math.min(timeout.toNanos(), Duration.ofSeconds(10).toNanos());
        int polls = 0;
        while (true) {
            check(mpi.MPI_Test(request, flag, OpenMpiHandles.STATUS_IGNORE), "MPI_Test");
            if (flag.getValue() != 0) {
                return;
            }
            long now = System.nanoTime();
            if (isRoot()) {
                pollArrivals();
                tellLeavers(now);
                if (now > deadline || now > leaverAbortAt) {
                    abort(lostRanksMessage(what));
                }
            } else if (now > deadline + grace) {
                abort(
                        String.format(
                                "djl-amp: rank %d of %d waited %d s in '%s' (collective #%d) and"
                                        + " rank 0 did not end the job: rank 0 is lost or hangs."
                                        + " Aborting the job.",
                                rank, size, (now - start) / 1_000_000_000L, what, sequence));
            }
            if (++polls > 1000) {
                LockSupport.parkNanos(100_000);
            } else {
                Thread.onSpinWait();
            }
        }
    }

    /**
     * Rank 0, waiting in a collective: a peer that closed its world before this collective left the
     * job (an exception ended its program): tells it so, so that its {@link #close()} throws
     * instead of finalizing and its exception gets printed, and gives the launcher a short grace to
     * end the job before aborting it.
     */
    private void tellLeavers(long now) {
        for (int peer = 1; peer < size; peer++) {
            if (closedAt[peer] != NOT_CLOSED && closedAt[peer] < sequence && !toldEarly[peer]) {
                toldEarly[peer] = true;
                sendVerdict(peer, sequence);
                long grace = Math.min(timeout.toNanos(), Duration.ofSeconds(10).toNanos());
                leaverAbortAt = Math.min(leaverAbortAt, now + grace);
            }
        }
    }

    private void sendVerdict(int peer, long verdict) {
        Memory value = new Memory(Long.BYTES);
        value.setLong(0, verdict);
        Memory request = new Memory(Native.POINTER_SIZE);
        check(
                mpi.MPI_Isend(
                        value, 1, handles.longType, peer, VERDICT_TAG, handles.commWorld, request),
                "MPI_Isend");
        pendingNotices.add(new Memory[] {request, value});
    }

    private String lostRanksMessage(String what) {
        List<Integer> missing = new ArrayList<>();
        List<String> left = new ArrayList<>();
        for (int peer = 1; peer < size; peer++) {
            if (closedAt[peer] != NOT_CLOSED && closedAt[peer] < sequence) {
                left.add(
                        "rank "
                                + peer
                                + " left the job after collective #"
                                + closedAt[peer]
                                + " (it closed its World: its program ended, an exception there"
                                + " is the cause)");
            } else if (lastArrival[peer] < sequence) {
                missing.add(peer);
            }
        }
        if (!left.isEmpty()) {
            return String.format(
                    "djl-amp: rank 0 of %d in '%s' (collective #%d): %s. Aborting the job; no"
                            + " checkpoint is written.",
                    size, what, sequence, String.join("; ", left));
        }
        String who =
                missing.isEmpty()
                        ? "every rank arrived but the collective did not complete (a network"
                                + " failure?)"
                        : (missing.size() == 1 ? "rank " : "ranks ")
                                + missing.toString().replaceAll("[\\[\\]]", "")
                                + " never arrived: lost or hung";
        return String.format(
                "djl-amp: rank 0 of %d waited %d s (%s=%s) in '%s' (collective #%d): %s."
                        + " Aborting the job; no checkpoint is written.",
                size,
                timeout.toSeconds(),
                TIMEOUT_PROPERTY,
                timeout.toMillis() / 1000.0,
                what,
                sequence,
                who);
    }

    static void requireDirect(ByteBuffer buffer, long bytes) {
        if (!buffer.isDirect()) {
            throw new IllegalArgumentException(
                    "MPI needs a direct buffer (NDArray.toByteBuffer(true) of a CPU array gives"
                            + " one); got a heap buffer");
        }
        if (buffer.capacity() < bytes) {
            throw new IllegalArgumentException(
                    "The buffer holds " + buffer.capacity() + " bytes, " + bytes + " needed");
        }
    }

    private static void check(int code, String function) {
        if (code != 0) {
            throw new IllegalStateException(function + " failed with MPI error code " + code);
        }
    }

    private static String libraryVersion(MpiLibrary mpi) {
        byte[] text = new byte[8192];
        IntByReference length = new IntByReference();
        if (mpi.MPI_Get_library_version(text, length) != 0) {
            return "MPI";
        }
        String version = new String(text, 0, length.getValue()).trim();
        int comma = version.indexOf(',');
        return comma > 0 ? version.substring(0, comma) : version;
    }

    /**
     * Leaves the job and finalizes MPI (once per process: MPI cannot be initialized again
     * afterwards).
     *
     * <p>First every rank checks with rank 0 that it leaves after the same collectives as the
     * others. A rank whose program ended while the others still wait for it in a collective (an
     * exception ended its training) is told so, and this method then throws instead of calling
     * {@code MPI_Finalize}, which would wait for the others forever: in a {@code
     * try-with-resources} the exception that ended the program is printed with this one attached,
     * the process exits non-zero, and the launcher ends the job. The check waits at most the
     * collective deadline for the other ranks; past it, the job is aborted naming the ranks that
     * did not close.
     *
     * @throws IllegalStateException when this rank leaves while other ranks wait for it
     */
    @Override
    public synchronized void close() {
        if (closed || mpi == null) {
            closed = true;
            return;
        }
        closed = true;
        if (size > 1) {
            long othersIn = isRoot() ? closeOnRoot() : closeOnPeer();
            if (othersIn != 0) {
                throw new IllegalStateException(
                        String.format(
                                "djl-amp: rank %d of %d left the job after collective #%d while"
                                        + " other ranks wait for it in collective #%d: its program"
                                        + " ended early (the exception this one is attached to,"
                                        + " if any, is why). MPI is not finalized, so that the"
                                        + " launcher ends the job.",
                                rank, size, sequence, othersIn));
            }
        }
        if (isRoot() && arrivalRequests != null) {
            for (int peer = 1; peer < size; peer++) {
                if (closedAt[peer] == NOT_CLOSED) {
                    mpi.MPI_Cancel(arrivalRequests[peer]);
                    mpi.MPI_Wait(arrivalRequests[peer], OpenMpiHandles.STATUS_IGNORE);
                }
            }
        }
        for (Memory[] notice : pendingNotices) {
            mpi.MPI_Wait(notice[0], OpenMpiHandles.STATUS_IGNORE);
        }
        pendingNotices.clear();
        IntByReference flag = new IntByReference();
        mpi.MPI_Finalized(flag);
        if (flag.getValue() == 0) {
            mpi.MPI_Finalize();
        }
    }

    /**
     * Rank 0 leaving: waits for every peer's closing notice; answers each whether it left after the
     * same collectives. Returns the collective some peer already waits in when rank 0 is the one
     * leaving early, else 0.
     */
    private long closeOnRoot() {
        long deadline = System.nanoTime() + timeout.toNanos();
        int polls = 0;
        while (true) {
            pollArrivals();
            boolean allClosed = true;
            long ahead = 0;
            for (int peer = 1; peer < size; peer++) {
                ahead = Math.max(ahead, lastArrival[peer] > sequence ? lastArrival[peer] : 0);
                allClosed &= closedAt[peer] != NOT_CLOSED;
            }
            if (ahead > 0) {
                return ahead;
            }
            if (allClosed) {
                break;
            }
            if (System.nanoTime() > deadline) {
                List<Integer> open = new ArrayList<>();
                for (int peer = 1; peer < size; peer++) {
                    if (closedAt[peer] == NOT_CLOSED) {
                        open.add(peer);
                    }
                }
                abort(
                        String.format(
                                "djl-amp: rank 0 of %d closed its World after collective #%d and"
                                        + " waited %d s (%s) for the other ranks to close theirs:"
                                        + " %s %s did not: lost or hung after the last collective."
                                        + " Aborting the job.",
                                size,
                                sequence,
                                timeout.toSeconds(),
                                TIMEOUT_PROPERTY,
                                open.size() == 1 ? "rank" : "ranks",
                                open.toString().replaceAll("[\\[\\]]", "")));
            }
            polls = pause(polls);
        }
        for (int peer = 1; peer < size; peer++) {
            if (closedAt[peer] != NOT_CLOSED && !toldEarly[peer]) {
                // a broadcast completes at rank 0 without its receivers: a peer can be behind
                sendVerdict(peer, closedAt[peer] == sequence ? 0 : sequence);
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
    private long closeOnPeer() {
        Memory notice = new Memory(Long.BYTES);
        notice.setLong(0, -(sequence + 1));
        Memory sent = new Memory(Native.POINTER_SIZE);
        check(
                mpi.MPI_Isend(notice, 1, handles.longType, 0, ARRIVAL_TAG, handles.commWorld, sent),
                "MPI_Isend");
        pendingNotices.add(new Memory[] {sent, notice});
        Memory verdict = new Memory(Long.BYTES);
        Memory received = new Memory(Native.POINTER_SIZE);
        check(
                mpi.MPI_Irecv(
                        verdict, 1, handles.longType, 0, VERDICT_TAG, handles.commWorld, received),
                "MPI_Irecv");
        long start = System.nanoTime();
        long deadline =
                start
                        + timeout.toNanos()
                        + Math.min(timeout.toNanos(), Duration.ofSeconds(10).toNanos());
        IntByReference flag = new IntByReference();
        int polls = 0;
        while (true) {
            check(mpi.MPI_Test(received, flag, OpenMpiHandles.STATUS_IGNORE), "MPI_Test");
            if (flag.getValue() != 0) {
                return verdict.getLong(0);
            }
            long now = System.nanoTime();
            if (now > deadline) {
                abort(
                        String.format(
                                "djl-amp: rank %d of %d closed its World after collective #%d and"
                                        + " waited %d s for rank 0 to close its own: rank 0 is"
                                        + " lost or hangs after the last collective. Aborting the"
                                        + " job.",
                                rank, size, sequence, (now - start) / 1_000_000_000L));
            }
            polls = pause(polls);
        }
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
