package io.shardmerge.delta;

import io.delta.storage.HadoopFileSystemLogStore;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.Iterator;
import java.util.Locale;
import java.util.Set;
import java.util.UUID;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileContext;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Options;
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
 *
 * <p>Files Delta writes outside the commit protocol: a checkpoint ({@code N.checkpoint.parquet})
 * it writes itself, in place when {@link #isPartialWriteVisible} says a file under construction
 * cannot be seen, else to a temporary file it renames; {@code _last_checkpoint} it overwrites
 * through this store. Only S3 shows an object once its upload completes, so only there are
 * both written in place; on {@code file:}, HDFS and ABFS a crash mid-write would leave a
 * truncated file under the final name. Answering true turns on Delta's in-JVM commit lock
 * unless {@code spark.databricks.delta.commitLock.enabled} is set; commits need no lock here,
 * and the local session sets it false (streaming/runtime/spark_session.py).
 */
public class PutIfAbsentLogStore extends HadoopFileSystemLogStore {
  static final String CONDITIONAL_CREATE = "fs.option.create.conditional.overwrite";

  /** Schemes whose objects appear only whole, once their upload completes (S3). */
  static final Set<String> WHOLE_OBJECT_SCHEMES = Set.of("s3a", "s3", "s3n");

  /** Directories can be opened and fsynced on Linux; elsewhere (macOS, Windows) not always. */
  private static final boolean SYNC_FOLDERS =
      System.getProperty("os.name", "").toLowerCase(Locale.ROOT).startsWith("linux");

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
      // Not a commit (Delta overwrites only files it alone writes, e.g. _last_checkpoint):
      // whoever writes last wins, but a reader must never see half a file.
      byte[] data = bytesOf(actions);
      if (CrashPoint.due(path)) {
        CrashPoint.dieWritingHalf(fs, path, data); // the kill harness only
      }
      overwrite(fs, path, data, conf);
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
      // The link is a new entry in the folder: without this, a power loss after Delta
      // reported the commit could lose the commit's name though its bytes are on disk.
      syncFolder(folder);
    } finally {
      Files.deleteIfExists(tmp);
    }
  }

  private static void overwrite(FileSystem fs, Path path, byte[] data, Configuration conf)
      throws IOException {
    String scheme = fs.getScheme();
    if (WHOLE_OBJECT_SCHEMES.contains(scheme)) {
      // One PUT: S3 replaces the object whole (a rename would be a copy and a delete).
      try (FSDataOutputStream out = fs.create(path, true)) {
        out.write(data);
      }
    } else if ("file".equals(scheme)) {
      overwriteLocal(fs, path, data);
    } else {
      // FileSystem.rename refuses an existing name; FileContext's rename with OVERWRITE
      // replaces it, atomically on HDFS. ABFS deletes the old file first: a reader may find
      // none for a moment, which Delta takes as no _last_checkpoint (it lists the log).
      Path tmp =
          new Path(path.getParent(), "." + path.getName() + "." + UUID.randomUUID() + ".tmp");
      boolean renamed = false;
      try {
        try (FSDataOutputStream out = fs.create(tmp, false)) {
          out.write(data);
        }
        FileContext.getFileContext(path.toUri(), conf)
            .rename(tmp, path, Options.Rename.OVERWRITE);
        renamed = true;
      } finally {
        if (!renamed) {
          fs.delete(tmp, false);
        }
      }
    }
  }

  private static void overwriteLocal(FileSystem fs, Path path, byte[] data) throws IOException {
    java.nio.file.Path target = Paths.get(fs.makeQualified(path).toUri());
    java.nio.file.Path folder = target.getParent();
    Files.createDirectories(folder);
    java.nio.file.Path tmp =
        folder.resolve("." + target.getFileName() + "." + UUID.randomUUID() + ".tmp");
    try {
      try (OutputStream out = Files.newOutputStream(tmp, StandardOpenOption.CREATE_NEW)) {
        out.write(data);
      }
      try (FileChannel ch = FileChannel.open(tmp, StandardOpenOption.WRITE)) {
        ch.force(true);
      }
      // Hadoop's local filesystem checks a file against its ".name.crc" sibling when one
      // exists; this write leaves none, so a stale one (from a write through Hadoop) goes
      // first. Either order of reader and these two steps sees a file that matches.
      Files.deleteIfExists(folder.resolve("." + target.getFileName() + ".crc"));
      // rename(2): readers see the old file or the new one, never part of either.
      Files.move(
          tmp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
      syncFolder(folder);
    } finally {
      Files.deleteIfExists(tmp);
    }
  }

  /** fsync a folder, so the names created or replaced in it survive a power loss. */
  static void syncFolder(java.nio.file.Path folder) throws IOException {
    if (!SYNC_FOLDERS) {
      return;
    }
    try (FileChannel ch = FileChannel.open(folder, StandardOpenOption.READ)) {
      ch.force(true);
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

  /**
   * Whether a file under construction can be seen under its name. Every commit this store
   * writes becomes visible whole (a link, a PUT, a rename), but Delta also asks this before
   * writing a checkpoint itself (Checkpoints.writeCheckpoint: in place when false) and before
   * a V2 checkpoint's overwrite: true except where the storage shows only whole objects.
   */
  @Override
  public Boolean isPartialWriteVisible(Path path, Configuration conf) {
    return partialWriteVisible(schemeOf(path, conf));
  }

  static boolean partialWriteVisible(String scheme) {
    return !WHOLE_OBJECT_SCHEMES.contains(scheme.toLowerCase(Locale.ROOT));
  }

  /** The path's scheme, or the default filesystem's for a path without one; no I/O. */
  static String schemeOf(Path path, Configuration conf) {
    String scheme = path.toUri().getScheme();
    if (scheme == null) {
      scheme = FileSystem.getDefaultUri(conf).getScheme();
    }
    return scheme == null ? "file" : scheme;
  }
}
