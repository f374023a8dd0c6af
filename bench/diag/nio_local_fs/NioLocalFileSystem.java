// Stop 90 prototype (bench/diag/nio_local_fs/README.md): measured, not used by the package.
package sparkpurge;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsAction;
import org.apache.hadoop.fs.permission.FsPermission;

/** Prototype: RawLocalFileSystem without chmod/readlink processes. */
public class NioLocalFileSystem extends RawLocalFileSystem {
  private static void add(Set<PosixFilePermission> s, FsAction a, PosixFilePermission r, PosixFilePermission w, PosixFilePermission x) {
    if (a.implies(FsAction.READ)) s.add(r);
    if (a.implies(FsAction.WRITE)) s.add(w);
    if (a.implies(FsAction.EXECUTE)) s.add(x);
  }

  @Override
  public void setPermission(Path p, FsPermission permission) throws IOException {
    Set<PosixFilePermission> s = EnumSet.noneOf(PosixFilePermission.class);
    add(s, permission.getUserAction(), PosixFilePermission.OWNER_READ, PosixFilePermission.OWNER_WRITE, PosixFilePermission.OWNER_EXECUTE);
    add(s, permission.getGroupAction(), PosixFilePermission.GROUP_READ, PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_EXECUTE);
    add(s, permission.getOtherAction(), PosixFilePermission.OTHERS_READ, PosixFilePermission.OTHERS_WRITE, PosixFilePermission.OTHERS_EXECUTE);
    Files.setPosixFilePermissions(pathToFile(p).toPath(), s);
  }

  @Override
  public FileStatus getFileLinkStatus(Path f) throws IOException {
    if (!Files.isSymbolicLink(pathToFile(f).toPath())) {
      return getFileStatus(f);
    }
    return super.getFileLinkStatus(f);
  }
}
