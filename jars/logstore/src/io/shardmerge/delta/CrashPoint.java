package io.shardmerge.delta;

import java.io.IOException;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * The kill harness's point inside a Delta checkpoint (scripts/kill-test, streaming/faults.py):
 * with {@code SHARDMERGE_CRASH_AT=delta_checkpoint:n} in the driver's environment, the n-th
 * time this JVM replaces a table's {@code _last_checkpoint}, Delta has written the checkpoint
 * file itself and the pointer is next. The store then writes half of the new pointer to its
 * temporary file, as a write cut short would leave it, and the job dies as {@code kill -9}
 * leaves it: its Python process (the JVM's parent) and the JVM at once, no cleanup.
 *
 * <p>Unset (every run but the harness's), {@link #due} reads one environment variable.
 */
final class CrashPoint {
  static final String NAME = "delta_checkpoint";
  static final String POINTER = "_last_checkpoint";
  private static final AtomicInteger SEEN = new AtomicInteger();

  private CrashPoint() {}

  /** Whether this overwrite of {@code path} is the one the harness asked to die in. */
  static boolean due(Path path) {
    String at = System.getenv("SHARDMERGE_CRASH_AT");
    if (at == null || !POINTER.equals(path.getName())) {
      return false;
    }
    int colon = at.indexOf(':');
    String point = colon < 0 ? at : at.substring(0, colon);
    if (!NAME.equals(point)) {
      return false;
    }
    int n = colon < 0 ? 1 : Integer.parseInt(at.substring(colon + 1));
    return SEEN.incrementAndGet() == n;
  }

  /** Half of {@code data} in a temporary file beside {@code path}, then the process dies. */
  static void dieWritingHalf(FileSystem fs, Path path, byte[] data) throws IOException {
    Path tmp = new Path(path.getParent(), "." + path.getName() + ".crash.tmp");
    try (FSDataOutputStream out = fs.create(tmp, true)) {
      out.write(data, 0, data.length / 2);
      out.hflush();
    }
    System.err.println("fault: killing the job (SIGKILL) at " + NAME + " writing " + path);
    ProcessHandle.current().parent().ifPresent(ProcessHandle::destroyForcibly);
    Runtime.getRuntime().halt(137);
  }
}
