package io.github.djlamp.amp.distributed;

/**
 * Under {@code mpirun}: calls {@code World.init()} a second time while the first world is open, and
 * prints what it says; then closes the first world as usual.
 */
public final class SecondInitJob {

    private SecondInitJob() {}

    /**
     * Runs the job.
     *
     * @param args none
     */
    public static void main(String[] args) {
        try (World world = World.init()) {
            try {
                World.init();
                System.out.println("rank " + world.getRank() + ": a second world was made");
            } catch (IllegalStateException e) {
                System.out.println("rank " + world.getRank() + " refused: " + e.getMessage());
            }
        }
    }
}
