package io.github.djlamp.examples;

import ai.djl.basicmodelzoo.cv.classification.ResNetV1;
import ai.djl.ndarray.types.Shape;
import ai.djl.nn.Block;
import io.github.djlamp.amp.diagnostics.AlignmentEntry;
import io.github.djlamp.amp.diagnostics.AlignmentReport;
import io.github.djlamp.amp.policy.PrecisionPolicy;

/**
 * Which layers of a model Tensor Cores can run at full speed: every layer djl-amp computes in 16
 * bits turns into a matrix multiplication, and Tensor Cores want its dimensions (channels, units)
 * in multiples of 8. The report lists each such layer with its M, N and K, and says what to change
 * where they are not aligned.
 *
 * <pre>
 * mvn -B -q -pl examples -am compile exec:java \
 *     -Dexec.mainClass=io.github.djlamp.examples.AlignmentReportExample -Dexec.args="64"
 * </pre>
 */
public final class AlignmentReportExample {

    private AlignmentReportExample() {}

    /**
     * Prints the report of ResNet-20 on Fashion-MNIST-sized images.
     *
     * @param args the batch size (default 64)
     */
    public static void main(String[] args) {
        int batch = args.length > 0 ? Integer.parseInt(args[0]) : 64;

        // 1. The model as any DJL user builds it: ResNet-20 for 1x28x28 images, 10 classes.
        Block resnet =
                ResNetV1.builder()
                        .setImageShape(new Shape(1, 28, 28))
                        .setNumLayers(20)
                        .setOutSize(10)
                        .build();

        // 2. The report for the policy you would train with, at the batch shape you would use.
        //    It reads shapes only: nothing is trained, the weights need not exist yet.
        AlignmentReport report =
                AlignmentReport.of(
                        resnet, PrecisionPolicy.mixedFloat16(), new Shape(batch, 1, 28, 28));
        System.out.println(report.toTable());

        // 3. The layers to look at, with what to change.
        System.out.println();
        System.out.println("To change:");
        for (AlignmentEntry entry : report.getNotAligned()) {
            System.out.println("  " + entry.getPath() + ": " + entry.getSuggestion());
        }
        System.out.printf(
                "%.1f%% of the 16-bit work runs on aligned shapes.%n",
                100 * report.getAlignedFlopFraction());
    }
}
