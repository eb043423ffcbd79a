package io.github.djlamp.amp.distributed;

import com.sun.jna.Memory;
import com.sun.jna.Native;
import com.sun.jna.Pointer;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The processes of one data-parallel job, as the MPI launcher ({@code mpirun}, {@code srun})
 * started them: this process's rank, their number, and the collectives training needs.
 *
 * <p>Every collective is non-blocking underneath and waited for with a deadline (read once when the
 * world is created from {@value #TIMEOUT_PROPERTY}, default {@value #DEFAULT_TIMEOUT_SECONDS} s;
 * {@link DataParallelOptions.Builder#collectiveTimeout} replaces it): when a rank dies or hangs,
 * the others do not wait forever. Before each collective every rank tells rank 0 it has arrived, so
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
    public static final String TIMEOUT_PROPERTY = CollectiveDeadline.PROPERTY;

    /** The default collective deadline in seconds. */
    public static final int DEFAULT_TIMEOUT_SECONDS = CollectiveDeadline.DEFAULT_SECONDS;

    /** The exit code of a job aborted by the watchdog. */
    public static final int ABORT_CODE = MpiConnection.ABORT_CODE;

    private static final Logger logger = LoggerFactory.getLogger(World.class);

    private final int rank;
    private final int size;
    // null for a world of one process without MPI
    private final MpiConnection connection;
    private final CollectiveWatchdog watchdog;
    private CollectiveDeadline deadline;
    private boolean closed;

    private World(MpiConnection connection, CollectiveDeadline deadline) {
        this.connection = connection;
        this.rank = connection == null ? 0 : connection.rank();
        this.size = connection == null ? 1 : connection.size();
        this.deadline = deadline;
        watchdog = connection == null ? null : new CollectiveWatchdog(connection, deadline);
    }

    /**
     * Joins the job the MPI launcher started: initializes MPI, once per process, and returns the
     * world; pass it to whatever needs it. Without a launcher's environment, returns a world of one
     * process and loads no MPI library. Reads {@value #TIMEOUT_PROPERTY} once, and rank 0 logs the
     * deadline and where it came from.
     *
     * @return the world
     * @throws IllegalStateException when a launcher started this process but no usable Open MPI
     *     library is found, or when this process already called this method (its world open, or
     *     closed: MPI starts once per process)
     * @throws IllegalArgumentException when {@value #TIMEOUT_PROPERTY} is not a positive number
     */
    public static synchronized World init() {
        if (!MpiBootstrap.launchedByMpi(System.getenv())) {
            return local();
        }
        CollectiveDeadline deadline = CollectiveDeadline.configured();
        MpiConnection connection = MpiBootstrap.join();
        World world = new World(connection, deadline);
        if (world.isRoot()) {
            logger.info(
                    "djl-amp distributed: {} ranks, collective deadline {}, {}",
                    world.size,
                    deadline.describe(),
                    MpiBootstrap.libraryVersion(connection.mpi()));
        }
        return world;
    }

    /**
     * Returns a world of one process, without MPI: every collective is the identity.
     *
     * @return a single-process world
     * @throws IllegalArgumentException when {@value #TIMEOUT_PROPERTY} is not a positive number
     */
    public static World local() {
        return new World(null, CollectiveDeadline.configured());
    }

    static boolean launchedByMpi(Map<String, String> environment) {
        return MpiBootstrap.launchedByMpi(environment);
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
        return deadline.duration();
    }

    /** Replaces the collective deadline from now on, logged on rank 0 (DataParallelOptions). */
    void setTimeout(Duration timeout, String source) {
        CollectiveDeadline replaced = deadline;
        deadline = new CollectiveDeadline(timeout, source);
        if (watchdog != null) {
            watchdog.setDeadline(deadline);
        }
        if (isRoot() && size > 1) {
            logger.info(
                    "djl-amp distributed: collective deadline {}, in place of {}",
                    deadline.describe(),
                    replaced.describe());
        }
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
        MpiLibrary mpi = connection.mpi();
        OpenMpiHandles handles = connection.handles();
        watchdog.run(
                what,
                "MPI_Iallreduce",
                request ->
                        mpi.MPI_Iallreduce(
                                OpenMpiHandles.IN_PLACE,
                                data,
                                count,
                                handles.floatType,
                                handles.sum,
                                handles.commWorld,
                                request));
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
        MpiLibrary mpi = connection.mpi();
        OpenMpiHandles handles = connection.handles();
        watchdog.run(
                what,
                "MPI_Iallreduce",
                request ->
                        mpi.MPI_Iallreduce(
                                OpenMpiHandles.IN_PLACE,
                                buffer,
                                values.length,
                                handles.longType,
                                handles.max,
                                handles.commWorld,
                                request));
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
        MpiLibrary mpi = connection.mpi();
        OpenMpiHandles handles = connection.handles();
        long offset = 0;
        while (offset < length) {
            Pointer chunkStart = data.share(offset);
            int chunk = (int) Math.min(Integer.MAX_VALUE, length - offset);
            watchdog.run(
                    what,
                    "MPI_Ibcast",
                    request ->
                            mpi.MPI_Ibcast(
                                    chunkStart,
                                    chunk,
                                    handles.byteType,
                                    0,
                                    handles.commWorld,
                                    request));
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
        MpiConnection.halt(connection, message);
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
        if (closed || connection == null) {
            closed = true;
            return;
        }
        closed = true;
        long othersIn = watchdog.leave();
        if (othersIn != 0) {
            throw new IllegalStateException(
                    String.format(
                            "djl-amp: rank %d of %d left the job after collective #%d while other"
                                    + " ranks wait for it in collective #%d: its program ended"
                                    + " early (the exception this one is attached to, if any, is"
                                    + " why). MPI is not finalized, so that the launcher ends the"
                                    + " job.",
                            rank, size, watchdog.getSequence(), othersIn));
        }
        watchdog.release();
        connection.finalizeMpi();
    }
}
