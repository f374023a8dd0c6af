package io.sparkpurge.localfs;

import java.io.File;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.InvalidPathException;
import java.nio.file.NoSuchFileException;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's raw local file system, without the processes it starts when Hadoop's native library
 * is absent (PySpark's jars have none): it ran {@code chmod} to set each new file's permissions
 * and {@code readlink} for each symbolic-link check of a rename. Here both are system calls
 * through {@code java.nio}; everything else is {@link RawLocalFileSystem}'s own.
 *
 * <p>Same results as the processes:
 * <ul>
 *   <li>{@link #setPermission}: the mode {@code chmod} was given ({@code %04o} of
 *       {@code toShort()}, the sticky bit included); on a directory the set-user-ID and
 *       set-group-ID bits it has are kept, as {@code chmod} with a four-digit mode keeps them; a
 *       missing path is a {@link FileNotFoundException}. Where the platform has no
 *       {@code unix:mode} attribute, {@code chmod} as before.</li>
 *   <li>{@link #getFileLinkStatus}: Hadoop ran {@code readlink} on the path's text
 *       ({@code new File(f.toString())}); when that names no symbolic link (its output empty)
 *       the answer is {@code getFileStatus(f)}, which is what this returns without the process.
 *       When it does name one, Hadoop's own method runs.</li>
 * </ul>
 * Built by {@code ./dev.sh setup} (build/jvm/local-fs/README.md); a local session uses it when
 * {@code SPARK_PURGE_LOCAL_FS_JAR} names the jar ({@code spark_purge.session.local_fs}).
 */
public class NioLocalFileSystem extends RawLocalFileSystem {
  private static final String MODE = "unix:mode";
  private static final int SET_IDS = 06000;

  @Override
  public void setPermission(Path p, FsPermission permission) throws IOException {
    java.nio.file.Path path = pathToFile(p).toPath();
    int mode = permission.toShort() & 07777;
    try {
      if (Files.isDirectory(path)) {
        mode |= ((Integer) Files.getAttribute(path, MODE)) & SET_IDS;
      }
      Files.setAttribute(path, MODE, mode);
    } catch (NoSuchFileException e) {
      throw new FileNotFoundException("File " + p + " does not exist");
    } catch (UnsupportedOperationException | IllegalArgumentException e) {
      super.setPermission(p, permission);
    }
  }

  @Override
  public FileStatus getFileLinkStatus(Path f) throws IOException {
    boolean link;
    try {
      link = Files.isSymbolicLink(new File(f.toString()).toPath());
    } catch (InvalidPathException e) {
      link = true; // let Hadoop's own method decide
    }
    return link ? super.getFileLinkStatus(f) : getFileStatus(f);
  }
}
