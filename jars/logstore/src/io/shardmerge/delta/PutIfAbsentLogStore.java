package io.shardmerge.delta;

import io.delta.storage.HadoopFileSystemLogStore;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.util.Iterator;
import java.util.UUID;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * A Delta log store for tables that several drivers write (a shardmerge group): a commit
 * file is created only if no file has its name, so two drivers committing the same version
 * never overwrite each other; the loser gets {@link FileAlreadyExistsException} and Delta
 * checks its transaction against the winner's and retries, as on HDFS.
 *
 * <ul>
 *   <li>{@code file:} the commit is written to a temporary file and hard-linked under its
 *       name ({@code link(2)} fails when the name exists, atomically). Delta's own
 *       LocalLogStore renames, which overwrites on a local filesystem, and is safe only
 *       within one JVM.
 *   <li>{@code s3a:} one conditional PUT ({@code If-None-Match: *}, S3A's
 *       {@code fs.option.create.conditional.overwrite}, Hadoop 3.4.2 and later): S3 keeps the
 *       first object under a name and refuses the others (412). Delta's S3SingleDriverLogStore
 *       is safe only within one driver, and its multi-driver store needs DynamoDB.
 *   <li>any other scheme: a temporary file renamed under the name, which is atomic and
 *       fails when the name exists on HDFS and on ABFS with a hierarchical namespace.
 * </ul>
 */
public class PutIfAbsentLogStore extends HadoopFileSystemLogStore {
  static final String CONDITIONAL_CREATE = "fs.option.create.conditional.overwrite";

  public PutIfAbsentLogStore(Configuration conf) {
    super(conf);
  }

  private static byte[] bytesOf(Iterator<String> actions) {
    StringBuilder out = new StringBuilder();
    while (actions.hasNext()) {
      out.append(actions.next()).append('\n');
    }
    return out.toString().getBytes(StandardCharsets.UTF_8);
  }

  @Override
  public void write(Path path, Iterator<String> actions, Boolean overwrite, Configuration conf)
      throws IOException {
    FileSystem fs = path.getFileSystem(conf);
    String scheme = fs.getScheme();
    if (overwrite) {
      // Not a commit (Delta overwrites only files it alone writes, e.g. _last_checkpoint).
      byte[] data = bytesOf(actions);
      try (FSDataOutputStream out = fs.create(path, true)) {
        out.write(data);
      }
      return;
    }
    if ("file".equals(scheme)) {
      writeLocal(path, bytesOf(actions));
    } else if ("s3a".equals(scheme)) {
      writeConditional(fs, path, bytesOf(actions));
    } else {
      writeWithRename(path, actions, false, conf);
    }
  }

  private static void writeLocal(Path path, byte[] data) throws IOException {
    java.nio.file.Path target = Paths.get(path.toUri());
    java.nio.file.Path folder = target.getParent();
    Files.createDirectories(folder);
    java.nio.file.Path tmp =
        folder.resolve("." + target.getFileName() + "." + UUID.randomUUID() + ".tmp");
    try {
      try (OutputStream out = Files.newOutputStream(tmp)) {
        out.write(data);
      }
      try (FileChannel ch = FileChannel.open(tmp, StandardOpenOption.WRITE)) {
        ch.force(true);
      }
      try {
        Files.createLink(target, tmp);
      } catch (FileAlreadyExistsException e) {
        throw new FileAlreadyExistsException(path.toString());
      }
    } finally {
      Files.deleteIfExists(tmp);
    }
  }

  private static void writeConditional(FileSystem fs, Path path, byte[] data) throws IOException {
    try {
      FSDataOutputStream out =
          (FSDataOutputStream)
              fs.createFile(path).overwrite(false).must(CONDITIONAL_CREATE, true).build();
      try {
        out.write(data);
      } finally {
        out.close(); // the PUT: the object is created now, if absent
      }
    } catch (IOException e) {
      if (lostTheName(e)) {
        throw new FileAlreadyExistsException(path.toString());
      }
      throw e;
    }
  }

  /** The name was taken: it existed, or S3 refused the conditional PUT (412). */
  private static boolean lostTheName(Throwable e) {
    for (Throwable t = e; t != null; t = t.getCause()) {
      String name = t.getClass().getName();
      if (name.endsWith("FileAlreadyExistsException")
          || name.endsWith("RemoteFileChangedException")) {
        return true;
      }
    }
    return false;
  }

  @Override
  public Boolean isPartialWriteVisible(Path path, Configuration conf) {
    // A commit becomes visible whole: a link, a PUT, a rename.
    return false;
  }
}
