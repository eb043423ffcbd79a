package io.github.djlamp.examples.data;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.djl.repository.LocalRepository;
import com.google.gson.JsonArray;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.security.MessageDigest;
import java.util.HexFormat;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class LocalFashionMnistRepositoryTest {

    @TempDir Path work;

    @Test
    void writesMetadataWithAbsoluteFileUris() throws Exception {
        Path data = work.resolve("data");
        Idx.writeRandom(data, 3, 1);
        LocalFashionMnistRepository repo =
                LocalFashionMnistRepository.create(data, work.resolve("w"));

        Path metadata =
                repo.root().resolve("dataset/cv/ai/djl/basicdataset/fashmnist/metadata.json");
        assertEquals(metadata, repo.metadataFile());
        assertTrue(Files.isRegularFile(metadata));
        JsonObject json =
                JsonParser.parseString(Files.readString(metadata, StandardCharsets.UTF_8))
                        .getAsJsonObject();
        assertEquals("0.2", json.get("metadataVersion").getAsString());
        assertEquals("dataset", json.get("resourceType").getAsString());
        assertEquals("cv", json.get("application").getAsString());
        assertEquals("ai.djl.basicdataset", json.get("groupId").getAsString());
        assertEquals("fashmnist", json.get("artifactId").getAsString());
        JsonArray artifacts = json.getAsJsonArray("artifacts");
        assertEquals(1, artifacts.size());
        JsonObject artifact = artifacts.get(0).getAsJsonObject();
        assertEquals("1.0", artifact.get("version").getAsString());
        assertEquals(repo.artifactName(), artifact.get("name").getAsString());
        assertTrue(repo.artifactName().matches("fashmnist-[0-9a-f]{12}"), repo.artifactName());

        JsonObject files = artifact.getAsJsonObject("files");
        assertEquals(4, files.size());
        for (FashionMnistFile file : FashionMnistFile.values()) {
            JsonObject item = files.getAsJsonObject(file.itemKey());
            URI uri = URI.create(item.get("uri").getAsString());
            assertTrue(uri.isAbsolute(), uri.toString());
            assertEquals("file", uri.getScheme());
            Path target = Paths.get(uri);
            assertTrue(target.isAbsolute());
            assertEquals(file.in(data).toRealPath(), target.toRealPath());
            assertEquals(file.baseName(), item.get("name").getAsString());
            assertEquals(Files.size(target), item.get("size").getAsLong());
            String sha1 =
                    HexFormat.of()
                            .formatHex(
                                    MessageDigest.getInstance("SHA-1")
                                            .digest(Files.readAllBytes(target)));
            assertEquals(sha1, item.get("sha1Hash").getAsString());
        }
        assertTrue(repo.repository() instanceof LocalRepository, "DJL saw no LocalRepository");
    }

    @Test
    void cacheNameFollowsContentNotFolder() throws IOException {
        Idx.writeRandom(work.resolve("a"), 2, 7);
        Idx.writeRandom(work.resolve("b"), 2, 7);
        Idx.writeRandom(work.resolve("c"), 2, 8);
        Path w = work.resolve("w");
        String a = LocalFashionMnistRepository.create(work.resolve("a"), w).artifactName();
        String b = LocalFashionMnistRepository.create(work.resolve("b"), w).artifactName();
        String c = LocalFashionMnistRepository.create(work.resolve("c"), w).artifactName();
        assertEquals(a, b);
        assertNotEquals(a, c);
    }

    @Test
    void namesTheFolderAndTheMissingFiles() throws IOException {
        Path data = work.resolve("partial");
        Idx.writeRandom(data, 2, 3);
        Files.delete(FashionMnistFile.TEST_LABELS.in(data));
        Files.delete(FashionMnistFile.TRAIN_IMAGES.in(data));
        FileNotFoundException e =
                assertThrows(
                        FileNotFoundException.class,
                        () -> LocalFashionMnistRepository.create(data, work.resolve("w")));
        String message = e.getMessage();
        assertTrue(message.contains(data.toAbsolutePath().toString()), message);
        assertTrue(message.contains("train-images-idx3-ubyte.gz"), message);
        assertTrue(message.contains("t10k-labels-idx1-ubyte.gz"), message);
        assertTrue(!message.contains("lacks train-labels"), message);

        Path nowhere = work.resolve("nowhere");
        e =
                assertThrows(
                        FileNotFoundException.class,
                        () -> LocalFashionMnistRepository.checkFolder(nowhere));
        assertTrue(e.getMessage().contains("does not exist"), e.getMessage());
    }

    @Test
    void rejectsWrongHeaders() throws IOException {
        Path data = work.resolve("swapped");
        Idx.writeRandom(data, 2, 4);
        // Labels where the images should be: the magic number is wrong.
        Files.copy(
                FashionMnistFile.TEST_LABELS.in(data),
                FashionMnistFile.TEST_IMAGES.in(data),
                java.nio.file.StandardCopyOption.REPLACE_EXISTING);
        IOException e =
                assertThrows(
                        IOException.class, () -> LocalFashionMnistRepository.checkFolder(data));
        assertTrue(e.getMessage().contains("2049"), e.getMessage());

        Path uneven = work.resolve("uneven");
        Idx.writeRandom(uneven, 2, 5);
        Idx.writeRandom(work.resolve("three"), 3, 5);
        Files.copy(
                FashionMnistFile.TRAIN_LABELS.in(work.resolve("three")),
                FashionMnistFile.TRAIN_LABELS.in(uneven),
                java.nio.file.StandardCopyOption.REPLACE_EXISTING);
        e = assertThrows(IOException.class, () -> LocalFashionMnistRepository.checkFolder(uneven));
        assertTrue(e.getMessage().contains("2 images but 3 labels"), e.getMessage());
    }

    @Test
    void rejectsShortBodiesAndBadLabels() throws IOException {
        Path data = work.resolve("short");
        Idx.writeRandom(data, 3, 6);
        Path images = FashionMnistFile.TRAIN_IMAGES.in(data);
        byte[] raw = Idx.read(images);
        Idx.writeRaw(images, java.util.Arrays.copyOf(raw, raw.length - 784));
        IOException e =
                assertThrows(
                        IOException.class,
                        () -> LocalFashionMnistRepository.create(data, work.resolve("w")));
        String message = e.getMessage();
        assertTrue(message.contains(images.toAbsolutePath().toString()), message);
        assertTrue(message.contains("is damaged"), message);
        assertTrue(message.contains("declares 3 records"), message);
        assertTrue(message.contains("trailer records " + (16 + 2 * 784) + " bytes"), message);
        assertTrue(message.contains("-Ddjlamp.data.dir"), message);
        assertTrue(noMetadata(work.resolve("w")), "metadata written for a damaged folder");

        Path labels = work.resolve("labels");
        Idx.writeRandom(labels, 3, 6);
        byte[] raw2 = Idx.read(FashionMnistFile.TEST_LABELS.in(labels));
        raw2[9] = 10;
        Idx.writeRaw(FashionMnistFile.TEST_LABELS.in(labels), raw2);
        e = assertThrows(IOException.class, () -> LocalFashionMnistRepository.checkFolder(labels));
        assertTrue(e.getMessage().contains("label 10 at 1"), e.getMessage());
    }

    @Test
    void rejectsAGzipFileCutShortWithoutReadingItThrough() throws IOException {
        Path data = work.resolve("cut");
        Idx.writeRandom(data, 40, 9);
        Path images = FashionMnistFile.TRAIN_IMAGES.in(data);
        byte[] gz = Files.readAllBytes(images);
        Files.write(images, java.util.Arrays.copyOf(gz, gz.length / 2));
        IOException e =
                assertThrows(
                        IOException.class,
                        () -> LocalFashionMnistRepository.create(data, work.resolve("w")));
        String message = e.getMessage();
        assertTrue(message.contains(images.toAbsolutePath().toString()), message);
        assertTrue(message.contains("is damaged"), message);
        assertTrue(message.contains("Replace it with an intact copy"), message);
        assertTrue(noMetadata(work.resolve("w")), "metadata written for a damaged folder");
    }

    private static boolean noMetadata(Path dir) throws IOException {
        if (Files.notExists(dir)) {
            return true;
        }
        try (java.util.stream.Stream<Path> files = Files.walk(dir)) {
            return files.noneMatch(p -> p.endsWith("metadata.json"));
        }
    }
}
