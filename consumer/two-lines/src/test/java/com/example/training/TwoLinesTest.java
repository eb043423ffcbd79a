package com.example.training;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.training.TrainingResult;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The stock program and its AMP version both train, and differ in two lines and an import. */
class TwoLinesTest {

    private static final Path SOURCES = Path.of("src/main/java/com/example/training");

    @Test
    void thePlainProgramTrainsTwoSteps() throws Exception {
        assertFiniteLoss(PlainDjlTraining.train(2));
    }

    @Test
    void theAmpProgramTrainsTwoSteps() throws Exception {
        assertFiniteLoss(AmpTraining.train(2));
    }

    @Test
    void theProgramsDifferInTwoLinesAndOneImport() throws Exception {
        List<String> plain = Files.readAllLines(SOURCES.resolve("PlainDjlTraining.java"));
        List<String> amp = new ArrayList<>();
        for (String line : Files.readAllLines(SOURCES.resolve("AmpTraining.java"))) {
            if (!line.equals("import io.github.djlamp.amp.Amp;")) {
                amp.add(line.replace("AmpTraining", "PlainDjlTraining"));
            }
        }
        assertEquals(plain.size(), amp.size(), "only the import line may be added");
        List<String> changed = new ArrayList<>();
        for (int i = 0; i < plain.size(); i++) {
            if (!plain.get(i).equals(amp.get(i))) {
                changed.add(amp.get(i).strip());
            }
        }
        assertEquals(
                List.of(
                        "model.setBlock(Amp.wrap(block, \"auto\"));",
                        "try (Trainer trainer = model.newTrainer(Amp.configure(config, model.getBlock()))) {"),
                changed);
    }

    private static void assertFiniteLoss(TrainingResult result) {
        Float loss = result.getTrainLoss();
        assertTrue(loss != null && Float.isFinite(loss), "training loss after two steps: " + loss);
    }
}
