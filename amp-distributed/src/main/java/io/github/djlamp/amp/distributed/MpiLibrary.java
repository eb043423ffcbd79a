package io.github.djlamp.amp.distributed;

import com.sun.jna.Library;
import com.sun.jna.Pointer;
import com.sun.jna.ptr.IntByReference;

/**
 * The few functions of MPI's C API that data-parallel training needs, bound through JNA. Handles
 * ({@code MPI_Comm}, {@code MPI_Datatype}, {@code MPI_Op}, {@code MPI_Request*}) are pointers, as
 * in Open MPI's ABI; {@link OpenMpiHandles} resolves the predefined ones.
 */
interface MpiLibrary extends Library {

    int MPI_Init_thread(Pointer argc, Pointer argv, int required, IntByReference provided);

    int MPI_Initialized(IntByReference flag);

    int MPI_Finalized(IntByReference flag);

    int MPI_Finalize();

    int MPI_Comm_rank(Pointer comm, IntByReference rank);

    int MPI_Comm_size(Pointer comm, IntByReference size);

    int MPI_Iallreduce(
            Pointer sendBuffer,
            Pointer receiveBuffer,
            int count,
            Pointer datatype,
            Pointer op,
            Pointer comm,
            Pointer request);

    int MPI_Ibcast(
            Pointer buffer, int count, Pointer datatype, int root, Pointer comm, Pointer request);

    int MPI_Isend(
            Pointer buffer,
            int count,
            Pointer datatype,
            int destination,
            int tag,
            Pointer comm,
            Pointer request);

    int MPI_Irecv(
            Pointer buffer,
            int count,
            Pointer datatype,
            int source,
            int tag,
            Pointer comm,
            Pointer request);

    int MPI_Test(Pointer request, IntByReference flag, Pointer status);

    int MPI_Wait(Pointer request, Pointer status);

    int MPI_Cancel(Pointer request);

    int MPI_Abort(Pointer comm, int errorCode);

    int MPI_Get_library_version(byte[] version, IntByReference length);
}
