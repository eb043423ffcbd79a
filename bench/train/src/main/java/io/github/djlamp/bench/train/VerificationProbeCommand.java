package io.github.djlamp.bench.train;

import com.google.gson.Gson;
import com.google.gson.JsonArray;
import com.google.gson.JsonObject;
import io.github.djlamp.amp.verify.KernelVerdict;
import io.github.djlamp.amp.verify.KernelVerdicts;
import io.github.djlamp.amp.verify.KernelVerification;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * The first training step of one model in a JVM of its own (started by {@link
 * VerificationCommand}): nothing has run in this process before it, so with verification on every
 * kernel signature of the model is checked in that step, and the step also pays every one-time cost
 * of the process (class loading, JIT, the engine's first kernels). Then a few more steps. Prints
 * one line {@code RESULT {json}}.
 */
@Command(
        name = "verification-probe",
        description = "First training step of one model in a fresh JVM (child of verification).")
final class VerificationProbeCommand implements Callable<Integer> {

    /** The prefix of the line that carries the measurement. */
    static final String PREFIX = "RESULT ";

    @Option(names = "--network", defaultValue = "resnet50", description = VerificationRig.NETWORKS)
    String network;

    @Option(names = "--batch", defaultValue = "8", description = "Batch size.")
    int batch;

    @Option(names = "--policy", defaultValue = "mixed_bfloat16", description = "djl-amp policy.")
    String policy;

    @Option(names = "--verification", required = true, description = "ON or OFF.")
    KernelVerification verification;

    @Option(names = "--steps", defaultValue = "2", description = "Steps after the first.")
    int steps;

    @Override
    public Integer call() {
        try (VerificationRig rig = VerificationRig.create(network, policy, verification, batch)) {
            long first = rig.step();
            List<KernelVerdict> verdicts = KernelVerdicts.all();
            JsonObject json = new JsonObject();
            json.addProperty("network", network);
            json.addProperty("batch", batch);
            json.addProperty("policy", policy);
            json.addProperty("verification", verification.name());
            json.addProperty("firstStepMs", first / 1e6);
            json.addProperty("signatures", verdicts.size());
            // verdicts an earlier JVM kept on disk: reused, no kernel ran for them here
            json.addProperty(
                    "signaturesKept",
                    verdicts.stream().filter(KernelVerdict::isRemembered).count());
            json.addProperty("layersChecked", VerificationCommand.layers(verdicts));
            json.addProperty("defects", KernelVerdicts.defects().size());
            JsonArray later = new JsonArray();
            for (int i = 0; i < steps; i++) {
                later.add(rig.step() / 1e6);
            }
            json.add("laterStepsMs", later);
            System.out.println(PREFIX + new Gson().toJson(json));
        }
        return 0;
    }
}
